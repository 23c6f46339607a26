"""ctypes mirror of <fleetjit/fleetjit.h> and the loader of libfleetjit.so.1.

Every struct here is layout-identical to the header's (tests/test_layout.py
compares the sizes with a C program when the build provides one). The
library is loaded on first use, from $FLEETJIT_LIBRARY if set, else through
the default loader search ("libfleetjit.so.1": LD_LIBRARY_PATH, the cache,
/usr/lib...). It is loaded RTLD_LOCAL, so its symbols never leak into the
process.
"""

import ctypes
import os
import threading
from ctypes import (POINTER, Structure, Union, c_char, c_double, c_int, c_int8,
                    c_int16, c_int32, c_int64, c_size_t, c_uint8, c_uint16,
                    c_uint32, c_uint64, c_void_p, c_float)

# The header this binding mirrors: FJ_VERSION_MAJOR / FJ_VERSION_MINOR. A
# library with another major is refused; an older minor lacks functions the
# binding may call.
EXPECTED_MAJOR = 1
EXPECTED_MINOR = 3
LIBRARY_NAME = "libfleetjit.so.1"

FEATURE_COUNT = 10


class fj_str(Structure):
    _fields_ = [("data", c_void_p), ("size", c_size_t)]


class fj_copy_plan(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("target", c_char * 32), ("impl", c_int),
                ("support", c_int * FEATURE_COUNT)]


# void (*log_fn)(void* user, int32_t level, fj_str message)
LOG_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int32, fj_str)


class fj_runtime_options(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("libcuda_path", fj_str), ("libnvrtc_path", fj_str),
                ("target_override", fj_str), ("copy_impl_override", c_int),
                ("flags", c_uint32), ("cache_dir", fj_str),
                ("cache_max_bytes", c_uint64),
                # Since 1.1.
                ("remote_cache_url", fj_str), ("fleet_key", fj_str),
                ("log_fn", LOG_FN), ("log_user", c_void_p), ("log_level", c_int32),
                ("preopen_devices", POINTER(c_int32)),
                ("num_preopen_devices", c_size_t)]


class fj_device_info(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("name", c_char * 256), ("ordinal", c_int32),
                ("cc_major", c_int32), ("cc_minor", c_int32),
                ("sm_count", c_int32), ("total_memory_bytes", c_uint64),
                ("shared_memory_per_block", c_int32),
                ("shared_memory_per_block_optin", c_int32),
                ("shared_memory_per_sm", c_int32), ("l2_cache_bytes", c_int32),
                ("max_threads_per_block", c_int32), ("cluster_launch", c_int32),
                ("driver_version", c_int32), ("plan", fj_copy_plan)]


class fj_build_options(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("source", fj_str), ("name", fj_str),
                ("nvrtc_options", POINTER(fj_str)), ("num_nvrtc_options", c_size_t),
                ("name_expressions", POINTER(fj_str)),
                ("num_name_expressions", c_size_t), ("target", fj_str),
                ("device", c_int32), ("copy_impl", c_int), ("output", c_int),
                ("flags", c_uint32),
                # Since 1.1.
                ("include_dirs", POINTER(fj_str)), ("num_include_dirs", c_size_t)]


class fj_module_info(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("target", c_char * 32), ("copy_impl", c_int), ("output", c_int),
                ("cache_result", c_int), ("build_ms", c_double),
                ("compile_ms", c_double), ("image_bytes", c_uint64)]


