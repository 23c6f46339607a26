"""Kernel arguments: Python values -> an array of fj_arg.

A value becomes one fj_arg by these rules, first match wins:
  - Scalar (i32(5), f32(1.5), u64(...), pointer(addr), ...): that kind.
  - Tensor(obj, box, oob): FJ_ARG_TENSOR, for FJ_TENSOR(...) parameters
    (box outermost-first, like shape; or box_innermost_first=).
  - DeviceBuffer or any tensor-like object (__dlpack__ or
    __cuda_array_interface__): FJ_ARG_POINTER to its first element, for
    `T*` parameters.
  - NumPy scalars (np.float32(2), np.int64(3), np.float16(...)) and ctypes
    values (c_float(2)): their own type.
  - bytes / bytearray / memoryview: FJ_ARG_BYTES (a struct by value).
  - int: FJ_ARG_I32 (use i64()/u64() for wider values); float: FJ_ARG_F32
    (use f64() for double). bool is refused (C++ bool is one byte: u8()).
The library checks every argument against the kernel's parameters before
the driver runs, so a wrong kind or size is a FleetjitError, not a fault.
An extern "C" kernel's integer parameter is only a size to the library:
where the binding has read the declaration (fleetjit._signature), a float
of any kind passed to one is refused naming the parameter (32.0 would
arrive as its float bits, 1107296256).
"""

import ctypes
import struct
import warnings

from . import _ffi
from .errors import FleetjitError, _integer, _real, _unsigned
from . import tensors

# The most bytes of parameters a kernel takes (the library's
# kMaxParamBytes, jit/thunk/arg_rules.h): a larger by-value struct is
# refused before it is copied.
MAX_PARAM_BYTES = 32 * 1024

_KIND_NAMES = {
    "i8": _ffi.ARG_I8, "i16": _ffi.ARG_I16, "i32": _ffi.ARG_I32, "i64": _ffi.ARG_I64,
    "u8": _ffi.ARG_U8, "u16": _ffi.ARG_U16, "u32": _ffi.ARG_U32, "u64": _ffi.ARG_U64,
    "f16": _ffi.ARG_F16, "bf16": _ffi.ARG_BF16, "f32": _ffi.ARG_F32, "f64": _ffi.ARG_F64,
    "pointer": _ffi.ARG_POINTER,
    "c64": _ffi.ARG_C64, "c128": _ffi.ARG_C128,  # since 1.3: cuFloatComplex, cuDoubleComplex
}
_RANGES = {
    "i8": (-2**7, 2**7 - 1), "i16": (-2**15, 2**15 - 1), "i32": (-2**31, 2**31 - 1),
    "i64": (-2**63, 2**63 - 1), "u8": (0, 2**8 - 1), "u16": (0, 2**16 - 1),
    "u32": (0, 2**32 - 1), "u64": (0, 2**64 - 1), "pointer": (0, 2**64 - 1),
}


class Scalar:
    """A kernel argument of an explicit C type: i8 ... u64, f16, bf16, f32, f64, pointer."""

    __slots__ = ("kind", "value")

    def __init__(self, kind, value):
        """An integer kind takes an integer (2.5 and "16" are refused, not
        cut or parsed); a float kind a number, refused when it is finite
        but past the type's range (it would become inf); out of range is an
        InvalidArgumentError naming the kind."""
        if kind not in _KIND_NAMES:
            raise ValueError(f"unknown argument kind {kind!r}")
        if kind in _RANGES:
            value = _integer(value, f"the {kind} value")
            lo, hi = _RANGES[kind]
            if not lo <= value <= hi:
                raise FleetjitError("INVALID_ARGUMENT",
                                    f"{value} does not fit {kind} ({lo} to {hi})")
        elif kind in ("c64", "c128"):
            if isinstance(value, (str, bytes)):
                raise FleetjitError("INVALID_ARGUMENT",
                                    f"the {kind} value is {value!r}, not a number")
            value = complex(value)
            if kind == "c64":
                _float_fits("f32", value.real, kind)
                _float_fits("f32", value.imag, kind)
        elif kind == "f16":
            value = struct.unpack("<H", struct.pack("<e", _float_fits(kind, value)))[0]
        elif kind == "bf16":
            bits = struct.unpack("<I", struct.pack("<f", _float_fits("f32", value, kind)))[0]
            if (bits & 0x7F800000) == 0x7F800000 and bits & 0x007FFFFF:
                value = (bits >> 16) | 0x40  # NaN stays a (quiet) NaN
            else:  # round to nearest, ties to even
                value = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
        else:
            value = _float_fits(kind, value)
        self.kind = kind
        self.value = value

    def __repr__(self):
        return f"{self.kind}({self.value!r})"


