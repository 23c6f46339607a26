# `cmake --install BUILD --prefix P` lays out a relocatable tree:
#
#   P/include/fleetjit/fleetjit.h           the C ABI, the only public C header
#   P/include/fleetjit/copy.cuh, copy/*     the device-side copy layer (also embedded)
#   P/lib/libfleetjit.so.1.0.0 (+ .so.1, .so links)   DT_RPATH $ORIGIN/fleetjit
#   P/lib/fleetjit/libfleetjit_core.so      private, DT_RPATH $ORIGIN
#   P/lib/fleetjit/libabsl_*.so.20220623    Debian's shared abseil it needs
#   P/lib/cmake/fleetjit/fleetjitConfig.cmake (+ ConfigVersion): fleetjit::fleetjit
#   P/lib/pkgconfig/fleetjit.pc             prefix computed from ${pcfiledir}
#   P/bin/fleetjit                          DT_RPATH $ORIGIN/../lib/fleetjit:$ORIGIN/../lib
#   P/share/fleetjit/fleetjit_floor.txt     the glibc / libstdc++ the libraries need
#
# Every path is relative to the object that holds it, so P can be copied
# anywhere and used without LD_LIBRARY_PATH. DT_RPATH (--disable-new-dtags,
# see fj_private_library_link_options) rather than RUNPATH, because only
# RPATH also serves the abseil libraries' own dependencies on each other.
# Installed ELF files are stripped (--strip-unneeded) whether or not
# `cmake --install --strip` was given: the core is 40 MB with its symbols.
include(CMakePackageConfigHelpers)

# Fixed relative directories (not GNUInstallDirs' multiarch libdir): the
# RPATHs above are written against this layout.
set(CMAKE_INSTALL_INCLUDEDIR include)
set(CMAKE_INSTALL_LIBDIR lib)
set(CMAKE_INSTALL_BINDIR bin)
set(CMAKE_INSTALL_DATADIR share)
set(FJ_INSTALL_PRIVATE_LIBDIR ${CMAKE_INSTALL_LIBDIR}/fleetjit)

# The build tree keeps the core beside libfleetjit.so.1 and the CLI in bin/
# beside lib/: list both places, so one RPATH serves the build tree, the
# staged GPU tree and the installed tree. The install step then drops the
# build-tree-only entry of libfleetjit.so.1 (shrinking an RPATH in place is
# always possible; growing it is not).
set_target_properties(fleetjit PROPERTIES INSTALL_RPATH "$ORIGIN/fleetjit:$ORIGIN")
set_target_properties(fleetjit_cli PROPERTIES
  INSTALL_RPATH "$ORIGIN/../lib/fleetjit:$ORIGIN/../lib")

# The libc / libstdc++ floor: the newest GLIBC_x.y and GLIBCXX_x.y.z symbol
# versions the shipped libraries require, computed after they link.
set(FJ_FLOOR_HEADER ${CMAKE_BINARY_DIR}/generated/fleetjit_floor.h)
set(FJ_FLOOR_TEXT ${CMAKE_BINARY_DIR}/generated/fleetjit_floor.txt)
find_program(FJ_OBJDUMP NAMES objdump REQUIRED)
add_custom_command(OUTPUT ${FJ_FLOOR_TEXT}
  COMMAND ${CMAKE_COMMAND} -DOBJDUMP=${FJ_OBJDUMP} -DLIBDIR=${CMAKE_BINARY_DIR}/lib
          -DHEADER=${FJ_FLOOR_HEADER} -DTEXT=${FJ_FLOOR_TEXT}
          "-DCXX=${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}"
          -P ${CMAKE_SOURCE_DIR}/cmake/floor.cmake
  DEPENDS fleetjit fleetjit_core ${CMAKE_SOURCE_DIR}/cmake/floor.cmake
  BYPRODUCTS ${FJ_FLOOR_HEADER}
  COMMENT "Computing the glibc/libstdc++ floor of the libraries" VERBATIM)
add_custom_target(fj_floor ALL DEPENDS ${FJ_FLOOR_TEXT})
# Only tools/floor.cc includes the header, so under Ninja only that object
# waits for the libraries to link; the CLI's other files compile meanwhile
# (a target-level dependency would hold them all back).
set_source_files_properties(${CMAKE_SOURCE_DIR}/tools/floor.cc
  TARGET_DIRECTORY fleetjit_cli PROPERTIES
  OBJECT_DEPENDS ${FJ_FLOOR_HEADER} SKIP_UNITY_BUILD_INCLUSION ON)
