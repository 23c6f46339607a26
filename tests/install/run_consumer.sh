#!/usr/bin/env bash
# run_consumer.sh PREFIX WORK_DIR cmake|pkg-config [cmake args...]: configures
# and builds tests/install/consumer against the installed PREFIX in
# WORK_DIR, then runs it (without LD_LIBRARY_PATH); it prints OK.
set -euo pipefail
prefix=$1 work=$2 how=$3; shift 3
src=$(cd "$(dirname "$0")/consumer" && pwd)
rm -rf "$work"
case $how in
  cmake) args=(-DCMAKE_PREFIX_PATH="$prefix") ;;
  pkg-config) export PKG_CONFIG_PATH=$prefix/lib/pkgconfig; args=(-DUSE_PKG_CONFIG=ON)
              pkg-config --cflags --libs fleetjit ;;
  *) echo "unknown: $how" >&2; exit 2 ;;
esac
cmake -S "$src" -B "$work" "${args[@]}" "$@"
cmake --build "$work"
env -u LD_LIBRARY_PATH "$work/consumer"
