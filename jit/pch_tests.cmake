# NVRTC precompiled headers: identical outputs, concurrent builds.
fj_add_test(nvrtc_pch_test tests/jit/nvrtc_pch_test.cc)
