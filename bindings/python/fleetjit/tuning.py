"""fj_tune: pick the fastest candidate build and launch shape of a kernel on
the live device, stored like a module (docs/tuning.md, "From Python").

    res = fleetjit.tune(rt, SOURCE, "tiled_axpy",
                        macro_sets=["-DTILE=1024", "-DTILE=4096"],
                        shapes=[128, 256, (512, 1, 1)],
                        grid_extent=(n,), grid_divisor=("TILE",),
                        args=[fleetjit.f32(2.0), x, y, fleetjit.i32(n)],
                        outputs=[y])
    best = res.best                  # rows[winner]: .macros, .block, .grid, .median_us

Beyond the C call's own rules, from Python:
- grid=callable(macros, block, shared_bytes) -> grid or None (fj_tune's
  grid_fn): None skips the candidate;
- shared=callable(macros, block) -> bytes, or {macro set: bytes}: dynamic
  shared memory per macro set (expanded into the C call's shapes);
- check=fleetjit.close(atol=..., rtol=..., exact=...), optionally with
  reference=[...], or check=callable(candidate, outputs) -> bool (fj_tune's
  check_fn).
An exception raised by one of these functions never crosses into C: the
candidate is skipped (grid) or refused (check), and tune raises
TuneCallbackError after the C call returns.
"""

import ctypes
import re
from ctypes import c_uint64, c_void_p
from dataclasses import dataclass, field, replace
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from . import _ffi, args as _args, tune_checks as _checks
from .errors import FleetjitError, _call, _fields, _no_nul, _unsigned
from .errors import check as _ok
from .tune_checks import HostOutput, TuneOutput, close  # noqa: F401  (re-exported)

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
    winner: int  # index into rows
    source: str  # "tuned", "memory", "disk", "remote"
    noisy: bool
    stored: bool
    tune_ms: float
    lookup_ms: float
    key: str
    # One per (macro set, shape) of the call, macro sets outermost, so row
    # i is macro set i // len(shapes), shape i % len(shapes).
    rows: List[TuneRow]
    # The C call's own table: with shared= it holds the expanded pairs too
    # (a shape made for another macro set, status "launch_refused",
    # message "(not a pair of this macro set: shared=)"); else rows.
    all_rows: List[TuneRow] = field(default_factory=list)

    @property
    def best(self) -> TuneRow:
        """rows[winner]."""
        return self.rows[self.winner]


class Macros(dict):
    """A candidate's macro set, as grid and shared functions receive it: a
    dict of NAME -> value for each -DNAME=VALUE (an int where VALUE is a
    decimal or 0x number, else the text; -DNAME alone is 1), with .text, the
    set as given in macro_sets ("" for none), and .index into macro_sets."""

    def __init__(self, text: str, index: int):
        super().__init__()
        self.text, self.index = text, index
        self.options = _split(text)
        for opt in self.options:
            if not opt.startswith("-D") or len(opt) == 2:
                continue
            name, eq, value = opt[2:].partition("=")
            self[name] = _macro_number(value) if eq else 1
            if self[name] is None:
                self[name] = value

    def __repr__(self):
        return f"Macros({self.text!r}, {dict(self)!r})"


@dataclass
class CallbackFailure:
    """An exception raised by a function tune called back."""
    where: str       # "grid" or "check"
    candidate: int   # index into the result's rows
    macros: str
    block: Tuple[int, int, int]
    exception: BaseException

    def __str__(self):
        return (f"candidate {self.candidate} ('{self.macros}', block "
                f"{'x'.join(map(str, self.block))}): {type(self.exception).__name__}: "
                f"{self.exception}")


