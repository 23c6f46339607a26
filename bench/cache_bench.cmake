# The module cache benchmark (CPU part: memory hit, fresh-process disk hit,
# publish cost, hashing). Needs no GPU.
add_executable(cache_bench ${CMAKE_CURRENT_LIST_DIR}/cache_bench.cc)
target_link_libraries(cache_bench PRIVATE fleetjit_core Threads::Threads)
set_target_properties(cache_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench
  BUILD_RPATH "${CMAKE_BINARY_DIR}/lib")
target_link_options(cache_bench PRIVATE -Wl,--disable-new-dtags)
