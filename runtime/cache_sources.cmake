# The module cache (memory tier, disk tier, keys, NVRTC identity) and the
# artifact encoding it stores.
list(APPEND FJ_LIB_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cache_entry.cc
  ${CMAKE_CURRENT_LIST_DIR}/cache_fs.cc
  ${CMAKE_CURRENT_LIST_DIR}/cache_key.cc
  ${CMAKE_CURRENT_LIST_DIR}/cache_sha256.cc
  ${CMAKE_CURRENT_LIST_DIR}/disk_cache.cc
  ${CMAKE_CURRENT_LIST_DIR}/module_cache.cc
  ${CMAKE_CURRENT_LIST_DIR}/nvrtc_locate.cc
  ${CMAKE_CURRENT_LIST_DIR}/../jit/artifact.cc)
