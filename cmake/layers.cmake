# The layers of fleetjit are build targets, linked as a graph:
#
#   fj_base -> fj_platform -> fj_jit -> fj_thunk
#   fj_jit -> fj_runtime_cache -> fj_runtime_config
#   fj_jit -> fj_runtime_device
#   fj_runtime_device + fj_runtime_cache -> fj_runtime_load
#   fj_runtime_load + fj_thunk -> fj_runtime_launch
#   fj_runtime_launch + fj_runtime_config -> fj_runtime_builder
#   fj_runtime_launch -> fj_runtime_copy
#   fj_runtime_cache -> fj_runtime_tune
#   fj_runtime_builder + fj_runtime_copy + fj_runtime_tune -> fj_runtime_tuning
#   fj_runtime_tuning -> fj_runtime (the facade)
#   fj_runtime -> libfleetjit_core.so -> libfleetjit.so.1 (capi/)
#
# Each is an OBJECT library whose sources live in one folder (the runtime's
# rooms are folders of runtime/; fj_runtime_config is the one file
# runtime/config.h), and each exposes only its own folder to includers:
# `#include "runtime/launch/launch.h"` compiles only in a target that links
# fj_runtime_launch, directly or through the graph. The folder is exposed
# through a link under ${CMAKE_BINARY_DIR}/layers/<target>/, never through
# the repository root. scripts/ci/check-layers (run by .ci/run) additionally
# rejects an include that points up or across the graph, e.g. from
# runtime/copy/ into runtime/builder/ or from jit/ into runtime/.

# The standard and abseil headers that most of the library's files include,
# precompiled: parsing them was a third of a layer file's compile time. The
# layers compile with one set of flags and no definitions, so fj_base
# precompiles them once and every other layer reuses its header; capi/
# (other visibility flags) precompiles its own. With
# CMAKE_DISABLE_PRECOMPILE_HEADERS=ON (scripts/dev/build sets it when it
# compiles through ccache, which does not cache such files unless told to)
# every file includes what it includes, as before.
set(FJ_PCH_HEADERS
  <algorithm> <atomic> <chrono> <cstdint> <cstring> <functional> <map>
  <memory> <optional> <string> <utility> <vector>
  <absl/base/thread_annotations.h> <absl/container/flat_hash_map.h>
  <absl/status/status.h> <absl/status/statusor.h> <absl/strings/match.h>
  <absl/strings/numbers.h> <absl/strings/str_cat.h>
  <absl/strings/str_format.h> <absl/strings/str_split.h>
  <absl/strings/string_view.h> <absl/synchronization/mutex.h>
  <absl/time/time.h>)

# fj_precompile_headers(TARGET [REUSE_FROM OTHER]): TARGET's files start
# from FJ_PCH_HEADERS, its own precompiled copy or OTHER's (same flags).
# From a precompiled header, GCC 12 no longer treats the standard headers'
# inlined string copies as system code and reports its known false
# positives in them (-Warray-bounds, -Wstringop-overread on std::string
# moves); builds without precompiled headers keep those warnings.
function(fj_precompile_headers target)
  if(CMAKE_DISABLE_PRECOMPILE_HEADERS)
    return()
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-array-bounds
      -Wno-stringop-overread)
  endif()
  if(ARGN)
    target_precompile_headers(${target} ${ARGN})
  else()
    target_precompile_headers(${target} PRIVATE ${FJ_PCH_HEADERS})
  endif()
endfunction()

# fj_layer(TARGET FOLDER SOURCES...): declares the layer TARGET built from
# SOURCES, exposing FOLDER (relative to the source root; a single file works
# too) as "FOLDER/...".
function(fj_layer target folder)
  add_library(${target} OBJECT ${ARGN})
  set(root ${CMAKE_BINARY_DIR}/layers/${target})
  get_filename_component(parent ${root}/${folder} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT EXISTS ${root}/${folder})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${folder} ${root}/${folder} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC ${root})
  # -fno-semantic-interposition: the layers' functions are exported from
  # libfleetjit_core.so, which links with -Bsymbolic-functions, so the
  # compiler may inline and call them directly inside the library.
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
    -fno-semantic-interposition)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET default VISIBILITY_INLINES_HIDDEN OFF)
  if(target STREQUAL "fj_base")
    fj_precompile_headers(${target})
  else()
    fj_precompile_headers(${target} REUSE_FROM fj_base)
  endif()
endfunction()
