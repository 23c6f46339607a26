# The runtime: driver loading, devices, NVRTC loading, modules, memory.
list(APPEND FJ_LIB_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/device.cc
  ${CMAKE_CURRENT_LIST_DIR}/driver_api.cc
  ${CMAKE_CURRENT_LIST_DIR}/nvrtc_library.cc
  ${CMAKE_CURRENT_LIST_DIR}/runtime.cc
  ${CMAKE_CURRENT_LIST_DIR}/status_macros.cc)
