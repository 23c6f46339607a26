#!/usr/bin/env bash
# relocate.sh PREFIX COPY DLOPEN_COPY: copies the installed tree elsewhere
# and loads it from there (dlopen RTLD_NOW|RTLD_LOCAL, no LD_LIBRARY_PATH);
# the copy's CLI runs too, and its CMake and pkg-config files point into it.
set -euo pipefail
prefix=$1 copy=$2 prog=$3
rm -rf "$copy"
mkdir -p "$(dirname "$copy")"
cp -a "$prefix" "$copy"
env -u LD_LIBRARY_PATH "$prog" "$copy"
env -u LD_LIBRARY_PATH "$copy/bin/fleetjit" info --target sm_90 >/dev/null
libdir=$(PKG_CONFIG_PATH=$copy/lib/pkgconfig pkg-config --variable=libdir fleetjit)
[ "$(cd "$libdir" && pwd -P)" = "$(cd "$copy/lib" && pwd -P)" ] ||
  { echo "pkg-config libdir $libdir is not in the copy" >&2; exit 1; }
echo "relocated tree OK"
