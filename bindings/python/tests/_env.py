"""Test setup: which libfleetjit.so.1 to load, and a private cache directory.

ctest sets FLEETJIT_LIBRARY to the build's library. Run by hand
(python3 -m unittest discover bindings/python/tests), the tests fall back
to build/lib/libfleetjit.so.1 and import the package from this tree unless
one is installed.
"""
import atexit
import importlib.util
import os
import pathlib
import shutil
import sys
import tempfile

_REPO = pathlib.Path(__file__).resolve().parents[3]
# The installed package if there is one (PYTHONPATH, pip), else this tree's.
if importlib.util.find_spec("fleetjit") is None:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
if not os.environ.get("FLEETJIT_LIBRARY"):
    candidate = _REPO / "build" / "lib" / "libfleetjit.so.1"
    if candidate.exists():
        os.environ["FLEETJIT_LIBRARY"] = str(candidate)
# A fresh disk cache for each run (FLEETJIT_CACHE_DIR overrides the
# cache_dir option, so it is the variable that must be set), never the
# user's ~/.cache/fleetjit nor a cache an earlier run filled.
CACHE_DIR = tempfile.mkdtemp(prefix="fleetjit-pytest-")
atexit.register(shutil.rmtree, CACHE_DIR, True)
os.environ["FLEETJIT_CACHE_DIR"] = CACHE_DIR

# The corpus kernel (saxpy and the axpy<T> template), one file for every
# test, bench and binding.
SAXPY = (_REPO / "examples" / "saxpy.cu").read_text()

_counter = [0]


def unique(source):
    """`source` with a comment that makes its cache key new in this run."""
    _counter[0] += 1
    return f"{source}\n// {os.getpid()}-{_counter[0]}\n"


TILED_COPY = (_REPO / "examples" / "tiled_copy.cu")


def tiled_copy_source():
    """examples/tiled_copy.cu, or None when the tests run outside the repository."""
    return TILED_COPY.read_text() if TILED_COPY.exists() else None
