# Tests of the launch path. CPU: packing (generic vs thunk), tensor
# encoding, launch checks. GPU (skips without one): launches, concurrency,
# bad launches, graph capture.
fj_add_test(launch_pack_test ${CMAKE_SOURCE_DIR}/tests/runtime/launch_pack_test.cc)
fj_add_test(tensor_encoder_test ${CMAKE_SOURCE_DIR}/tests/runtime/tensor_encoder_test.cc)
if(EXISTS ${CMAKE_SOURCE_DIR}/tests/gpu/launch_gpu_test.cc)
  fj_add_test(launch_gpu_test ${CMAKE_SOURCE_DIR}/tests/gpu/launch_gpu_test.cc)
endif()
