foreach(name copy_bench build_bench)
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${name}.cc ${CMAKE_CURRENT_LIST_DIR}/bench_util.cc)
  target_link_libraries(${name} PRIVATE fleetjit fleetjit_core)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench
    BUILD_RPATH "${CMAKE_BINARY_DIR}/lib" LINK_OPTIONS "-Wl,--disable-new-dtags")
endforeach()
