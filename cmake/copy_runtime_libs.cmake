# Copies every libabsl_*.so.* that LIB needs (transitively) into DIR, so a
# build tree runs on a host with no abseil installed.
file(GET_RUNTIME_DEPENDENCIES LIBRARIES ${LIB}
  RESOLVED_DEPENDENCIES_VAR deps UNRESOLVED_DEPENDENCIES_VAR missing
  PRE_INCLUDE_REGEXES "libabsl_" PRE_EXCLUDE_REGEXES ".*")
foreach(dep IN LISTS deps)
  get_filename_component(name ${dep} NAME)
  if(NOT EXISTS ${DIR}/${name})
    file(COPY ${dep} DESTINATION ${DIR} FOLLOW_SYMLINK_CHAIN)
  endif()
endforeach()
