#!/usr/bin/env bash
# check_abi.sh LIBRARY BASELINE SUPPRESSIONS: compares libfleetjit.so.1 with
# the checked-in abidw baseline (capi/abi/) using abidiff, over the types
# <fleetjit/fleetjit.h> declares (SUPPRESSIONS drops the rest when abidw
# reads the library).
#
#   pass: no change, or additions only: new functions, fields appended to a
#         struct (rule 5 of the header: struct_size versions them), new
#         enumerators. Additions are listed, with how to record them.
#   fail: abidiff's INCOMPATIBLE bit (8: a function or variable removed), or
#         a change to what exists: a member moved, retyped, renamed or
#         removed, a struct shrunk, a signature or enumerator value changed.
#         (An array member that grows is reported as retyped: if it is the
#         last member, the change is in fact an addition; record it.)
# scripts/dev/update-abi-baseline records a deliberate change.
set -uo pipefail
lib=$1 baseline=$2 supp=$3
if ! command -v abidiff >/dev/null; then
  echo "abidiff is missing: apt-get install abigail-tools (scripts/dev/install-deps)" >&2
  exit 1
fi
if ! readelf -S "$lib" | grep '\.debug_info' >/dev/null; then
  echo "$lib has no DWARF: the C shim must be built with -g (tests/abi/CMakeLists.txt)" >&2
  exit 1
fi
# The library is read exactly as the baseline was written
# (scripts/dev/update-abi-baseline), then the two representations are compared.
current=$(mktemp --suffix=.abi)
trap 'rm -f "$current"' EXIT
if ! abidw --suppressions "$supp" --drop-undefined-syms --no-corpus-path --no-comp-dir-path \
       --short-locs --type-id-style hash "$lib" > "$current"; then
  echo "abidw failed on $lib"; exit 1
fi
report=$(abidiff "$baseline" "$current" 2>&1); rc=$?
update="scripts/dev/update-abi-baseline"
if (( rc & 3 )); then
  echo "abidiff failed to run (exit $rc):"; echo "$report"; exit 1
fi
if (( rc & 8 )); then
  echo "INCOMPATIBLE ABI change against $baseline (abidiff exit $rc):"; echo "$report"
  echo "A deliberate break bumps FJ_VERSION_MAJOR and the SONAME, then runs $update."
  exit 1
fi
if (( rc & 4 )); then
  # Shrinks: "type size changed from X to Y" with Y < X.
  shrunk=$(echo "$report" | sed -n 's/.*type size changed from \([0-9]*\) to \([0-9]*\).*/\1 \2/p' |
           awk '$2 < $1' | head -1)
  fatal=$(echo "$report" | grep -E "offset changed from|deletion|type name changed from|name of .* changed|was removed|was added|value changed from|enumerator deletion|\[D\]" || true)
  if [ -n "$fatal$shrunk" ]; then
    echo "ABI change against $baseline that is not an addition (abidiff exit $rc):"
    echo "$report"
    echo "---- offending lines:"; echo "$fatal${shrunk:+
a struct shrank ($shrunk bits)}"
    echo "If it is deliberate (and FJ_VERSION_MAJOR says so), run $update."
    exit 1
  fi
  echo "ABI additions since the baseline (compatible):"
  echo "$report" | grep -E "changes summary|\[A\]|\[C\]|insertion|'.*', at offset" || true
  echo "Record them on purpose: bump FJ_VERSION_MINOR, update capi/exported_symbols.txt, run $update."
fi
echo "ABI of $(basename "$lib") is compatible with $(basename "$baseline")"