class TuneCallbackError(Exception):
    """A grid or check function raised during fleetjit.tune. The C call ran
    to its end without the candidates concerned (skipped by grid, refused
    by check); this is raised after it.

    failures: every CallbackFailure, in the order raised
    result:   the TuneResult when the call still found a winner, else None
    error:    the FleetjitError of the C call when it failed, else None
    The first failure's exception is __cause__. A result found without
    some candidates may have been stored (result.stored): once the
    function is fixed, tune with retune=True."""

    def __init__(self, failures, result=None, error=None):
        self.failures, self.result, self.error = list(failures), result, error
        first = self.failures[0]
        wheres = sorted({f.where for f in self.failures})
        text = (f"the {' and '.join(wheres)} function raised for {len(self.failures)} "
                f"candidate(s); the first: {first}")
        if error is not None:
            text += f"; then fj_tune failed: {error}"
        elif result is not None and result.stored:
            text += ("; the result (without those candidates) was stored: tune with "
                     "retune=True once the function is fixed")
        super().__init__(text)


_SPLIT = re.compile(r"[ \t\n]+")


def _split(text: str) -> List[str]:
    """A macro set's options, split as the library splits them."""
    return [o for o in _SPLIT.split(text) if o]


def _macro_number(value: str) -> Optional[int]:
    """The library's reading of a macro's value: an unsigned decimal or 0x
    hex number below 2**64, else None."""
    if len(value) > 2 and value[0] == "0" and value[1] in "xX":
        digits, allowed, base = value[2:], "0123456789abcdefABCDEF", 16
    else:
        digits, allowed, base = value, "0123456789", 10
    if not digits or any(c not in allowed for c in digits):
        return None
    v = int(digits, base)
    return v if v < 1 << 64 else None


def _block3(block) -> Tuple[int, int, int]:
    """A block with 0 entries counted as 1, as the library launches it."""
    return tuple(d or 1 for d in block)


class _Skip(Exception):
    """A candidate the grid rule does not apply to (message: why)."""


