# Tests of the module cache (no GPU needed). The multi-process tests run
# cache_stress_helper as separate processes.
add_executable(cache_stress_helper ${CMAKE_SOURCE_DIR}/tests/runtime/cache_stress_helper.cc)
target_link_libraries(cache_stress_helper PRIVATE fleetjit_core Threads::Threads)
target_include_directories(cache_stress_helper PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/tests)
set_target_properties(cache_stress_helper PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
fj_executable_rpath(cache_stress_helper)

fj_add_test(artifact_test ${CMAKE_SOURCE_DIR}/tests/jit/artifact_test.cc)
fj_add_test(cache_key_test ${CMAKE_SOURCE_DIR}/tests/runtime/cache_key_test.cc)
fj_add_test(module_cache_test ${CMAKE_SOURCE_DIR}/tests/runtime/module_cache_test.cc)
fj_add_test(disk_cache_test ${CMAKE_SOURCE_DIR}/tests/runtime/disk_cache_test.cc)
fj_add_test(cache_process_test ${CMAKE_SOURCE_DIR}/tests/runtime/cache_process_test.cc)
target_compile_definitions(cache_process_test PRIVATE
  FJ_CACHE_STRESS_HELPER="$<TARGET_FILE:cache_stress_helper>")
add_dependencies(cache_process_test cache_stress_helper)
if(EXISTS ${CMAKE_SOURCE_DIR}/tools/cache_command.cc)
  fj_add_test(cache_command_test ${CMAKE_SOURCE_DIR}/tests/runtime/cache_command_test.cc
    ${CMAKE_SOURCE_DIR}/tools/cache_command.cc)
endif()
# The cold build path: thunk generation and disk publication in the
# background (needs NVRTC, no GPU).
fj_add_test(cold_build_test ${CMAKE_SOURCE_DIR}/tests/runtime/cold_build_test.cc)
