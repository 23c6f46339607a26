"""fleetjit kernels inside jax.jit, through XLA's FFI (jax.ffi.ffi_call).

A small C++ handler (fleetjit_xla.cc, beside this file) launches a fleetjit
kernel on the stream XLA hands it, on XLA's own buffers. It is compiled on
first use against the headers jaxlib ships (jax.ffi.include_dir()) and
<fleetjit/fleetjit.h>, with the host's C++ compiler (c++, g++, or
$CXX), into a cache folder; it links neither XLA nor libfleetjit.

    import jax, jax.numpy as jnp, fleetjit
    from fleetjit import jax_ffi
    rt = fleetjit.Runtime()
    k = rt.build(SAXPY, name="saxpy.cu").kernel("saxpy")
    # saxpy(y, x, a, n) updates y: alias input 1 (y) to result 0, and pass
    # (result 0, input 0, a, n) as the kernel's parameters.
    saxpy = jax_ffi.kernel_call(k, jax.ShapeDtypeStruct((n,), jnp.float32),
                                order=(jax_ffi.result(0, num_inputs=2), 0,
                                       jax_ffi.F32, jax_ffi.COUNT),
                                f32s=(2.0,), input_output_aliases={1: 0})
    out = jax.jit(saxpy)(x, y)          # 2 * x + y, on XLA's stream
"""

import ctypes
import os
import pathlib
import shutil
import subprocess
import tempfile

import numpy as np

from .. import _ffi
from ..errors import FleetjitError

TARGET = "fleetjit_launch"
F32 = -1     # the next entry of f32s
I32 = -2     # the next entry of i32s
COUNT = -3   # the element count of result 0, as int32

_HERE = pathlib.Path(__file__).resolve().parent
SOURCE = _HERE / "fleetjit_xla.cc"
_registered = None


def result(index, num_inputs):
    """The `order` entry of result `index` (buffers are the inputs, then the
    results)."""
    return num_inputs + index


def fleetjit_include_dir():
    """A folder holding fleetjit/fleetjit.h: $FLEETJIT_INCLUDE_DIR, the
    package's own copy (wheels), else the source tree's include/."""
    candidates = [os.environ.get("FLEETJIT_INCLUDE_DIR"),
                  _HERE.parent / "include", _HERE.parents[3] / "include"]
    for c in candidates:
        if c and (pathlib.Path(c) / "fleetjit" / "fleetjit.h").is_file():
            return str(c)
    raise FleetjitError("NOT_FOUND", "no fleetjit/fleetjit.h: set FLEETJIT_INCLUDE_DIR")


def _compiler():
    for c in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if c and shutil.which(c):
            return shutil.which(c)
    raise FleetjitError("UNAVAILABLE", "no C++ compiler (c++, g++, clang++ or $CXX) "
                        "to build the XLA FFI handler")


def build(out_dir=None):
    """Compiles fleetjit_xla.cc (once per source and jaxlib) and returns the
    path of the shared library."""
    import jax
    import jax.ffi
    inc = jax.ffi.include_dir()
    out_dir = pathlib.Path(out_dir or os.environ.get("FLEETJIT_JAX_FFI_DIR") or
                           pathlib.Path(tempfile.gettempdir()) / "fleetjit-jax-ffi")
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = f"{jax.__version__}-{int(SOURCE.stat().st_mtime)}"
    lib = out_dir / f"libfleetjit_xla-{tag}.so"
    if lib.exists():
        return str(lib)
    cmd = [_compiler(), "-O2", "-std=c++17", "-shared", "-fPIC", "-I", inc,
           "-I", fleetjit_include_dir(), str(SOURCE), "-o", str(lib) + ".tmp"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise FleetjitError("BUILD_ERROR", f"{' '.join(cmd)} failed:\n{r.stderr[-4000:]}")
    os.replace(str(lib) + ".tmp", lib)
    return str(lib)


def register(path=None):
    """Registers the handler as the CUDA target "fleetjit_launch" (once)."""
    global _registered
    if _registered is not None:
        return _registered
    import jax.ffi
    path = path or build()
    handler = ctypes.CDLL(path).FleetjitLaunch
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(handler), platform="CUDA")
    _registered = path
    return path


def _address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


def kernel_call(kernel, result_shape_dtypes, *, order, f32s=(), i32s=(), grid=0,
                block=256, shared_bytes=0, input_output_aliases=None):
    """A function of JAX arrays that launches `kernel` (a fleetjit.Kernel)
    through jax.ffi.ffi_call: usable inside jax.jit.

    order: the kernel's parameters: an int k >= 0 is buffer k (inputs
           first, then results: result(i, num_inputs)), F32 / I32 the next
           value of f32s / i32s, COUNT the element count of result 0.
    grid:  0 = ceil(elements of result 0 / block).
    The kernel, its runtime and the library must outlive the calls.
    """
    import jax
    import jax.ffi
    register()
    lib = _ffi.load()
    if not hasattr(lib, "fj_stream_wrap"):
        raise FleetjitError("UNAVAILABLE", "this libfleetjit.so.1 has no fj_stream_wrap")
    runtime = kernel._module._runtime
    attrs = dict(
        launch_fn=np.uint64(_address(lib.fj_launch)),
        wrap_fn=np.uint64(_address(lib.fj_stream_wrap)),
        message_fn=np.uint64(_address(lib.fj_status_message)),
        free_fn=np.uint64(_address(lib.fj_status_free)),
        runtime=np.uint64(runtime._live()), kernel=np.uint64(kernel._live()),
        device=np.int64(kernel.device), grid=np.int64(grid), block=np.int64(block),
        shared_bytes=np.int64(shared_bytes),
        order=np.asarray(order, dtype=np.int64),
        f32s=np.asarray(tuple(f32s) or (0.0,), dtype=np.float32),
        i32s=np.asarray(tuple(i32s) or (0,), dtype=np.int32))
    call = jax.ffi.ffi_call(TARGET, result_shape_dtypes,
                            input_output_aliases=input_output_aliases or {})

    def run(*arrays):
        return call(*arrays, **attrs)
    run.keep = kernel  # the handles in attrs stay valid while `run` lives
    return run