_FLOAT_FORMATS = {"f16": "<e", "f32": "<f"}


def _float_fits(fmt, value, kind=None):
    """`value` as a float that `fmt` (f16, f32, f64) holds: a finite value
    that would round to inf is refused (inf and NaN pass)."""
    kind = kind or fmt
    x = _real(value, f"the {kind} value")
    if fmt in _FLOAT_FORMATS:
        try:
            struct.pack(_FLOAT_FORMATS[fmt], x)
        except OverflowError:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"{value!r} does not fit {kind} (it would be inf)") from None
    return x


def _maker(kind):
    def make(value):
        return Scalar(kind, value)
    make.__name__ = kind
    make.__doc__ = f"A kernel argument of type {kind}."
    return make


i8, i16, i32, i64 = (_maker(k) for k in ("i8", "i16", "i32", "i64"))
u8, u16, u32, u64 = (_maker(k) for k in ("u8", "u16", "u32", "u64"))
f16, bf16, f32, f64 = (_maker(k) for k in ("f16", "bf16", "f32", "f64"))
pointer = _maker("pointer")
c64, c128 = _maker("c64"), _maker("c128")


class Tensor:
    """A tensor argument for an FJ_TENSOR(T, rank) parameter.

    obj:  anything tensors.borrow() accepts (torch, CuPy, JAX, NumPy arrays...)
    box:  tile extents, OUTERMOST-FIRST like the shape: box=(rows, cols) for
          a 2-D tensor of shape (rows, cols). None or 0 = the whole extent;
          a shorter tuple leaves the inner dimensions whole. Device code
          counts the other way (fj::tensor::box(0) is the innermost).
    box_innermost_first:  the same extents given innermost-first, as device
          code and CUDA's tensor maps count them: (cols, rows). Give box or
          this, not both.
    oob:  "promise_in_bounds" (default), "zeros" or "nan": what reads outside
          the tensor return. Under "promise_in_bounds" a box larger than the
          tensor in a dimension is refused by the library.
    swizzle: the SMEM layout of its tiles, the TMA swizzle width in bytes:
          0 (default, none), 32, 64 or 128; box's innermost extent times the
          element size must equal it (see fj::swizzle in <fleetjit/copy.cuh>)
    A box with more extents than the tensor has dimensions is a ValueError.
    """

    def __init__(self, obj, box=None, oob="promise_in_bounds", swizzle=0, *,
                 box_innermost_first=None):
        if oob not in _ffi.OOB:
            raise ValueError(f"oob must be one of {sorted(_ffi.OOB)}")
        if swizzle not in _ffi.SWIZZLE:
            raise ValueError(
                f"swizzle must be one of {sorted(_ffi.SWIZZLE)} (bytes)")
        if box is not None and box_innermost_first is not None:
            raise ValueError("give box (outermost-first, like shape) or "
                             "box_innermost_first, not both")
        if box_innermost_first is not None:
            box = tuple(reversed(tuple(_integer(b, "a box extent")
                                       for b in box_innermost_first)))
        box = tuple(_integer(b, "a box extent") for b in (box or ()))
        if len(box) > 5:
            raise ValueError("box has at most 5 extents")
        if any(b < 0 or b > 0xFFFFFFFF for b in box):
            raise ValueError(f"box {box} (outermost-first, like shape): "
                             "extents are 0..2^32-1")
        self.obj = obj
        self.box = box
        self.oob = oob
        self.swizzle = swizzle

    def to_c(self, keep, stream=None, device_id=0):
        """An fj_tensor_arg (kept alive in `keep`) describing the borrowed tensor."""
        borrowed = tensors.borrow(self.obj, stream=stream, device_id=device_id)
        ndim = borrowed.tensor.ndim
        if len(self.box) > ndim:
            raise ValueError(
                f"box {self.box} has {len(self.box)} extents but the tensor "
                f"has {ndim} dimensions (shape {borrowed.shape}); box is "
                "outermost-first, like shape")
        arg = _ffi.new(_ffi.fj_tensor_arg)
        arg.tensor = borrowed.address
        for i, b in enumerate(self.box):
            arg.box[i] = b
        arg.oob = _ffi.OOB[self.oob]
        arg.swizzle = _ffi.SWIZZLE[self.swizzle]
        keep.extend((borrowed, arg))
        return arg


