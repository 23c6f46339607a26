# `fleetjit cache stats|ls|clear|verify`.
list(APPEND FJ_CLI_SOURCES ${CMAKE_CURRENT_LIST_DIR}/cache_command.cc)
