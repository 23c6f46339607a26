"""What fleetjit.tune checks a candidate's outputs with (docs/tuning.md,
"From Python"): the outputs' dtypes and shapes, host copies of them
(HostOutput), and close(), a comparison with a tolerance.

    res = fleetjit.tune(rt, SRC, "row_sum", ..., outputs={"sum": s, "argmax": i},
                        check=fleetjit.close(atol=1e-4, rtol=1e-5))

Each output's dtype and shape come from the tensor passed as the output (a
torch or CuPy array, anything with __dlpack__ or __cuda_array_interface__),
or from fleetjit.TuneOutput(buffer, dtype=..., shape=...) for a
DeviceBuffer or an (address, nbytes) pair, which otherwise are raw bytes.

NumPy is optional: with it, close() compares whole arrays at once and
HostOutput.numpy() / np.asarray(out) give arrays; without it close()
compares element by element in Python (slow for millions of elements) and
HostOutput.values() / tolist() decode through the struct module.
"""

import ctypes
import math
import struct
from dataclasses import dataclass
from typing import Optional, Tuple

from . import args as _args, tensors as _tensors
from .errors import FleetjitError, _call, _fields, _integer, _unsigned, lib

# dtype name -> (DLPack code, bits, struct format of one element or None,
# NumPy dtype name or None). bf16 has neither: its values are decoded
# through its bits ("H"); complex types are pairs of their float format.
DTYPES = {
    "bool": (_tensors.KDL_BOOL, 8, "?", "bool"),
    "i8": (_tensors.KDL_INT, 8, "b", "int8"),
    "i16": (_tensors.KDL_INT, 16, "h", "int16"),
    "i32": (_tensors.KDL_INT, 32, "i", "int32"),
    "i64": (_tensors.KDL_INT, 64, "q", "int64"),
    "u8": (_tensors.KDL_UINT, 8, "B", "uint8"),
    "u16": (_tensors.KDL_UINT, 16, "H", "uint16"),
    "u32": (_tensors.KDL_UINT, 32, "I", "uint32"),
    "u64": (_tensors.KDL_UINT, 64, "Q", "uint64"),
    "f16": (_tensors.KDL_FLOAT, 16, "e", "float16"),
    "f32": (_tensors.KDL_FLOAT, 32, "f", "float32"),
    "f64": (_tensors.KDL_FLOAT, 64, "d", "float64"),
    "bf16": (_tensors.KDL_BFLOAT, 16, None, None),
    "c64": (_tensors.KDL_COMPLEX, 64, "f", "complex64"),
    "c128": (_tensors.KDL_COMPLEX, 128, "d", "complex128"),
}
FLOATING = frozenset(("f16", "bf16", "f32", "f64", "c64", "c128"))
_BY_DLPACK = {(code, bits): name for name, (code, bits, _, _) in DTYPES.items()}
# The buffer protocol's formats ("B", bytes, is raw: any dtype).
_BY_FORMAT = {"?": "bool", "b": "i8", "h": "i16", "i": "i32", "q": "i64", "H": "u16",
              "I": "u32", "Q": "u64", "e": "f16", "f": "f32", "d": "f64", "Zf": "c64",
              "Zd": "c128"}
_BY_FORMAT.update({"l": "i64", "L": "u64"} if struct.calcsize("l") == 8 else {})
# Other spellings a dtype argument may take: NumPy's and torch's names
# (str(np.float32), str(torch.bfloat16) minus "torch.").
_ALIASES = {np_name: name for name, (_, _, _, np_name) in DTYPES.items() if np_name}
_ALIASES.update({"bfloat16": "bf16", "half": "f16", "float": "f32", "double": "f64",
                 "bool_": "bool", "cfloat": "c64", "cdouble": "c128"})


