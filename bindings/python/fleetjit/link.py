"""Device linking (fj_module_link, since 1.3): several inputs into one module.

    import fleetjit
    from fleetjit import LinkInput
    with fleetjit.Runtime() as rt:
        mod = rt.link([LinkInput("source", KERNEL, name="kernel.cu"),
                       LinkInput("source", HELPERS, name="helpers.cu")],
                      target="sm_90")                  # no GPU needed
        k = mod.kernel("combine")                    # as for a built module

Inputs are CUDA sources (compiled by NVRTC with -dc, or -dlto with lto=True)
and prebuilt "cubin", "ptx", "fatbin", "ltoir" or "library" bytes.
devrt=True links the toolkit's libcudadevrt (dynamic parallelism). A link
error raises FleetjitError("BUILD_ERROR") whose .build_log (and
.details["link_log"]) is nvJitLink's log; a host without nvJitLink raises
FleetjitError("UNAVAILABLE") naming the library and where it was looked for.
"""

import ctypes
import os
from ctypes import c_void_p
from dataclasses import dataclass
from typing import Sequence, Union

from . import _ffi
from .errors import FleetjitError, _call, _no_nul, _ordinal, lib
from .runtime import Module, Runtime

# fj_link_input_kind, by name.
LINK_KINDS = _ffi.ENUMS["fj_link_input_kind"]
LINK_NO_CACHE, LINK_LTO, LINK_DEVRT = _ffi.FJ_LINK_NO_CACHE, _ffi.FJ_LINK_LTO, _ffi.FJ_LINK_DEVRT
fj_link_input, fj_link_options = _ffi.fj_link_input, _ffi.fj_link_options


@dataclass
class LinkInput:
    """One input: kind ("source", "cubin", "ptx", "fatbin", "ltoir",
    "library"), its text or bytes, a name for messages, and for a source its
    NVRTC options and name expressions."""
    kind: str
    data: Union[str, bytes]
    name: str = ""
    nvrtc_options: Sequence[str] = ()
    name_expressions: Sequence[str] = ()


def _fj_module_link():
    fj = lib()
    if not hasattr(fj, "fj_module_link"):
        raise FleetjitError("UNAVAILABLE",
                            "this libfleetjit.so.1 predates 1.3: it has no fj_module_link")
    return fj.fj_module_link


def _strings(items, what, path=False):
    """`items` as a list, each checked for an embedded NUL; a folder may be
    a str, bytes or os.PathLike (path=True)."""
    if isinstance(items, (str, bytes, os.PathLike)):
        raise FleetjitError("INVALID_ARGUMENT", f"{what} is a list of strings")
    items = [os.fspath(s) for s in items] if path else list(items)
    for s in items:
        _no_nul(s, what)
    return items


def link(runtime: Runtime, inputs: Sequence[LinkInput], *, name="", target=None,
         device=0, link_options=(), include_dirs=(), lto=False, devrt=False,
         cache=True) -> Module:
    """Links `inputs` into one module (or fetches it from the cache).

    target: "sm_XX[a]"; None = the runtime's target, else the live device
            `device`. A named target needs no GPU.
    """
    # Embedded NULs are refused here, as build refuses them: nvJitLink, NVRTC
    # and the driver read C strings. A source's NUL is the library's error.
    _no_nul(name, "name")
    _no_nul(target, "target")
    include_dirs = _strings(include_dirs, "include_dirs", path=True)
    link_options = _strings(link_options, "link_options")
    keep = []
    arr = (fj_link_input * max(len(inputs), 1))()
    for i, item in enumerate(inputs):
        if not isinstance(item, LinkInput):
            raise TypeError(f"inputs[{i}] is a {type(item).__name__}, not a "
                            "fleetjit.LinkInput")
        if item.kind not in LINK_KINDS:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"inputs[{i}].kind must be one of {sorted(LINK_KINDS)}")
        _no_nul(item.name, f"inputs[{i}].name")
        _strings(item.nvrtc_options, f"inputs[{i}].nvrtc_options")
        _strings(item.name_expressions, f"inputs[{i}].name_expressions")
        data = _ffi.bytes_arg(item.data, f"inputs[{i}].data")
        buf = ctypes.create_string_buffer(data, len(data) + 1)
        n = _ffi.StrArg(item.name, f"inputs[{i}].name")
        k1, opts, nopts = _ffi.str_array(item.nvrtc_options, f"inputs[{i}].nvrtc_options")
        k2, exprs, nexprs = _ffi.str_array(item.name_expressions,
                                           f"inputs[{i}].name_expressions")
        keep += [buf, n, k1, k2]
        e = arr[i]
        e.struct_size = ctypes.sizeof(fj_link_input)
        e.kind = LINK_KINDS[item.kind]
        e.name = n.value
        e.data = ctypes.cast(buf, c_void_p)
        e.size = len(data)
        e.nvrtc_options, e.num_nvrtc_options = opts, nopts
        e.name_expressions, e.num_name_expressions = exprs, nexprs
    o = _ffi.new(fj_link_options)
    o.inputs = ctypes.addressof(arr) if inputs else None
    o.num_inputs = len(inputs)
    names = [_ffi.StrArg(name, "name"), _ffi.StrArg(target, "target")]
    o.name, o.target = names[0].value, names[1].value
    o.device = _ordinal(device)
    k3, o.link_options, o.num_link_options = _ffi.str_array(link_options, "link_options")
    k4, o.include_dirs, o.num_include_dirs = _ffi.str_array(include_dirs, "include_dirs")
    o.flags = ((0 if cache else LINK_NO_CACHE) | (LINK_LTO if lto else 0) |
               (LINK_DEVRT if devrt else 0))
    out = c_void_p()
    _call(runtime, _fj_module_link(), ctypes.byref(o), ctypes.byref(out))
    del keep, names, k3, k4
    return Module(out.value, runtime)


Runtime.link = link