# DLPack-compatible tensors (fj_tensor == DLTensor).
class fj_dl_device(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class fj_dl_dtype(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class fj_tensor(Structure):
    _fields_ = [("data", c_void_p), ("device", fj_dl_device), ("ndim", c_int32),
                ("dtype", fj_dl_dtype), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class fj_tensor_arg(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("tensor", c_void_p),  # const fj_tensor*: often a producer's DLTensor
                ("box", c_uint32 * 5), ("oob", c_int),
                ("swizzle", c_int)]  # fj_swizzle, since 1.1


class fj_tensor_check(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p), ("tma", c_int32),
                ("reason", c_char * 256)]


class _fj_arg_value(Union):
    _fields_ = [("i8", c_int8), ("i16", c_int16), ("i32", c_int32), ("i64", c_int64),
                ("u8", c_uint8), ("u16", c_uint16), ("u32", c_uint32),
                ("u64", c_uint64), ("f32", c_float), ("f64", c_double),
                ("pointer", c_uint64), ("bytes", c_void_p), ("tensor", c_void_p)]


class fj_arg(Structure):
    _fields_ = [("struct_size", c_size_t), ("kind", c_int), ("size", c_uint32),
                ("v", _fj_arg_value)]


class fj_launch_config(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("grid", c_uint32 * 3), ("block", c_uint32 * 3),
                ("shared_bytes", c_uint32), ("cluster", c_uint32 * 3),
                ("stream", c_void_p)]


class fj_launch_config_13(fj_launch_config):
    """The 1.3 struct (flags, the L2 window after `stream`): the size the
    compiled path (_fastlaunch.c, built against the 1.3 header) reports."""
    _fields_ = [("flags", c_uint32), ("l2_hit_ratio", c_float),
                ("l2_window_base", c_uint64), ("l2_window_bytes", c_uint64)]


class fj_kernel_info(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("lowered_name", c_char * 512), ("num_params", c_int32),
                ("param_bytes", c_uint32), ("max_threads_per_block", c_int32),
                ("static_shared_bytes", c_int32), ("num_regs", c_int32),
                ("uses_thunk", c_int32)]


class fj_cache_stats(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("memory_hits", c_uint64), ("disk_hits", c_uint64),
                ("misses", c_uint64), ("compiles", c_uint64),
                ("compile_ms_total", c_double), ("evictions", c_uint64),
                ("rejected_entries", c_uint64), ("disk_entries", c_uint64),
                ("disk_bytes", c_uint64),
                # Since 1.1: the remote tier.
                ("remote_state", c_int), ("remote_hits", c_uint64),
                ("remote_misses", c_uint64), ("remote_errors", c_uint64),
                ("remote_rejected", c_uint64), ("remote_writes", c_uint64),
                ("remote_write_drops", c_uint64), ("remote_breaker_opens", c_uint64)]


# Since 1.1: copies, prefetch, modules built elsewhere.
class fj_copy_desc(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("src", c_void_p), ("src_start", c_int64 * 5), ("oob", c_int),
                ("dst", c_void_p), ("gather_index", c_void_p)]


class fj_prefetch_desc(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("address", c_uint64), ("bytes", c_uint64), ("tensor", c_void_p),
                ("tile_start", c_int64 * 5), ("tile_extent", c_int64 * 5),
                ("mode", c_int), ("reader_device", c_int32),
                ("stage_address", c_uint64), ("stage_bytes", c_uint64)]


class fj_module_load_options(Structure):
    _fields_ = [("struct_size", c_size_t), ("ext", c_void_p),
                ("image", c_void_p), ("image_size", c_size_t), ("kind", c_int),
                ("name", fj_str), ("target", fj_str)]


def new(struct_type):
    """A zeroed struct with struct_size set, as the header's convention 5 asks."""
    s = struct_type()
    s.struct_size = ctypes.sizeof(struct_type)
    return s


# Enumerations, by their stable names (fj_copy_impl_name etc.).
COPY_IMPLS = {"auto": 0, "sync": 1, "cp_async": 2, "tma": 3}
OUTPUTS = {"auto": 0, "cubin": 1, "ptx": 2}
CACHE_RESULTS = {0: "compiled", 1: "memory_hit", 2: "disk_hit", 3: "remote_hit"}
REMOTE_STATES = {0: "off", 1: "unavailable", 2: "closed", 3: "open", 4: "half_open"}
LOG_LEVELS = {"off": 0, "error": 1, "warn": 2, "info": 3, "debug": 4}
PREFETCH_MODES = {"auto": 0, "local_l2": 1, "warm_owner_l2": 2, "stage_local": 3}
IMAGE_KINDS = {"auto": 0, "cubin": 1, "ptx": 2, "fatbin": 3}
OOB = {"promise_in_bounds": 0, "zeros": 1, "nan": 2}
# fj_swizzle by width in bytes (0 = none).
SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
RUNTIME_DISABLE_DISK_CACHE = 1 << 0
RUNTIME_DISABLE_THUNKS = 1 << 1
BUILD_NO_CACHE = 1 << 0

ARG_I8, ARG_I16, ARG_I32, ARG_I64 = 1, 2, 3, 4
ARG_U8, ARG_U16, ARG_U32, ARG_U64 = 5, 6, 7, 8
ARG_F16, ARG_BF16, ARG_F32, ARG_F64 = 9, 10, 11, 12
ARG_POINTER, ARG_BYTES, ARG_TENSOR = 13, 14, 15

_STATUS = c_void_p  # fj_status*, NULL = success
_HANDLE = c_void_p  # fj_runtime*, fj_module*, fj_kernel*, fj_stream*

# name -> (restype, argtypes). Functions a binding needs from every 1.x
# library; optional ones (added after 1.0) are bound when present.
_PROTOTYPES = {
    "fj_version": (c_uint32, []),
    "fj_status_code": (c_int, [_STATUS]),
    "fj_status_message": (c_void_p, [_STATUS, POINTER(c_size_t)]),
    "fj_status_detail": (c_void_p, [_STATUS, fj_str, POINTER(c_size_t)]),
    "fj_status_free": (None, [_STATUS]),
    "fj_code_name": (ctypes.c_char_p, [c_int]),
    "fj_copy_impl_name": (ctypes.c_char_p, [c_int]),
    "fj_feature_name": (ctypes.c_char_p, [c_int]),
    "fj_support_name": (ctypes.c_char_p, [c_int]),
    "fj_copy_plan_for_target": (_STATUS, [fj_str, c_int, POINTER(fj_copy_plan)]),
    "fj_runtime_create": (_STATUS, [POINTER(fj_runtime_options), POINTER(_HANDLE)]),
    "fj_runtime_destroy": (_STATUS, [_HANDLE]),
    "fj_runtime_driver_error": (ctypes.c_char_p, [_HANDLE]),
    "fj_device_count": (_STATUS, [_HANDLE, POINTER(c_int32)]),
    "fj_device_info_get": (_STATUS, [_HANDLE, c_int32, POINTER(fj_device_info)]),
    "fj_mem_alloc": (_STATUS, [_HANDLE, c_int32, c_uint64, POINTER(c_uint64)]),
    "fj_mem_free": (_STATUS, [_HANDLE, c_uint64]),
    "fj_memcpy_htod": (_STATUS, [_HANDLE, c_uint64, c_void_p, c_uint64, _HANDLE]),
    "fj_memcpy_dtoh": (_STATUS, [_HANDLE, c_void_p, c_uint64, c_uint64, _HANDLE]),
    "fj_memcpy_dtod": (_STATUS, [_HANDLE, c_uint64, c_uint64, c_uint64, _HANDLE]),
    "fj_memset_d8": (_STATUS, [_HANDLE, c_uint64, c_uint8, c_uint64, _HANDLE]),
    "fj_stream_create": (_STATUS, [_HANDLE, c_int32, POINTER(_HANDLE)]),
    "fj_stream_synchronize": (_STATUS, [_HANDLE]),
    "fj_stream_destroy": (_STATUS, [_HANDLE]),
    "fj_module_build": (_STATUS, [_HANDLE, POINTER(fj_build_options), POINTER(_HANDLE)]),
    "fj_module_info_get": (_STATUS, [_HANDLE, POINTER(fj_module_info)]),
    "fj_module_image": (_STATUS, [_HANDLE, POINTER(c_void_p), POINTER(c_size_t)]),
    "fj_module_destroy": (_STATUS, [_HANDLE]),
    "fj_module_get_kernel": (_STATUS, [_HANDLE, fj_str, c_int32, POINTER(_HANDLE)]),
    "fj_tensor_arg_check": (_STATUS, [POINTER(fj_tensor_arg), POINTER(fj_tensor_check)]),
    "fj_launch": (_STATUS, [_HANDLE, POINTER(fj_launch_config), c_void_p, c_size_t]),
    "fj_kernel_info_get": (_STATUS, [_HANDLE, POINTER(fj_kernel_info)]),
    "fj_cache_stats_get": (_STATUS, [_HANDLE, POINTER(fj_cache_stats)]),
    "fj_cache_clear": (_STATUS, [_HANDLE]),
}
_OPTIONAL_PROTOTYPES = {
    # fj_stream_wrap(fj_runtime*, int32_t device, uint64_t cu_stream, fj_stream** out)
    "fj_stream_wrap": (_STATUS, [_HANDLE, c_int32, c_uint64, POINTER(_HANDLE)]),
    # Since 1.1.
    "fj_runtime_include_dir": (_STATUS, [_HANDLE, c_size_t, POINTER(c_size_t),
                                         POINTER(ctypes.c_char_p),
                                         POINTER(ctypes.c_char_p)]),
    "fj_module_build_async": (_STATUS, [_HANDLE, POINTER(fj_build_options),
                                        POINTER(_HANDLE)]),
    "fj_build_poll": (_STATUS, [_HANDLE, POINTER(c_int32)]),
    "fj_build_wait": (_STATUS, [_HANDLE, c_uint32, POINTER(c_int32)]),
    "fj_build_take": (_STATUS, [_HANDLE, POINTER(_HANDLE)]),
    "fj_build_destroy": (_STATUS, [_HANDLE]),
    "fj_module_load": (_STATUS, [_HANDLE, POINTER(fj_module_load_options),
                                 POINTER(_HANDLE)]),
    "fj_cache_flush": (_STATUS, [_HANDLE, c_uint32]),
    "fj_copy": (_STATUS, [_HANDLE, POINTER(fj_copy_desc), _HANDLE]),
    "fj_prefetch": (_STATUS, [_HANDLE, POINTER(fj_prefetch_desc), _HANDLE]),
    "fj_peer_query": (_STATUS, [_HANDLE, c_int32, c_int32, POINTER(c_int32)]),
    "fj_peer_enable": (_STATUS, [_HANDLE, c_int32, c_int32]),
    "fj_peer_disable": (_STATUS, [_HANDLE, c_int32, c_int32]),
}

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
        for name, (restype, argtypes) in _PROTOTYPES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise LoadError(f"{path} lacks {name}: not a fleetjit 1.x library") from None
            fn.restype, fn.argtypes = restype, argtypes
        for name, (restype, argtypes) in _OPTIONAL_PROTOTYPES.items():
            if hasattr(lib, name):
                fn = getattr(lib, name)
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
