"""fj_tune: pick the fastest candidate build and launch shape of a kernel on
the live device, stored like a module (docs/tuning.md).

    res = fleetjit.tune(rt, SOURCE, "tiled_axpy",
                        macro_sets=["-DTILE=1024", "-DTILE=4096"],
                        shapes=[128, 256, (512, 1, 1)],
                        grid_extent=(n,), grid_divisor=("TILE",),
                        args=[fleetjit.f32(2.0), x, y, fleetjit.i32(n)],
                        outputs=[y])
    best = res.rows[res.winner]      # .macros, .block, .grid, .median_us
"""

import ctypes
from ctypes import c_uint64, c_void_p
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from . import _ffi, args as _args
from .errors import FleetjitError, _call, _fields, _no_nul, _unsigned, check

TUNE_NO_CACHE_READ = _ffi.FJ_TUNE_NO_CACHE_READ
TUNE_NO_CACHE_WRITE = _ffi.FJ_TUNE_NO_CACHE_WRITE
# fj_cache_result, as a tuning result's source.
CACHE_RESULTS = {0: "tuned", 1: "memory", 2: "disk", 3: "remote"}
fj_tune_shape, fj_tune_options = _ffi.fj_tune_shape, _ffi.fj_tune_options
fj_tune_summary, fj_tune_row = _ffi.fj_tune_summary, _ffi.fj_tune_row


def _lib():
    lib = _ffi.load()
    if not hasattr(lib, "fj_tune"):
        raise FleetjitError("UNAVAILABLE",
                            f"{_ffi.library_path()} has no fj_tune (it needs 1.3)")
    return lib


def status_name(status: int) -> str:
    """fj_tune_status_name: "ok", "wrong_output", ...; "unknown" out of range."""
    return _lib().fj_tune_status_name(status).decode()


@dataclass
class TuneRow:
    macro_index: int
    shape_index: int
    macros: str
    block: Tuple[int, int, int]
    shared_bytes: int
    cluster: Tuple[int, int, int]
    grid: Tuple[int, int, int]
    status: str
    message: str
    median_us: float
    min_us: float
    spread: float
    noisy: bool
    samples: int
    batch: int


@dataclass
class TuneResult:
    winner: int
    source: str  # "tuned", "memory", "disk", "remote"
    noisy: bool
    stored: bool
    tune_ms: float
    lookup_ms: float
    key: str
    rows: List[TuneRow]


def _text(s) -> str:
    return ctypes.string_at(s.data, s.size).decode() if s.size else ""


def _dims(value, bits: int, what: str) -> Tuple[int, int, int]:
    """1 to 3 dimensions (an integer or a sequence), padded with 0."""
    v = (value,) if not hasattr(value, "__iter__") else tuple(value)
    if not 1 <= len(v) <= 3:
        raise FleetjitError("INVALID_ARGUMENT", f"{what}: expected 1 to 3 dimensions, got {v}")
    return tuple(_unsigned(d, bits, f"{what}[{i}]") for i, d in enumerate(v)) + (0,) * (3 - len(v))


