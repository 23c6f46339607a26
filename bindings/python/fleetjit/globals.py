"""ABI 1.3's module entries: globals, the build log, kernel attributes and
occupancy, cooperative / dependent / L2-window launches, stream priorities
and the persisting L2 set-aside (see <fleetjit/fleetjit.h>, "Module
globals", "Kernel attributes and occupancy", fj_launch_flags).

They are methods of the classes in fleetjit.runtime, attached here:

    mod = rt.build(src, name_expressions=["&ns::table"])
    mod.global_write("ns::table", np.arange(64, dtype=np.float32), stream=s)
    g = mod.get_global("counter")             # GlobalInfo(address, bytes, ...)
    log = mod.build_log                       # NVRTC's warnings, cache hits too
    k = mod.kernel("grid_sum")
    per_sm = k.occupancy(256)                  # blocks per SM
    k.launch_ex(grid=per_sm * sms, block=256, args=[...], cooperative=True)
    hi = rt.stream_with_priority(0, rt.stream_priority_range(0)[1])
"""

import ctypes
from ctypes import c_int32, c_size_t, c_uint64, c_void_p
from dataclasses import dataclass

from . import _ffi
from . import args as _args
from .errors import (FleetjitError, _call, _fields, _integer, _ordinal, _signed, _unsigned,
                     lib)
from .runtime import Kernel, Module, Runtime, Stream, _dims

MINOR = 3  # the header minor these entries came with

LAUNCH_COOPERATIVE = _ffi.FJ_LAUNCH_COOPERATIVE
LAUNCH_PROGRAMMATIC_DEPENDENT = _ffi.FJ_LAUNCH_PROGRAMMATIC_DEPENDENT
KERNEL_ATTRS = _ffi.ENUMS["fj_kernel_attr"]


# The generated structs (the whole 1.3 struct: flags and the L2 window,
# the kernel's cuFuncGetAttribute fields).
fj_global_info = _ffi.fj_global_info
fj_launch_config_13 = _ffi.fj_launch_config
fj_kernel_info_13 = _ffi.fj_kernel_info


def _fn(name):
    """The library's `name` with its prototype, or a FAILED_PRECONDITION
    error naming the 1.3 library it needs."""
    library = lib()
    fn = getattr(library, name, None)
    if fn is None:
        raise FleetjitError("FAILED_PRECONDITION",
                            f"{_ffi.library_path()} lacks {name} (fleetjit 1.{MINOR} or later)")
    return fn


@dataclass(frozen=True)
class GlobalInfo:
    address: int
    bytes: int
    lowered_name: str


@dataclass(frozen=True)
class KernelAttributes:
    const_bytes: int
    local_bytes: int
    max_dynamic_shared_bytes: int
    ptx_version: int
    binary_version: int
    cache_mode_ca: bool
    preferred_carveout: int


def _stream_handle(module, stream, device):
    """(fj_stream* or None, _call's `using`: (the Stream,) or ())."""
    if stream is None:
        return None, ()
    handle, _, using = module._runtime._resolve_stream(stream, device)
    return handle, using


# ------------------------------------------------------------------ Module

def get_global(self, name: str, device: int = 0) -> GlobalInfo:
    """The __device__ / __constant__ variable `name` (its symbol, or a name
    expression of the build such as "&ns::table") on `device`."""
    device = _ordinal(device)
    n = _ffi.StrArg(name, "global name")
    out = fj_global_info()
    out.struct_size = ctypes.sizeof(out)
    _call(self, _fn("fj_module_get_global"), n.value, device, ctypes.byref(out))
    return GlobalInfo(out.address, out.bytes, out.lowered_name.decode())


