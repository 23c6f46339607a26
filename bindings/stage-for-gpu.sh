#!/usr/bin/env bash
# Builds the Rust and Go binding test binaries here and copies them, with a
# runner, into DEST (default <repo>/.device/bindings), for a GPU host that
# has neither cargo nor go. Run scripts/stage-for-gpu first (it recreates
# .device and stages the library into .device/build/lib), then this, then
# on the GPU host, from the repo root:
#   .device/bindings/run.sh            # library from .device/build/lib
# FLEETJIT_LIB_DIR / FLEETJIT_INCLUDE_DIR: as for bindings/test.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
dest="$(realpath -m "${1:-$repo/.device/bindings}")"
export FLEETJIT_LIB_DIR="$(realpath -m "${FLEETJIT_LIB_DIR:-$repo/build/lib}")"
export FLEETJIT_INCLUDE_DIR="$(realpath -m "${FLEETJIT_INCLUDE_DIR:-$repo/include}")"
command -v cargo >/dev/null || export PATH="$HOME/.cargo/bin:$PATH"
rm -rf "$dest" && mkdir -p "$dest"

# Rust: every test executable of the workspace (not the doc tests).
(cd "$here/rust" && cargo test --offline --no-run --message-format=json 2>/dev/null) |
  grep '"test":true' | grep -o '"executable":"[^"]*"' | sed 's/"executable":"//; s/"$//' |
  while read -r exe; do cp "$exe" "$dest/rust-$(basename "$exe" | sed 's/-[0-9a-f]*$//')"; done

# Go: one test binary.
(cd "$here/go" && CGO_ENABLED=1 GOPROXY=off GOFLAGS=-mod=mod \
  CGO_CFLAGS="-I$FLEETJIT_INCLUDE_DIR" CGO_LDFLAGS="-L$FLEETJIT_LIB_DIR -Wl,-rpath,$FLEETJIT_LIB_DIR" \
  go test -c -o "$dest/go-fleetjit.test" .)

strip --strip-debug "$dest"/rust-* "$dest"/go-fleetjit.test 2>/dev/null || true

cat > "$dest/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the staged binding tests; LD_LIBRARY_PATH beats the build host's rpath.
set -u
d="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export LD_LIBRARY_PATH="$(realpath "${FLEETJIT_LIB_DIR:-$d/../build/lib}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The tests give each runtime its own cache folder; FLEETJIT_CACHE_DIR (which
# scripts/gpu-check exports) would override it (the environment wins).
unset FLEETJIT_CACHE_DIR
rc=0
for t in "$d"/rust-*; do
  echo "== $(basename "$t")"; "$t" --show-output --test-threads=1 || rc=1
done
echo "== go-fleetjit.test"; "$d/go-fleetjit.test" -test.v -test.count=1 || rc=1
echo "bindings GPU run: rc=$rc"; exit $rc
RUN
chmod +x "$dest/run.sh"
du -sh "$dest"
