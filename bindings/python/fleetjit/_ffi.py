"""The loader of libfleetjit.so.1, over the generated ctypes module _abi.py.

_abi.py (written by scripts/dev/gen-bindings from <fleetjit/fleetjit.h>)
holds every struct, constant, enum and prototype; this module re-exports
them with the names the rest of the binding uses. The library is loaded on
first use, from $FLEETJIT_LIBRARY if set, else the wheel's own copy, else
through the default loader search ("libfleetjit.so.1": LD_LIBRARY_PATH, the
cache, /usr/lib...). It is loaded RTLD_LOCAL, so its symbols never leak into
the process.
"""

import ctypes
import os
import threading
from ctypes import POINTER, c_void_p

from ._abi import *  # noqa: F401,F403  (structs fj_*, constants FJ_*, ENUMS, FUNCTIONS)
from ._abi import ENUMS, FUNCTIONS, VERSION

# The header this binding was generated from: FJ_VERSION_MAJOR /
# FJ_VERSION_MINOR. A library with another major is refused; an older minor
# lacks functions the binding may call (has()).
EXPECTED_MAJOR = FJ_VERSION_MAJOR  # noqa: F405
EXPECTED_MINOR = FJ_VERSION_MINOR  # noqa: F405
LIBRARY_NAME = "libfleetjit.so.1"

FEATURE_COUNT = FJ_FEATURE_COUNT  # noqa: F405
# void (*log_fn)(void* user, int32_t level, fj_str message)
LOG_FN = fj_runtime_options_log_fn  # noqa: F405
# The compiled launch path reports the size of the whole (1.3) struct.
fj_launch_config_13 = fj_launch_config  # noqa: F405


def new(struct_type):
    """A zeroed struct with struct_size set, as the header's convention 5 asks."""
    s = struct_type()
    s.struct_size = ctypes.sizeof(struct_type)
    return s


# Enumerations, by their stable names (fj_copy_impl_name etc.).
COPY_IMPLS = ENUMS["fj_copy_impl"]
OUTPUTS = ENUMS["fj_output"]
CACHE_RESULTS = {v: k for k, v in ENUMS["fj_cache_result"].items()}
REMOTE_STATES = {v: k for k, v in ENUMS["fj_remote_state"].items()}
LOG_LEVELS = ENUMS["fj_log_level"]
PREFETCH_MODES = ENUMS["fj_prefetch_mode"]
IMAGE_KINDS = ENUMS["fj_image_kind"]
OOB = ENUMS["fj_oob"]
# fj_swizzle by width in bytes (0 = none): "32b" -> 32.
SWIZZLE = {0 if k == "none" else int(k[:-1]): v for k, v in ENUMS["fj_swizzle"].items()}
RUNTIME_DISABLE_DISK_CACHE = FJ_RUNTIME_DISABLE_DISK_CACHE  # noqa: F405
RUNTIME_DISABLE_THUNKS = FJ_RUNTIME_DISABLE_THUNKS  # noqa: F405
BUILD_NO_CACHE = FJ_BUILD_NO_CACHE  # noqa: F405

# fj_arg_kind: ARG_I8 ... ARG_C128.
ARG_I8, ARG_I16, ARG_I32, ARG_I64 = FJ_ARG_I8, FJ_ARG_I16, FJ_ARG_I32, FJ_ARG_I64  # noqa: F405
ARG_U8, ARG_U16, ARG_U32, ARG_U64 = FJ_ARG_U8, FJ_ARG_U16, FJ_ARG_U32, FJ_ARG_U64  # noqa: F405
ARG_F16, ARG_BF16, ARG_F32, ARG_F64 = FJ_ARG_F16, FJ_ARG_BF16, FJ_ARG_F32, FJ_ARG_F64  # noqa: F405
ARG_POINTER, ARG_BYTES, ARG_TENSOR = FJ_ARG_POINTER, FJ_ARG_BYTES, FJ_ARG_TENSOR  # noqa: F405
ARG_C64, ARG_C128 = FJ_ARG_C64, FJ_ARG_C128  # noqa: F405