_NUMPY_KINDS = {
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float32": "f32", "float64": "f64", "complex64": "c64", "complex128": "c128",
}
_CTYPES_KINDS = {
    ctypes.c_int8: "i8", ctypes.c_int16: "i16", ctypes.c_int32: "i32", ctypes.c_int64: "i64",
    ctypes.c_uint8: "u8", ctypes.c_uint16: "u16", ctypes.c_uint32: "u32",
    ctypes.c_uint64: "u64", ctypes.c_float: "f32", ctypes.c_double: "f64",
    ctypes.c_void_p: "pointer",
}


def _numpy_scalar(value):
    t = type(value)
    if t.__module__ != "numpy" or not hasattr(value, "dtype") or getattr(value, "ndim", 1) != 0:
        return None
    name = value.dtype.name
    if name == "float16":
        return Scalar("f16", float(value))
    if name in _NUMPY_KINDS:
        return Scalar(_NUMPY_KINDS[name], value.item())
    raise FleetjitError("INVALID_ARGUMENT", f"no kernel argument kind for numpy {name}")


def to_scalar(value):
    """The Scalar a plain value converts to, or None if it is not a scalar."""
    if isinstance(value, Scalar):
        return value
    if type(value).__module__ == "numpy":  # before float: float64 subclasses it
        return _numpy_scalar(value)
    if isinstance(value, bool):
        raise FleetjitError("INVALID_ARGUMENT",
                            "bool is ambiguous as a kernel argument: use u8(...) for C++ bool "
                            "or i32(...) for int")
    if isinstance(value, int):
        if not -2**31 <= value < 2**31:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"{value} does not fit int32: use i64(...) or u64(...)")
        return Scalar("i32", value)
    if isinstance(value, float):
        return Scalar("f32", value)
    if isinstance(value, complex):  # a double complex: c64(z) for cuFloatComplex
        return Scalar("c128", value)
    for ctype, kind in _CTYPES_KINDS.items():
        if type(value) is ctype:
            return Scalar(kind, value.value or 0)
    return _numpy_scalar(value)


def _fill_scalar(arg, s, keep=None):
    arg.kind = _KIND_NAMES[s.kind]
    if s.kind in ("c64", "c128"):  # re, im: in v itself (c64) or at v.bytes (c128)
        fmt = "<ff" if s.kind == "c64" else "<dd"
        raw = struct.pack(fmt, s.value.real, s.value.imag)
        if s.kind == "c64":
            arg.v.u64 = struct.unpack("<Q", raw)[0]
        else:
            buf = ctypes.create_string_buffer(raw, 16)
            keep.append(buf)
            arg.v.bytes = ctypes.addressof(buf)
        return
    field = {"f16": "u16", "bf16": "u16", "pointer": "pointer"}.get(s.kind, s.kind)
    setattr(arg.v, field, s.value)


