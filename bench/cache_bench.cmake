# The module cache benchmark (CPU part: memory hit, fresh-process disk hit,
# publish cost, hashing). Needs no GPU.
add_executable(cache_bench ${CMAKE_CURRENT_LIST_DIR}/cache_bench.cc)
target_link_libraries(cache_bench PRIVATE fleetjit_core Threads::Threads)
set_target_properties(cache_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
fj_executable_rpath(cache_bench)
