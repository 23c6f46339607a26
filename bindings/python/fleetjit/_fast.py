"""Loads the compiled launch path (_fastlaunch), when it is built.

`module` is the extension or None; `launch_address` the address of the
fj_launch it calls. The extension is optional: without it (not built, a
layout that differs from the ctypes mirror, FLEETJIT_PYTHON_FAST=0) every
launch takes the pure-ctypes path. $FLEETJIT_PYTHON_EXT names a built
extension to load instead of the package's (ctest points it into the build
tree); without it, fleetjit/_fastlaunch.abi3.so is imported if present.
Otherwise every
launch takes the pure-ctypes path in runtime.Kernel._launch_ctypes.
"""

import contextlib
import ctypes
import os
import sys
import threading
import warnings

from . import _ffi

module = None
launch_address = 0
torch_pending = True  # torch.Tensor not registered yet (torch not imported)
# (NumPy's scalar types are registered with it: torch imports NumPy.)
why_not = ""


numpy_registered = False


def maybe_register():
    """Registers again once torch or NumPy has been imported since."""
    if "torch" in sys.modules or (not numpy_registered and "numpy" in sys.modules):
        register()


def register():
    """Registers torch.Tensor (once torch is imported), Scalar, NumPy's
    scalar types (once NumPy is imported) and the kinds."""
    global torch_pending, numpy_registered
    from . import args, tensors
    torch = sys.modules.get("torch")
    tensor_type = getattr(torch, "Tensor", None) if torch is not None else None
    type_codes = {}
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # NumPy scalars pack as their own type
        for name, kind in args._NUMPY_KINDS.items():
            type_codes[getattr(numpy, name)] = args._KIND_NAMES[kind]
    module.register_types(tensor_type, args.Scalar, dict(args._KIND_NAMES), type_codes,
                          tensors.CAI_TYPESTRS)
    if tensor_type is not None:
        _torch_shim(torch)
    torch_pending = tensor_type is None
    numpy_registered = numpy is not None


torch_shim = "torch not registered"  # "on", or why the shim is off
torch_shim_codes = {}  # {"cpu": code, "cuda": code}: libtorch's device types
torch_shim_dtypes = {}  # {ScalarType code: torch.dtype}, when the shim is on

# What the shim reads of a tensor (_fastlaunch.c, "torch shim").
_SHIM_FUNCTIONS = ("aoti_torch_get_data_ptr", "aoti_torch_get_device_type",
                   "aoti_torch_get_dtype", "aoti_torch_is_contiguous",
                   "aoti_torch_get_dim", "aoti_torch_get_sizes",
                   "aoti_torch_get_strides")


