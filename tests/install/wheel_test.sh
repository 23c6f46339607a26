#!/usr/bin/env bash
# python_wheel_test: builds the wheel (scripts/dev/build-wheel), installs it
# with pip into a fresh venv, then, with no LD_LIBRARY_PATH and no
# FLEETJIT_LIBRARY, imports fleetjit from the venv, checks that the library
# it loaded is the wheel's own, builds a kernel for a named target (sm_90)
# and checks the cubin, and runs the bundled CLI through the venv's
# `fleetjit` script.
#
#   wheel_test.sh BUILD_DIR WORK_DIR
set -euo pipefail
# Never die silently: name the command that failed.
trap 'echo "wheel_test: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
B="$1"
W="$2"
PY=/usr/bin/python3
rm -rf "$W" && mkdir -p "$W"
whl="$("$repo/scripts/dev/build-wheel" "$B" "$W/dist")"
echo "wheel: $(basename "$whl"), $(stat -c %s "$whl") bytes"
case "$(basename "$whl")" in
  fleetjit-*-cp38-abi3-manylinux_2_*_x86_64.whl) ;;
  *) echo "unexpected wheel tag: $whl"; exit 1 ;;
esac
"$PY" -m venv --without-pip "$W/venv"
"$PY" -m pip --python "$W/venv/bin/python" install -q --no-index --no-deps "$whl"
cd "$W"  # not the source tree: the import must come from the venv
env -u LD_LIBRARY_PATH -u FLEETJIT_LIBRARY -u PYTHONPATH "$W/venv/bin/python" - <<'PY'
import os, fleetjit
from fleetjit import _fast, _ffi
site = os.path.dirname(fleetjit.__file__)
assert "/venv/" in site, site
assert fleetjit.library_path() == os.path.join(site, "lib", "libfleetjit.so.1"), fleetjit.library_path()
print("library", fleetjit.library_version(), "from", fleetjit.library_path())
assert _fast.available()[0], _fast.available()
src = ('extern "C" __global__ void scale(float* y, float a, int n) {'
       ' int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] *= a; }'
       f' // {os.urandom(8).hex()}')
with fleetjit.Runtime(cache_dir=os.path.join(os.getcwd(), "cache")) as rt:
    m = rt.build(src, name="scale.cu", target="sm_90")
    image = m.image
    assert image[:4] == b"\x7fELF", image[:4]
    assert m.info.target == "sm_90", m.info
print("built scale.cu for sm_90:", len(image), "bytes of cubin")
PY
# Read whole, then cut: `info | head -3` under pipefail fails whenever head
# exits before info has written its last line (SIGPIPE), which a loaded
# host makes likely.
info="$(env -u LD_LIBRARY_PATH -u FLEETJIT_LIBRARY "$W/venv/bin/fleetjit" info)"
printf '%s\n' "$info" | sed -n 1,3p
echo "wheel test OK"
