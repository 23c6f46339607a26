"""Runtime, Module, Kernel, Stream and DeviceBuffer: thin owners of C handles.

Ownership follows the C ABI: a Runtime owns everything created from it, and
closing it invalidates its modules, kernels, streams and buffers (their
calls then raise FleetjitError("INVALID_ARGUMENT")). Each class is also a
context manager.
"""

import ctypes
import os
import sys
import weakref
from dataclasses import dataclass, field, asdict
from typing import Dict, List, Optional, Tuple

from . import _ffi
from . import _signature
from . import args as _args
from . import _fast
from . import builds
from . import copies
from . import logs
from .errors import (FleetjitError, _call, _closed, _destroyer, _integer, _no_nul, _ordinal,
                     _unsigned, check, lib)


# The compiled launch path (fleetjit/_fastlaunch.c) when it is built and
# this is True; else every launch takes the pure-ctypes path.
USE_FAST_PATH = True
_UNSET = object()


# ----------------------------------------------------------------- versions

def library_version() -> Tuple[int, int]:
    """(major, minor) of the libfleetjit.so.1 actually loaded."""
    v = lib().fj_version()
    return (v >> 16, v & 0xFFFF)


def check_version() -> Tuple[int, int]:
    """Refuses a library whose major differs from the binding's, or whose
    minor is older than the header this binding mirrors."""
    major, minor = library_version()
    if major != _ffi.EXPECTED_MAJOR or minor < _ffi.EXPECTED_MINOR:
        raise FleetjitError(
            "FAILED_PRECONDITION",
            f"{_ffi.library_path()} is fleetjit {major}.{minor}; this binding needs "
            f"{_ffi.EXPECTED_MAJOR}.x with x >= {_ffi.EXPECTED_MINOR}")
    return (major, minor)


# ------------------------------------------------------------- value types

@dataclass(frozen=True)
class CopyPlan:
    target: str
    impl: str                     # "sync", "cp_async" or "tma"
    features: Dict[str, str]      # feature -> "native" | "emulated"


@dataclass(frozen=True)
class Device:
    ordinal: int
    name: str
    compute_capability: Tuple[int, int]
    sm_count: int
    total_memory_bytes: int
    shared_memory_per_block: int
    shared_memory_per_block_optin: int
    shared_memory_per_sm: int
    l2_cache_bytes: int
    max_threads_per_block: int
    cluster_launch: bool
    driver_version: int
    plan: CopyPlan


@dataclass(frozen=True)
class ModuleInfo:
    target: str
    copy_impl: str
    output: str                   # "cubin" or "ptx"
    cache_result: str             # "compiled", "memory_hit" or "disk_hit"
    build_ms: float
    compile_ms: float
    image_bytes: int


@dataclass(frozen=True)
class KernelInfo:
    lowered_name: str
    num_params: int
    param_bytes: int
    max_threads_per_block: int
    static_shared_bytes: int
    num_regs: int
    uses_thunk: bool


@dataclass(frozen=True)
class CacheStats:
    memory_hits: int
    disk_hits: int
    misses: int
    compiles: int
    compile_ms_total: float
    evictions: int
    rejected_entries: int
    disk_entries: int
    disk_bytes: int
    remote_state: str = "off"
    remote_hits: int = 0
    remote_misses: int = 0
    remote_errors: int = 0
    remote_rejected: int = 0
    remote_writes: int = 0
    remote_write_drops: int = 0
    remote_breaker_opens: int = 0


def _name(fn, value):
    return fn(value).decode()


def _plan_from_c(p) -> CopyPlan:
    fj = lib()
    features = {_name(fj.fj_feature_name, f): _name(fj.fj_support_name, p.support[f])
                for f in range(_ffi.FEATURE_COUNT)}
    return CopyPlan(p.target.decode(), _name(fj.fj_copy_impl_name, p.impl), features)


def _impl_value(impl) -> int:
    if impl is None:
        return 0
    if impl not in _ffi.COPY_IMPLS:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"copy_impl must be one of {sorted(_ffi.COPY_IMPLS)}, not {impl!r}")
    return _ffi.COPY_IMPLS[impl]


def copy_plan(target: str, impl: Optional[str] = None) -> CopyPlan:
    """The copy plan for a named target ("sm_90", "compute_80"); no GPU needed."""
    t = _ffi.StrArg(target, "target")
    plan = _ffi.new(_ffi.fj_copy_plan)
    check(lib().fj_copy_plan_for_target(t.value, _impl_value(impl), ctypes.byref(plan)))
    return _plan_from_c(plan)


