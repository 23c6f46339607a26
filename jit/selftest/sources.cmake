# Host reference of the copy-layer conformance kernels (fleetjit selftest).
list(APPEND FJ_LIB_SOURCES ${CMAKE_CURRENT_LIST_DIR}/reference.cc)
# Conformance runner (fleetjit selftest, the H200 matrix test).
list(APPEND FJ_LIB_SOURCES ${CMAKE_CURRENT_LIST_DIR}/runner.cc)
