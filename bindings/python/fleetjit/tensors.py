"""Borrowing tensors from other frameworks, without copying and without a compiler.

Two protocols are read:

1. DLPack (`__dlpack__` / `__dlpack_device__`: torch, CuPy, JAX, NumPy >= 1.22).
   The producer returns a PyCapsule holding a DLManagedTensor* (name
   "dltensor") or, when asked with max_version, a DLManagedTensorVersioned*
   ("dltensor_versioned"). Its DLTensor is layout-identical to fj_tensor, so
   the binding passes the DLTensor's address straight to the library. The
   capsule is kept alive (inside BorrowedTensor) for as long as the library
   may read the tensor, and is never renamed to "used_dltensor": when it is
   collected, the producer's capsule destructor calls the deleter, which
   releases the producer's reference.
2. `__cuda_array_interface__` (CuPy, Numba, torch): the binding builds an
   fj_tensor itself (strides converted from bytes to elements).
"""

import ctypes
from ctypes import POINTER, Structure, c_int64, c_uint32, c_uint64, c_void_p

from . import _ffi
from .errors import FleetjitError, _integer, _ordinal, _unsigned

# DLDeviceType values the library accepts, and the CPU one NumPy reports.
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13
CUDA_DEVICE_TYPES = (KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED)

# DLDataTypeCode
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT, KDL_COMPLEX, KDL_BOOL = 0, 1, 2, 4, 5, 6

DLTensor = _ffi.fj_tensor  # identical layouts; the header promises it


class DLManagedTensor(Structure):
    """DLPack < 1.0 (capsule name "dltensor"): the DLTensor comes first."""
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    """DLPack >= 1.0 (capsule name "dltensor_versioned"): the DLTensor sits
    after the version, manager_ctx, deleter and flags."""
    _fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p),
                ("deleter", c_void_p), ("flags", c_uint64), ("dl_tensor", DLTensor)]


DLPACK_FLAG_READ_ONLY = 1 << 0
# Offsets of the DLTensor inside each managed struct (0 and 32 on LP64).
LEGACY_TENSOR_OFFSET = DLManagedTensor.dl_tensor.offset
VERSIONED_TENSOR_OFFSET = DLManagedTensorVersioned.dl_tensor.offset
MAX_DLPACK_MAJOR = 1

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_get_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_get_name.restype = ctypes.c_char_p
_capsule_get_name.argtypes = [ctypes.py_object]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


class BorrowedTensor:
    """A tensor borrowed from its producer: `address` is an fj_tensor*.

    Keep the object alive until the library is done with the tensor (for a
    launch: until the launch call returns; the library copies what it needs).
    """

    def __init__(self, address, keep, source, read_only=False):
        self.address = address        # fj_tensor* / DLTensor*
        self._keep = keep             # the capsule, or the arrays we built
        self.source = source          # "dltensor", "dltensor_versioned" or "cuda_array_interface"
        self.read_only = read_only

    @property
    def tensor(self):
        """A ctypes view of the fj_tensor (valid while this object lives)."""
        return DLTensor.from_address(self.address)

    @property
    def device(self):
        t = self.tensor
        return (t.device.device_type, t.device.device_id)

    @property
    def shape(self):
        t = self.tensor
        return tuple(t.shape[i] for i in range(t.ndim))

    @property
    def strides(self):
        """Strides in elements; None for compact row-major."""
        t = self.tensor
        if not t.strides:
            return None
        return tuple(t.strides[i] for i in range(t.ndim))

    @property
    def dtype(self):
        """(code, bits, lanes) as DLPack spells them."""
        d = self.tensor.dtype
        return (d.code, d.bits, d.lanes)

    @property
    def data_ptr(self):
        """The address of the first element: data + byte_offset."""
        t = self.tensor
        return (t.data or 0) + t.byte_offset

    def close(self):
        self._keep = None
        self.address = None


def _dlpack_stream_argument(device_type, stream):
    # DLPack: CPU producers take stream=None; for CUDA, None means the legacy
    # default stream, 1 the legacy default stream, 2 the per-thread default
    # stream, any other integer a cudaStream_t; 0 is not allowed.
    if device_type not in CUDA_DEVICE_TYPES:
        return None
    if stream is None or stream == 0:
        return 1
    return stream