def tensor_check(tensor: "_args.Tensor") -> Tuple[bool, str]:
    """(tma, reason): whether the tma implementation can describe a tensor
    argument with a TMA tensor map (else it falls back to cp.async), checked
    as fj_launch would. Needs no runtime or GPU."""
    keep = []
    arg = tensor.to_c(keep)
    out = _ffi.new(_ffi.fj_tensor_check)
    check(lib().fj_tensor_arg_check(ctypes.byref(arg), ctypes.byref(out)))
    return bool(out.tma), out.reason.decode(errors="replace")


# ------------------------------------------------------------------ handles

class _Handle:
    """An owned C handle; close() is idempotent."""

    _destroy_name = ""

    def __init__(self, handle, owner=None):
        self._handle = handle
        self._owner = owner

    @property
    def closed(self) -> bool:
        return not self._handle or (self._owner is not None and self._owner.closed)

    def _live(self):
        # One read: close() on another thread may clear _handle between a
        # check and a second read (a NULL then reached the library). The
        # handle read stays valid while the caller's gate entry holds it.
        handle = self._handle
        if not handle or (self._owner is not None and self._owner.closed):
            raise FleetjitError("INVALID_ARGUMENT", f"this {type(self).__name__} is closed")
        return handle

    def close(self):
        """Refuses new calls at once; destroys the handle once no call that
        uses it is in flight (for a Runtime: no call at all)."""
        handle, self._handle = self._handle, None
        if not handle:
            return
        destroy = getattr(lib(), self._destroy_name)
        gate = getattr(self, "_gate", None)
        if self._owner is None:  # a Runtime
            gate.close(lambda: check(destroy(handle)))
        else:  # a Module or Stream: its gate is a child of the runtime's
            gate.close(_destroyer(self._owner._gate, destroy, handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown, or the owner went first
            pass


class Stream(_Handle):
    """A CUDA stream owned (fj_stream_create) or borrowed (fj_stream_wrap)."""

    _destroy_name = "fj_stream_destroy"

    def __init__(self, handle, runtime, device, cu_stream=None):
        super().__init__(handle, runtime)
        self._gate = _fast.new_gate(runtime._gate, handle)
        self.device = device
        self.cu_stream = cu_stream  # the integer CUstream when borrowed, else None

    def synchronize(self):
        _call(self, lib().fj_stream_synchronize)

    def close(self):
        if self.cu_stream is not None and self._owner is not None:
            gates = getattr(self._owner, "_gates_by_cu", {})
            if gates.get(self.cu_stream) is self._gate:
                del gates[self.cu_stream]
                getattr(self._owner, "_fj_by_cu", {}).pop(self.cu_stream, None)
        super().close()


class DeviceBuffer:
    """Device memory from fj_mem_alloc, freed by close() or with the runtime."""

    def __init__(self, runtime, device, nbytes, address):
        self._runtime = runtime
        # Its methods' calls in flight: close() frees the memory once they return.
        self._gate = _fast.new_gate(runtime._gate, address)
        runtime._buffers.add(self)  # zeroed when the runtime closes
        self.device = device
        self.nbytes = nbytes
        self.device_address = address

    @property
    def closed(self):
        return not self.device_address or self._runtime.closed

    def _live(self):
        """The runtime's handle (the first argument of its calls); refused
        once the buffer is closed."""
        if self.closed:
            raise FleetjitError("INVALID_ARGUMENT", "this DeviceBuffer is closed")
        return self._runtime._live()

    def upload(self, data, stream: Optional[Stream] = None):
        """Copies host bytes (any buffer) to the start of the buffer."""
        view = memoryview(data).cast("B")
        if view.nbytes > self.nbytes:
            raise FleetjitError("OUT_OF_RANGE", f"{view.nbytes} bytes into a {self.nbytes}-byte buffer")
        src = (ctypes.c_char * view.nbytes).from_buffer_copy(view)
        _call(self, lib().fj_memcpy_htod, self.device_address, src,
              view.nbytes, stream._live() if stream else None,
              using=(stream,) if stream else ())

    def download(self, nbytes: Optional[int] = None) -> bytes:
        """Copies the buffer (or its first nbytes) back to the host."""
        n = self.nbytes if nbytes is None else _integer(nbytes, "nbytes")
        if n < 0:
            raise FleetjitError("INVALID_ARGUMENT", f"nbytes is {n}: a size is not negative")
        # Checked before the host buffer is allocated (2**31 of a 16-byte
        # buffer allocated 2 GiB, then the library refused it).
        if n > self.nbytes:
            raise FleetjitError("OUT_OF_RANGE",
                                f"nbytes is {n}: the buffer holds {self.nbytes} bytes")
        self._live()  # a closed buffer: refused before allocating too
        dst = ctypes.create_string_buffer(n)
        _call(self, lib().fj_memcpy_dtoh, dst, self.device_address, n, None)
        return dst.raw

    def copy_from(self, src: "DeviceBuffer", nbytes: Optional[int] = None,
                  stream: Optional[Stream] = None):
        """Copies device bytes from `src` (its first nbytes; all of it by
        default) to the start of this buffer (fj_memcpy_dtod), on `stream`
        or synchronously."""
        n = src.nbytes if nbytes is None else _integer(nbytes, "nbytes")
        if n < 0 or n > self.nbytes or n > src.nbytes:
            raise FleetjitError("OUT_OF_RANGE",
                                f"{n} bytes from a {src.nbytes}-byte buffer into a "
                                f"{self.nbytes}-byte buffer")
        _call(self, lib().fj_memcpy_dtod, self.device_address,
              src.device_address, n,
              stream._live() if stream else None,
              using=(src, stream) if stream else (src,))

    def fill(self, value: int):
        """Sets every byte to `value` (0 to 255)."""
        value = _unsigned(value, 8, "the fill value")
        _call(self, lib().fj_memset_d8, self.device_address, value,
              self.nbytes, None)

    def close(self):
        """Refuses new calls at once; frees the memory once none of the
        buffer's own calls (upload, download...) is in flight. (A launch or
        copy that takes it as an argument is the caller's to finish first,
        as for the GPU work it queues.)"""
        address, self.device_address = self.device_address, 0
        if address:  # freed with the runtime if that closes first
            runtime = self._runtime
            self._gate.close(_destroyer(
                runtime._gate, lambda a: lib().fj_mem_free(runtime._live(), a), address))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Kernel:
    """A kernel of a Module, loaded on one device."""

    def __init__(self, module, handle, name, device):
        self._module = module
        self._gate = module._gate
        self._handle = handle
        self.name = name
        self.device = device
        self._dtypes = _UNSET
        self._integers = _UNSET
        self._torch_dtypes = _UNSET
        # launch as a C callable in the instance dict: kernel.launch(...)
        # then reaches fj_launch with no Python frame, and comes back to
        # the method below for whatever it does not launch itself
        # (fleetjit/_fastlaunch.c, Launcher). Not for a subclass that
        # overrides launch.
        if _fast.module is not None and type(self).launch is Kernel.launch:
            runtime = module._runtime
            self.launch = _fast.module.bind(self, handle, _fast.launch_address, module,
                                            self._gate, runtime._gates_by_cu, globals(),
                                            self._cai_dtypes())

    def _live(self):
        if self._module.closed:
            raise FleetjitError("INVALID_ARGUMENT", "the kernel's module is closed")
        return self._handle

    @property
    def info(self) -> KernelInfo:
        out = _ffi.new(_ffi.fj_kernel_info)
        _call(self, lib().fj_kernel_info_get, ctypes.byref(out))
        return KernelInfo(out.lowered_name.decode(), out.num_params, out.param_bytes,
                          out.max_threads_per_block, out.static_shared_bytes, out.num_regs,
                          bool(out.uses_thunk))

    @property
    def param_dtypes(self):
        """Per parameter, the dtype name a pointer parameter points to
        ("float32", "bfloat16"...) or None, read from the declaration of an
        extern "C" kernel in the built source; None when unknown."""
        dt = self._dl_dtypes()
        return None if dt is None else [d[2] if d else None for d in dt]

    def _dl_dtypes(self):
        dt = self._dtypes
        if dt is _UNSET:
            dt = self._dtypes = _signature.pointer_dtypes(
                getattr(self._module, "_source", None), self.name)
        return dt

    def _integer_params(self):
        """Per parameter, the (C type, name) of one the extern "C" kernel
        declares as a by-value integer, else None; None when unknown."""
        it = self._integers
        if it is _UNSET:
            it = self._integers = _signature.integer_params(
                getattr(self._module, "_source", None), self.name)
        return it

    def _cai_dtypes(self):
        """Per parameter, the (code, bits) a __cuda_array_interface__
        argument's typestr must give for the compiled path to pack it (a
        const T* for a read-only one, checked by the ctypes path), "int"
        for a by-value integer parameter (a float argument there is left
        to the ctypes path, which refuses it), else None; None when the
        kernel's declaration is unknown."""
        dt = self._dl_dtypes()
        if dt is None:
            return None
        it = self._integer_params() or ()
        return tuple(tuple(d[:2]) if d else
                     ("int" if i < len(it) and it[i] is not None else None)
                     for i, d in enumerate(dt))

    def _torch_dtype_tuple(self):
        """The per-parameter torch dtypes the compiled path compares with;
        cached once torch is imported (before that no torch tensor can be
        an argument)."""
        torch = sys.modules.get("torch")
        dt = self._dl_dtypes()
        if torch is None or dt is None:
            td = None
        else:
            td = tuple(getattr(torch, d[2], None) if d else None for d in dt)
        if torch is not None:
            self._torch_dtypes = td
        return td

    def _fast_dtypes(self):
        """_torch_dtype_tuple() for the compiled path, registering torch
        and NumPy with it first when either has been imported since."""
        if _fast.torch_pending:
            _fast.maybe_register()
        return self._torch_dtype_tuple()

    def launch(self, grid, block, args=(), stream=None, shared_bytes=0, cluster=None):
        """Launches asynchronously on `stream`.

        grid, block, cluster: an int or a tuple of up to 3 ints.
        args: see fleetjit.args (scalars, tensor-like objects as pointers,
              fleetjit.Tensor for FJ_TENSOR parameters).
        stream: None (the legacy default stream), a fleetjit Stream, a
              torch.cuda.Stream, a cupy.cuda.Stream, or an integer CUstream
              (torch.cuda.current_stream().cuda_stream,
              cupy.cuda.get_current_stream().ptr).
        Torch CUDA tensors pass by data_ptr(): launch on the stream that
        produced them (torch.cuda.current_stream()) or synchronize first.
        A non-contiguous view is refused; a dtype other than the one the
        kernel's `T*` parameter declares is a RuntimeWarning.
        """
        fast = _fast.module if USE_FAST_PATH else None
        # The compiled path takes a shared_bytes that is an int fitting
        # uint32 and leaves any other to the ctypes path, which refuses it.
        if fast is not None and cluster is None and self._module._handle:
            if not self._gate.enter():  # the module's (a child of the runtime's)
                raise _closed(self)
            try:
                if self._launch_fast(fast, grid, block, args, stream, shared_bytes):
                    return
            finally:
                self._gate.exit()
        self._launch_ctypes(grid, block, args, stream, shared_bytes, cluster)

    def _launch_fast(self, fast, grid, block, args, stream, shared_bytes):
        """True when the compiled path launched; False for an argument the
        ctypes path packs or refuses."""
        runtime = self._module._runtime
        sgate = None
        if stream is None:
            fjs, obj = 0, None
        elif type(stream) is Stream:
            fjs, obj = stream._live(), None
            sgate = stream._gate  # entered: the stream is not destroyed under the launch
            if not sgate.enter():
                raise _closed(stream)
        else:
            fjs, obj = 0, stream  # a wrapped Stream's gate: entered by fast.launch
        try:
            dtypes = self._torch_dtypes
            if dtypes is _UNSET:  # until torch is imported
                dtypes = self._fast_dtypes()
            for _ in range(2):
                r = fast.launch(_fast.launch_address, self._handle, grid, block, shared_bytes,
                                fjs, obj, runtime._gates_by_cu, args, dtypes,
                                self._cai_dtypes())
                if type(r) is not tuple:
                    break
                runtime.wrap_stream(r[1], self.device)  # a framework stream not wrapped yet
        finally:
            if sgate is not None:
                sgate.exit()
        if type(r) is int:
            check(r)
        return r is None

    def _launch_ctypes(self, grid, block, args, stream, shared_bytes, cluster):
        """The pure-ctypes launch (no compiled module, or an argument the
        compiled path leaves to it)."""
        runtime = self._module._runtime
        fj_stream, cu_stream, using = runtime._resolve_stream(stream, self.device)
        cfg = _ffi.new(_ffi.fj_launch_config)
        for dst, value, default, what in ((cfg.grid, grid, 1, "grid"),
                                          (cfg.block, block, 1, "block"),
                                          (cfg.cluster, cluster, 0, "cluster")):
            dims = _dims(value, default, what)
            for i in range(3):
                dst[i] = dims[i]
        cfg.shared_bytes = _unsigned(shared_bytes, 32, "shared_bytes")
        cfg.stream = fj_stream
        keep, arr, count = _args.build(args, stream=cu_stream, device_id=self.device,
                                       dtypes=self._dl_dtypes(),
                                       integers=self._integer_params())
        _call(self, lib().fj_launch, ctypes.byref(cfg),
              ctypes.cast(arr, ctypes.c_void_p) if arr is not None else None,
              count, using=using)
        del keep  # the library copied what it needs: the tensors may go


def _dims(value, default, what):
    """3 uint32 launch dimensions from an int or a sequence of up to 3 ints
    (None: all `default`, for a cluster only); refused when one is not an integer or does not
    fit (ctypes would silently wrap it)."""
    if value is None and not default:  # no cluster
        return (default,) * 3
    if not hasattr(value, "__iter__"):
        value = (value,)
    value = tuple(_unsigned(v, 32, f"{what}[{i}]") for i, v in enumerate(value))
    if len(value) > 3:
        raise FleetjitError("INVALID_ARGUMENT", f"{value} has more than 3 dimensions")
    if not value:
        raise FleetjitError("INVALID_ARGUMENT", f"{what} is (): give 1 to 3 dimensions")
    return value + (default,) * (3 - len(value))


class Module(_Handle):
    """A built module: its image, its kernels."""

    _destroy_name = "fj_module_destroy"

    def __init__(self, handle, runtime):
        super().__init__(handle, runtime)
        self._runtime = runtime
        # Its calls and its kernels' launches in flight: close() destroys
        # the module once they return.
        self._gate = _fast.new_gate(runtime._gate, handle)

    @property
    def info(self) -> ModuleInfo:
        out = _ffi.new(_ffi.fj_module_info)
        _call(self, lib().fj_module_info_get, ctypes.byref(out))
        output = {v: k for k, v in _ffi.OUTPUTS.items()}.get(out.output, str(out.output))
        return ModuleInfo(out.target.decode(), _name(lib().fj_copy_impl_name, out.copy_impl),
                          output, _ffi.CACHE_RESULTS.get(out.cache_result, str(out.cache_result)),
                          out.build_ms, out.compile_ms, out.image_bytes)

    @property
    def image(self) -> bytes:
        """The cubin (ELF) or PTX text."""
        data = ctypes.c_void_p()
        size = ctypes.c_size_t()
        _call(self, lib().fj_module_image, ctypes.byref(data), ctypes.byref(size))
        return ctypes.string_at(data, size.value)

    def kernel(self, name: str, device: int = 0) -> Kernel:
        """The kernel `name` (extern "C" name or a name expression), loaded on `device`."""
        _no_nul(name, "kernel name")
        device = _ordinal(device)
        n = _ffi.StrArg(name, "kernel name")
        out = ctypes.c_void_p()
        _call(self, lib().fj_module_get_kernel, n.value, device, ctypes.byref(out))
        return Kernel(self, out.value, name, device)


class Runtime(_Handle):
    """A fleetjit runtime: devices, builds, the module cache.

    Every option is optional; environment variables (FLEETJIT_TARGET, ...)
    override them as `fleetjit info` lists.
        target:     build every module for this target ("sm_90") instead of the device's
        copy_impl:  "sync", "cp_async" or "tma" instead of the device's choice
        cache_dir:  disk cache directory (default $FLEETJIT_CACHE_DIR or ~/.cache/fleetjit)
        cache_max_bytes: disk cache cap (0 = 1 GiB)
        remote_cache_url, fleet_key: the fleet's shared cache tier (redis://...)
        log:        a callable(level, message) or a logging.Logger receiving
                    the library's log lines (from any thread); log_level:
                    "error", "warn" (default), "info" or "debug"
        preopen_devices: ordinals whose contexts are opened now ([-1] = all)
        disk_cache: False to use the memory cache only
        thunks:     False to launch through the generic path only
        libcuda, libnvrtc: library files instead of the loader's search
    """

    _destroy_name = "fj_runtime_destroy"

    def __init__(self, *, target=None, copy_impl=None, cache_dir=None, cache_max_bytes=0,
                 disk_cache=True, thunks=True, libcuda=None, libnvrtc=None,
                 remote_cache_url=None, fleet_key=None, log=None, log_level="warn",
                 preopen_devices=None):
        check_version()
        opts = _ffi.new(_ffi.fj_runtime_options)
        keep = [_ffi.StrArg(s, what) for s, what in (
            (libcuda, "libcuda"), (libnvrtc, "libnvrtc"), (target, "target"),
            (cache_dir, "cache_dir"), (remote_cache_url, "remote_cache_url"),
            (fleet_key, "fleet_key"))]
        opts.libcuda_path, opts.libnvrtc_path = keep[0].value, keep[1].value
        opts.target_override, opts.cache_dir = keep[2].value, keep[3].value
        opts.remote_cache_url, opts.fleet_key = keep[4].value, keep[5].value
        if log is not None:
            opts.log_fn, opts.log_level = logs.callback(log, log_level)
        if preopen_devices is not None:
            preopen_devices = [_ordinal(d, f"preopen_devices[{i}]")
                               for i, d in enumerate(preopen_devices)]
            devs = (ctypes.c_int32 * max(1, len(preopen_devices)))(*preopen_devices)
            keep.append(devs)
            opts.preopen_devices = ctypes.cast(devs, ctypes.POINTER(ctypes.c_int32))
            opts.num_preopen_devices = len(preopen_devices)
        opts.copy_impl_override = _impl_value(copy_impl)
        opts.flags = ((0 if disk_cache else _ffi.RUNTIME_DISABLE_DISK_CACHE) |
                      (0 if thunks else _ffi.RUNTIME_DISABLE_THUNKS))
        opts.cache_max_bytes = _unsigned(cache_max_bytes, 64, "cache_max_bytes")
        out = ctypes.c_void_p()
        check(lib().fj_runtime_create(ctypes.byref(opts), ctypes.byref(out)))
        self._gate = _fast.new_gate()
        self._buffers = weakref.WeakSet()
        super().__init__(out.value)
        self._wrapped_streams = {}
        self._fj_by_cu = {}  # CUstream -> fj_stream*
        # CUstream -> the wrapped Stream's gate (its fj_stream* and its calls
        # in flight), for the compiled path
        self._gates_by_cu = {}

    def close(self):
        # Wrapped streams are the binding's; the runtime releases the rest.
        for s in getattr(self, "_wrapped_streams", {}).values():
            try:
                s.close()
            except FleetjitError:
                pass
        self._wrapped_streams = {}
        # Emptied in place: each kernel's compiled launcher holds the dict.
        self.__dict__.setdefault("_fj_by_cu", {}).clear()
        self.__dict__.setdefault("_gates_by_cu", {}).clear()
        for b in list(getattr(self, "_buffers", ())):
            b.device_address = 0  # freed with the runtime: launches refuse it
        super().close()

    # Devices.
    @property
    def driver_error(self) -> str:
        """Why the driver is unavailable ("" if it loaded)."""
        if not self._gate.enter():
            raise FleetjitError("INVALID_ARGUMENT", "this Runtime is closed")
        try:
            return lib().fj_runtime_driver_error(self._live()).decode(errors="replace")
        finally:
            self._gate.exit()

    @property
    def device_count(self) -> int:
        n = ctypes.c_int32()
        _call(self, lib().fj_device_count, ctypes.byref(n))
        return n.value

    def device(self, ordinal: int) -> Device:
        ordinal = _ordinal(ordinal)
        out = _ffi.new(_ffi.fj_device_info)
        _call(self, lib().fj_device_info_get, ordinal, ctypes.byref(out))
        return Device(out.ordinal, out.name.decode(errors="replace"),
                      (out.cc_major, out.cc_minor), out.sm_count, out.total_memory_bytes,
                      out.shared_memory_per_block, out.shared_memory_per_block_optin,
                      out.shared_memory_per_sm, out.l2_cache_bytes, out.max_threads_per_block,
                      bool(out.cluster_launch), out.driver_version, _plan_from_c(out.plan))

    @property
    def devices(self) -> List[Device]:
        return [self.device(i) for i in range(self.device_count)]

    def device_report(self) -> dict:
        """What `fleetjit info --json` reports: version, driver error, devices."""
        major, minor = library_version()
        return {"version": f"{major}.{minor}", "library": _ffi.library_path(),
                "driver_error": self.driver_error,
                "devices": [asdict(d) for d in self.devices]}

    # Builds.
    def build(self, source, *, name="", target=None, device=0, copy_impl=None,
              nvrtc_options=(), name_expressions=(), output=None, cache=True,
              include_dirs=()) -> Module:
        """Builds CUDA C++ `source` (or fetches it from the cache).

        target: "sm_XX[a]" (cubin) or "compute_XX[a]" (PTX); None = the
                runtime's target, else the live device `device`. A named
                target needs no GPU.
        include_dirs: folders searched for #include "..." before CUDA's.
        A compile error raises BuildError (a FleetjitError) with .build_log.
        """
        o, keep = self._build_options(source, name, target, device, copy_impl,
                                      nvrtc_options, name_expressions, output, cache,
                                      include_dirs)
        out = ctypes.c_void_p()
        _call(self, lib().fj_module_build, ctypes.byref(o), ctypes.byref(out))
        del keep
        m = Module(out.value, self)
        m._source = source
        return m

    def _build_options(self, source, name, target, device, copy_impl, nvrtc_options,
                       name_expressions, output, cache, include_dirs):
        """(fj_build_options, keep-alive list) for build() and build_async()."""
        _no_nul(source, "source")
        _no_nul(name, "name")
        for what, items in (("nvrtc_options", nvrtc_options),
                            ("name_expressions", name_expressions),
                            ("include_dirs", include_dirs)):
            if isinstance(items, (str, bytes, os.PathLike)):
                raise FleetjitError("INVALID_ARGUMENT", f"{what} is a list of strings")
        # A folder is a str, bytes or os.PathLike (pathlib.Path), as for open().
        include_dirs = [os.fspath(d) for d in include_dirs]
        for what, items in (("nvrtc_options", nvrtc_options),
                            ("name_expressions", name_expressions),
                            ("include_dirs", include_dirs)):
            for item in items:
                _no_nul(item, what)
        o = _ffi.new(_ffi.fj_build_options)
        keep = [_ffi.StrArg(source, "source"), _ffi.StrArg(name, "name"),
                _ffi.StrArg(target, "target")]
        o.source, o.name, o.target = keep[0].value, keep[1].value, keep[2].value
        k1, o.nvrtc_options, o.num_nvrtc_options = _ffi.str_array(nvrtc_options, "nvrtc_options")
        k2, o.name_expressions, o.num_name_expressions = _ffi.str_array(name_expressions,
                                                                       "name_expressions")
        k3, o.include_dirs, o.num_include_dirs = _ffi.str_array(include_dirs, "include_dirs")
        keep.extend((k1, k2, k3))
        o.device = _ordinal(device)
        o.copy_impl = _impl_value(copy_impl)
        if output is not None and output not in _ffi.OUTPUTS:
            raise FleetjitError("INVALID_ARGUMENT", f"output must be one of {sorted(_ffi.OUTPUTS)}")
        o.output = _ffi.OUTPUTS.get(output or "auto")
        o.flags = 0 if cache else _ffi.BUILD_NO_CACHE
        return o, keep

    def build_async(self, source, **options) -> "builds.BuildFuture":
        """Starts build(source, **options) on the runtime's build threads and
        returns a BuildFuture at once: .done(), .result(timeout), `await`."""
        return builds.start(self, source, options)

    def load(self, image, *, kind="auto", name="", target=None) -> Module:
        """A Module of an image built elsewhere (fj_module_load): a cubin,
        PTX or fatbin (bytes), e.g. `fleetjit build -o` output or
        Module.image of another runtime."""
        return builds.load(self, image, kind, name, target)

    @property
    def include_dirs(self):
        """[(folder, why it is searched)] of CUDA's header folders, in order."""
        return builds.include_dirs(self)

    def flush_cache(self, timeout=None):
        """Waits until background cache writes are done (fj_cache_flush);
        DeadlineExceededError (a TimeoutError) after `timeout` seconds."""
        builds.flush(self, timeout)

    # Copies, prefetch, peers (fleetjit/copies.py).
    def copy(self, dst, src, src_start=(), *, oob="promise_in_bounds",
             gather_index=None, stream=None):
        """dst[i] = src[src_start + i] (fj_copy); see fleetjit.copies.copy."""
        copies.copy(self, dst, src, src_start, oob, gather_index, stream)

    def prefetch(self, data, nbytes=None, *, tile_start=(), tile_extent=(), mode="auto",
                 reader_device=-1, stage=None, stream=None):
        """An L2 prefetch hint or a staging copy (fj_prefetch); see
        fleetjit.copies.prefetch."""
        copies.prefetch(self, data, nbytes, tile_start, tile_extent, mode, reader_device,
                        stage, stream)

    def peer_query(self, reader: int, owner: int) -> bool:
        return copies.peer_query(self, reader, owner)

    def peer_enable(self, reader: int, owner: int):
        copies.peer_enable(self, reader, owner)

    def peer_disable(self, reader: int, owner: int):
        copies.peer_disable(self, reader, owner)

    # Cache.
    def cache_stats(self) -> CacheStats:
        out = _ffi.new(_ffi.fj_cache_stats)
        _call(self, lib().fj_cache_stats_get, ctypes.byref(out))
        return CacheStats(out.memory_hits, out.disk_hits, out.misses, out.compiles,
                          out.compile_ms_total, out.evictions, out.rejected_entries,
                          out.disk_entries, out.disk_bytes,
                          _ffi.REMOTE_STATES.get(out.remote_state, str(out.remote_state)),
                          out.remote_hits, out.remote_misses, out.remote_errors,
                          out.remote_rejected, out.remote_writes, out.remote_write_drops,
                          out.remote_breaker_opens)

    def clear_cache(self):
        _call(self, lib().fj_cache_clear)

    # Memory and streams.
    def alloc(self, nbytes: int, device: int = 0) -> DeviceBuffer:
        nbytes = _integer(nbytes, "alloc size")
        if nbytes < 0:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"alloc of {nbytes} bytes: a size is not negative")
        nbytes = _unsigned(nbytes, 64, "alloc size")
        device = _ordinal(device)
        out = ctypes.c_uint64()
        _call(self, lib().fj_mem_alloc, device, nbytes, ctypes.byref(out))
        return DeviceBuffer(self, device, nbytes, out.value)

    def create_stream(self, device: int = 0) -> Stream:
        device = _ordinal(device)
        out = ctypes.c_void_p()
        _call(self, lib().fj_stream_create, device, ctypes.byref(out))
        return Stream(out.value, self, device)

    def wrap_stream(self, cu_stream: int, device: int = 0) -> Stream:
        """A fleetjit Stream over a framework's CUstream (not owned: closing
        it does not destroy the CUDA stream). Needs fj_stream_wrap."""
        device = _ordinal(device)
        cu_stream = _unsigned(cu_stream, 64, "CUstream")
        key = (device, cu_stream)
        s = self._wrapped_streams.get(key)
        if s is not None and not s.closed:
            return s
        fj = lib()
        if not hasattr(fj, "fj_stream_wrap"):
            major, minor = library_version()
            raise FleetjitError(
                "UNAVAILABLE",
                f"this libfleetjit.so.1 ({major}.{minor}, {_ffi.library_path()}) has no "
                "fj_stream_wrap, so it cannot launch on a framework's stream "
                f"(0x{cu_stream:x}); use stream=None (the legacy default stream), the "
                "framework's default stream, or Runtime.create_stream()")
        out = ctypes.c_void_p()
        _call(self, fj.fj_stream_wrap, device, cu_stream, ctypes.byref(out))
        s = Stream(out.value, self, device, cu_stream=cu_stream)
        self._wrapped_streams[key] = s
        self._fj_by_cu[cu_stream] = out.value
        self._gates_by_cu[cu_stream] = s._gate  # its handle, and its calls in flight
        return s

    def _resolve_stream(self, stream, device):
        """(fj_stream* or None, integer CUstream or None, (the Stream,) or ())
        for a launch: the call passes the last to _call(using=...), so that
        the stream is not destroyed under the call."""
        if stream is None:
            return None, None, ()
        if isinstance(stream, Stream):
            return stream._live(), stream.cu_stream, (stream,)
        handle = stream
        if not isinstance(handle, int):
            handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
            if handle is None:
                handle = getattr(stream, "ptr", None)       # cupy.cuda.Stream
            if not isinstance(handle, int):
                raise FleetjitError("INVALID_ARGUMENT",
                                    f"stream must be None, a fleetjit Stream, an integer CUstream "
                                    f"or a torch/CuPy stream, not {type(stream).__name__}")
        if handle == 0:  # the legacy default stream: no wrapper needed
            return None, None, ()
        s = self.wrap_stream(handle, device)
        return s._live(), handle, (s,)
