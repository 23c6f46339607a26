# Host launch thunks: argument rules shared with the generic launch path,
# LLVM IR generation to an ELF object, and the ORC JIT that loads objects.
list(APPEND FJ_LIB_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/arg_rules.cc
  ${CMAKE_CURRENT_LIST_DIR}/thunk_codegen.cc
  ${CMAKE_CURRENT_LIST_DIR}/thunk_jit.cc)
