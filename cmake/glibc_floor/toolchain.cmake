# The wheel's glibc-floor build: this machine's gcc 12 compiling and linking
# against a Debian 11 sysroot (glibc 2.31, scripts/dev/debian11-sysroot), so
# that every library and program it links needs glibc 2.31 at most. Used by
# scripts/dev/build-wheel-floor for fleetjit and for the abseil it builds
# from source; the normal build never reads this file.
#
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/glibc_floor/toolchain.cmake \
#         -DFJ_FLOOR_SYSROOT=.debian11/sysroot -DFJ_FLOOR_COMPAT_OBJECT=compat.o ...
#
# - Headers: the sysroot's glibc 2.31 and kernel headers; gcc 12's own C++
#   headers (its /usr/include/c++/12 is not under the sysroot).
# - libstdc++ is linked statically (-static-libstdc++): the C++20 code
#   needs gcc 12's, which no glibc 2.31 system ships. Its symbols stay inside
#   each library (--exclude-libs,ALL for shared libraries).
# - libgcc_s stays shared, linked against bullseye's (GCC_7.0.0 at most): gcc
#   12's static unwinder (libgcc_eh.a) calls _dl_find_object (glibc 2.35).
# - Startup files and libraries come from the sysroot first (-B): gcc's
#   default search puts this machine's /usr/lib/x86_64-linux-gnu before the
#   sysroot's, which would link glibc 2.36's libc.so and Scrt1.o.
# - FJ_FLOOR_COMPAT_OBJECT (cmake/glibc_floor/compat.c, compiled against the
#   sysroot) defines, hidden, the three symbols that the static libstdc++.a
#   and LLVM archives (compiled against glibc 2.36 headers) reference and
#   glibc 2.31 lacks: __libc_single_threaded, arc4random, mallinfo2.
# - libpthread and libdl are glibc 2.31's own libraries: libpthread is
#   linked --no-as-needed, since the static libstdc++.a that references it
#   (pthread_once) comes after it on the link line.
if(NOT FJ_FLOOR_SYSROOT AND DEFINED ENV{FJ_FLOOR_SYSROOT})
  set(FJ_FLOOR_SYSROOT $ENV{FJ_FLOOR_SYSROOT})
endif()
if(NOT FJ_FLOOR_COMPAT_OBJECT AND DEFINED ENV{FJ_FLOOR_COMPAT_OBJECT})
  set(FJ_FLOOR_COMPAT_OBJECT $ENV{FJ_FLOOR_COMPAT_OBJECT})
endif()
if(NOT FJ_FLOOR_SYSROOT OR NOT EXISTS ${FJ_FLOOR_SYSROOT}/usr/include/stdio.h)
  message(FATAL_ERROR "FJ_FLOOR_SYSROOT (${FJ_FLOOR_SYSROOT}) is not a sysroot: "
    "scripts/dev/debian11-sysroot makes one")
endif()
if(NOT FJ_FLOOR_COMPAT_OBJECT OR NOT EXISTS ${FJ_FLOOR_COMPAT_OBJECT})
  message(FATAL_ERROR "FJ_FLOOR_COMPAT_OBJECT (${FJ_FLOOR_COMPAT_OBJECT}) does not exist: "
    "compile cmake/glibc_floor/compat.c against the sysroot")
endif()
# try_compile projects read this file again: hand them the two settings.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES FJ_FLOOR_SYSROOT FJ_FLOOR_COMPAT_OBJECT)

set(CMAKE_C_COMPILER gcc)
set(CMAKE_CXX_COMPILER g++)
set(CMAKE_SYSROOT ${FJ_FLOOR_SYSROOT})
set(_fj_multiarch x86_64-linux-gnu)
set(_fj_link "-static-libstdc++ -B${FJ_FLOOR_SYSROOT}/usr/lib/${_fj_multiarch}/ -B${FJ_FLOOR_SYSROOT}/lib/${_fj_multiarch}/ ${FJ_FLOOR_COMPAT_OBJECT}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_fj_link}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_fj_link} -Wl,--exclude-libs,ALL")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${_fj_link} -Wl,--exclude-libs,ALL")
foreach(lang C CXX)
  set(CMAKE_${lang}_STANDARD_LIBRARIES
    "-Wl,--push-state,--no-as-needed -lpthread -Wl,--pop-state -ldl -lrt")
endforeach()
