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


def fake_driver_saxpy(test):
    """For a test on the fake CUDA driver ($FLEETJIT_LIBCUDA, else
    libfj_fake_cuda.so next to the library): sets test.fake (its CDLL),
    test.rt (a Runtime on it), test.mod (saxpy built), test.k (its kernel)
    and test.buf (64 bytes); skips the test without the driver or NVRTC."""
    import ctypes
    import fleetjit
    from fleetjit import _ffi
    fake = os.environ.get("FLEETJIT_LIBCUDA") or str(
        pathlib.Path(_ffi.library_path()).parent / "libfj_fake_cuda.so")
    if not os.path.exists(fake):
        test.skipTest(f"no fake CUDA driver at {fake}")
    test.fake = ctypes.CDLL(fake)
    test.fake.fjfake_calls.restype = ctypes.c_uint64
    test.fake.fjfake_create_stream.restype = ctypes.c_uint64
    test.rt = fleetjit.Runtime(libcuda=fake, disk_cache=False)
    if test.rt.device_count != 1:
        test.rt.close()
        test.skipTest("the fake driver did not load")
    try:
        test.mod = test.rt.build(SAXPY, name="saxpy.cu", target="compute_90")
    except fleetjit.FleetjitError as e:
        test.rt.close()
        if e.code == "UNAVAILABLE":
            test.skipTest(f"no NVRTC: {e.message}")
        raise
    test.k = test.mod.kernel("saxpy")
    test.buf = test.rt.alloc(64)
