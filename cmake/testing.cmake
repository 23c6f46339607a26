# fj_add_test(name sources...): a GoogleTest executable linked with the
# private core library, registered with ctest. Tests sit at the top of the
# layer graph, so they see every layer's headers and the repository root
# (for tests/common/ and the other tests' fixtures). GPU tests skip
# themselves (GTEST_SKIP with the reason) where there is no driver or GPU.
include(GoogleTest)

# The tests' precompiled header: GoogleTest and the headers most tests
# include (the library's FJ_PCH_HEADERS and a few more), compiled once per
# build folder by fj_test_pch and reused by every fj_add_test and
# fj_add_fault_test target (their flags are fj_test_pch's: -fPIE, hidden
# visibility, gtest's definitions; a test's own -D does not touch these
# headers). Parsing them was about a fifth of a test file's compile. Off
# with CMAKE_DISABLE_PRECOMPILE_HEADERS, as the layers' (scripts/dev/build
# through ccache): every test file still includes what it uses.
set(FJ_TEST_PCH_HEADERS ${FJ_PCH_HEADERS} <gtest/gtest.h> <atomic> <filesystem>
    <fstream> <mutex> <random> <set> <thread>)
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/test_pch_main.cc
  CONTENT "int main() { return 0; }\n")
add_executable(fj_test_pch EXCLUDE_FROM_ALL ${CMAKE_BINARY_DIR}/generated/test_pch_main.cc)
target_link_libraries(fj_test_pch PRIVATE GTest::gtest Threads::Threads)
fj_precompile_headers(fj_test_pch PRIVATE ${FJ_TEST_PCH_HEADERS})

# fj_use_test_pch(TARGET): TARGET's C++ files start from fj_test_pch's header.
function(fj_use_test_pch target)
  fj_precompile_headers(${target} REUSE_FROM fj_test_pch)
endfunction()

# fj_add_test(name sources...): a test of the CPU suite (a GPU test that
# skips without one is fj_add_gpu_test's). fj_add_gpu_test(name sources...):
# the same, every case labelled gpu (`ctest -L gpu` runs the GPU suite,
# `ctest -LE gpu` the rest); it sits in the folder of what it tests.
function(fj_add_test name)
  _fj_add_test(${name} "" ${ARGN})
endfunction()

function(fj_add_gpu_test name)
  _fj_add_test(${name} gpu ${ARGN})
endfunction()

function(_fj_add_test name labels)
  add_executable(${name} ${ARGN})
  fj_use_test_pch(${name})
  # fj_bundled_kernels: the kernel corpus, examples/*.cu (tests/common/corpus.h).
  target_link_libraries(${name} PRIVATE fleetjit_core GTest::gtest GTest::gtest_main Threads::Threads
                        fj_test_stacks fj_bundled_kernels)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR})
  set_target_properties(${name} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  fj_executable_rpath(${name})
  if(name IN_LIST FJ_TSAN_TESTS)  # tests/CMakeLists.txt: the ThreadSanitizer stage
    list(APPEND labels tsan)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST TEST_LIST ${name}_TESTS
    PROPERTIES ENVIRONMENT "FLEETJIT_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
  # The labels, on every case discovered. Not through PROPERTIES above:
  # GoogleTest.cmake (3.25) splits a list value there, so a test of two
  # labels (launch_concurrency_test: gpu and tsan) would lose one. ctest
  # reads this file after the one that discovers the cases.
  if(labels)
    set(labels_file ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
    file(WRITE ${labels_file} "if(${name}_TESTS)\n"
      "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${labels}\")\n"
      "endif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_file})
  endif()
endfunction()
