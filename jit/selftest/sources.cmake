# Host reference of the copy-layer conformance kernels (fleetjit selftest).
list(APPEND FJ_LIB_SOURCES ${CMAKE_CURRENT_LIST_DIR}/reference.cc)

