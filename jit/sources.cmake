# The JIT: targets, copy plans, NVRTC builds, parameter layouts.
list(APPEND FJ_LIB_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/copy_plan.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedded.cc
  ${CMAKE_CURRENT_LIST_DIR}/nvrtc_build.cc
  ${CMAKE_CURRENT_LIST_DIR}/param_layout.cc
  ${CMAKE_CURRENT_LIST_DIR}/target.cc)
