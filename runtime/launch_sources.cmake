# The launch path: tensor argument encoding, parameter packing, launch
# checks and the driver call, and attaching JIT-built launch thunks.
list(APPEND FJ_LIB_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/launch.cc
  ${CMAKE_CURRENT_LIST_DIR}/launch_thunks.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_encoder.cc)
