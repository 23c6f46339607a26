# The conformance runner drives the matrix through the C ABI, so it sits
# above libfleetjit.so.1 (not inside the core): the CLI and the matrix test
# link it.
add_library(fleetjit_selftest STATIC
  ${CMAKE_SOURCE_DIR}/jit/selftest/runner.cc
  ${CMAKE_SOURCE_DIR}/jit/selftest/matrix.cc
  ${CMAKE_SOURCE_DIR}/jit/selftest/span_cells.cc
  ${CMAKE_SOURCE_DIR}/jit/selftest/tile_cells.cc
  ${CMAKE_SOURCE_DIR}/jit/selftest/case_gen.cc
  ${CMAKE_SOURCE_DIR}/jit/selftest/watchdog.cc
  ${CMAKE_SOURCE_DIR}/jit/selftest/c_abi.cc)
target_link_libraries(fleetjit_selftest PUBLIC fleetjit fleetjit_core)

# The conformance matrix on the live GPU (skips without one): one test per
# feature under every implementation, plus the anchors' refusals working.
# It drives the matrix through the C ABI, so it links libfleetjit.so.1.
fj_add_test(copy_conformance_test ${CMAKE_SOURCE_DIR}/tests/gpu/copy_conformance_test.cc)
target_link_libraries(copy_conformance_test PRIVATE fleetjit_selftest)