def _numpy():
    """NumPy if it can be imported, else None (tests patch this)."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def dtype_name(dtype, what="dtype") -> str:
    """"f32", "bf16"...: a name of DTYPES, NumPy's or torch's name of one,
    or a NumPy / torch dtype object."""
    text = dtype if isinstance(dtype, str) else str(dtype)
    if text.startswith("torch."):
        text = text[len("torch."):]
    if text.startswith("<class 'numpy."):  # np.float32, the type itself
        text = text[len("<class 'numpy."):-2]
    name = text if text in DTYPES else _ALIASES.get(text)
    if name is None:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"{what} {dtype!r} is not one of {', '.join(DTYPES)} "
                            "(or NumPy's / torch's name of one)")
    return name


def itemsize(dtype: Optional[str]) -> int:
    return 1 if dtype is None else DTYPES[dtype][1] // 8


def _dlpack_dtype(code_bits_lanes, what):
    code, bits, lanes = code_bits_lanes
    name = _BY_DLPACK.get((code, bits))
    if name is None or lanes != 1:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"{what} has the DLPack dtype (code {code}, {bits} bits, "
                            f"{lanes} lanes), which tune cannot read as one of "
                            f"{', '.join(DTYPES)}: pass it as an (address, nbytes) pair "
                            "(raw bytes, compared exactly)")
    return name


class TuneOutput:
    """An output of fleetjit.tune with its element type and shape declared:
    `data` is a DeviceBuffer, an (address, nbytes) pair or a tensor; dtype
    one of DTYPES ("f32", "bf16", "i32"...; NumPy's and torch's names
    too); shape defaults to one dimension of nbytes / the element size."""

    def __init__(self, data, dtype=None, shape=None):
        self.data = data
        self.dtype = None if dtype is None else dtype_name(dtype, "TuneOutput's dtype")
        self.shape = None if shape is None else tuple(
            _integer(s, "TuneOutput's shape") for s in (
                shape if hasattr(shape, "__iter__") else (shape,)))

    def __repr__(self):
        return f"TuneOutput({self.data!r}, dtype={self.dtype!r}, shape={self.shape!r})"


@dataclass
class OutputSpec:
    """One output as the tuning reads it."""
    index: int
    name: object          # the mapping's key, else the index
    address: int
    nbytes: int
    dtype: Optional[str]  # None: raw bytes
    shape: Tuple[int, ...]
    keep: object = None   # a borrowed tensor, kept alive during the call

    @property
    def label(self):
        return (f"outputs[{self.index}]" if self.name == self.index
                else f"outputs[{self.name!r}]")


def _product(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def output_spec(value, index, name, device) -> OutputSpec:
    """An output of tune: a DeviceBuffer, an (address, nbytes) pair, a
    tensor (dtype and shape from it) or a TuneOutput."""
    what = f"outputs[{index}]" if name == index else f"outputs[{name!r}]"
    dtype = shape = None
    if isinstance(value, TuneOutput):
        dtype, shape, value = value.dtype, value.shape, value.data
    keep = None
    if hasattr(value, "device_address"):  # a DeviceBuffer
        address, nbytes = value.device_address, value.nbytes
    elif (_tensors.is_tensor_like(value) or type(value).__name__ == "PyCapsule"
          or isinstance(value, _args.Tensor)):
        obj = value.obj if isinstance(value, _args.Tensor) else value
        keep = _tensors.borrow(obj, device_id=device)
        if keep.device[0] not in _tensors.CUDA_DEVICE_TYPES:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"{what} is not in CUDA memory (DLPack device type "
                                f"{keep.device[0]}): outputs are device buffers the kernel "
                                "writes")
        t_shape = keep.shape
        if keep.strides is not None and not _args.c_contiguous(t_shape, keep.strides):
            raise FleetjitError("INVALID_ARGUMENT",
                                f"{what} is not contiguous (shape {t_shape}, strides "
                                f"{keep.strides}): outputs are saved and compared whole")
        t_dtype = _dlpack_dtype(keep.dtype, what)
        if dtype is not None and dtype != t_dtype:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"{what}: TuneOutput's dtype {dtype} differs from the "
                                f"tensor's, {t_dtype}")
        dtype = t_dtype
        shape = shape or t_shape
        address = keep.data_ptr
        nbytes = _product(t_shape) * itemsize(t_dtype)
    else:
        address, nbytes = _fields(value, ("address", "nbytes"), what)
    address = _unsigned(address, 64, f"{what}'s address")
    nbytes = _unsigned(nbytes, 64, f"{what}'s size")
    size = itemsize(dtype)
    if shape is None:
        if nbytes % size:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"{what}: {nbytes} bytes are not whole {dtype} elements")
        shape = (nbytes // size,)
    elif _product(shape) * size != nbytes:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"{what}: shape {shape} of {dtype or 'bytes'} is "
                            f"{_product(shape) * size} bytes, the buffer {nbytes}")
    return OutputSpec(index, name, address, nbytes, dtype, tuple(shape), keep)


def _bf16_to_f32_bits(h):
    return struct.unpack("<f", struct.pack("<I", h << 16))[0]


def decode(data: bytes, dtype: Optional[str]) -> list:
    """The elements of `data` as Python numbers, flat (no NumPy)."""
    if dtype is None:
        return list(data)
    code, bits, fmt, _ = DTYPES[dtype]
    if dtype == "bf16":
        return [_bf16_to_f32_bits(h) for (h,) in struct.iter_unpack("<H", data)]
    if code == _tensors.KDL_COMPLEX:
        return [complex(r, i) for r, i in struct.iter_unpack("<" + fmt * 2, data)]
    return [v for (v,) in struct.iter_unpack("<" + fmt, data)]


def to_numpy(data: bytes, dtype: Optional[str], shape, np):
    """A read-only array of `data` (bf16 widened to float32, exactly)."""
    if dtype is None:
        return np.frombuffer(data, np.uint8).reshape(shape)
    if dtype == "bf16":
        bits = np.frombuffer(data, "<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    return np.frombuffer(data, np.dtype(DTYPES[dtype][3]).newbyteorder("<")).reshape(shape)


def _nest(flat, shape):
    if len(shape) <= 1:
        return list(flat)
    step = _product(shape[1:])
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


class HostOutput:
    """A host copy of one output of one candidate, as a check sees it.

    name, index: which output (the mapping's key, else its index)
    dtype: "f32", "bf16"... or None for raw bytes; shape: a tuple
    data: the bytes; values(): the elements, flat, as Python numbers;
    tolist(): nested by shape; numpy() (or np.asarray(out)): an array
    (needs NumPy; bf16 is widened to float32, raw bytes are uint8).
    """

    __slots__ = ("name", "index", "dtype", "shape", "data")

    def __init__(self, spec: OutputSpec, data: bytes):
        self.name, self.index = spec.name, spec.index
        self.dtype, self.shape, self.data = spec.dtype, spec.shape, data

    def values(self) -> list:
        return decode(self.data, self.dtype)

    def tolist(self):
        flat = self.values()
        return flat[0] if self.shape == () else _nest(flat, self.shape)

    def numpy(self):
        np = _numpy()
        if np is None:
            raise ImportError("HostOutput.numpy() needs NumPy; values() and tolist() do not")
        return to_numpy(self.data, self.dtype, self.shape, np)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __len__(self):
        return self.shape[0] if self.shape else 1

    def __repr__(self):
        return f"HostOutput({self.name!r}, dtype={self.dtype}, shape={self.shape})"


def reference_bytes(value, spec: OutputSpec, runtime, what) -> bytes:
    """The host bytes of a caller's reference for output `spec`: bytes, a
    NumPy array or anything with the buffer protocol, a DeviceBuffer, or a
    tensor (on the host or the device, through DLPack or
    __cuda_array_interface__). Its dtype, where it has one, must be the
    output's, and its size the output's."""
    have_dtype = None
    if hasattr(value, "device_address") and hasattr(value, "download"):  # a DeviceBuffer
        data = value.download()
    else:
        try:
            view = memoryview(value)
        except TypeError:
            view = None
        if view is not None:
            np = _numpy()
            if np is not None and isinstance(value, np.ndarray):
                have_dtype = dtype_name(value.dtype, f"{what}'s dtype")
                data = np.ascontiguousarray(value).tobytes()
            else:  # array.array, ...: its struct format says the dtype; bytes are raw
                have_dtype = _BY_FORMAT.get(view.format.lstrip("@=<"))
                data = view.tobytes()
        elif _tensors.is_tensor_like(value):
            t = _tensors.borrow(value)
            have_dtype = _dlpack_dtype(t.dtype, what)
            if t.strides is not None:
                if not _args.c_contiguous(t.shape, t.strides):
                    raise FleetjitError("INVALID_ARGUMENT",
                                        f"{what} is not contiguous: pass a contiguous copy")
            n = _product(t.shape) * itemsize(have_dtype)
            if t.device[0] in _tensors.CUDA_DEVICE_TYPES:
                dst = ctypes.create_string_buffer(max(n, 1))
                if n:
                    _call(runtime, lib().fj_memcpy_dtoh, dst, t.data_ptr, n, None)
                data = dst.raw[:n]
            else:
                data = ctypes.string_at(t.data_ptr, n) if n else b""
            t.close()
        else:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"{what} is a {type(value).__name__}: expected bytes, an "
                                "array, a DeviceBuffer or a tensor")
    if have_dtype is not None and spec.dtype is not None and have_dtype != spec.dtype:
        # bf16 has no NumPy dtype: a uint16 array of its bits is taken.
        if not (spec.dtype == "bf16" and have_dtype == "u16"):
            raise FleetjitError("INVALID_ARGUMENT",
                                f"{what} is {have_dtype}, the output {spec.dtype}")
    if len(data) != spec.nbytes:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"{what} holds {len(data)} bytes, {spec.label} {spec.nbytes}")
    return data


def _format_index(flat_index, shape):
    if len(shape) <= 1:
        return str(flat_index)
    out = []
    for s in reversed(shape):
        out.append(flat_index % s if s else 0)
        flat_index //= s if s else 1
    return str(tuple(reversed(out)))


class close:  # noqa: N801  (a lower-case factory-like name: check=fleetjit.close(...))
    """check=fleetjit.close(atol=..., rtol=...): a candidate is correct when
    every element of every output is within atol + rtol * |ref| of the
    reference (NumPy's isclose, ref the reference's element): the
    `reference=` given to tune, else the outputs of the first candidate
    that runs (put a trusted candidate first; it is taken as correct).

    Floating and complex outputs (f16, bf16, f32, f64, c64, c128) are
    compared with the tolerance; integer, bool and raw-byte outputs, and
    the outputs named in `exact` (their names, or indices for a list of
    outputs), byte for byte. equal_nan: a NaN where the reference has NaN
    passes (default True); infinities must match. atol and rtol may also be
    mappings from output name (or index) to a number, defaulting to 0.
    """

    def __init__(self, atol=0.0, rtol=0.0, *, exact=(), equal_nan=True):
        self.atol, self.rtol = atol, rtol
        for what, tol in (("atol", atol), ("rtol", rtol)):
            for v in (tol.values() if isinstance(tol, dict) else (tol,)):
                if not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0:
                    raise FleetjitError("INVALID_ARGUMENT",
                                        f"close(): {what} {v!r} is not a number >= 0")
        if isinstance(exact, (str, int)):
            exact = (exact,)
        self.exact = tuple(exact)
        self.equal_nan = bool(equal_nan)

    def __repr__(self):
        return (f"close(atol={self.atol!r}, rtol={self.rtol!r}, exact={self.exact!r}, "
                f"equal_nan={self.equal_nan})")

    def _tol(self, tol, spec):
        if isinstance(tol, dict):
            return float(tol.get(spec.name, tol.get(spec.index, 0.0)))
        return float(tol)

    def bind(self, specs):
        """Checks the names against the outputs; returns the per-output rule
        [(exact, atol, rtol)]."""
        names = {s.name for s in specs} | {s.index for s in specs}
        for n in self.exact:
            if n not in names:
                raise FleetjitError("INVALID_ARGUMENT",
                                    f"close(exact=...) names {n!r}, which is no output")
        for what, tol in (("atol", self.atol), ("rtol", self.rtol)):
            if isinstance(tol, dict):
                for n in tol:
                    if n not in names:
                        raise FleetjitError("INVALID_ARGUMENT",
                                            f"close({what}=...) names {n!r}, which is no "
                                            "output")
        rules = []
        for s in specs:
            exact = s.name in self.exact or s.index in self.exact or s.dtype not in FLOATING
            atol, rtol = self._tol(self.atol, s), self._tol(self.rtol, s)
            if s.dtype is None and (atol or rtol) and not (s.name in self.exact or
                                                           s.index in self.exact):
                raise FleetjitError(
                    "INVALID_ARGUMENT",
                    f"{s.label} has no dtype, so close() cannot apply a tolerance to it: "
                    "pass a tensor or fleetjit.TuneOutput(buffer, dtype='f32'), or name "
                    "it in exact=")
            rules.append((exact, atol, rtol))
        return rules

    def compare(self, spec, rule, got: bytes, ref: bytes) -> Optional[str]:
        """None when `got` matches `ref` under `rule`, else why not."""
        exact, atol, rtol = rule
        if exact:
            if got == ref:
                return None
            size = itemsize(spec.dtype)
            first = next(i for i in range(len(got)) if got[i] != ref[i]) // size
            g = decode(got[first * size:(first + 1) * size], spec.dtype)[0]
            r = decode(ref[first * size:(first + 1) * size], spec.dtype)[0]
            return (f"{spec.label} differs from the reference at element "
                    f"{_format_index(first, spec.shape)}: {g!r} != {r!r} (compared exactly)")
        np = _numpy()
        if np is not None:
            a = to_numpy(got, spec.dtype, (-1,), np)
            b = to_numpy(ref, spec.dtype, (-1,), np)
            with np.errstate(invalid="ignore", over="ignore"):
                ok = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=self.equal_nan)
            if ok.all():
                return None
            bad = np.flatnonzero(~ok)
            first, count = int(bad[0]), int(bad.size)
            g, r = a[first].item(), b[first].item()
        else:
            count, first, g, r = 0, None, None, None
            for i, (x, y) in enumerate(zip(decode(got, spec.dtype), decode(ref, spec.dtype))):
                if not self._close(x, y, atol, rtol):
                    count += 1
                    if first is None:
                        first, g, r = i, x, y
            if first is None:
                return None
        return (f"{spec.label}: {count} element(s) outside atol {atol:g} + rtol {rtol:g} "
                f"* |ref|; the first at {_format_index(first, spec.shape)}: {g!r} vs the "
                f"reference's {r!r}")

    def _close(self, x, y, atol, rtol):
        if isinstance(x, complex):
            nan_x = math.isnan(x.real) or math.isnan(x.imag)
            nan_y = math.isnan(y.real) or math.isnan(y.imag)
            inf = math.isinf(x.real) or math.isinf(x.imag) or math.isinf(y.real) or \
                math.isinf(y.imag)
        else:
            nan_x, nan_y = math.isnan(x), math.isnan(y)
            inf = math.isinf(x) or math.isinf(y)
        if nan_x or nan_y:
            return self.equal_nan and nan_x and nan_y
        if inf:
            return x == y
        return abs(x - y) <= atol + rtol * abs(y)
