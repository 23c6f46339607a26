"""The newcomer corpus's manifests (bench/corpus/README.md), read without a GPU.

run.py measures the corpus on the GPU host with this module; the tests
(tests/corpus/) check every manifest with it on any machine. Nothing here
imports torch or fleetjit.

    sets = corpus.find_sets([])                  # bench/corpus/set*/
    for m in corpus.load_sets(sets):             # Manifest, checked
        for size in m.sizes:
            p = corpus.resolve(m, size, sms=132)  # every expression evaluated

The expression language (shapes, bytes, grid, block, smem, scalars, box,
view, defines, init arguments) is the one tools/corpus_manifest.cc reads
in C++, with the same grammar and results: integers and decimal floats,
names, + - * / // % (Python's semantics: / is true division, // floors, %
takes the divisor's sign), unary + and -, parentheses, min(a, b, ...),
max(a, b, ...) and cdiv(a, b). Integers are 64-bit: a result outside
[-2^63, 2^63) is an error.
"""
import json
import math
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent  # bench/corpus

# dtype -> (bytes, kind): f float, i signed integer, u unsigned integer.
DTYPES = {
    "f32": (4, "f"), "f16": (2, "f"), "bf16": (2, "f"), "fp8e4m3": (1, "f"),
    "i8": (1, "i"), "u8": (1, "u"), "i32": (4, "i"), "i64": (8, "i"),
}
INITS = ("randn", "rand", "randint", "perm", "arange", "zeros")
ARG_KINDS = ("buffer", "tensor", "i32", "i64", "f32")
OOB = ("promise_in_bounds", "zeros", "nan")
SWIZZLE = (0, 32, 64, 128)
# Names an expression or the torch expression gives a meaning of their own.
RESERVED = ("sms", "torch", "F", "min", "max", "cdiv")
# Keys with free text, accepted on the manifest, a buffer, a launch and an arg.
FREE_KEYS = ("notes", "comment")

INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ManifestError(ValueError):
    """A manifest that cannot be run, with what and where."""


# ------------------------------------------------------------ expressions

