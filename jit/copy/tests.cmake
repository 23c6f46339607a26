# Copy-layer tests, CPU only: NVRTC builds of <fleetjit/copy.cuh> for every
# target and implementation with PTX checks, and the host emulation of the
# software copy paths against the conformance reference.
fj_add_test(copy_ptx_test tests/jit/copy_ptx_test.cc)
fj_add_test(copy_emulation_test tests/jit/copy_emulation_test.cc)
