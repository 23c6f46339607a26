"""fleetjit kernels inside jax.jit, through XLA's FFI (jax.ffi.ffi_call).

A small C++ handler (fleetjit_xla.cc, beside this file) launches a fleetjit
kernel on the stream XLA hands it, on XLA's own buffers. It is compiled on
first use against the headers jaxlib ships (jax.ffi.include_dir()) and
<fleetjit/fleetjit.h>, with the host's C++ compiler (c++, g++, or
$CXX), into a folder of the user's own (cache_dir(): created 0700, its
owner and mode checked, the file named by a digest of what it is made of,
loaded by the descriptor that was checked); it links neither XLA nor
libfleetjit.

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
import hashlib
import os
import pathlib
import secrets
import shutil
import subprocess
import tempfile
import threading
import warnings

from .. import _ffi, _trust
from ..args import _float_fits
from ..errors import FleetjitError, _integer, _signed

TARGET = "fleetjit_launch"
F32 = -1     # the next entry of f32s
I32 = -2     # the next entry of i32s
COUNT = -3   # the element count of result 0, as int32

_HERE = pathlib.Path(__file__).resolve().parent
SOURCE = _HERE / "fleetjit_xla.cc"
_registered = None
_register_lock = threading.Lock()
_FOLDER_HINT = ("; fix its owner or mode (chmod go-w), or set FLEETJIT_JAX_FFI_DIR "
                "to a folder of your own")


def result(index, num_inputs):
    """The `order` entry of result `index` (buffers are the inputs, then the
    results)."""
    return num_inputs + index


def fleetjit_include_dir():
    """A folder holding fleetjit/fleetjit.h: $FLEETJIT_INCLUDE_DIR, the
    package's own copy (wheels), else the source tree's include/ (only when
    this package is the source tree's bindings/python/fleetjit)."""
    candidates = [os.environ.get("FLEETJIT_INCLUDE_DIR"), _HERE.parent / "include"]
    if _HERE.parents[1].name == "python" and _HERE.parents[2].name == "bindings":
        candidates.append(_HERE.parents[3] / "include")
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


def cache_dir():
    """(folder, how it was chosen) where build() keeps the handler: a folder
    of this user's own. $FLEETJIT_JAX_FFI_DIR, else
    $XDG_CACHE_HOME/fleetjit-jax-ffi (an absolute XDG_CACHE_HOME), else
    ~/.cache/fleetjit-jax-ffi; where the home folder has no cache that can
    be made (read-only, missing), <tmp>/fleetjit-jax-ffi-<euid>. Each is
    created 0700 and must be owned by the effective uid and writable by no
    one else (build() checks)."""
    env = os.environ.get("FLEETJIT_JAX_FFI_DIR")
    if env:
        return env, "FLEETJIT_JAX_FFI_DIR"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "fleetjit-jax-ffi"), "XDG_CACHE_HOME"
    home = os.path.expanduser("~")
    if home.startswith("/"):
        return os.path.join(home, ".cache", "fleetjit-jax-ffi"), "HOME"
    return _tmp_dir(), "TMPDIR"


def _tmp_dir():
    return os.path.join(tempfile.gettempdir(), f"fleetjit-jax-ffi-{os.geteuid()}")


def _open_cache_dir(out_dir=None):
    """(path, descriptor) of the checked folder the handler lives in."""
    if out_dir is not None:
        path, how = os.fspath(out_dir), "out_dir"
    else:
        path, how = cache_dir()
    try:
        return path, _trust.open_private_dir(path, "the JAX FFI folder", _FOLDER_HINT)
    except FleetjitError:
        raise
    except OSError as e:
        if how != "HOME" and how != "XDG_CACHE_HOME":
            raise FleetjitError("UNAVAILABLE",
                                f"cannot use the JAX FFI folder {path}: {e}") from None
    # The home folder's cache cannot be made (a read-only or missing home):
    # a per-user folder under the temporary folder, checked the same way.
    path = _tmp_dir()
    try:
        return path, _trust.open_private_dir(path, "the JAX FFI folder", _FOLDER_HINT)
    except OSError as e:
        raise FleetjitError("UNAVAILABLE",
                            f"cannot use the JAX FFI folder {path}: {e}") from None


def _digest_tree(h, root):
    """Every file under `root`, by relative path and content, into `h`."""
    root = pathlib.Path(root)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")


def _key(compiler, flags, xla_include, fleetjit_include, jax_version):
    """The handler's name in the folder: a digest of everything that makes
    it (the compiler and its version, the flags, the source, fleetjit.h,
    XLA's FFI headers, jax's version)."""
    h = hashlib.sha256(b"fleetjit-jax-ffi 2\0")
    version = subprocess.run([compiler, "--version"], capture_output=True)
    for part in (compiler.encode(), version.stdout, "\0".join(flags).encode(),
                 jax_version.encode(), SOURCE.read_bytes(),
                 (pathlib.Path(fleetjit_include) / "fleetjit" / "fleetjit.h").read_bytes()):
        h.update(len(part).to_bytes(8, "little") + part)
    ffi = pathlib.Path(xla_include) / "xla" / "ffi"
    _digest_tree(h, ffi if ffi.is_dir() else xla_include)
    return h.hexdigest()[:40]


