"""FleetjitError: every fj_status, and every failure of the binding itself."""

import ctypes
import math
import operator
import os

from . import _ffi

# The fj_code names, indexed by value (fj_code_name of each; 1.2 added
# DEADLINE_EXCEEDED). FleetjitError.code is one of them, or "UNKNOWN" from a
# newer library.
CODES = ("OK", "INVALID_ARGUMENT", "NOT_FOUND", "UNAVAILABLE", "FAILED_PRECONDITION",
         "BUILD_ERROR", "CUDA_ERROR", "RESOURCE_EXHAUSTED", "OUT_OF_RANGE", "INTERNAL",
         "DEADLINE_EXCEEDED")

# Keys of fj_status_detail() that the library documents.
_DETAIL_KEYS = ("build_log", "options", "target", "copy_impl", "cuda_call", "cuda_error",
                "link_log")


class FleetjitError(Exception):
    """A failed fleetjit call.

    code:      the fj_code name ("BUILD_ERROR", "INVALID_ARGUMENT", ...)
    message:   the library's message
    build_log: NVRTC's log for a BUILD_ERROR, else None
    details:   every documented detail the status carried (dict)
    """

    def __new__(cls, code="UNKNOWN", message="", build_log=None, details=None):
        # FleetjitError(code, ...) is the subclass of its code, so callers
        # can catch BuildError, DeadlineExceededError... or all of them.
        if cls is FleetjitError:
            cls = _BY_CODE.get(code, FleetjitError)
        return super().__new__(cls, code, message)

    def __init__(self, code="UNKNOWN", message="", build_log=None, details=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.build_log = build_log
        self.details = dict(details or {})

    def __reduce__(self):
        return (FleetjitError, (self.code, self.message, self.build_log, self.details))


class InvalidArgumentError(FleetjitError, ValueError):
    """INVALID_ARGUMENT: bad input, refused before anything ran."""


class NotFoundError(FleetjitError, LookupError):
    """NOT_FOUND: no such kernel, device, file or entry."""


class UnavailableError(FleetjitError):
    """UNAVAILABLE: no driver, GPU, NVRTC or library."""


class FailedPreconditionError(FleetjitError):
    """FAILED_PRECONDITION: the call is valid but not in this state."""


class BuildError(FleetjitError):
    """BUILD_ERROR: NVRTC refused the source; .build_log says why."""


class CudaError(FleetjitError):
    """CUDA_ERROR: a driver call failed; .details["cuda_error"] names it."""


class ResourceExhaustedError(FleetjitError):
    """RESOURCE_EXHAUSTED: out of device memory or another resource."""


class OutOfRangeError(FleetjitError, IndexError):
    """OUT_OF_RANGE: an index or size past its limit."""


class InternalError(FleetjitError):
    """INTERNAL: a bug in fleetjit."""


class DeadlineExceededError(FleetjitError, TimeoutError):
    """DEADLINE_EXCEEDED: a wait ran out of time (fj_cache_flush)."""


_BY_CODE = {
    "INVALID_ARGUMENT": InvalidArgumentError, "NOT_FOUND": NotFoundError,
    "UNAVAILABLE": UnavailableError, "FAILED_PRECONDITION": FailedPreconditionError,
    "BUILD_ERROR": BuildError, "CUDA_ERROR": CudaError,
    "RESOURCE_EXHAUSTED": ResourceExhaustedError, "OUT_OF_RANGE": OutOfRangeError,
    "INTERNAL": InternalError, "DEADLINE_EXCEEDED": DeadlineExceededError,
}


def _text(data, size):
    """A returned const char* (bytes from ctypes' c_char_p, None for NULL)."""
    if data is None:
        return None
    return data[:size].decode("utf-8", errors="replace")


def lib():
    """The loaded library; a load failure becomes FleetjitError("UNAVAILABLE")."""
    try:
        return _ffi.load()
    except _ffi.LoadError as e:
        raise FleetjitError("UNAVAILABLE", str(e)) from None


def status_to_error(status):
    """Reads and frees a non-NULL fj_status*, returning the FleetjitError."""
    fj = lib()
    try:
        code = fj.fj_status_code(status)
        name = fj.fj_code_name(code).decode()
        size = ctypes.c_size_t(0)
        message = _text(fj.fj_status_message(status, ctypes.byref(size)), size.value) or ""
        details = {}
        for key in _DETAIL_KEYS:
            k = _ffi.StrArg(key)
            size = ctypes.c_size_t(0)
            value = _text(fj.fj_status_detail(status, k.value, ctypes.byref(size)), size.value)
            if value is not None:
                details[key] = value
    finally:
        fj.fj_status_free(status)
    return FleetjitError(name, message, details.get("build_log"), details)


def check(status):
    """Raises the FleetjitError a status describes; NULL (success) passes."""
    if status:
        raise status_to_error(status)


def _closed(owner):
    """The refusal of a call on `owner` whose gate is closed: the runtime's
    when it is closed, else the owner's own (a closed Module, Stream...)."""
    parent = getattr(owner._gate, "parent", None)
    if parent is None or parent.closed:
        return FleetjitError("INVALID_ARGUMENT", "this Runtime is closed")
    try:
        owner._live()
    except FleetjitError as e:
        return e
    return FleetjitError("INVALID_ARGUMENT", f"this {type(owner).__name__} is closed")


def _call(owner, fn, *args, using=()):
    """check(fn(owner's handle, *args)) as one of the in-flight calls of its
    gate: the runtime's, or a module's, stream's or build's (a child of the
    runtime's). close() on another thread refuses new calls at once but
    destroys the handle only once the calls in flight that use it have
    returned (a build, a launch), so none runs on a freed handle. `using`:
    the other handles the call uses (Streams, DeviceBuffers), whose gates
    it enters too."""
    gate = owner._gate
    if not gate.enter():
        raise _closed(owner)
    try:
        if not using:
            check(fn(owner._live(), *args))
            return
        entered = []
        try:
            for other in using:
                if not other._gate.enter():
                    raise _closed(other)
                entered.append(other._gate)
            check(fn(owner._live(), *args))
        finally:
            for g in reversed(entered):
                g.exit()
    finally:
        gate.exit()


def _destroyer(runtime_gate, destroy, handle):
    """on_idle for the gate of a Module, Stream or BuildFuture: destroy(handle)
    as a call of its runtime, skipped when the runtime is closed (destroying
    the runtime frees it)."""
    def on_idle():
        if runtime_gate.enter():
            try:
                check(destroy(handle))
            finally:
                runtime_gate.exit()
    return on_idle


# Integers bound for a C field or argument. ctypes wraps an out-of-range
# Python int silently (1 << 32 passed as an int32_t is 0, -1 as a uint64_t
# is 2**64 - 1) and raises TypeError for a float; these refuse both with
# INVALID_ARGUMENT naming the argument, before anything reaches the library.

def _integer(value, what):
    try:
        if isinstance(value, bool):  # True is not a count of 1
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"{what} is {value!r}, not an integer") from None