def build(values, stream=None, device_id=0, dtypes=None, integers=None):
    """(keep-alive list, fj_arg array or None, count) for a kernel's arguments.

    `stream` is the integer CUstream of the launch, handed to DLPack
    producers so they order their pending writes before it. `dtypes`, when
    known (fleetjit._signature.pointer_dtypes), gives per parameter the
    (code, bits, name) a tensor argument's dtype should have: a tensor of
    another dtype launches, with a warning. `integers`, when known
    (fleetjit._signature.integer_params), gives per parameter the (C type,
    name) of an integer one: a float argument there is refused.
    """
    values = list(values)
    keep = []
    if not values:
        return keep, None, 0
    arr = (_ffi.fj_arg * len(values))()
    for i, value in enumerate(values):
        a = arr[i]
        a.struct_size = ctypes.sizeof(_ffi.fj_arg)
        want = dtypes[i] if dtypes is not None and i < len(dtypes) else None
        integer = integers[i] if integers is not None and i < len(integers) else None
        try:
            _fill(a, value, keep, stream, device_id, want, i, integer)
        except FleetjitError as e:
            raise FleetjitError(e.code, f"argument {i}: {e.message}") from None
    keep.append(arr)
    return keep, arr, len(values)


_DL_NAMES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
             (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
             (2, 16): "float16", (2, 32): "float32", (2, 64): "float64",
             (4, 16): "bfloat16", (6, 8): "bool"}


def _warn_dtype(index, have, want):
    """Warns when a tensor's DLPack (code, bits) differs from the pointee
    (code, bits, name) the kernel declares."""
    if want is None or have is None or tuple(have[:2]) == tuple(want[:2]):
        return
    name = _DL_NAMES.get(tuple(have[:2]), f"DLPack dtype {tuple(have[:2])}")
    warnings.warn(f"argument {index}: a {name} tensor passed to a parameter the "
                  f"kernel declares as pointing to {want[2]}", RuntimeWarning,
                  stacklevel=5)


def _torch_dl_dtype(dtype):
    """(code, bits) of a torch dtype, or None."""
    return _TORCH_DTYPES.get(str(dtype))


_TORCH_DTYPES = {"torch." + v: k for k, v in _DL_NAMES.items()}


def _refuse_strided(index, value, shape, strides):
    raise FleetjitError(
        "INVALID_ARGUMENT",
        f"a non-contiguous {type(value).__name__} (shape {tuple(shape)}, strides "
        f"{tuple(strides)} elements) cannot be passed as a pointer: the kernel "
        "would read the wrong elements; pass a contiguous copy (.contiguous()) "
        "or a fleetjit.Tensor for an FJ_TENSOR parameter")


def c_contiguous(shape, strides):
    """Whether element strides describe a compact row-major layout
    (dimensions of extent 1 may have any stride; an empty tensor is)."""
    if strides is None:
        return True
    if any(s == 0 for s in shape):
        return True
    expected = 1
    for extent, stride in reversed(list(zip(shape, strides))):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _pointer(address, what):
    """A device address for a pointer parameter: refused when NULL (a
    closed buffer, a tensor without data) or past uint64."""
    if not address:
        raise FleetjitError("INVALID_ARGUMENT", f"{what} is NULL")
    return _unsigned(address, 64, what)


_FLOAT_KINDS = frozenset(("f16", "bf16", "f32", "f64", "c64", "c128"))


def _refuse_float_for_integer(value, s, integer):
    """A float kind for a parameter declared as an integer: its bits would
    arrive as the integer (32.0 as 1107296256)."""
    ctype, pname = integer
    shown = f"{ctype} {pname}" if pname else ctype
    raise FleetjitError(
        "INVALID_ARGUMENT",
        f"{type(value).__name__} {value!r} ({s.kind}) passed to the integer parameter "
        f"'{shown}': its float bits would arrive as the integer; pass an int "
        f"(int(x)) or fleetjit.i32(...)/i64(...)")


