# Copies every libabsl_*.so.* that LIB needs (transitively) into DIR, so a
# build tree runs on a host with no abseil installed. PREFER, if set, is a
# folder whose copies win.
file(GET_RUNTIME_DEPENDENCIES LIBRARIES ${LIB}
  RESOLVED_DEPENDENCIES_VAR deps UNRESOLVED_DEPENDENCIES_VAR missing
  CONFLICTING_DEPENDENCIES_PREFIX conflict
  PRE_INCLUDE_REGEXES "libabsl_" PRE_EXCLUDE_REGEXES ".*"
  POST_EXCLUDE_REGEXES "^${DIR}/")
# Merged-/usr systems see each library under /lib and /usr/lib: same file.
foreach(name IN LISTS conflict_FILENAMES)
  list(GET conflict_${name} 0 first)
  list(APPEND deps ${first})
endforeach()
foreach(dep IN LISTS deps)
  get_filename_component(name ${dep} NAME)
  # FJ_ABSL_PREFIX (dependencies.cmake): its build of each library, whatever
  # the dynamic loader's search found (transitive ones resolve to Debian's).
  if(PREFER AND EXISTS ${PREFER}/${name})
    set(dep ${PREFER}/${name})
  endif()
  if(NOT EXISTS ${DIR}/${name} AND NOT dep MATCHES "^${DIR}/")
    file(COPY ${dep} DESTINATION ${DIR} FOLLOW_SYMLINK_CHAIN)
  endif()
endforeach()
