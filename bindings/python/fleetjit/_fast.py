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

import ctypes
import os
import sys
import threading

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
    torch_pending = tensor_type is None
    numpy_registered = numpy is not None


def _load():
    global module, launch_address, why_not
    if os.environ.get("FLEETJIT_PYTHON_FAST", "1") == "0":
        why_not = "FLEETJIT_PYTHON_FAST=0"
        return
    try:
        path = os.environ.get("FLEETJIT_PYTHON_EXT")
        if path:  # a build tree's copy (ctest), else the package's own
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
