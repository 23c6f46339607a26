"""Tensor copies, L2 prefetch and peer access (fj_copy, fj_prefetch,
fj_peer_query/enable/disable).

Tensors are anything fleetjit.borrow accepts: a DLPack capsule, an object
with __dlpack__ (torch, CuPy, JAX arrays) or __cuda_array_interface__
(CuPy, Numba), or a BorrowedTensor. DLPack producers are handed the
stream of the copy, so they order their pending writes before it.

    rt.copy(dst, src, src_start=(0, 128), oob="zeros", stream=torch_stream)
    rt.copy(kv_window, kv_cache, gather_index=page_table)   # paged KV rows
"""

import ctypes

from . import _ffi
from . import tensors
from .errors import (FleetjitError, _call, _fields, _integer, _ordinal, _signed, _unsigned,
                     lib)


def _need(name):
    fj = lib()
    if not hasattr(fj, name):
        raise FleetjitError("UNAVAILABLE", f"this libfleetjit.so.1 ({_ffi.library_path()}) "
                            f"has no {name} (fleetjit 1.1 or later has)")
    return getattr(fj, name)


def _starts(values, what):
    values = tuple(_signed(v, 64, f"{what}[{i}]") for i, v in enumerate(values))
    if len(values) > 5:
        raise FleetjitError("INVALID_ARGUMENT", f"{what} has at most 5 entries")
    return values + (0,) * (5 - len(values))


def copy(runtime, dst, src, src_start=(), oob="promise_in_bounds", gather_index=None,
         stream=None):
    """dst[i] = src[src_start + i] for every index i of dst, the fill (oob
    "zeros" or "nan") where that lies outside src; with gather_index (1-D
    int32/int64, dst.shape[0] entries) the outermost source coordinate is
    gather_index[i0] + src_start[0]. Asynchronous on `stream` (a fleetjit
    Stream, a torch/CuPy stream, an integer CUstream or None)."""
    if oob not in _ffi.OOB:
        raise FleetjitError("INVALID_ARGUMENT", f"oob must be one of {sorted(_ffi.OOB)}")
    fn = _need("fj_copy")
    fj_stream, cu_stream, using = runtime._resolve_stream(stream, 0)
    keep = []
    d = _ffi.new(_ffi.fj_copy_desc)
    if dst is None or src is None:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"{'dst' if dst is None else 'src'} is None: a copy needs "
                            "both a dst and a src tensor")
    for field, obj in (("src", src), ("dst", dst), ("gather_index", gather_index)):
        if obj is None:
            continue
        b = tensors.borrow(obj, stream=cu_stream)
        keep.append(b)
        setattr(d, field, b.address)
        if field == "dst" and b.read_only:
            raise FleetjitError("INVALID_ARGUMENT", "dst is a read-only tensor")
    starts = _starts(src_start, "src_start")
    for i, v in enumerate(starts):
        d.src_start[i] = v
    d.oob = _ffi.OOB[oob]
    _call(runtime, fn, ctypes.byref(d), fj_stream, using=using)
    del keep  # the library has read the descriptors


def prefetch(runtime, data, nbytes=None, tile_start=(), tile_extent=(), mode="auto",
             reader_device=-1, stage=None, stream=None):
    """Prefetches a byte range (data = a device address or DeviceBuffer,
    with nbytes) or a tile of a tensor (data = a tensor-like object, with
    tile_start/tile_extent outermost-first) for `reader_device`.
    mode: "auto", "local_l2", "warm_owner_l2" or "stage_local" (then
    stage = a DeviceBuffer or (address, bytes) on the reader)."""
    if mode not in _ffi.PREFETCH_MODES:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"mode must be one of {sorted(_ffi.PREFETCH_MODES)}")
    fn = _need("fj_prefetch")
    reader_device = _ordinal(reader_device, "reader_device")
    fj_stream, cu_stream, using = runtime._resolve_stream(stream, max(reader_device, 0))
    d = _ffi.new(_ffi.fj_prefetch_desc)
    keep = []
    address = getattr(data, "device_address", None)
    if isinstance(data, int) or address is not None:
        d.address = _unsigned(data if address is None else address, 64, "the address")
        if nbytes is None:
            nbytes = getattr(data, "nbytes", None)
        if nbytes is None or _integer(nbytes, "nbytes") < 0:
            raise FleetjitError("INVALID_ARGUMENT", "a byte range needs nbytes >= 0")
        d.bytes = _unsigned(nbytes, 64, "nbytes")
    else:
        b = tensors.borrow(data, stream=cu_stream)
        keep.append(b)
        d.tensor = b.address
        for i, v in enumerate(_starts(tile_start, "tile_start")):
            d.tile_start[i] = v
        for i, v in enumerate(_starts(tile_extent, "tile_extent")):
            d.tile_extent[i] = v
    d.mode = _ffi.PREFETCH_MODES[mode]
    d.reader_device = reader_device
    if stage is not None:
        if hasattr(stage, "device_address"):
            d.stage_address, d.stage_bytes = stage.device_address, stage.nbytes
        else:
            address, nbytes = _fields(stage, ("address", "bytes"), "stage")
            d.stage_address = _unsigned(address, 64, "stage's address")
            d.stage_bytes = _unsigned(nbytes, 64, "stage's bytes")
    _call(runtime, fn, ctypes.byref(d), fj_stream, using=using)
    del keep


def peer_query(runtime, reader, owner):
    """Whether GPU `reader` has a P2P path to `owner`'s memory."""
    reader, owner = _peers(reader, owner)
    out = ctypes.c_int32()
    _call(runtime, _need("fj_peer_query"), reader, owner, ctypes.byref(out))
    return bool(out.value)


def peer_enable(runtime, reader, owner):
    """Lets kernels on `reader` use `owner`'s memory (idempotent)."""
    reader, owner = _peers(reader, owner)
    _call(runtime, _need("fj_peer_enable"), reader, owner)


def peer_disable(runtime, reader, owner):
    reader, owner = _peers(reader, owner)
    _call(runtime, _need("fj_peer_disable"), reader, owner)


def _peers(reader, owner):
    """The two ordinals of a peer call, refused outside int32 (int() and
    ctypes cut 1.5 to 1 and wrapped 1 << 32 to 0)."""
    return _ordinal(reader, "reader device ordinal"), _ordinal(owner, "owner device ordinal")
