# fj_embed_files(OUT SYMBOL INCLUDE STRUCT BASE files...): generates OUT, a
# C++ source that defines `const STRUCT SYMBOL[]` (and SYMBOL##Count) with
# each file's path relative to BASE and its content. INCLUDE is the header
# that declares STRUCT ({absl::string_view path, content}) and the symbols.
function(fj_embed_files out symbol include struct base)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DSYMBOL=${symbol} -DINCLUDE=${include}
            -DSTRUCT=${struct} -DBASE=${base} "-DFILES=${ARGN}"
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_files.cmake
    DEPENDS ${ARGN} ${CMAKE_SOURCE_DIR}/cmake/embed_files.cmake
    COMMENT "Embedding ${symbol}" VERBATIM)
endfunction()