def _compile_into(dir_fd, name, compiler, flags):
    """Compiles the handler in a fresh private temporary folder, then
    writes it into the checked folder under a temporary name and renames it
    to `name` (replacing whatever was there: an entry that failed the
    checks)."""
    with tempfile.TemporaryDirectory(prefix="fleetjit-jax-ffi-build-") as work:
        out = os.path.join(work, "handler.so")
        cmd = [compiler, *flags, str(SOURCE), "-o", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise FleetjitError("BUILD_ERROR", f"{' '.join(cmd)} failed:\n{r.stderr[-4000:]}")
        with open(out, "rb") as f:
            data = f.read()
    tmp = f".tmp-{os.getpid()}-{secrets.token_hex(8)}.so"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o700, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, 0o700)  # exactly, whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _build(out_dir=None):
    """(path, open descriptor) of the checked handler, built if needed."""
    import jax
    import jax.ffi
    inc = jax.ffi.include_dir()
    compiler = _compiler()
    fleetjit_inc = fleetjit_include_dir()
    flags = ["-O2", "-std=c++17", "-shared", "-fPIC", "-I", inc, "-I", fleetjit_inc]
    name = f"libfleetjit_xla-{_key(compiler, flags, inc, fleetjit_inc, jax.__version__)}.so"
    folder, dir_fd = _open_cache_dir(out_dir)
    try:
        path = os.path.join(folder, name)
        fd, problem = _trust.open_private_file(dir_fd, name)
        if fd is None:
            if problem:
                warnings.warn(f"fleetjit: refusing {path}: {problem}; building it again",
                              RuntimeWarning, stacklevel=3)
            _compile_into(dir_fd, name, compiler, flags)
            fd, problem = _trust.open_private_file(dir_fd, name)
            if fd is None:
                raise FleetjitError("FAILED_PRECONDITION",
                                    f"refusing {path} just built: {problem or 'gone'}")
        return path, fd
    finally:
        os.close(dir_fd)


def build(out_dir=None):
    """Compiles fleetjit_xla.cc (once per content of what it is made of:
    the source, the headers, the compiler, the flags) into this user's
    folder (cache_dir(), or out_dir, checked the same way) and returns the
    path of the shared library."""
    path, fd = _build(out_dir)
    os.close(fd)
    return path


def register(path=None):
    """Registers the handler as the CUDA target "fleetjit_launch" (once).

    Without `path`, the handler build() makes or finds in this user's
    folder, loaded by the descriptor that was checked. A `path` of your
    own must be a regular file owned by you (or root) and writable by no
    one else."""
    global _registered
    with _register_lock:  # one build and one registration, whatever the threads
        if _registered is not None:
            return _registered
        import jax.ffi
        if path is None:
            path, fd = _build()
        else:
            path = os.fspath(path)
            fd = _trust.open_checked_file(path)
        handler = _trust.load_fd(fd).FleetjitLaunch
        jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(handler), platform="CUDA")
        _registered = path
        return path


def _checked_scalars(kernel, order, f32s, i32s):
    """(order, f32s, i32s) as tuples, each value checked before anything is
    built: i32s integers that fit int32, f32s numbers, and no F32 entry
    for a parameter the kernel declares as an integer (its float bits would
    arrive as the integer)."""
    order = tuple(_integer(o, "an order entry") for o in order)
    i32s = tuple(_signed(v, 32, f"i32s[{i}]") for i, v in enumerate(i32s))
    f32s = tuple(_float_fits("f32", v, f"f32s[{i}]") for i, v in enumerate(f32s))
    integers = getattr(kernel, "_integer_params", lambda: None)() or ()
    for j, o in enumerate(order):
        if o == F32 and j < len(integers) and integers[j] is not None:
            ctype, pname = integers[j]
            shown = f"{ctype} {pname}" if pname else ctype
            raise FleetjitError("INVALID_ARGUMENT",
                                f"order[{j}] is F32 but the kernel's parameter {j} is the "
                                f"integer '{shown}': its float bits would arrive as the "
                                "integer; use I32 (i32s) or COUNT")
    return order, f32s, i32s


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
    An F32 entry where the kernel declares an integer parameter is refused
    by its name, as is an i32s value that is not an integer fitting int32.
    """
    order, f32s, i32s = _checked_scalars(kernel, order, f32s, i32s)
    import jax
    import jax.ffi
    import numpy as np
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
