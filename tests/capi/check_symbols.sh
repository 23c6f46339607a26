#!/usr/bin/env bash
# Compares the dynamic symbols libfleetjit.so.1 exports with the checked-in
# list: the ABI grows only on purpose.
set -euo pipefail
lib=$1; expected=$2
actual=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u)
if ! diff <(echo "$actual") <(grep -v '^#' "$expected" | sort -u); then
  echo "exported symbols differ from $expected (< library, > list)" >&2
  exit 1
fi
bad=$(echo "$actual" | grep -v '^fj_' || true)
if [ -n "$bad" ]; then echo "non-fj_ exports: $bad" >&2; exit 1; fi
echo "$(echo "$actual" | wc -l) exported symbols, all fj_*, match the list"
