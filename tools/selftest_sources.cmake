# fleetjit selftest: the copy-layer conformance matrix (jit/selftest/runner.h).
list(APPEND FJ_CLI_SOURCES ${CMAKE_CURRENT_LIST_DIR}/selftest_command.cc)
