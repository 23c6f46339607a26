#!/usr/bin/env bash
# wheel_elf_check_test: scripts/dev/check-wheel-elf on small wheels made
# here, so that what it accepts and refuses is pinned without building the
# real wheel (python_wheel_test runs it on that one, through build-wheel).
# A C program compiled by this machine's compiler needs some glibc N.M
# (GLIBC_2.34 on Debian 12: __libc_start_main); the check must
# - accept it in a wheel tagged manylinux_N_M (and one above),
# - refuse it tagged manylinux_N_(M-1), naming the file and the version,
# - refuse a needed library the wheel lacks, accept it once the wheel
#   carries it beside the file,
# - refuse an RPATH entry that is not $ORIGIN-relative.
#
#   wheel_elf_check_test.sh WORK_DIR
set -euo pipefail
trap 'echo "wheel_elf_check_test: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
W="$1"
check="$repo/scripts/dev/check-wheel-elf"
rm -rf "$W" && mkdir -p "$W/src"
cd "$W"
echo 'int main(void) { return 0; }' >src/main.c
echo 'int helper(void) { return 1; }' >src/helper.c
cc -O1 -o src/prog src/main.c
cc -O1 -shared -fPIC -Wl,-soname,libhelper.so.1 -o src/libhelper.so.1 src/helper.c
cc -O1 -o src/prog_needs_helper src/main.c -Wl,--no-as-needed src/libhelper.so.1 '-Wl,-rpath,$ORIGIN'
cc -O1 -o src/prog_abs_rpath src/main.c -Wl,-rpath,/usr/lib/fleetjit-nowhere

need="$(readelf -VW src/prog | sed -n '/Version needs section/,$p' | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -n 1)"
[ -n "$need" ] || { echo "no GLIBC need in a compiled program"; exit 1; }
major="${need#GLIBC_}"; minor="${major#*.}"; major="${major%%.*}"; minor="${minor%%.*}"
echo "a compiled program needs $need"

# wheel TAG FILE...: a wheel tagged manylinux_TAG_x86_64 holding the FILEs in fleetjit/.
wheel() {
  local tag="$1"; shift
  local d="$W/w-$tag-$RANDOM"
  mkdir -p "$d/fleetjit"
  cp "$@" "$d/fleetjit/"
  local whl="$W/fleetjit-0.0.0-cp38-abi3-manylinux_${tag}_x86_64.whl"
  rm -f "$whl"
  (cd "$d" && python3 -c 'import sys, zipfile, os
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for f in sorted(os.listdir("fleetjit")):
        z.write(os.path.join("fleetjit", f))' "$whl")
  echo "$whl"
}
expect() {  # pass|fail PATTERN WHEEL: the check's outcome and a line it prints
  local want="$1" pattern="$2" whl="$3" out rc=0
  out="$("$check" "$whl" 2>&1)" || rc=$?
  if { [ "$want" = pass ] && [ "$rc" != 0 ]; } || { [ "$want" = fail ] && [ "$rc" != 1 ]; }; then
    echo "expected check-wheel-elf to $want on $(basename "$whl") (exit $rc):"
    printf '%s\n' "$out"
    exit 1
  fi
  if ! grep -qF -- "$pattern" <<<"$out"; then
    echo "check-wheel-elf on $(basename "$whl") did not print '$pattern':"
    printf '%s\n' "$out"
    exit 1
  fi
  echo "$want as expected: $(basename "$whl"): $(grep -F -- "$pattern" <<<"$out" | sed -n 1p)"
}

expect pass "fit manylinux_${major}_${minor}" "$(wheel "${major}_${minor}" src/prog)"
expect pass "fit manylinux_${major}_$((minor + 1))" "$(wheel "${major}_$((minor + 1))" src/prog)"
if [ "$minor" -gt 0 ]; then
  expect fail "fleetjit/prog needs GLIBC_${major}.${minor}, newer than manylinux_${major}_$((minor - 1))" \
    "$(wheel "${major}_$((minor - 1))" src/prog)"
fi
expect fail "needs libhelper.so.1, which is neither in the wheel" \
  "$(wheel "${major}_${minor}" src/prog_needs_helper)"
expect pass "fit manylinux_${major}_${minor}" \
  "$(wheel "${major}_${minor}" src/prog_needs_helper src/libhelper.so.1)"
expect fail "RPATH entry /usr/lib/fleetjit-nowhere points outside the wheel" \
  "$(wheel "${major}_${minor}" src/prog_abs_rpath)"
echo "wheel ELF check OK"