def _rule_grid(fixed, extent, divisor, macros: Macros, block) -> Tuple[int, int, int]:
    """fj_tune's grid rules 2 and 3, for when the binding must pass a
    grid_fn itself (shared=): grid[i] = ceil(extent[i] / d) or fixed."""
    if not any(extent):
        return tuple(g or 1 for g in fixed)
    out = []
    for i in range(3):
        name = divisor[i]
        if name == "":
            d = 1
        elif name in ("block.x", "block.y", "block.z"):
            d = block["xyz".index(name[-1])] or 1
        else:
            prefix = f"-D{name}="
            hit = next((o for o in macros.options if o.startswith(prefix)), None)
            if hit is None:
                raise _Skip(f"grid divisor {i}: the macro set defines no {name} (-D{name}=N)")
            d = _macro_number(hit[len(prefix):])
            if d is None:
                raise _Skip(f"grid divisor {i}: macro {name} = '{hit[len(prefix):]}' is not "
                            "an unsigned integer")
        if d == 0:
            raise _Skip(f"grid divisor {i} ('{name}') is 0")
        e = extent[i] or 1
        blocks = -(-e // d)
        if blocks > 0xFFFFFFFF:
            raise _Skip(f"grid[{i}] = {blocks} does not fit 32 bits")
        out.append(blocks)
    return tuple(out)


def _shared_bytes(shared, macros: Macros, block) -> int:
    """The dynamic shared memory `shared` gives a macro set and block."""
    what = f"shared for macro set {macros.index} ('{macros.text}')"
    if isinstance(shared, Mapping):
        if macros.text not in shared:
            raise FleetjitError("INVALID_ARGUMENT",
                                f"shared has no entry for macro set {macros.index} "
                                f"('{macros.text}'): a mapping names every macro set")
        value = shared[macros.text]
    else:
        value = shared(macros, block)
    return _unsigned(value, 32, what)


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




def _outputs(outputs, device) -> List[_checks.OutputSpec]:
    """The output specs, from a sequence or a mapping of name -> output."""
    if isinstance(outputs, (str, bytes)):
        raise FleetjitError("INVALID_ARGUMENT", "outputs is a list (or a dict) of buffers")
    if isinstance(outputs, Mapping):
        items = list(outputs.items())
        return [_checks.output_spec(v, i, k, device) for i, (k, v) in enumerate(items)]
    return [_checks.output_spec(v, i, i, device) for i, v in enumerate(outputs)]


def _references(reference, specs, runtime) -> List[bytes]:
    """One host copy per output of the caller's reference."""
    if isinstance(reference, Mapping):
        out = []
        for s in specs:
            key = s.name if s.name in reference else s.index
            if key not in reference:
                raise FleetjitError("INVALID_ARGUMENT",
                                    f"reference has no entry for {s.label}")
            out.append(_checks.reference_bytes(reference[key], s, runtime,
                                               f"reference[{key!r}]"))
        return out
    if not isinstance(reference, (list, tuple)):
        raise FleetjitError("INVALID_ARGUMENT",
                            "reference is a list with one entry per output, or a dict "
                            "keyed like outputs")
    if len(reference) != len(specs):
        raise FleetjitError("INVALID_ARGUMENT",
                            f"reference has {len(reference)} entries for {len(specs)} "
                            "outputs")
    return [_checks.reference_bytes(r, s, runtime, f"reference[{s.index}]")
            for r, s in zip(reference, specs)]


class _Callbacks:
    """The grid_fn and check_fn of one fj_tune call: Python functions behind
    ctypes trampolines that never let an exception into C."""

    def __init__(self, macros: List[Macros], user_shapes, pair_of_c):
        self.macros = macros
        self.user_shapes = user_shapes    # [(block, smem, cluster)] as given
        self.pair_of_c = pair_of_c        # C candidate -> (macro, user shape) or None
        self.failures: List[CallbackFailure] = []
        self.fatal: Optional[BaseException] = None  # KeyboardInterrupt, SystemExit...
        self.notes = {}                   # user candidate index -> row message
        self.grid = None                  # (macros, block, smem) -> grid or None
        self.check = None                 # (user index, [bytes]) -> (ok, message)

    def user_index(self, m, s):
        return m * len(self.user_shapes) + s

    def _failed(self, where, c, exc):
        m, s = self.pair_of_c[c]
        u = self.user_index(m, s)
        self.failures.append(CallbackFailure(where, u, self.macros[m].text,
                                             _block3(self.user_shapes[s][0]), exc))
        self.notes[u] = f"the {where} function raised {type(exc).__name__}: {exc}"
        if not isinstance(exc, Exception):
            self.fatal = self.fatal or exc

    def grid_fn(self, _user, c, _macros, shape_ptr, out_grid):
        try:
            pair = self.pair_of_c[c]
            if pair is None:
                return 1  # a shape made for another macro set (shared=)
            if self.fatal is not None:
                return 1
            m, s = pair
            shape = _ffi.fj_tune_shape.from_address(shape_ptr)
            block = _block3(shape.block)
            try:
                grid = self.grid(self.macros[m], block, shape.shared_bytes)
            except _Skip as e:
                self.notes[self.user_index(m, s)] = str(e)
                return 1
            if grid is None:
                self.notes[self.user_index(m, s)] = "skipped: the grid function returned None"
                return 1
            if isinstance(grid, bool):
                raise TypeError("the grid function returned a bool, not a grid")
            dims = _dims(grid, 32, "the grid function's result")
            for i in range(3):
                out_grid[i] = dims[i]
            return 0
        except BaseException as e:  # noqa: B902  (nothing may cross into C)
            try:
                self._failed("grid", c, e)
            except BaseException:  # noqa: B902
                pass
            return 2

    def check_fn(self, _user, c, outputs, sizes, n):
        try:
            if self.fatal is not None:
                return 0
            m, s = self.pair_of_c[c]
            data = [ctypes.string_at(outputs[i], sizes[i]) for i in range(n)]
            ok, message = self.check(self.user_index(m, s), data)
            if not ok and message:
                self.notes[self.user_index(m, s)] = message
            return 1 if ok else 0
        except BaseException as e:  # noqa: B902
            try:
                self._failed("check", c, e)
            except BaseException:  # noqa: B902
                pass
            return 0


def _close_check(cmp: close, specs, references):
    """check(user index, [bytes]) comparing with `references` (None: the
    first candidate checked)."""
    rules = cmp.bind(specs)
    state = {"ref": references}

    def run(_index, data):
        if state["ref"] is None:
            state["ref"] = data
            return True, None
        for spec, rule, got, ref in zip(specs, rules, data, state["ref"]):
            why = cmp.compare(spec, rule, got, ref)
            if why is not None:
                return False, why
        return True, None
    return run


def _callable_check(fn, specs, as_mapping):
    def run(index, data):
        outs = [HostOutput(s, d) for s, d in zip(specs, data)]
        verdict = fn(index, {s.name: o for s, o in zip(specs, outs)} if as_mapping else outs)
        if verdict is None:
            raise TypeError("the check function returned None: return True or False")
        return bool(verdict), ("the check function returned False" if not verdict else None)
    return run


def tune(runtime, source: str, kernel: str, *, shapes: Sequence, args: Sequence,
         outputs=(), macro_sets: Sequence[str] = (), grid=None, grid_fn=None,
         grid_extent: Optional[Sequence[int]] = None,
         grid_divisor: Sequence[str] = ("", "", ""), shared=None, check=None,
         reference=None, name: str = "", device: int = 0,
         nvrtc_options: Sequence[str] = (), name_expressions: Sequence[str] = (),
         target=None, copy_impl=None, output=None, cache: bool = True,
         include_dirs: Sequence[str] = (), warmup: int = 0, samples: int = 0,
         noise_threshold: float = 0.0, timeout_ms: int = 0, retune: bool = False,
         store: bool = True) -> TuneResult:
    """Tunes `kernel` of `source` over macro_sets x shapes (see the module doc
    and docs/tuning.md, "From Python").

    The base build takes Runtime.build's options (name, device, target,
    copy_impl, nvrtc_options, name_expressions, output, cache, include_dirs),
    converted and checked by the same code as build; cache=False builds the
    candidates without the module cache (retune and store are the tuning
    result's own cache). The device is the one tuned on.

    shapes: each a block (256, (32, 8)), or a dict with "block",
      "shared_bytes" and "cluster".
    grid: a fixed grid, or a function grid(macros, block, shared_bytes)
      -> grid (an int or 1-3 ints) or None to skip the candidate, called
      per candidate on every call (cache hits included: the grids are in
      the key); macros is a Macros dict, block (x, y, z). grid_fn= is the
      same function by its C name. Else grid_extent / grid_divisor.
    shared: the dynamic shared memory per macro set: shared(macros, block)
      -> bytes, or a dict {macro set text: bytes}; the shapes then carry
      no shared_bytes of their own. The C call gets each distinct (block,
      bytes, cluster) once; the pairs it makes for another macro set are
      skipped and left out of `rows` (they are in `all_rows`).
    outputs: the buffers the kernel writes, a list or a dict name ->
      output, each a tensor (dtype and shape read from it), a
      DeviceBuffer, an (address, nbytes) pair, or TuneOutput(buf,
      dtype=, shape=): saved, checked and restored when the call returns.
    check: None compares the outputs byte for byte with the first
      candidate's that runs (the library's own check), or with
      `reference` when one is given (exactly, as close()); close(atol=,
      rtol=, exact=) with a tolerance; a function check(candidate,
      outputs) -> bool, outputs a list (a dict for a dict of outputs) of
      HostOutput, candidate the index into the result's rows.
    reference: the expected outputs (a list, or a dict keyed like
      outputs): host arrays, bytes, DeviceBuffers or tensors.
    An exception in a grid or check function: see TuneCallbackError.
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
    if grid_fn is not None:
        if grid is not None:
            raise FleetjitError("INVALID_ARGUMENT", "give grid or grid_fn, not both")
        if not callable(grid_fn):
            raise FleetjitError("INVALID_ARGUMENT", "grid_fn is a function")
        grid = grid_fn
    grid_function = grid if callable(grid) else None
    if grid_function is not None and grid_extent is not None:
        raise FleetjitError("INVALID_ARGUMENT",
                            "give a grid function or grid_extent, not both (the "
                            "function decides every grid)")
    if shared is not None and not (callable(shared) or isinstance(shared, Mapping)):
        raise FleetjitError("INVALID_ARGUMENT",
                            "shared is a function (macros, block) -> bytes or a dict "
                            "{macro set: bytes}")
    if check is not None and not (isinstance(check, close) or callable(check)):
        raise FleetjitError("INVALID_ARGUMENT",
                            "check is fleetjit.close(...) or a function (candidate, "
                            "outputs) -> bool")
    if reference is not None and check is not None and not isinstance(check, close):
        raise FleetjitError("INVALID_ARGUMENT",
                            "reference= goes with check=None or fleetjit.close(...); a "
                            "check function compares with its own reference")

    b, keep = runtime._build_options(source, name, target, device, copy_impl,
                                     nvrtc_options, name_expressions, output, cache,
                                     include_dirs)
    keep.append(_ffi.StrArg(kernel, "kernel name"))
    o = fj_tune_options()
    o.struct_size = ctypes.sizeof(o)
    o.build = ctypes.addressof(b)
    o.kernel = keep[-1].value
    k3, o.macro_sets, o.num_macro_sets = _ffi.str_array(macro_sets, "macro_sets")

    user_shapes = [_shape(s, f"shapes[{i}]") for i, s in enumerate(shapes)]
    macros = [Macros(t if isinstance(t, str) else bytes(t).decode(), i)
              for i, t in enumerate(macro_sets)] or [Macros("", 0)]
    if shared is None:
        c_shapes = user_shapes
        per_macro = [list(range(len(user_shapes))) for _ in macros]
    else:
        for i, (_, smem, _) in enumerate(user_shapes):
            if smem:
                raise FleetjitError("INVALID_ARGUMENT",
                                    f"shapes[{i}] has shared_bytes {smem} and shared= is "
                                    "given: one of them says how much dynamic shared "
                                    "memory a candidate has")
        index_of, c_shapes, per_macro = {}, [], []
        for m in macros:
            row = []
            for block, _, cluster in user_shapes:
                key = (block, _shared_bytes(shared, m, _block3(block)), cluster)
                if key not in index_of:
                    index_of[key] = len(c_shapes)
                    c_shapes.append(key)
                row.append(index_of[key])
            per_macro.append(row)
    # C candidate m * len(c_shapes) + cs -> (m, user shape) where that pair is one.
    pair_of_c = [None] * (len(macros) * len(c_shapes))
    for m, row in enumerate(per_macro):
        for s, cs in enumerate(row):
            pair_of_c[m * len(c_shapes) + cs] = (m, s)
    calls = _Callbacks(macros, user_shapes, pair_of_c)

    shape_arr = (fj_tune_shape * len(c_shapes))()
    for i, (block, smem, cluster) in enumerate(c_shapes):
        shape_arr[i].struct_size = ctypes.sizeof(fj_tune_shape)
        shape_arr[i].block[:] = block
        shape_arr[i].shared_bytes = smem
        shape_arr[i].cluster[:] = cluster
    o.shapes = ctypes.addressof(shape_arr) if len(c_shapes) else None
    o.num_shapes = len(c_shapes)
    fixed = (0, 0, 0)
    if grid is not None and grid_function is None:
        fixed = _dims(grid, 32, "grid")
        o.grid[:] = fixed
    extent = (0, 0, 0)
    if grid_extent is not None:
        extent = _dims(grid_extent, 64, "grid_extent")
        o.grid_extent[:] = extent
    padded = tuple(grid_divisor) + ("",) * (3 - len(grid_divisor))
    divisors = [_ffi.StrArg(d, "grid_divisor") for d in padded]
    for i in range(3):
        o.grid_divisor[i] = divisors[i].value
    grid_cb = None
    if grid_function is not None:
        calls.grid = grid_function
    elif shared is not None:  # the binding's grid_fn skips the other sets' pairs
        texts = [d if isinstance(d, str) else bytes(d).decode() for d in padded]
        calls.grid = lambda m, block, _smem: _rule_grid(fixed, extent, texts, m, block)
    if calls.grid is not None:
        grid_cb = _ffi.fj_tune_options_grid_fn(calls.grid_fn)
        o.grid_fn = grid_cb

    arg_keep, arg_arr, n = _args.build(args, device_id=device)
    o.args = ctypes.cast(arg_arr, c_void_p) if arg_arr is not None else None
    o.num_args = n
    specs = _outputs(outputs, device)
    addr_arr = (c_uint64 * max(1, len(specs)))(*[s.address for s in specs])
    size_arr = (c_uint64 * max(1, len(specs)))(*[s.nbytes for s in specs])
    o.output_addresses = addr_arr if specs else None
    o.output_bytes = size_arr if specs else None
    o.num_outputs = len(specs)
    check_cb = None
    if check is not None or reference is not None:
        if check is None or isinstance(check, close):
            refs = None if reference is None else _references(reference, specs, runtime)
            calls.check = _close_check(check or close(), specs, refs)
        else:
            calls.check = _callable_check(check, specs, isinstance(outputs, Mapping))
        check_cb = _ffi.fj_tune_options_check_fn(calls.check_fn)
        o.check_fn = check_cb
    o.warmup = _unsigned(warmup, 32, "warmup")
    o.samples = _unsigned(samples, 32, "samples")
    o.timeout_ms = _unsigned(timeout_ms, 32, "timeout_ms")
    o.noise_threshold = noise_threshold
    o.flags = (TUNE_NO_CACHE_READ if retune else 0) | (0 if store else TUNE_NO_CACHE_WRITE)
    handle = c_void_p()
    try:
        _call(runtime, lib.fj_tune, ctypes.byref(o), ctypes.byref(handle))
    except FleetjitError as e:
        if calls.fatal is not None:
            raise calls.fatal
        if calls.failures:
            raise TuneCallbackError(calls.failures, None, e) from calls.failures[0].exception
        if calls.notes:  # the library's rows say "refused"; the binding knows why
            why = "; ".join(f"candidate {u}: {note}" for u, note in sorted(calls.notes.items()))
            raise FleetjitError(e.code, f"{e.message} (from the binding: {why})", e.build_log,
                                e.details) from None
        raise
    finally:
        # The trampolines and everything the C call read, alive until here.
        del keep, k3, divisors, arg_keep, shape_arr, grid_cb, check_cb, specs
    try:
        s = fj_tune_summary()
        s.struct_size = ctypes.sizeof(s)
        _ok(lib.fj_tune_result_summary(handle, ctypes.byref(s)))
        all_rows = []
        for i in range(s.num_rows):
            r = fj_tune_row()
            r.struct_size = ctypes.sizeof(r)
            _ok(lib.fj_tune_result_row(handle, i, ctypes.byref(r)))
            all_rows.append(TuneRow(r.macro_index, r.shape_index, _text(r.macros),
                                    tuple(r.block), r.shared_bytes, tuple(r.cluster),
                                    tuple(r.grid), status_name(r.status), _text(r.message),
                                    r.median_us, r.min_us, r.spread, bool(r.noisy),
                                    r.samples, r.batch))
    finally:
        _ok(lib.fj_tune_result_free(handle))
    rows, user_of_c = [], {}
    for m, row in enumerate(per_macro):
        for su, cs in enumerate(row):
            c = m * len(c_shapes) + cs
            if c >= len(all_rows):
                continue
            user_of_c[c] = len(rows)
            r = replace(all_rows[c], shape_index=su)
            note = calls.notes.get(calls.user_index(m, su))
            if note is not None and r.status != "ok":
                r.message = note
            rows.append(r)
    for c, r in enumerate(all_rows):
        if pair_of_c[c] is None and r.status == "launch_refused":
            all_rows[c] = replace(r, message="(not a pair of this macro set: shared=)")
    result = TuneResult(user_of_c.get(s.winner, len(rows)),
                        CACHE_RESULTS.get(s.source, "unknown"), bool(s.noisy),
                        bool(s.stored), s.tune_ms, s.lookup_ms, s.key.decode(), rows,
                        all_rows if shared is not None else rows)
    if calls.fatal is not None:
        raise calls.fatal
    if calls.failures:
        raise TuneCallbackError(calls.failures, result) from calls.failures[0].exception
    return result