def from_dlpack(obj, stream=None):
    """Borrows `obj` through __dlpack__. `stream` is the integer CUstream the
    consumer will use (None: the legacy default); the producer makes that
    stream wait for its pending writes, as the DLPack protocol asks."""
    device = obj.__dlpack_device__()
    if not isinstance(device, tuple) or len(device) != 2:
        raise FleetjitError("INVALID_ARGUMENT", f"__dlpack_device__() returned {device!r}, "
                            "not (device_type, device_id)")
    device_type = _integer(device[0], "__dlpack_device__()'s device_type")
    _integer(device[1], "__dlpack_device__()'s device_id")
    stream_arg = _dlpack_stream_argument(device_type, stream)
    try:
        capsule = obj.__dlpack__(stream=stream_arg, max_version=(MAX_DLPACK_MAJOR, 0))
    except TypeError:  # a producer older than DLPack 1.0: no max_version
        capsule = obj.__dlpack__(stream=stream_arg)
    return from_capsule(capsule)


# The most dimensions a borrowed tensor may have (NumPy's and CuPy's limit):
# shape and strides are read ndim entries long, so a larger or negative
# ndim is refused before anything is read or allocated.
MAX_NDIM = 64


def _checked_rank(borrowed):
    ndim = borrowed.tensor.ndim
    if not 0 <= ndim <= MAX_NDIM:
        raise FleetjitError("INVALID_ARGUMENT", f"a DLPack tensor of ndim {ndim}: "
                            f"0 to {MAX_NDIM} dimensions are read")
    return borrowed


def from_capsule(capsule):
    """Borrows the tensor of a DLPack capsule, keeping the capsule alive."""
    name = _capsule_get_name(capsule)
    if name == b"dltensor" and _capsule_is_valid(capsule, name):
        managed = _capsule_get_pointer(capsule, name)
        return _checked_rank(
            BorrowedTensor(managed + LEGACY_TENSOR_OFFSET, capsule, "dltensor"))
    if name == b"dltensor_versioned" and _capsule_is_valid(capsule, name):
        managed = _capsule_get_pointer(capsule, name)
        header = DLManagedTensorVersioned.from_address(managed)
        if header.version.major > MAX_DLPACK_MAJOR:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"DLPack {header.version.major}.{header.version.minor} "
                                f"capsule: this binding reads DLPack <= {MAX_DLPACK_MAJOR}.x")
        return _checked_rank(
            BorrowedTensor(managed + VERSIONED_TENSOR_OFFSET, capsule, "dltensor_versioned",
                           read_only=bool(header.flags & DLPACK_FLAG_READ_ONLY)))
    shown = name.decode(errors="replace") if name is not None else None
    raise FleetjitError("INVALID_ARGUMENT",
                        f"not a usable DLPack capsule (name {shown!r}; expected 'dltensor' or "
                        "'dltensor_versioned', and each capsule can be consumed once)")


# Every __cuda_array_interface__ typestr read: "<f4", "|u1", "=i8"... (a
# byte order of "<", "=" (this little-endian host) or "|") -> the DLPack
# (code, bits). bfloat16 has no typestr of its own.
_CAI_ITEMSIZES = {"f": (KDL_FLOAT, (2, 4, 8)), "i": (KDL_INT, (1, 2, 4, 8)),
                  "u": (KDL_UINT, (1, 2, 4, 8)), "b": (KDL_BOOL, (1,)),
                  "c": (KDL_COMPLEX, (8, 16))}
CAI_TYPESTRS = {f"{order}{kind}{size}": (code, size * 8)
                for kind, (code, sizes) in _CAI_ITEMSIZES.items() for size in sizes
                for order in "<=|"}


def _dtype_from_typestr(typestr):
    """(code, bits, itemsize) of a typestr; any other is refused by name."""
    dtype = CAI_TYPESTRS.get(typestr) if isinstance(typestr, str) else None
    if dtype is None:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"__cuda_array_interface__ typestr {typestr!r} is not a "
                            "little-endian int (1, 2, 4, 8 bytes), uint (1, 2, 4, 8), "
                            "float (2, 4, 8), bool (1) or complex (8, 16) type")
    return dtype[0], dtype[1], dtype[1] // 8