def _loaded_libtorch_cpu():
    """The libtorch_cpu that torch loaded (its own, not one on the loader's
    path), opened without loading anything: the path from /proc/self/maps."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.rstrip("\n").split(None, 5)[-1]
            if os.path.basename(path).startswith("libtorch_cpu.so"):
                return ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    raise OSError("libtorch_cpu is not loaded")


def _torch_shim(torch):
    """Turns on the compiled path's torch shim (_fastlaunch.c): an exact
    torch.Tensor read through libtorch's stable C functions rather than four
    Python calls, about 0.2 us less per tensor argument. It is on only if the
    at::Tensor sits where this torch keeps it, found by comparing the words
    after the object header with Tensor._cdata, and if the shim reads probe
    tensors (CPU ones: no CUDA context is made) exactly as torch's methods
    do; otherwise every tensor takes the method calls, as before.
    FLEETJIT_TORCH_SHIM=0 keeps it off. register_types, just called, has
    turned it off."""
    global torch_shim
    if os.environ.get("FLEETJIT_TORCH_SHIM", "1") == "0":
        torch_shim = "FLEETJIT_TORCH_SHIM=0"
        return
    # Probe tensors are real CPU tensors even under a dispatch mode
    # (FakeTensorMode...) or a default device.
    try:
        quiet = getattr(torch._C, "_DisableTorchDispatch", contextlib.nullcontext)
        with quiet():
            torch_shim = _torch_shim_setup(torch)
    except Exception as e:  # a torch this binding does not know
        torch_shim = f"off: {type(e).__name__}: {e}"
    if torch_shim != "on":
        module.torch_shim(0, -1, 0, (0,) * 7, {}, False)


def _torch_shim_setup(torch):
    lib = _loaded_libtorch_cpu()
    addresses = []
    for name in _SHIM_FUNCTIONS:
        fn = getattr(lib, name, None)
        if fn is None and name != "aoti_torch_is_contiguous":  # torch >= 2.9
            return f"off: libtorch_cpu has no {name}"
        addresses.append(ctypes.cast(fn, ctypes.c_void_p).value if fn is not None else 0)
    functions = tuple(addresses)
    device_code = {}
    for kind in ("cpu", "cuda"):
        fn = getattr(lib, f"aoti_torch_device_type_{kind}")
        fn.restype, fn.argtypes = ctypes.c_int32, []
        device_code[kind] = fn()
    torch_shim_codes.update(device_code)

    probe = torch.empty(3, device="cpu")
    header, flag, word0, word1 = module.torch_shim_words(probe)
    impl = probe._cdata
    if word0 == impl:  # an at::Tensor right after the header
        offset, borrow_flag = header, -1
    elif flag == 0 and word1 == impl:  # a c10::MaybeOwned<at::Tensor>
        offset, borrow_flag = header + 8, header
    else:
        return "off: no at::Tensor where this binding looks for it"

    def setup(dtypes, live):
        module.torch_shim(offset, borrow_flag, device_code["cuda"], functions, dtypes, live)

    # The ScalarType code of every dtype this torch can make a tensor of,
    # read (not yet used by launches, until every check below has passed).
    setup({}, False)
    dtypes = {}
    for dtype in {v for v in vars(torch).values() if isinstance(v, torch.dtype)}:
        try:
            with warnings.catch_warnings():  # "ComplexHalf support is experimental"
                warnings.simplefilter("ignore")
                t = torch.empty(0, dtype=dtype, device="cpu")
        except Exception:  # quantized and other dtypes of no plain tensor
            continue
        read = module.torch_shim_read(t)
        if read is None:
            return f"off: the shim could not read a {dtype} tensor"
        if dtypes.setdefault(read[2], dtype) is not dtype:
            return f"off: {dtype} and {dtypes[read[2]]} read as one dtype code"
    if torch.float32 not in dtypes.values():
        return "off: no dtype code for torch.float32"
    setup(dtypes, False)

    # Probe tensors: each read must equal what torch's own methods say.
    cpu = {"device": "cpu"}
    base = torch.arange(24, dtype=torch.float32, **cpu).reshape(4, 6)
    probes = [base, base.t(), base[1:], base[:, ::2], base[:, 1:],
              torch.empty(0, **cpu), torch.empty(2, 0, 3, **cpu).transpose(0, 2),
              torch.arange(10, dtype=torch.float16, **cpu)[3:],
              torch.empty(1, 5, dtype=torch.int64, **cpu).expand(3, 5),
              torch.empty(4, 1, 3, **cpu).transpose(0, 1),
              torch.tensor(7.0, dtype=torch.bfloat16, **cpu)]
    for t in probes:
        read = module.torch_shim_read(t)
        want = (t.data_ptr(), device_code["cpu"], t.dtype, t.is_contiguous())
        if read is None or (read[0], read[1], dtypes.get(read[2]), read[3]) != want:
            return (f"off: a {t.dtype} tensor of shape {tuple(t.shape)} reads as "
                    f"{read}, torch says {want}")
    setup(dtypes, True)
    torch_shim_dtypes.clear()
    torch_shim_dtypes.update(dtypes)
    return "on"


def _load():
    global module, launch_address, why_not
    if os.environ.get("FLEETJIT_PYTHON_FAST", "1") == "0":
        why_not = "FLEETJIT_PYTHON_FAST=0"
        return
    try:
        path = os.environ.get("FLEETJIT_PYTHON_EXT")
        if path:  # a build tree's copy (ctest), else the package's own
            from ._trust import world_writable
            problem = world_writable(path)
            if problem:  # trusted, but not if anyone can write it
                why_not = f"refusing $FLEETJIT_PYTHON_EXT {path}: {problem}"
                warnings.warn(f"fleetjit: {why_not}; launches take the ctypes path",
                              RuntimeWarning, stacklevel=2)
                return
            import importlib.machinery
            import importlib.util
            loader = importlib.machinery.ExtensionFileLoader("fleetjit._fastlaunch", path)
            spec = importlib.util.spec_from_file_location("fleetjit._fastlaunch", path,
                                                          loader=loader)
            ext = importlib.util.module_from_spec(spec)
            loader.exec_module(ext)
        else:
            from . import _fastlaunch as ext
    except ImportError as e:
        why_not = f"not built ({e})"
        return
    if not getattr(ext, "INTEGER_PARAMS", 0):  # it would pack 32.0 for an int n
        why_not = "built from an older _fastlaunch.c (no integer-parameter check): rebuild it"
        return
    want = (ctypes.sizeof(_ffi.fj_arg), ctypes.sizeof(_ffi.fj_launch_config_13))
    if tuple(ext.layout()) != want:
        why_not = f"layout {ext.layout()} differs from the binding's {want}"
        return
    try:
        lib = _ffi.load()
    except _ffi.LoadError as e:
        why_not = str(e)
        return
    launch_address = ctypes.cast(lib.fj_launch, ctypes.c_void_p).value
    module = ext
    register()


class PyGate:
    """In-flight calls, for the binding without the compiled path (which
    has _fastlaunch.Gate, the same under the GIL). A Runtime has one; each
    Module, Stream and BuildFuture a child, PyGate(parent, handle), whose
    calls also count in the parent's (one lock for both). enter() is False
    once this gate or its parent is closed, else counts a call that exit()
    ends; close(on_idle) refuses new calls and runs on_idle (the destroy)
    now if none is in flight, its error raised, else when the last one
    exits, its error to sys.unraisablehook."""

    __slots__ = ("_lock", "inflight", "closed", "_on_idle", "parent", "handle")

    def __init__(self, parent=None, handle=0):
        self._lock = threading.Lock() if parent is None else parent._lock
        self.inflight = 0
        self.closed = False
        self._on_idle = None
        self.parent = parent
        self.handle = handle

    def enter(self):
        parent = self.parent
        with self._lock:
            if self.closed or (parent is not None and parent.closed):
                return False
            self.inflight += 1
            if parent is not None:
                parent.inflight += 1
            return True

    def _ended(self):
        """One call less (under the lock); the destroy to run, if it was the last."""
        self.inflight -= 1
        on_idle = self._on_idle if self.inflight == 0 else None
        if on_idle is not None:
            self._on_idle = None
        return on_idle

    def exit(self):
        parent = self.parent
        with self._lock:
            # The child's destroy runs first: it re-enters the parent, which
            # a closed runtime refuses (then the runtime's destroy frees it).
            pending = (self._ended(), parent._ended() if parent is not None else None)
        for on_idle in pending:
            if on_idle is not None:
                try:
                    on_idle()
                except Exception as e:
                    sys.unraisablehook(_unraisable(e, on_idle))

    def close(self, on_idle):
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self.inflight:
                self._on_idle = on_idle
                return
        on_idle()


def _unraisable(e, obj):
    return type("UnraisableHookArgs", (), dict(
        exc_type=type(e), exc_value=e, exc_traceback=e.__traceback__,
        err_msg="Exception ignored while destroying a closed fleetjit handle",
        object=obj))()


def new_gate(parent=None, handle=0):
    """The in-flight gate of a new Runtime, or (parent: the runtime's gate)
    of a Module, Stream or BuildFuture whose C handle is `handle` (see
    PyGate)."""
    if module is not None:
        return module.Gate() if parent is None else module.Gate(parent, handle)
    return PyGate(parent, handle)


def available():
    """(True, "") when launches take the compiled path, else (False, why)."""
    return module is not None, why_not


_load()
