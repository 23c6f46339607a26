# Dependencies, all from Debian packages (scripts/dev/install-deps installs them):
# abseil (shared, libabsl-dev), LLVM 14 (static, llvm-14-dev), GoogleTest,
# the hiredis headers (libhiredis-dev) and the CUDA headers. libcuda, NVRTC
# and hiredis are dlopen'ed at run time: nothing links against them.

# CUDA headers only (cuda.h, nvrtc.h types).
find_path(FJ_CUDA_INCLUDE_DIR cuda.h
  HINTS ${CUDA_HOME}/include $ENV{CUDA_HOME}/include /usr/local/cuda/include
  REQUIRED)

# hiredis 0.14 headers only (libhiredis-dev): the library is dlopen'ed by
# the remote cache tier when one is configured (platform/hiredis_api.h says
# why), so nothing links against it and a host without it still runs.
find_path(FJ_HIREDIS_INCLUDE_DIR hiredis/hiredis.h)
if(NOT FJ_HIREDIS_INCLUDE_DIR)
  message(FATAL_ERROR "hiredis headers not found: apt-get install libhiredis-dev")
endif()

# abseil: Debian's static archives are not PIC, so link the shared ones.
# FJ_ABSL_PREFIX names another build of the same abseil (its include/ and
# lib/): scripts/ci/tsan points it at one built with -fsanitize=thread from
# Debian's source package, so that ThreadSanitizer sees abseil's locks.
set(FJ_ABSL_PREFIX "" CACHE PATH "an abseil install to use instead of Debian's")
set(FJ_ABSL_LIBDIR /usr/lib/x86_64-linux-gnu)
if(FJ_ABSL_PREFIX)
  set(FJ_ABSL_LIBDIR ${FJ_ABSL_PREFIX}/lib)
  include_directories(BEFORE SYSTEM ${FJ_ABSL_PREFIX}/include)
endif()
set(FJ_ABSL_COMPONENTS status statusor strings str_format_internal
    synchronization time hash raw_hash_set cord cordz_info cord_internal
    cordz_functions cordz_handle throw_delegate raw_logging_internal
    int128 base spinlock_wait malloc_internal stacktrace symbolize
    debugging_internal demangle_internal graphcycles_internal
    time_zone civil_time strerror city low_level_hash bad_optional_access
    bad_variant_access log_severity flags_marshalling)
set(FJ_ABSL_LIBS "")
foreach(c IN LISTS FJ_ABSL_COMPONENTS)
  find_library(FJ_ABSL_${c} NAMES absl_${c} PATHS ${FJ_ABSL_LIBDIR} NO_DEFAULT_PATH)
  if(FJ_ABSL_${c})
    list(APPEND FJ_ABSL_LIBS ${FJ_ABSL_${c}})
  endif()
endforeach()
if(NOT FJ_ABSL_status)
  message(FATAL_ERROR "abseil not found: apt-get install libabsl-dev")
endif()

# LLVM 14, static and PIC (Debian's archives are).
find_program(FJ_LLVM_CONFIG NAMES llvm-config-14 llvm-config REQUIRED)
execute_process(COMMAND ${FJ_LLVM_CONFIG} --includedir
  OUTPUT_VARIABLE FJ_LLVM_INCLUDE_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${FJ_LLVM_CONFIG} --link-static --libfiles orcjit native
  OUTPUT_VARIABLE FJ_LLVM_LIBFILES OUTPUT_STRIP_TRAILING_WHITESPACE)
separate_arguments(FJ_LLVM_LIBFILES)
# LLVM's own system libraries, minus the optional ones (z3, xml2) that the
# GPU host lacks and the ORC JIT does not need: --as-needed drops them.
set(FJ_LLVM_LIBS -Wl,--start-group ${FJ_LLVM_LIBFILES} -Wl,--end-group z tinfo rt m)

find_package(GTest REQUIRED)
find_package(Threads REQUIRED)

# Link options for the two shared libraries: hide every symbol that came
# from a static archive (LLVM), refuse undefined symbols, and find the
# shared abseil beside the library with DT_RPATH, which (unlike RUNPATH)
# also serves the transitive libabsl_* dependencies.
function(fj_private_library_link_options target)
  target_link_options(${target} PRIVATE
    -Wl,--exclude-libs,ALL -Wl,--no-undefined -Wl,--as-needed
    -Wl,--disable-new-dtags
    # A call from one of the library's functions to another binds inside
    # it, not through the PLT: nothing interposes on fleetjit's internals,
    # and the launch path crosses a dozen of them.
    -Wl,-Bsymbolic-functions)
  set(rpath "$ORIGIN")
  if(FJ_ABSL_PREFIX)
    list(APPEND rpath ${FJ_ABSL_LIBDIR})  # the copies beside it come from there
  endif()
  set_target_properties(${target} PROPERTIES
    BUILD_WITH_INSTALL_RPATH ON INSTALL_RPATH "${rpath}")
endfunction()

# Copies the shared abseil libraries a target needs next to it after link.
function(fj_copy_runtime_libs target dir)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DDIR=${dir} -DLIB=$<TARGET_FILE:${target}>
            "-DPREFER=$<$<BOOL:${FJ_ABSL_PREFIX}>:${FJ_ABSL_LIBDIR}>"
            -P ${CMAKE_SOURCE_DIR}/cmake/copy_runtime_libs.cmake
    VERBATIM)
endfunction()

# Executables (CLI, tests, benchmarks) live in build/{bin,tests,bench} and
# find the libraries in ../lib, in the build tree and staged on the GPU host.
function(fj_executable_rpath target)
  set_target_properties(${target} PROPERTIES
    BUILD_WITH_INSTALL_RPATH ON INSTALL_RPATH "$ORIGIN/../lib")
  target_link_options(${target} PRIVATE -Wl,--disable-new-dtags)
endfunction()