def _cai_ints(cai, key, what):
    """cai[key], a tuple or list of integers (a shape, strides)."""
    value = cai[key]
    if not isinstance(value, (tuple, list)):
        raise FleetjitError("INVALID_ARGUMENT", f"__cuda_array_interface__ {key} is "
                            f"{value!r}, not a tuple")
    return tuple(_integer(v, f"__cuda_array_interface__ {what}") for v in value)


def from_cuda_array_interface(obj, device_id=0):
    """Borrows `obj` through __cuda_array_interface__ (v2/v3). The interface
    names no device: `device_id` is the caller's (the kernel's device). Its
    "stream" entry (v3) is not waited on: produce the data on the stream the
    kernel is launched on, as frameworks' current streams do."""
    device_id = _ordinal(device_id, "device_id")
    cai = obj.__cuda_array_interface__
    if not isinstance(cai, dict):
        raise FleetjitError("INVALID_ARGUMENT",
                            f"__cuda_array_interface__ is a {type(cai).__name__}, not a dict")
    for key in ("shape", "typestr", "data"):
        if key not in cai:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"__cuda_array_interface__ has no {key!r} entry")
    if cai.get("mask") is not None:
        raise FleetjitError("INVALID_ARGUMENT", "__cuda_array_interface__ has a mask: "
                            "masked arrays are not supported")
    shape = _cai_ints(cai, "shape", "shape")
    if len(shape) > MAX_NDIM:
        raise FleetjitError("INVALID_ARGUMENT", f"__cuda_array_interface__ shape has "
                            f"{len(shape)} dimensions: at most {MAX_NDIM} are read")
    if any(s < 0 for s in shape):
        raise FleetjitError("INVALID_ARGUMENT",
                            f"__cuda_array_interface__ shape {shape} has a negative extent")
    code, bits, itemsize = _dtype_from_typestr(cai["typestr"])
    data = cai["data"]
    if not isinstance(data, tuple) or len(data) != 2:
        raise FleetjitError("INVALID_ARGUMENT", f"__cuda_array_interface__ data is "
                            f"{data!r}, not (address, read_only)")
    ptr, read_only = data
    if ptr is not None:
        ptr = _unsigned(ptr, 64, "__cuda_array_interface__ data address")
    ndim = len(shape)
    shape_arr = (c_int64 * max(ndim, 1))(*shape)
    strides_arr = None
    if cai.get("strides") is not None:
        byte_strides = _cai_ints(cai, "strides", "stride")
        if len(byte_strides) != ndim:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"__cuda_array_interface__ strides {byte_strides} do not "
                                f"match shape {shape}")
        if any(s % itemsize for s in byte_strides):
            raise FleetjitError("INVALID_ARGUMENT",
                                f"__cuda_array_interface__ strides {tuple(byte_strides)} are "
                                f"not multiples of the {itemsize}-byte element")
        strides_arr = (c_int64 * max(ndim, 1))(*[s // itemsize for s in byte_strides])
    t = DLTensor()
    t.data = ptr or None
    t.device.device_type = KDL_CUDA
    t.device.device_id = device_id
    t.ndim = ndim
    t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
    t.shape = ctypes.cast(shape_arr, POINTER(c_int64))
    t.strides = ctypes.cast(strides_arr, POINTER(c_int64)) if strides_arr is not None else None
    t.byte_offset = 0
    keep = (t, shape_arr, strides_arr, obj)
    return BorrowedTensor(ctypes.addressof(t), keep, "cuda_array_interface",
                          read_only=bool(read_only))


def is_tensor_like(obj):
    return hasattr(obj, "__dlpack__") or hasattr(obj, "__cuda_array_interface__")


def borrow(obj, stream=None, device_id=0):
    """Borrows any tensor-like object: a DLPack capsule, an object with
    __dlpack__ (first), or one with __cuda_array_interface__."""
    if isinstance(obj, BorrowedTensor):
        return obj
    if type(obj).__name__ == "PyCapsule":  # a DLPack capsule itself
        return from_capsule(obj)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return from_dlpack(obj, stream)
    if hasattr(obj, "__cuda_array_interface__"):
        return from_cuda_array_interface(obj, device_id)
    raise FleetjitError("INVALID_ARGUMENT",
                        f"{type(obj).__name__} exports neither __dlpack__ nor "
                        "__cuda_array_interface__")