def global_write(self, name: str, data, offset: int = 0, device: int = 0, stream=None):
    """Copies `data` (bytes-like or a NumPy array) into the global, `offset`
    bytes in, ordered on `stream` (None: complete on return). The data is
    kept alive by the returned object: hold it until the stream has passed
    the copy."""
    device = _ordinal(device)
    offset = _unsigned(offset, 64, "offset")
    view = memoryview(data).cast("B")
    buf = (ctypes.c_char * len(view)).from_buffer_copy(view)
    n = _ffi.StrArg(name, "global name")
    fj_stream, using = _stream_handle(self, stream, device)
    _call(self, _fn("fj_module_global_write"), n.value, device, offset,
          ctypes.addressof(buf), len(view), fj_stream, using=using)
    return buf


def global_read(self, name: str, nbytes=None, offset: int = 0, device: int = 0,
                stream=None) -> bytearray:
    """`nbytes` (default: the rest of the variable) read from the global; with
    a stream the bytes are valid once it is synchronised."""
    device = _ordinal(device)
    offset = _unsigned(offset, 64, "offset")
    n = _ffi.StrArg(name, "global name")
    if nbytes is not None:
        nbytes = _integer(nbytes, "nbytes")
        if nbytes < 0:
            raise FleetjitError("INVALID_ARGUMENT", f"nbytes is {nbytes}: a size is not negative")
    # The rest by default; more than the variable holds is refused before
    # allocating it (an offset past the end is the library's OUT_OF_RANGE).
    rest = max(self.get_global(name, device).bytes - offset, 0)
    if nbytes is None:
        nbytes = rest
    elif nbytes > rest:
        raise FleetjitError("OUT_OF_RANGE", f"nbytes is {nbytes}: the global {name!r} has "
                            f"{rest} bytes from offset {offset}")
    out = bytearray(nbytes)
    buf = (ctypes.c_char * len(out)).from_buffer(out) if out else None
    fj_stream, using = _stream_handle(self, stream, device)
    _call(self, _fn("fj_module_global_read"), n.value, device, offset,
          ctypes.addressof(buf) if buf is not None else None,
          len(out), fj_stream, using=using)
    return out


def _build_log(self) -> str:
    log = ctypes.c_char_p()
    size = c_size_t()
    _call(self, _fn("fj_module_build_log"), ctypes.byref(log), ctypes.byref(size))
    return ctypes.string_at(log, size.value).decode(errors="replace")


# ------------------------------------------------------------------ Kernel

def attributes(self) -> KernelAttributes:
    """fj_kernel_info's 1.3 fields (cuFuncGetAttribute)."""
    out = fj_kernel_info_13()
    out.struct_size = ctypes.sizeof(out)
    _call(self, lib().fj_kernel_info_get,
          ctypes.byref(out))
    return KernelAttributes(out.const_bytes, out.local_bytes, out.max_dynamic_shared_bytes,
                            out.ptx_version, out.binary_version, bool(out.cache_mode_ca),
                            out.preferred_carveout)


def set_attribute(self, attr: str, value: int):
    """attr: "max_dynamic_shared_bytes" or "preferred_carveout" (percent, -1)."""
    if attr not in KERNEL_ATTRS:
        raise ValueError(f"attr must be one of {sorted(KERNEL_ATTRS)}")
    value = _signed(value, 32, f"the {attr} value")
    _call(self, _fn("fj_kernel_set_attribute"), KERNEL_ATTRS[attr], value)


def occupancy(self, block_threads: int, dynamic_shared_bytes: int = 0) -> int:
    """Blocks per SM of `block_threads` threads and that much dynamic SMEM."""
    block_threads = _unsigned(block_threads, 32, "block_threads")
    dynamic_shared_bytes = _unsigned(dynamic_shared_bytes, 32, "dynamic_shared_bytes")
    out = c_int32()
    _call(self, _fn("fj_kernel_occupancy"), block_threads, dynamic_shared_bytes,
          ctypes.byref(out))
    return out.value


