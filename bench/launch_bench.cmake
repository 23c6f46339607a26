# Launch overhead against raw cuLaunchKernel, thunk JIT time (issue 5).
add_executable(launch_bench ${CMAKE_CURRENT_LIST_DIR}/launch_bench.cc ${CMAKE_CURRENT_LIST_DIR}/bench_util.cc)
target_link_libraries(launch_bench PRIVATE fleetjit fleetjit_core)
set_target_properties(launch_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
fj_executable_rpath(launch_bench)
