# fj_embed_files(OUT SYMBOL BASE files...): generates OUT, a C++ source that
# defines `const EmbeddedFile SYMBOL[]` (and SYMBOL##Count) with each file's
# path relative to BASE and its content. See jit/embedded.h.
function(fj_embed_files out symbol base)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DSYMBOL=${symbol} -DBASE=${base}
            "-DFILES=${ARGN}" -P ${CMAKE_SOURCE_DIR}/cmake/embed_files.cmake
    DEPENDS ${ARGN} ${CMAKE_SOURCE_DIR}/cmake/embed_files.cmake
    COMMENT "Embedding ${symbol}" VERBATIM)
endfunction()