def _ordinal(device, what="device ordinal"):
    """A device ordinal that fits the C int32_t (ctypes would silently wrap
    it: 1 << 32 is device 0)."""
    try:
        if isinstance(device, bool):
            raise TypeError
        d = operator.index(device)
    except TypeError:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"{what} {device!r} is not an integer") from None
    if not -(1 << 31) <= d < 1 << 31:
        raise FleetjitError("INVALID_ARGUMENT", f"{what} {d} is out of range")
    return d


def _unsigned(value, bits: int, what: str) -> int:
    """`value` as an integer that fits the C field's uint`bits`; refused
    otherwise (ctypes would silently wrap it)."""
    v = _integer(value, what)
    if not 0 <= v < 1 << bits:
        raise FleetjitError("INVALID_ARGUMENT", f"{what} is {v}: out of range for a "
                            f"uint{bits} (0 to {(1 << bits) - 1})")
    return v


def _signed(value, bits: int, what: str) -> int:
    """`value` as an integer that fits the C field's int`bits`; refused
    otherwise (ctypes would silently wrap it)."""
    v = _integer(value, what)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= v <= hi:
        raise FleetjitError("INVALID_ARGUMENT", f"{what} is {v}: out of range for an "
                            f"int{bits} ({lo} to {hi})")
    return v


def _real(value, what):
    """`value` as a float: a number (an int, a float, a NumPy scalar), never
    a str that float() would parse, nor a bool."""
    if isinstance(value, (str, bytes, bool)) or not hasattr(type(value), "__float__"):
        raise FleetjitError("INVALID_ARGUMENT", f"{what} is {value!r}, not a number")
    return float(value)


def _seconds(timeout, what="timeout"):
    """A timeout in seconds: None or inf (wait forever), else a number >= 0."""
    if timeout is None:
        return math.inf
    t = _real(timeout, what)
    if math.isnan(t) or t < 0:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"{what} is {timeout!r} s: not a number of seconds >= 0")
    return t


def _fields(value, names, what):
    """`value`, a tuple of exactly len(names) entries (l2_window's (base,
    bytes, hit_ratio), an (address, nbytes) pair...)."""
    try:
        fields = tuple(value)
    except TypeError:
        fields = ()
    if len(fields) != len(names):
        raise FleetjitError("INVALID_ARGUMENT",
                            f"{what} is {value!r}: expected ({', '.join(names)})")
    return fields


def _no_nul(text, what):
    """Refuses a string argument that is not a str, bytes or os.PathLike (an
    int would become that many NUL bytes) and one with an embedded NUL: the
    library, NVRTC and the driver read C strings, so everything after it
    would silently be dropped. None (unset) passes."""
    if text is None:
        return
    if isinstance(text, os.PathLike):
        text = os.fspath(text)
    if not isinstance(text, (str, bytes, bytearray)):
        raise TypeError(f"{what} must be a str, not {type(text).__name__}")
    nul = "\0" if isinstance(text, str) else b"\0"
    if nul in text:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"the {what} holds a NUL character at offset "
                            f"{text.index(nul)}; the library, NVRTC and the driver read C "
                            "strings and would silently drop everything after it")
