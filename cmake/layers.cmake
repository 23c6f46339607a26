# The layers of fleetjit are build targets, linked as a chain:
#
#   fj_base -> fj_platform -> fj_jit -> fj_thunk -> fj_runtime -> libfleetjit.so.1
#
# Each is an OBJECT library whose sources live in one folder, and each
# exposes only its own folder to includers: `#include "runtime/launch/launch.h"`
# compiles only in a target that links fj_runtime, directly or through the
# chain. The folder is exposed through a link under
# ${CMAKE_BINARY_DIR}/layers/<target>/, never through the repository root.
# scripts/check-layers (run by .ci/run) additionally rejects an include
# that points up the chain, e.g. from jit/ into runtime/.

# fj_layer(TARGET FOLDER SOURCES...): declares the layer TARGET built from
# SOURCES, exposing FOLDER (relative to the source root) as "FOLDER/...".
function(fj_layer target folder)
  add_library(${target} OBJECT ${ARGN})
  set(root ${CMAKE_BINARY_DIR}/layers/${target})
  get_filename_component(parent ${root}/${folder} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT EXISTS ${root}/${folder})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${folder} ${root}/${folder} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC ${root})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET default VISIBILITY_INLINES_HIDDEN OFF)
endfunction()