if(NOT CMAKE_GENERATOR MATCHES "Ninja")
  add_dependencies(fleetjit_cli fj_floor)
endif()
target_include_directories(fleetjit_cli PRIVATE ${CMAKE_BINARY_DIR}/generated)

# 1. The C ABI: header, library, links.
install(FILES ${CMAKE_SOURCE_DIR}/include/fleetjit/fleetjit.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fleetjit)
# The device-side copy layer, for editors and offline nvcc builds; fleetjit's
# own NVRTC builds use the copy embedded in the library.
install(FILES ${CMAKE_SOURCE_DIR}/include/fleetjit/copy.cuh
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fleetjit)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/fleetjit/copy/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fleetjit/copy)
install(TARGETS fleetjit LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# 2. The private core and the shared abseil copied beside it at build time.
install(TARGETS fleetjit_core LIBRARY DESTINATION ${FJ_INSTALL_PRIVATE_LIBDIR})
install(DIRECTORY ${CMAKE_BINARY_DIR}/lib/ DESTINATION ${FJ_INSTALL_PRIVATE_LIBDIR}
  FILES_MATCHING PATTERN "libabsl_*.so.*")

# 3. The CLI and the floor.
install(TARGETS fleetjit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${FJ_FLOOR_TEXT} DESTINATION ${CMAKE_INSTALL_DATADIR}/fleetjit)

# 4. Drop the build-tree RPATH entry and strip what was installed.
install(CODE "
  set(_fj_root \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}\")
  file(RPATH_CHANGE FILE \"\${_fj_root}/${CMAKE_INSTALL_LIBDIR}/libfleetjit.so.${PROJECT_VERSION}\"
       OLD_RPATH \"\$ORIGIN/fleetjit:\$ORIGIN\" NEW_RPATH \"\$ORIGIN/fleetjit\")
  file(GLOB _fj_elves
       \"\${_fj_root}/${CMAKE_INSTALL_LIBDIR}/libfleetjit.so.${PROJECT_VERSION}\"
       \"\${_fj_root}/${FJ_INSTALL_PRIVATE_LIBDIR}/*.so*\"
       \"\${_fj_root}/${CMAKE_INSTALL_BINDIR}/fleetjit\")
  foreach(_f IN LISTS _fj_elves)
    if(NOT IS_SYMLINK \"\${_f}\")
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-unneeded \"\${_f}\"
                      RESULT_VARIABLE _rc)
      if(NOT _rc EQUAL 0)
        message(FATAL_ERROR \"strip failed on \${_f}\")
      endif()
    endif()
  endforeach()
")

# 5. find_package(fleetjit) and pkg-config.
set(FJ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fleetjit)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/fleetjitConfig.cmake.in
  ${CMAKE_BINARY_DIR}/generated/fleetjitConfig.cmake
  INSTALL_DESTINATION ${FJ_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/generated/fleetjitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/generated/fleetjitConfig.cmake
              ${CMAKE_BINARY_DIR}/generated/fleetjitConfigVersion.cmake
  DESTINATION ${FJ_CMAKE_DIR})
configure_file(${CMAKE_SOURCE_DIR}/cmake/fleetjit.pc.in
  ${CMAKE_BINARY_DIR}/generated/fleetjit.pc @ONLY)
# The build tree's own, for the bindings built against it
# (PKG_CONFIG_PATH=build/lib/pkgconfig: cgo's `#cgo pkg-config: fleetjit`,
# fleetjit-sys's build script): the header in the source tree, the library
# in build/lib.
file(WRITE ${CMAKE_BINARY_DIR}/lib/pkgconfig/fleetjit.pc
  "# fleetjit's build tree (not installed): ${CMAKE_BINARY_DIR}\n"
  "includedir=${CMAKE_SOURCE_DIR}/include\nlibdir=${CMAKE_BINARY_DIR}/lib\n\n"
  "Name: fleetjit\nDescription: JIT runtime for CUDA GPUs with a stable C ABI (build tree)\n"
  "Version: ${PROJECT_VERSION}\nCflags: -I\${includedir}\n"
  "Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lfleetjit\n")
install(FILES ${CMAKE_BINARY_DIR}/generated/fleetjit.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