_TOKEN = re.compile(r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>//|[-+*/%(),]))")


def _tokens(text):
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            at = len(text) - len(text[pos:].lstrip())
            raise ManifestError(f"unexpected {text[at]!r} at column {at + 1}")
        if m.group("num") is not None:
            s = m.group("num")
            out.append(("num", float(s) if any(c in s for c in ".eE") else int(s)))
        elif m.group("name") is not None:
            out.append(("name", m.group("name")))
        else:
            out.append(("op", m.group("op")))
        pos = m.end()
    out.append(("end", None))
    return out


def _check_int(v):
    if isinstance(v, int) and not INT_MIN <= v <= INT_MAX:
        raise ManifestError(f"{v} does not fit 64 bits")
    return v


def _floordiv(a, b):
    if b == 0:
        raise ManifestError("division by zero")
    if isinstance(a, int) and isinstance(b, int):
        return _check_int(a // b)
    return float(math.floor(a / b))


def _mod(a, b):
    if b == 0:
        raise ManifestError("modulo by zero")
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    r = math.fmod(a, b)
    if r != 0 and (r < 0) != (b < 0):
        r += b
    return float(r)


def _binary(op, a, b):
    if op == "+":
        return _check_int(a + b)
    if op == "-":
        return _check_int(a - b)
    if op == "*":
        return _check_int(a * b)
    if op == "/":
        if b == 0:
            raise ManifestError("division by zero")
        return a / b
    if op == "//":
        return _floordiv(a, b)
    return _mod(a, b)


class _Parser:
    def __init__(self, text, env):
        self.toks, self.i, self.env = _tokens(text), 0, env

    def peek(self):
        return self.toks[self.i]

    def take(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, op):
        t = self.take()
        if t != ("op", op):
            raise ManifestError(f"expected {op!r}, got {_show(t)}")

    def expr(self):
        v = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            v = _binary(self.take()[1], v, self.term())
        return v

    def term(self):
        v = self.unary()
        while self.peek()[0] == "op" and self.peek()[1] in ("*", "/", "//", "%"):
            v = _binary(self.take()[1], v, self.unary())
        return v

    def unary(self):
        if self.peek() == ("op", "-"):
            self.take()
            return _check_int(-self.unary())
        if self.peek() == ("op", "+"):
            self.take()
            return self.unary()
        return self.primary()

    def primary(self):
        kind, value = self.take()
        if kind == "num":
            return _check_int(value)
        if kind == "op" and value == "(":
            v = self.expr()
            self.expect(")")
            return v
        if kind == "name":
            if self.peek() == ("op", "("):
                return self.call(value)
            if value not in self.env:
                raise ManifestError(f"unknown name {value!r} (known: "
                                    f"{', '.join(sorted(self.env)) or 'none'})")
            return self.env[value]
        raise ManifestError(f"unexpected {_show((kind, value))}")

    def call(self, fn):
        if fn not in ("min", "max", "cdiv"):
            raise ManifestError(f"unknown function {fn!r} (min, max, cdiv)")
        self.expect("(")
        args = [self.expr()]
        while self.peek() == ("op", ","):
            self.take()
            args.append(self.expr())
        self.expect(")")
        if fn == "cdiv":
            if len(args) != 2:
                raise ManifestError(f"cdiv takes 2 arguments, not {len(args)}")
            return _check_int(-_floordiv(-args[0], args[1]))
        if len(args) < 2:
            raise ManifestError(f"{fn} takes 2 or more arguments")
        best = args[0]
        for a in args[1:]:
            if (a < best) if fn == "min" else (a > best):
                best = a
        return best


def _show(tok):
    return "the end" if tok[0] == "end" else repr(tok[1])


def evaluate(expr, env):
    """The value (int or float) of `expr`: a JSON number or an expression
    string over `env` (name -> number)."""
    if isinstance(expr, bool) or not isinstance(expr, (int, float, str)):
        raise ManifestError(f"{expr!r} is not a number or an expression")
    if isinstance(expr, (int, float)):
        return _check_int(expr)
    try:
        p = _Parser(expr, env)
        v = p.expr()
        if p.peek()[0] != "end":
            raise ManifestError(f"unexpected {_show(p.peek())} after the expression")
    except ManifestError as e:
        raise ManifestError(f"{expr!r}: {e}") from None
    return v


def evaluate_int(expr, env, what):
    v = evaluate(expr, env)
    if not isinstance(v, int):
        raise ManifestError(f"{what}: {expr!r} is {v!r}, not an integer (// divides integers)")
    return v


def parse_call(text):
    """('name', [argument texts]) of "name" or "name(a, b)" (an init)."""
    m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*", text)
    if m is None:
        raise ManifestError(f"{text!r} is not NAME or NAME(ARGS)")
    args, depth, cur = [], 0, ""
    for c in m.group(2) or "":
        if c == "," and depth == 0:
            args.append(cur)
            cur = ""
            continue
        depth += (c == "(") - (c == ")")
        cur += c
    if m.group(2) is not None:
        args.append(cur)
    return m.group(1), [a.strip() for a in args]


def define_text(v):
    """A define's value as -DNAME=<text>: integers as they are, floats as
    Python's repr (the shortest text that reads back the same)."""
    return str(v) if isinstance(v, int) else repr(float(v))


# --------------------------------------------------------------- manifests

class Manifest:
    """One kernel's manifest, checked for shape (keys and types); resolve()
    checks its values for one size."""

    def __init__(self, path, data):
        self.path = pathlib.Path(path)
        self.dir = self.path.parent
        self.set = self.dir.name
        self.data = data
        self.name = data["name"]
        self.what = data.get("what", "")
        self.sizes = [(s["label"], dict(s["vars"])) for s in data["sizes"]]
        self.buffers = data["buffers"]
        self.torch = data["torch"]
        self.layer = data["layer"]
        self.plain = data["plain"]

    @property
    def id(self):
        return f"{self.set}/{self.name}"


def _keys(obj, where, required, optional=()):
    if not isinstance(obj, dict):
        raise ManifestError(f"{where}: an object is needed, not {type(obj).__name__}")
    for k in required:
        if k not in obj:
            raise ManifestError(f"{where}: '{k}' is missing")
    for k in obj:
        if k not in required and k not in optional and k not in FREE_KEYS and not k.startswith("_"):
            raise ManifestError(f"{where}: unknown key '{k}' (known: "
                                f"{', '.join(list(required) + list(optional))})")


def _expr_ok(v, where):
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ManifestError(f"{where}: {v!r} is not a number or an expression string")


def _dims(v, where, lo=1, hi=3):
    """A list of lo..hi expressions, or one expression (a 1-element list)."""
    if not isinstance(v, list):
        v = [v]
    if not lo <= len(v) <= hi:
        raise ManifestError(f"{where}: {len(v)} entries (give {lo} to {hi})")
    for i, e in enumerate(v):
        _expr_ok(e, f"{where}[{i}]")
    return v


def _check_launch(launch, where, buffers, manifest_dir):
    _keys(launch, where, ("source", "kernel", "grid", "block", "args"), ("smem", "defines"))
    for k in ("source", "kernel"):
        if not isinstance(launch[k], str) or not launch[k]:
            raise ManifestError(f"{where}.{k}: a non-empty string is needed")
    if not (manifest_dir / launch["source"]).is_file():
        raise ManifestError(f"{where}.source: no file {launch['source']} beside the manifest")
    _dims(launch["grid"], f"{where}.grid")
    _dims(launch["block"], f"{where}.block")
    _expr_ok(launch.get("smem", 0), f"{where}.smem")
    defines = launch.get("defines", {})
    if not isinstance(defines, dict):
        raise ManifestError(f"{where}.defines: an object NAME -> EXPR is needed")
    for name, v in defines.items():
        if not _IDENT.match(name):
            raise ManifestError(f"{where}.defines: {name!r} is not a macro name")
        _expr_ok(v, f"{where}.defines.{name}")
    if not isinstance(launch["args"], list):
        raise ManifestError(f"{where}.args: a list is needed")
    for i, a in enumerate(launch["args"]):
        w = f"{where}.args[{i}]"
        if not isinstance(a, dict):
            raise ManifestError(f"{w}: an object is needed")
        kinds = [k for k in a if k in ARG_KINDS]
        if len(kinds) != 1:
            raise ManifestError(f"{w}: give exactly one of {', '.join(ARG_KINDS)} "
                                f"(has {', '.join(a) or 'nothing'})")
        kind = kinds[0]
        if kind == "tensor":
            _keys(a, w, ("tensor",), ("box", "oob", "swizzle", "view"))
        else:
            _keys(a, w, (kind,))
        if kind in ("buffer", "tensor"):
            if a[kind] not in buffers:
                raise ManifestError(f"{w}: no buffer {a[kind]!r}")
            if kind == "tensor":
                if a.get("oob", "promise_in_bounds") not in OOB:
                    raise ManifestError(f"{w}.oob: {a['oob']!r} is not one of {', '.join(OOB)}")
                if a.get("swizzle", 0) not in SWIZZLE:
                    raise ManifestError(f"{w}.swizzle: {a['swizzle']!r} is not 0, 32, 64 or 128")
                for k in ("box", "view"):
                    if k in a:
                        _dims(a[k], f"{w}.{k}", 1 if k == "view" else 0, 5)
        else:
            _expr_ok(a[kind], f"{w}.{kind}")


def check(data, path):
    """Checks the manifest's keys and types; returns a Manifest."""
    path = pathlib.Path(path)
    _keys(data, path.name, ("name", "sizes", "buffers", "bytes", "torch", "layer", "plain"),
          ("what",))
    if not isinstance(data["name"], str) or not _IDENT.match(data["name"]):
        raise ManifestError(f"name: {data['name']!r} is not a name (letters, digits, _)")
    if not isinstance(data["sizes"], list) or not data["sizes"]:
        raise ManifestError("sizes: a non-empty list is needed")
    labels = set()
    for i, s in enumerate(data["sizes"]):
        _keys(s, f"sizes[{i}]", ("label", "vars"))
        if not isinstance(s["label"], str) or s["label"] in labels:
            raise ManifestError(f"sizes[{i}].label: a string of its own is needed")
        labels.add(s["label"])
        if not isinstance(s["vars"], dict):
            raise ManifestError(f"sizes[{i}].vars: an object NAME -> number is needed")
        for k, v in s["vars"].items():
            if not _IDENT.match(k) or k in RESERVED or k in data["buffers"]:
                raise ManifestError(f"sizes[{i}].vars: {k!r} cannot be a variable's name "
                                    f"(an identifier, not {', '.join(RESERVED)} or a buffer)")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ManifestError(f"sizes[{i}].vars.{k}: {v!r} is not a number")
    bufs = data["buffers"]
    if not isinstance(bufs, dict) or not bufs:
        raise ManifestError("buffers: a non-empty object is needed")
    for name, b in bufs.items():
        w = f"buffers.{name}"
        if not _IDENT.match(name) or name in RESERVED:
            raise ManifestError(f"{w}: not a buffer name (an identifier, not "
                                f"{', '.join(RESERVED)})")
        _keys(b, w, ("dtype", "shape"), ("init", "output", "atol", "rtol"))
        if b["dtype"] not in DTYPES:
            raise ManifestError(f"{w}.dtype: {b['dtype']!r} is not one of {', '.join(DTYPES)}")
        _dims(b["shape"], f"{w}.shape", 0, 8)
        if not isinstance(b.get("output", False), bool):
            raise ManifestError(f"{w}.output: true or false")
        if not b.get("output", False):
            if "init" not in b:
                raise ManifestError(f"{w}: an input needs an init (or mark it \"output\": true)")
            for k in ("atol", "rtol"):
                if k in b:
                    raise ManifestError(f"{w}.{k}: only outputs are compared")
        for k in ("atol", "rtol"):
            v = b.get(k, 0)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise ManifestError(f"{w}.{k}: {v!r} is not a number >= 0")
        if "init" in b:
            if not isinstance(b["init"], str):
                raise ManifestError(f"{w}.init: a string is needed")
            fn, args = parse_call(b["init"])
            if fn not in INITS:
                raise ManifestError(f"{w}.init: {fn!r} is not one of {', '.join(INITS)}")
    _expr_ok(data["bytes"], "bytes")
    if not isinstance(data["torch"], str) or not data["torch"].strip():
        raise ManifestError("torch: a Python expression string is needed")
    try:
        compile(data["torch"], f"{path.name}:torch", "eval")
    except SyntaxError as e:
        raise ManifestError(f"torch: not a Python expression: {e.msg} (column {e.offset})") from None
    for side in ("layer", "plain"):
        _check_launch(data[side], side, bufs, path.parent)
    return Manifest(path, data)


def load(path):
    """The manifest at `path`, checked for shape; ManifestError names the
    file and what is wrong."""
    path = pathlib.Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(f"{path}: {e}") from None
    except json.JSONDecodeError as e:
        raise ManifestError(f"{path}: not JSON: {e}") from None
    try:
        return check(data, path)
    except ManifestError as e:
        raise ManifestError(f"{path}: {e}") from None


# ------------------------------------------------------- one size resolved

class Buffer:
    def __init__(self, name, dtype, shape, init, init_args, output, atol, rtol):
        self.name, self.dtype, self.shape = name, dtype, tuple(shape)
        self.init, self.init_args = init, tuple(init_args)  # init None: a pure output
        self.output, self.atol, self.rtol = output, atol, rtol
        self.numel = math.prod(self.shape)
        self.elem_bytes = DTYPES[dtype][0]
        self.nbytes = self.numel * self.elem_bytes

    @property
    def kind(self):
        return DTYPES[self.dtype][1]


class Arg:
    def __init__(self, kind, value=None, buffer=None, box=(), oob="promise_in_bounds",
                 swizzle=0, view=None):
        self.kind, self.value, self.buffer = kind, value, buffer
        self.box, self.oob, self.swizzle, self.view = tuple(box), oob, swizzle, view


class Launch:
    def __init__(self, source, kernel, grid, block, smem, defines, args):
        self.source, self.kernel = source, kernel  # source: a pathlib.Path
        self.grid, self.block, self.smem = grid, block, smem  # 3-tuples, int
        self.defines = defines  # ["-DNAME=VALUE", ...]
        self.args = args

    def build_key(self, target, impl):
        return (str(self.source), tuple(self.defines), target or "", impl or "")


class Problem:
    """A manifest at one size: every expression evaluated and checked."""

    def __init__(self, manifest, label, env, buffers, nbytes, layer, plain):
        self.manifest, self.label, self.env = manifest, label, env
        self.buffers, self.bytes, self.layer, self.plain = buffers, nbytes, layer, plain

    @property
    def outputs(self):
        return [b for b in self.buffers.values() if b.output]


def _fits(v, kind, bytes_):
    bits = 8 * bytes_
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if kind == "i" else (0, (1 << bits) - 1)
    return lo <= v <= hi


def _resolve_buffer(name, b, env):
    w = f"buffers.{name}"
    shape = [evaluate_int(e, env, f"{w}.shape[{i}]")
             for i, e in enumerate(b["shape"] if isinstance(b["shape"], list) else [b["shape"]])]
    for i, d in enumerate(shape):
        if d < 1:
            raise ManifestError(f"{w}.shape[{i}] is {d}: extents are >= 1")
    size, kind = DTYPES[b["dtype"]]
    init, init_args = None, []
    if "init" in b:
        init, texts = parse_call(b["init"])
        want = {"randint": 2, "perm": 1}.get(init, 0)
        if len(texts) != want:
            raise ManifestError(f"{w}.init: {init} takes {want} argument(s)")
        init_args = [evaluate_int(t, env, f"{w}.init") for t in texts]
        numel = math.prod(shape)
        if init in ("randn", "rand") and kind != "f":
            raise ManifestError(f"{w}.init: {init} fills floating-point buffers ({b['dtype']} is not)")
        if init in ("randint", "perm") and kind == "f":
            raise ManifestError(f"{w}.init: {init} fills integer buffers ({b['dtype']} is not)")
        if init == "randint":
            lo, hi = init_args
            if not (lo < hi and _fits(lo, kind, size) and _fits(hi - 1, kind, size)):
                raise ManifestError(f"{w}.init: randint({lo}, {hi}) is empty or does not fit "
                                    f"{b['dtype']}")
        if init == "perm":
            (n,) = init_args
            if n < numel or not _fits(n - 1, kind, size):
                raise ManifestError(f"{w}.init: perm({n}) must give {numel} distinct values "
                                    f"that fit {b['dtype']}")
        if init == "arange" and kind != "f" and not _fits(numel - 1, kind, size):
            raise ManifestError(f"{w}.init: arange up to {numel - 1} does not fit {b['dtype']}")
    return Buffer(name, b["dtype"], shape, init, init_args, bool(b.get("output", False)),
                  float(b.get("atol", 0)), float(b.get("rtol", 0)))


def _dim3(v, env, where, limits):
    vals = [evaluate_int(e, env, f"{where}[{i}]")
            for i, e in enumerate(v if isinstance(v, list) else [v])]
    for i, x in enumerate(vals):
        if not 1 <= x <= limits[i]:
            raise ManifestError(f"{where}[{i}] is {x} (1..{limits[i]})")
    return tuple(vals + [1] * (3 - len(vals)))


def _resolve_launch(launch, where, env, buffers, manifest_dir):
    grid = _dim3(launch["grid"], env, f"{where}.grid", (2**31 - 1, 65535, 65535))
    block = _dim3(launch["block"], env, f"{where}.block", (1024, 1024, 64))
    if math.prod(block) > 1024:
        raise ManifestError(f"{where}.block: {math.prod(block)} threads (1024 at most)")
    smem = evaluate_int(launch.get("smem", 0), env, f"{where}.smem")
    if not 0 <= smem < 2**32:
        raise ManifestError(f"{where}.smem is {smem}")
    defines = [f"-D{k}={define_text(evaluate(v, env))}"
               for k, v in launch.get("defines", {}).items()]
    args = []
    for i, a in enumerate(launch["args"]):
        w = f"{where}.args[{i}]"
        if "buffer" in a:
            args.append(Arg("buffer", buffer=a["buffer"]))
        elif "tensor" in a:
            b = buffers[a["tensor"]]
            shape = b.shape
            view = None
            if "view" in a:
                view = tuple(evaluate_int(e, env, f"{w}.view[{j}]")
                             for j, e in enumerate(a["view"] if isinstance(a["view"], list)
                                                   else [a["view"]]))
                if any(d < 1 for d in view) or math.prod(view) != b.numel:
                    raise ManifestError(f"{w}.view: {list(view)} does not hold the "
                                        f"{b.numel} elements of {b.name} {list(b.shape)}")
                shape = view
            if not 1 <= len(shape) <= 5:
                raise ManifestError(f"{w}: a tensor has 1 to 5 dimensions ({b.name}: {len(shape)})")
            box_src = a.get("box", [])
            box = tuple(evaluate_int(e, env, f"{w}.box[{j}]")
                        for j, e in enumerate(box_src if isinstance(box_src, list) else [box_src]))
            if len(box) > len(shape):
                raise ManifestError(f"{w}.box: {len(box)} extents for a {len(shape)}-D tensor "
                                    "(outermost-first, like the shape)")
            oob = a.get("oob", "promise_in_bounds")
            for j, x in enumerate(box):
                if not 0 <= x < 2**32:
                    raise ManifestError(f"{w}.box[{j}] is {x}")
                if oob == "promise_in_bounds" and x > shape[j]:
                    raise ManifestError(f"{w}.box[{j}] is {x}, past the extent {shape[j]} "
                                        "(oob promise_in_bounds)")
            if oob == "nan" and b.kind != "f":
                raise ManifestError(f"{w}.oob: nan fill needs a floating-point tensor")
            args.append(Arg("tensor", buffer=b.name, box=box, oob=oob,
                            swizzle=a.get("swizzle", 0), view=view))
        else:
            kind = next(k for k in ("i32", "i64", "f32") if k in a)
            v = evaluate(a[kind], env)
            if kind == "f32":
                v = float(v)
                if not math.isfinite(v) or abs(v) > 3.4028234663852886e38:
                    raise ManifestError(f"{w}: {a[kind]!r} is {v}, not a finite f32")
            else:
                if not isinstance(v, int):
                    raise ManifestError(f"{w}: {a[kind]!r} is {v!r}, not an integer")
                if kind == "i32" and not -2**31 <= v < 2**31:
                    raise ManifestError(f"{w}: {v} does not fit i32")
            args.append(Arg(kind, value=v))
    return Launch(manifest_dir / launch["source"], launch["kernel"], grid, block, smem,
                  defines, args)


def resolve(m, size, sms):
    """The Problem of manifest `m` at `size` (a (label, vars) pair of
    m.sizes) on a device of `sms` SMs."""
    label, vars_ = size
    env = dict(vars_)
    env["sms"] = sms
    try:
        buffers = {n: _resolve_buffer(n, b, env) for n, b in m.buffers.items()}
        nbytes = evaluate_int(m.data["bytes"], env, "bytes")
        if nbytes < 2:
            raise ManifestError(f"bytes is {nbytes}")
        layer = _resolve_launch(m.layer, "layer", env, buffers, m.dir)
        plain = _resolve_launch(m.plain, "plain", env, buffers, m.dir)
    except ManifestError as e:
        raise ManifestError(f"{m.path} (size {label!r}): {e}") from None
    return Problem(m, label, env, buffers, nbytes, layer, plain)


def validate(m, sms_values=(132,)):
    """Resolves every size of `m` for each SM count; ManifestError on the
    first problem."""
    for sms in sms_values:
        for size in m.sizes:
            resolve(m, size, sms)


# --------------------------------------------------------------- the sets

def find_sets(dirs=()):
    """The set folders to run: each of `dirs` that holds *.json is a set; any
    other is a corpus root whose set*/ subfolders are the sets. No dirs: the
    sets of bench/corpus."""
    out = []
    for d in (dirs or [ROOT]):
        d = pathlib.Path(d)
        if not d.is_dir():
            raise ManifestError(f"{d}: no such folder")
        if any(d.glob("*.json")):
            out.append(d)
        else:
            out.extend(sorted(p for p in d.iterdir() if p.is_dir() and p.name.startswith("set")))
    return out


def load_sets(sets):
    """Every manifest of the set folders, checked for shape (not resolved),
    in folder and name order."""
    return [load(p) for d in sets for p in sorted(pathlib.Path(d).glob("*.json"))]


if __name__ == "__main__":  # python3 bench/corpus/corpus.py [DIR...]: checks the manifests
    import sys
    try:
        ms = load_sets(find_sets(sys.argv[1:]))
        for m in ms:
            validate(m)
            print(f"{m.id}: {len(m.sizes)} size(s) OK")
    except ManifestError as e:
        print(f"corpus: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"{len(ms)} manifest(s) OK" if ms else "no manifests")
    sys.exit(0 if ms else 1)
