# Precompiled headers for NVRTC builds (jit/nvrtc_pch.h).
list(APPEND FJ_LIB_SOURCES ${CMAKE_CURRENT_LIST_DIR}/nvrtc_pch.cc)
