#!/usr/bin/env bash
# check_install.sh BUILD_DIR PREFIX VERSION: `cmake --install BUILD_DIR --prefix PREFIX`
# into an empty PREFIX, then checks the tree: files and links, SONAME,
# DT_RPATH (not RUNPATH) of each ELF file, every abseil library the core
# needs shipped beside it, nothing unstripped, no absolute path into the
# build, and `fleetjit info` running from it without LD_LIBRARY_PATH.
set -euo pipefail
build=$1 prefix=$2 version=$3
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
cd "$prefix"
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
for f in include/fleetjit/fleetjit.h include/fleetjit/copy.cuh include/fleetjit/copy/tma.cuh lib/libfleetjit.so.$version lib/libfleetjit.so.1 \
         lib/libfleetjit.so lib/fleetjit/libfleetjit_core.so \
         lib/cmake/fleetjit/fleetjitConfig.cmake lib/cmake/fleetjit/fleetjitConfigVersion.cmake \
         lib/pkgconfig/fleetjit.pc bin/fleetjit share/fleetjit/fleetjit_floor.txt; do
  [ -e "$f" ] || bad "missing $f"
done
[ "$(readlink lib/libfleetjit.so.1)" = libfleetjit.so.$version ] || bad "lib/libfleetjit.so.1 link"
[ "$(readlink lib/libfleetjit.so)" = libfleetjit.so.1 ] || bad "lib/libfleetjit.so link"
ls lib/fleetjit/libabsl_*.so.20220623 >/dev/null 2>&1 || bad "no abseil in lib/fleetjit"

rpath() { readelf -d "$1" | sed -n 's/.*(RPATH).*Library rpath: \[\(.*\)\]/\1/p'; }
check_rpath() {
  local got; got=$(rpath "$1")
  [ "$got" = "$2" ] || bad "$1: DT_RPATH '$got', expected '$2'"
  ! readelf -d "$1" | grep >/dev/null RUNPATH || bad "$1 has DT_RUNPATH (transitive abseil would not resolve)"
}
readelf -d lib/libfleetjit.so.$version | grep >/dev/null 'SONAME.*\[libfleetjit.so.1\]' || bad "SONAME"
check_rpath lib/libfleetjit.so.$version '$ORIGIN/fleetjit'
check_rpath lib/fleetjit/libfleetjit_core.so '$ORIGIN'
check_rpath bin/fleetjit '$ORIGIN/../lib/fleetjit:$ORIGIN/../lib'

# Every libabsl_* needed by anything shipped is shipped.
for f in lib/libfleetjit.so.$version lib/fleetjit/*.so* bin/fleetjit; do
  [ -L "$f" ] && continue
  for dep in $(readelf -d "$f" | sed -n 's/.*NEEDED.*\[\(libabsl_[^]]*\)\]/\1/p'); do
    [ -e "lib/fleetjit/$dep" ] || bad "$f needs $dep, not shipped"
  done
  if readelf -S "$f" | grep >/dev/null '\.symtab'; then bad "$f is not stripped"; fi
  if strings "$f" | grep >/dev/null "$(cd "$build" && pwd)"; then bad "$f names the build directory"; fi
done

# Everything resolves inside the tree, with no LD_LIBRARY_PATH.
unresolved=$(env -u LD_LIBRARY_PATH ldd bin/fleetjit lib/libfleetjit.so.1 | grep 'not found' || true)
[ -z "$unresolved" ] || bad "unresolved: $unresolved"
for dep in libfleetjit_core.so libabsl_base; do
  env -u LD_LIBRARY_PATH ldd lib/libfleetjit.so.1 | grep "$dep" | grep "$prefix/lib/fleetjit/" >/dev/null ||
    bad "$dep does not resolve into $prefix/lib/fleetjit"
done
info=$(env -u LD_LIBRARY_PATH bin/fleetjit info) || bad "fleetjit info failed"
echo "$info" | grep >/dev/null '^needs glibc >= ' || bad "fleetjit info does not state the floor"
echo "$info" | grep '^needs' || true
cat share/fleetjit/fleetjit_floor.txt
echo "installed tree: $(du -sh . | cut -f1) ($(find . -type f | wc -l) files)"
[ $fail = 0 ] && echo "install layout OK"
exit $fail
