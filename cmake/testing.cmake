# fj_add_test(name sources...): a GoogleTest executable linked with the core
# library, registered with ctest. GPU tests skip themselves (GTEST_SKIP with
# the reason) where there is no driver or no GPU.
include(GoogleTest)
function(fj_add_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE fleetjit_core GTest::gtest GTest::gtest_main Threads::Threads)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/tests)
  set_target_properties(${name} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  fj_executable_rpath(${name})
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
    PROPERTIES ENVIRONMENT "FLEETJIT_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
endfunction()
