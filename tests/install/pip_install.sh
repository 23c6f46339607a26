#!/usr/bin/env bash
# pip_install.sh PYTHON PACKAGE_DIR TARGET LIBRARY: installs the binding with
# pip, offline (no index, no build isolation), into TARGET, then imports it
# from there and builds a kernel for sm_90; then into a fresh venv (pip and
# nothing else: the package's build backend needs only the standard
# library), as README.md's command does, and imports it there.
set -euo pipefail
# Never die silently: name the command that failed.
trap 'echo "pip_install: line $LINENO: \`$BASH_COMMAND\` failed (status $?)" >&2' ERR
py=$1 pkg=$2 target=$3 lib=$4
rm -rf "$target"
# Build in a scratch copy so the source tree gets no build/ or egg-info.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$pkg"/. "$scratch/"
rm -rf "$scratch/build" "$scratch"/*.egg-info
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$py" -m pip install --no-build-isolation --no-deps --no-index --target "$target" "$scratch"
cd "$scratch/.."  # not the package directory: import the installed copy
PYTHONPATH=$target FLEETJIT_LIBRARY=$lib "$py" - <<'PY'
import fleetjit, os
assert os.environ["PYTHONPATH"] in fleetjit.__file__, fleetjit.__file__
with fleetjit.Runtime(disk_cache=False) as rt:
    m = rt.build('extern "C" __global__ void k(int* p) { *p = 1; }', target="sm_90")
    print("fleetjit", fleetjit.__version__, "library %d.%d" % fleetjit.library_version(),
          "from", fleetjit.__file__, "->", m.info.target, m.info.copy_impl)
PY
"$py" -m venv "$scratch/venv"
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$scratch/venv/bin/python" -m pip install -q --no-build-isolation --no-deps "$scratch"
FLEETJIT_LIBRARY=$lib "$scratch/venv/bin/python" - <<'PY'
import fleetjit, sys
assert fleetjit.__file__.startswith(sys.prefix), (fleetjit.__file__, sys.prefix)
print("fresh venv:", fleetjit.__version__, "library %d.%d" % fleetjit.library_version())
print("pip install OK")
PY
