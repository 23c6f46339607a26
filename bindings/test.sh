#!/usr/bin/env bash
# Runs the Rust and Go binding test suites against a built libfleetjit.
#
#   bindings/test.sh                 # library from <repo>/build/lib
#   FLEETJIT_LIB_DIR=/path/to/lib bindings/test.sh
#   bindings/test.sh rust|go         # one suite only
#
# FLEETJIT_LIB_DIR      directory holding libfleetjit.so(.1) (default <repo>/build/lib)
# FLEETJIT_INCLUDE_DIR  directory holding fleetjit/fleetjit.h (default <repo>/include)
#
# Both suites pass without a GPU (the GPU launch tests then skip and say
# why). Prints each suite's summary lines and exits non-zero if any suite
# fails. Installs Debian's golang-go with apt when `go` is missing; cargo
# must already be installed (also looked for in ~/.cargo/bin) and runs
# --offline: the crates have no dependencies.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
lib_dir="$(realpath -m "${FLEETJIT_LIB_DIR:-$repo/build/lib}")"
inc_dir="$(realpath -m "${FLEETJIT_INCLUDE_DIR:-$repo/include}")"
export FLEETJIT_LIB_DIR="$lib_dir" FLEETJIT_INCLUDE_DIR="$inc_dir"
suites=("${@:-rust go}")
suites=(${suites[*]})

if [ ! -e "$lib_dir/libfleetjit.so" ]; then
  echo "bindings/test.sh: no libfleetjit.so in $lib_dir (build the library or set FLEETJIT_LIB_DIR)" >&2
  exit 2
fi
if [ ! -f "$inc_dir/fleetjit/fleetjit.h" ]; then
  echo "bindings/test.sh: no fleetjit/fleetjit.h in $inc_dir (set FLEETJIT_INCLUDE_DIR)" >&2
  exit 2
fi
echo "bindings/test.sh: library $lib_dir, header $inc_dir"

logs="$(mktemp -d "${TMPDIR:-/tmp}/fleetjit-bindings.XXXXXX")"
failed=()

run_rust() {
  if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! command -v cargo >/dev/null; then
    echo "rust: cargo not found (install a Rust toolchain)" >&2
    return 1
  fi
  # Each test runtime names its own cache folder; FLEETJIT_CACHE_DIR would
  # override it (the environment wins over fj_runtime_options).
  unset FLEETJIT_CACHE_DIR
  echo "== rust: cargo test --offline ($(cargo --version))"
  (cd "$here/rust" && cargo test --offline -- --show-output) >"$logs/rust.log" 2>&1
  local rc=$?
  # One summary per test binary, SKIP lines printed by the GPU tests.
  grep -E '^\s*(Running|Doc-tests) |^test result:|SKIP' "$logs/rust.log" | sed 's/^\s*/  /'
  awk '/^test result:/ { p += $4; f += $6; i += $8 } END { printf "  rust total: %d passed, %d failed, %d ignored\n", p, f, i }' "$logs/rust.log"
  if [ $rc -ne 0 ]; then
    echo "-- rust log tail ($logs/rust.log):"; tail -60 "$logs/rust.log"
  fi
  return $rc
}

run_go() {
  if ! command -v go >/dev/null; then
    echo "go: not found; installing Debian's golang-go"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends golang-go >/dev/null; } || { echo "go: apt-get install golang-go failed" >&2; return 1; }
  fi
  echo "== go: go test ./... ($(go version))"
  # Header and library first on the command line, ahead of the package's
  # ${SRCDIR} defaults. -count=1: go's test cache does not see the .so.
  (cd "$here/go" &&
    CGO_ENABLED=1 GOPROXY=off GOFLAGS=-mod=mod \
    CGO_CFLAGS="-I$inc_dir ${CGO_CFLAGS:-}" \
    CGO_LDFLAGS="-L$lib_dir -Wl,-rpath,$lib_dir ${CGO_LDFLAGS:-}" \
    go test -count=1 -v ./...) >"$logs/go.log" 2>&1
  local rc=$?
  # go -v prints a skipped test's reason (t.Skipf) just above its --- SKIP.
  grep -E -B1 -e '^--- SKIP' "$logs/go.log" | grep -v '^--$' | sed 's/^\s*/  /'
  awk '/^--- PASS/ { p++ } /^--- FAIL/ { f++ } /^--- SKIP/ { s++ } END { printf "  go total: %d passed, %d failed, %d skipped\n", p, f, s }' "$logs/go.log"
  grep -E '^(ok|FAIL|---)\s' "$logs/go.log" | grep -vE '^--- (PASS|SKIP)' | sed 's/^/  /'
  if [ $rc -ne 0 ]; then
    echo "-- go log tail ($logs/go.log):"; tail -60 "$logs/go.log"
  fi
  return $rc
}

for s in "${suites[@]}"; do
  case "$s" in
    rust) run_rust || failed+=(rust) ;;
    go) run_go || failed+=(go) ;;
    *) echo "bindings/test.sh: unknown suite '$s' (rust, go)" >&2; exit 2 ;;
  esac
done

echo "logs: $logs"
if ((${#failed[@]})); then
  echo "bindings/test.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "bindings/test.sh: all passed (${suites[*]})"