def _shape(value, what="shape") -> Tuple[Tuple[int, int, int], int, Tuple[int, int, int]]:
    """(block, shared_bytes, cluster) of 256, (256, 2), or a dict."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"block", "shared_bytes", "cluster"}, key=str)
        if unknown:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"{what} has the unknown key {unknown[0]!r} (a shape's keys "
                                "are 'block', 'shared_bytes' and 'cluster')")
        block = value.get("block", 0)
        smem = value.get("shared_bytes", 0)
        cluster = value.get("cluster", (0, 0, 0))
    else:
        block, smem, cluster = value, 0, (0, 0, 0)
    return (_dims(block, 32, f"{what}.block"), _unsigned(smem, 32, f"{what}.shared_bytes"),
            _dims(cluster, 32, f"{what}.cluster"))


def tune(runtime, source: str, kernel: str, *, shapes: Sequence, args: Sequence,
         outputs: Sequence, macro_sets: Sequence[str] = (), grid=None,
         grid_extent: Optional[Sequence[int]] = None,
         grid_divisor: Sequence[str] = ("", "", ""), name: str = "", device: int = 0,
         nvrtc_options: Sequence[str] = (), name_expressions: Sequence[str] = (),
         target=None, copy_impl=None, output=None, cache: bool = True,
         include_dirs: Sequence[str] = (), warmup: int = 0, samples: int = 0,
         noise_threshold: float = 0.0, timeout_ms: int = 0, retune: bool = False,
         store: bool = True) -> TuneResult:
    """Tunes `kernel` of `source` over macro_sets x shapes (see the module doc).

    The base build takes Runtime.build's options (name, device, target,
    copy_impl, nvrtc_options, name_expressions, output, cache, include_dirs),
    converted and checked by the same code as build; cache=False builds the
    candidates without the module cache (retune and store are the tuning
    result's own cache). The device is the one tuned on.
    outputs: the buffers the kernel writes, each a DeviceBuffer or an
    (address, nbytes) pair: checked (the first candidate that runs is the
    reference) and restored when the call returns.
    """
    lib = _lib()
    # The tune's own strings; the base build's are checked by _build_options.
    _no_nul(kernel, "kernel name")
    for what, items in (("macro_sets", macro_sets), ("grid_divisor", grid_divisor)):
        if isinstance(items, (str, bytes)):
            raise FleetjitError("INVALID_ARGUMENT", f"{what} is a list of strings")
        for item in items:
            _no_nul(item, what)
    if len(grid_divisor) > 3:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"grid_divisor has {len(grid_divisor)} entries; at most 3")
    b, keep = runtime._build_options(source, name, target, device, copy_impl,
                                     nvrtc_options, name_expressions, output, cache,
                                     include_dirs)
    keep.append(_ffi.StrArg(kernel, "kernel name"))
    o = fj_tune_options()
    o.struct_size = ctypes.sizeof(o)
    o.build = ctypes.addressof(b)
    o.kernel = keep[-1].value
    k3, o.macro_sets, o.num_macro_sets = _ffi.str_array(macro_sets, "macro_sets")
    shape_arr = (fj_tune_shape * len(shapes))()
    for i, s in enumerate(shapes):
        block, smem, cluster = _shape(s, f"shapes[{i}]")
        shape_arr[i].struct_size = ctypes.sizeof(fj_tune_shape)
        shape_arr[i].block[:] = block
        shape_arr[i].shared_bytes = smem
        shape_arr[i].cluster[:] = cluster
    o.shapes = ctypes.addressof(shape_arr) if len(shapes) else None
    o.num_shapes = len(shapes)
    if grid is not None:
        o.grid[:] = _dims(grid, 32, "grid")
    if grid_extent is not None:
        o.grid_extent[:] = _dims(grid_extent, 64, "grid_extent")
    divisors = [_ffi.StrArg(d, "grid_divisor")
                for d in tuple(grid_divisor) + ("",) * (3 - len(grid_divisor))]
    for i in range(3):
        o.grid_divisor[i] = divisors[i].value
    arg_keep, arg_arr, n = _args.build(args, device_id=device)
    o.args = ctypes.cast(arg_arr, c_void_p) if arg_arr is not None else None
    o.num_args = n
    addresses, sizes = [], []
    for i, out in enumerate(outputs):
        if hasattr(out, "device_address"):
            address, nbytes = out.device_address, out.nbytes
        else:
            address, nbytes = _fields(out, ("address", "nbytes"), f"outputs[{i}]")
        addresses.append(_unsigned(address, 64, f"outputs[{i}]'s address"))
        sizes.append(_unsigned(nbytes, 64, f"outputs[{i}]'s size"))
    addr_arr = (c_uint64 * max(1, len(addresses)))(*addresses)
    size_arr = (c_uint64 * max(1, len(sizes)))(*sizes)
    o.output_addresses = addr_arr if addresses else None
    o.output_bytes = size_arr if sizes else None
    o.num_outputs = len(addresses)
    o.warmup = _unsigned(warmup, 32, "warmup")
    o.samples = _unsigned(samples, 32, "samples")
    o.timeout_ms = _unsigned(timeout_ms, 32, "timeout_ms")
    o.noise_threshold = noise_threshold
    o.flags = (TUNE_NO_CACHE_READ if retune else 0) | (0 if store else TUNE_NO_CACHE_WRITE)
    handle = c_void_p()
    _call(runtime, lib.fj_tune, ctypes.byref(o), ctypes.byref(handle))
    del keep, k3, divisors, arg_keep
    try:
        s = fj_tune_summary()
        s.struct_size = ctypes.sizeof(s)
        check(lib.fj_tune_result_summary(handle, ctypes.byref(s)))
        rows = []
        for i in range(s.num_rows):
            r = fj_tune_row()
            r.struct_size = ctypes.sizeof(r)
            check(lib.fj_tune_result_row(handle, i, ctypes.byref(r)))
            rows.append(TuneRow(r.macro_index, r.shape_index, _text(r.macros),
                                tuple(r.block), r.shared_bytes, tuple(r.cluster),
                                tuple(r.grid), status_name(r.status), _text(r.message),
                                r.median_us, r.min_us, r.spread, bool(r.noisy), r.samples,
                                r.batch))
        return TuneResult(s.winner, CACHE_RESULTS.get(s.source, "unknown"), bool(s.noisy),
                          bool(s.stored), s.tune_ms, s.lookup_ms, s.key.decode(), rows)
    finally:
        check(lib.fj_tune_result_free(handle))
