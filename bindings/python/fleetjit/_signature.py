"""The pointer and integer types of an extern "C" kernel's parameters, read
from its source.

The library checks every argument's kind and size, but a `T*` parameter is
just an address to it: a bf16 tensor passed where the kernel takes `float*`
launches. The binding reads the kernel's declaration in the source it built
(for extern "C" kernels named by their plain name) and warns when a
tensor's dtype differs from the pointee type. Unknown types (void*, structs,
vector types, templates) are not checked. Likewise an integer parameter
is only 4 or 8 bytes to the library; a float argument passed there is
refused here by the parameter's name (integer_params).
"""

import re

# Pointee C/CUDA type -> DLPack (code, bits) and the dtype's common name.
_POINTEE = {
    "float": (2, 32, "float32"), "double": (2, 64, "float64"),
    "half": (2, 16, "float16"), "__half": (2, 16, "float16"),
    "__nv_bfloat16": (4, 16, "bfloat16"), "nv_bfloat16": (4, 16, "bfloat16"),
    "int": (0, 32, "int32"), "int32_t": (0, 32, "int32"),
    "signed": (0, 32, "int32"),
    "long long": (0, 64, "int64"), "int64_t": (0, 64, "int64"),
    "short": (0, 16, "int16"), "int16_t": (0, 16, "int16"),
    "int8_t": (0, 8, "int8"), "signed char": (0, 8, "int8"),
    "unsigned char": (1, 8, "uint8"), "uint8_t": (1, 8, "uint8"),
    "unsigned short": (1, 16, "uint16"), "uint16_t": (1, 16, "uint16"),
    "unsigned": (1, 32, "uint32"), "unsigned int": (1, 32, "uint32"),
    "uint32_t": (1, 32, "uint32"),
    "unsigned long long": (1, 64, "uint64"), "uint64_t": (1, 64, "uint64"),
    "bool": (6, 8, "bool"),
}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict",
               "struct"}
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _split_top(text):
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def _pointee(param):
    """(code, bits, name, const) of a `T*` parameter's T (const: a
    `const T*`, which the kernel does not write through), or None."""
    param = param.strip()
    if param.count("*") != 1 or "(" in param or "[" in param:
        return None
    base = param.split("*")[0]
    words = [w for w in base.split() if w not in _QUALIFIERS]
    known = _POINTEE.get(" ".join(words))
    return None if known is None else known + ("const" in base.split(),)


def _declaration(source, name):
    """The parameter texts of the extern "C" kernel `name` in `source`;
    None when its declaration is not found or is not one plain declaration
    (templates, macros, overloads)."""
    if not isinstance(source, str) or not re.fullmatch(r"[A-Za-z_]\w*", name or ""):
        return None
    text = _COMMENTS.sub(" ", source)
    pattern = re.compile(
        r"extern\s+\"C\"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
        r"void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?" + re.escape(name) +
        r"\s*\(")
    found = list(pattern.finditer(text))
    if len(found) != 1:
        return None
    start = found[0].end()
    depth, end = 1, start
    while end < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    if depth:
        return None
    params = _split_top(text[start:end - 1])
    if len(params) == 1 and params[0].strip() in ("", "void"):
        return []
    return params


def pointer_dtypes(source, name):
    """Per parameter of the extern "C" kernel `name` in `source`: the
    (code, bits, dtype name, const) of a pointer parameter's pointee, or None.
    None (not a list) when the kernel's declaration is not found or is not
    one plain declaration (templates, macros, overloads)."""
    params = _declaration(source, name)
    return None if params is None else [_pointee(p) for p in params]


# Integer types a by-value parameter may be declared as: the words of C's
# own (any order: "unsigned long long", "long int") or one typedef.
_INTEGER_WORDS = {"signed", "unsigned", "int", "long", "short", "char", "bool",
                  "__int128"}
_INTEGER_TYPEDEFS = {f"{u}int{b}_t" for u in ("", "u") for b in (8, 16, 32, 64)} | {
    "size_t", "ssize_t", "ptrdiff_t", "intptr_t", "uintptr_t"}


def _integer_param(param):
    """(C type, name) of a by-value integer parameter ("int n" ->
    ("int", "n"); an unnamed one has name ""), else None."""
    if any(c in param for c in "*&[(=<"):
        return None
    words = [w for w in param.replace("std::", " ").replace("::", " ").split()
             if w not in _QUALIFIERS]
    if not words:
        return None
    pname = ""
    if len(words) > 1 and re.fullmatch(r"[A-Za-z_]\w*", words[-1]) and \
            words[-1] not in _INTEGER_WORDS:
        pname = words.pop()
    if len(words) == 1 and words[0] in _INTEGER_TYPEDEFS:
        return words[0], pname
    if words and all(w in _INTEGER_WORDS for w in words):
        return " ".join(words), pname
    return None


def integer_params(source, name):
    """Per parameter of the extern "C" kernel `name` in `source`: (C type,
    parameter name) of one declared as a by-value integer (int, unsigned,
    long long, int64_t, size_t...), else None. None (not a list) when the
    declaration is unknown, as for pointer_dtypes. The library knows such
    a parameter's size only (PTX does not say integer), so the binding
    refuses a float argument there: its bits would arrive as the integer."""
    params = _declaration(source, name)
    return None if params is None else [_integer_param(p) for p in params]