def _fill(a, value, keep, stream, device_id, want=None, index=0, integer=None):
    if isinstance(value, Tensor):
        a.kind = _ffi.ARG_TENSOR
        a.v.tensor = ctypes.addressof(value.to_c(keep, stream, device_id))
        return
    address = getattr(value, "device_address", None)  # DeviceBuffer
    if address is not None:
        if getattr(value, "closed", False):
            raise FleetjitError("INVALID_ARGUMENT",
                                f"this {type(value).__name__} is closed")
        a.kind = _ffi.ARG_POINTER
        a.v.pointer = _pointer(address, "device_address")
        return
    if type(value).__module__.startswith("torch") and getattr(value, "is_cuda", False):
        # A CUDA torch tensor: read its pointer, no DLPack capsule. torch's
        # own current stream orders its writes; launch on that stream.
        if not value.is_contiguous():
            _refuse_strided(index, value, value.shape, value.stride())
        _warn_dtype(index, _torch_dl_dtype(value.dtype), want)
        a.kind = _ffi.ARG_POINTER
        a.v.pointer = value.data_ptr()
        return
    if tensors.is_tensor_like(value):
        borrowed = tensors.borrow(value, stream=stream, device_id=device_id)
        if borrowed.device[0] not in tensors.CUDA_DEVICE_TYPES:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"{type(value).__name__} lives on DLPack device type "
                                f"{borrowed.device[0]}, not CUDA memory")
        shape, strides = borrowed.shape, borrowed.strides
        if any(s < 0 for s in shape):
            raise FleetjitError("INVALID_ARGUMENT", f"{type(value).__name__} has the "
                                f"negative shape {shape}")
        if not c_contiguous(shape, strides):
            _refuse_strided(index, value, shape, strides)
        if borrowed.device[0] == tensors.KDL_CUDA and borrowed.device[1] != device_id:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"{type(value).__name__} lives on CUDA device "
                                f"{borrowed.device[1]}, the kernel on device {device_id}")
        if borrowed.read_only and want is not None and not want[3]:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"a read-only {type(value).__name__} passed to a parameter "
                                f"the kernel declares as a non-const {want[2]} pointer "
                                "(it may write there)")
        _warn_dtype(index, borrowed.dtype, want)
        keep.append(borrowed)
        a.kind = _ffi.ARG_POINTER
        _pointer(borrowed.tensor.data, f"the {type(value).__name__}'s data")
        a.v.pointer = _unsigned(borrowed.data_ptr, 64, "the tensor's address")
        return
    if isinstance(value, (bytes, bytearray, memoryview)):
        # The size first: no parameter is larger (and FJ_ARG_BYTES' size is
        # a uint32 that ctypes would wrap), so nothing larger is copied.
        nbytes = memoryview(value).nbytes
        if nbytes > MAX_PARAM_BYTES:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"a {nbytes}-byte {type(value).__name__} passed by value: "
                                f"a kernel's parameters hold at most {MAX_PARAM_BYTES} bytes")
        data = bytes(value)
        buf = ctypes.create_string_buffer(data, len(data))
        keep.append(buf)
        a.kind = _ffi.ARG_BYTES
        a.size = len(data)
        a.v.bytes = ctypes.addressof(buf)
        return
    s = to_scalar(value)
    if s is None:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"cannot pass a {type(value).__name__} to a kernel (use a scalar, "
                            "i32()/f32()/..., a tensor-like object or fleetjit.Tensor)")
    if integer is not None and s.kind in _FLOAT_KINDS:
        _refuse_float_for_integer(value, s, integer)
    _fill_scalar(a, s, keep)