_lock = threading.Lock()
_lib = None


class LoadError(OSError):
    """libfleetjit.so.1 could not be loaded (errors.FleetjitError wraps it)."""


# A wheel carries the library (and its private libraries, found through its
# $ORIGIN RPATH) in fleetjit/lib.
PACKAGED_LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib",
                                LIBRARY_NAME)


def library_path():
    """What load() opens: $FLEETJIT_LIBRARY, else the wheel's own
    fleetjit/lib/libfleetjit.so.1, else the loader's libfleetjit.so.1."""
    env = os.environ.get("FLEETJIT_LIBRARY")
    if env:
        return env
    if os.path.exists(PACKAGED_LIBRARY):
        return PACKAGED_LIBRARY
    return LIBRARY_NAME


def load():
    """The loaded library (a ctypes.CDLL with prototypes), loading it once."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        path = library_path()
        if path == os.environ.get("FLEETJIT_LIBRARY"):  # trusted, but not if anyone can write it
            from ._trust import world_writable
            problem = world_writable(path)
            if problem:
                raise LoadError(f"refusing $FLEETJIT_LIBRARY {path}: {problem}")
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as e:
            hint = ("" if "FLEETJIT_LIBRARY" in os.environ else
                    "; set FLEETJIT_LIBRARY to the path of libfleetjit.so.1 "
                    "(e.g. PREFIX/lib/libfleetjit.so.1)")
            raise LoadError(f"cannot load {path}: {e}{hint}") from None
        if not hasattr(lib, "fj_version"):
            raise LoadError(f"{path} lacks fj_version: not a fleetjit library")
        # Every entry of the header this binding was generated from; one
        # an older library lacks stays absent (has(), and each wrapper says
        # which minor brought it).
        for name, (restype, argtypes) in FUNCTIONS.items():
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype, fn.argtypes = restype, argtypes
        _lib = lib
        return lib


def has(name):
    """Whether the loaded library exports `name` (for functions added after 1.0)."""
    return hasattr(load(), name)


class StrArg:
    """Keeps the bytes behind an fj_str alive for the duration of a call.
    `text` is a str, bytes or os.PathLike, or None (empty); anything else is
    a TypeError and an embedded NUL an InvalidArgumentError, naming `what`."""

    __slots__ = ("raw", "value")

    def __init__(self, text, what="a string argument"):
        from .errors import _no_nul  # errors imports this module
        _no_nul(text, what)
        if text is None:
            text = b""
        elif isinstance(text, os.PathLike):
            text = os.fsencode(text)
        elif isinstance(text, str):
            text = text.encode("utf-8")
        else:
            text = bytes(text)
        self.raw = ctypes.create_string_buffer(text, len(text) + 1)
        self.value = fj_str(ctypes.cast(self.raw, c_void_p), len(text))


def str_array(items, what="a list of strings"):
    """(keep-alive list, POINTER(fj_str) or None, count) for a list of strings."""
    keep = []
    for i, s in enumerate(items):
        if s is None:
            raise TypeError(f"{what}[{i}] is None, not a str")
        keep.append(StrArg(s, f"{what}[{i}]"))
    count = len(keep)
    if count == 0:
        return keep, None, 0
    arr = (fj_str * count)(*[k.value for k in keep])
    keep.append(arr)
    return keep, ctypes.cast(arr, POINTER(fj_str)), count


def bytes_arg(data, what):
    """`data` (a str, UTF-8, or anything bytes-like) as bytes; an int or
    None is a TypeError naming `what` (bytes(100) would be 100 NULs)."""
    if isinstance(data, str):
        return data.encode("utf-8")
    try:
        return memoryview(data).tobytes()
    except TypeError:
        raise TypeError(f"{what} must be bytes-like or a str, not "
                        f"{type(data).__name__}") from None