def suggest_block(self, dynamic_shared_bytes: int = 0):
    """(block threads, minimum grid) for the most occupancy."""
    dynamic_shared_bytes = _unsigned(dynamic_shared_bytes, 32, "dynamic_shared_bytes")
    block, grid = c_int32(), c_int32()
    _call(self, _fn("fj_kernel_suggest_block"), dynamic_shared_bytes,
          ctypes.byref(block), ctypes.byref(grid))
    return block.value, grid.value


def launch_ex(self, grid, block, args=(), stream=None, shared_bytes=0, cluster=None, *,
              cooperative=False, programmatic=False, l2_window=None):
    """Kernel.launch with the 1.3 flags: cooperative (grid.sync()),
    programmatic (a dependent launch, sm_90+), l2_window=(base, bytes,
    hit_ratio) a persisting L2 access-policy window (sm_80+)."""
    runtime = self._module._runtime
    fj_stream, cu_stream, using = runtime._resolve_stream(stream, self.device)
    cfg = fj_launch_config_13()
    cfg.struct_size = ctypes.sizeof(cfg)
    for dst, value, default, what in ((cfg.grid, grid, 1, "grid"),
                                      (cfg.block, block, 1, "block"),
                                      (cfg.cluster, cluster, 0, "cluster")):
        dims = _dims(value, default, what)
        for i in range(3):
            dst[i] = dims[i]
    cfg.shared_bytes = _unsigned(shared_bytes, 32, "shared_bytes")
    cfg.stream = fj_stream
    cfg.flags = ((LAUNCH_COOPERATIVE if cooperative else 0) |
                 (LAUNCH_PROGRAMMATIC_DEPENDENT if programmatic else 0))
    if l2_window is not None:
        base, nbytes, ratio = _fields(l2_window, ("base", "bytes", "hit_ratio"), "l2_window")
        cfg.l2_window_base = _unsigned(base, 64, "l2_window's base")
        cfg.l2_window_bytes = _unsigned(nbytes, 64, "l2_window's bytes")
        cfg.l2_hit_ratio = ratio
    keep, arr, count = _args.build(args, stream=cu_stream, device_id=self.device)
    _call(self, lib().fj_launch,
          ctypes.byref(cfg),
          ctypes.cast(arr, c_void_p) if arr is not None else None, count,
          using=using)
    del keep


# ----------------------------------------------------------------- Runtime

def stream_priority_range(self, device: int = 0):
    """(least, greatest) stream priority of `device`, e.g. (0, -5)."""
    device = _ordinal(device)
    least, greatest = c_int32(), c_int32()
    _call(self, _fn("fj_stream_priority_range"), device, ctypes.byref(least),
          ctypes.byref(greatest))
    return least.value, greatest.value


def stream_with_priority(self, device: int, priority: int) -> Stream:
    """A non-blocking stream of `priority` (inside stream_priority_range)."""
    device = _ordinal(device)
    priority = _signed(priority, 32, "stream priority")
    out = ctypes.c_void_p()
    _call(self, _fn("fj_stream_create_with_priority"), device, priority,
          ctypes.byref(out))
    return Stream(out.value, self, device)


def set_persisting_l2(self, device: int, nbytes: int) -> int:
    """Sets aside `nbytes` of L2 for persisting accesses; returns what was set."""
    device = _ordinal(device)
    nbytes = _unsigned(nbytes, 64, "nbytes")
    out = c_uint64()
    _call(self, _fn("fj_device_set_persisting_l2"), device, nbytes,
          ctypes.byref(out))
    return out.value


Module.get_global = get_global
Module.global_write = global_write
Module.global_read = global_read
Module.build_log = property(_build_log)
Kernel.attributes = property(attributes)
Kernel.set_attribute = set_attribute
Kernel.occupancy = occupancy
Kernel.suggest_block = suggest_block
Kernel.launch_ex = launch_ex
Runtime.stream_priority_range = stream_priority_range
Runtime.stream_with_priority = stream_with_priority
Runtime.set_persisting_l2 = set_persisting_l2
