# fj_add_test(name sources...): a GoogleTest executable linked with the
# private core library, registered with ctest. Tests sit at the top of the
# layer graph, so they see every layer's headers and the repository root
# (for tests/common/ and the other tests' fixtures). GPU tests skip
# themselves (GTEST_SKIP with the reason) where there is no driver or GPU.
include(GoogleTest)
function(fj_add_test name)
  add_executable(${name} ${ARGN})
  # fj_bundled_kernels: the kernel corpus, examples/*.cu (tests/common/corpus.h).
  target_link_libraries(${name} PRIVATE fleetjit_core GTest::gtest GTest::gtest_main Threads::Threads
                        fj_test_stacks fj_bundled_kernels)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR})
  set_target_properties(${name} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  fj_executable_rpath(${name})
  set(properties ENVIRONMENT "FLEETJIT_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
  if(name IN_LIST FJ_TSAN_TESTS)  # tests/CMakeLists.txt: the ThreadSanitizer stage
    list(APPEND properties LABELS tsan)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES ${properties})
endfunction()
