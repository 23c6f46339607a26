# Launch thunks: codegen -> object -> ORC JIT -> call.
fj_add_test(thunk_test ${CMAKE_SOURCE_DIR}/tests/jit/thunk_test.cc)
