#!/usr/bin/env python3
"""The newcomer corpus on the GPU: each kernel on <fleetjit/copy.cuh> ("layer")
next to its plain twin, torch's op and a D2D copy of the same bytes.

    PYTHONPATH=bindings/python FLEETJIT_LIBRARY=build/lib/libfleetjit.so.1 \\
        python3 bench/corpus/run.py [SET_DIR ...] [--check] [--json FILE]

For every manifest (bench/corpus/README.md) of the given set folders
(default: every bench/corpus/set*/), every size and every variant the GPU
has (on sm_90: tma, cp_async, sync natively and cp_async@compute_80, PTX
the driver compiles): builds the layer kernel and the plain twin with
fleetjit (all builds start at once, on the runtime's build threads),
fills the inputs per the manifest with torch (fresh random numbers each
run: --seed repeats one), poisons the outputs, runs each kernel once and
compares every output with the torch expression (atol/rtol), then times
the layer kernel, the plain twin, the torch expression and a copy of
bytes/2 (dst.copy_(src): a D2D cudaMemcpyAsync), each as the median of
--samples CUDA-event timings of --batch calls queued behind
torch.cuda._sleep (Python's launch cost hidden). GB/s = the manifest's
bytes / time, so a ratio to the copy is the fraction of the copy.

Prints one line per case as it finishes, then the table and per variant
the median layer/plain and the lowest case. --check: correctness only.
Exit status: 0 all right, 1 a case wrong or failed, 2 bad usage or a
manifest that cannot run, 3 no GPU (or no torch).
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import time
import warnings
import zlib

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parents[1] / "bindings" / "python"))

import corpus  # noqa: E402  (bench/corpus/corpus.py)

DEVICE_TYPE = "cuda"  # tests/corpus/ run main() on "cpu" with stand-ins
SLEEP_CYCLES = 20_000_000  # ~10 ms at 2 GHz: longer than queuing a batch of launches
NATIVE_IMPLS = ("tma", "cp_async", "sync")
TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16",
                "fp8e4m3": "float8_e4m3fn", "i8": "int8", "u8": "uint8",
                "i32": "int32", "i64": "int64"}


def log(*parts):
    print(*parts, flush=True)


# ------------------------------------------------------------- variants

class Variant:
    """A column of the table: a copy implementation and the target its
    builds are for (None: the device's own; "compute_80": PTX)."""

    def __init__(self, impl, target=None, extra=()):
        # extra: NAME=VALUE macros the layer kernel is built with (a layer
        # experiment measured beside the default in one run).
        self.impl, self.target, self.extra = impl, target, tuple(extra)

    @property
    def name(self):
        return (self.impl + (f"@{self.target}" if self.target else "") +
                "".join(f"+{e}" for e in self.extra))


def parse_variants(text):
    """Variants named as in `fleetjit matrix --variants`: tma,cp_async@compute_80,
    each optionally followed by +NAME=VALUE macros for the layer kernel
    (sync+FJ_SYNC_L2_FIRST=1)."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        head, *extra = part.split("+")
        impl, _, target = head.partition("@")
        if impl not in NATIVE_IMPLS:
            raise ValueError(f"unknown implementation in {part!r}: use tma, cp_async or sync")
        for e in extra:
            if not e or "=" not in e or not e.split("=")[0].isidentifier():
                raise ValueError(f"bad macro {e!r} in {part!r}: use +NAME=VALUE")
        out.append(Variant(impl, target or None, extra))
    return out


def device_variants(fleetjit, device_target, cc):
    """What the GPU has: each implementation its target plans natively, then
    cp_async@compute_80 on a device past sm_80 (PTX the driver compiles)."""
    out = []
    for impl in NATIVE_IMPLS:
        try:
            fleetjit.copy_plan(device_target, impl)
        except fleetjit.FleetjitError:
            continue
        out.append(Variant(impl))
    if cc > (8, 0):
        out.append(Variant("cp_async", "compute_80"))
    return out


# ------------------------------------------------------ torch-side helpers

def torch_dtype(torch, name):
    return getattr(torch, TORCH_DTYPES[name])


def make_buffer(torch, buf, device, gen):
    """A tensor for `buf` (a corpus.Buffer) filled per its init; a pure
    output is left empty (poisoned before each run)."""
    dt = torch_dtype(torch, buf.dtype)
    shape = buf.shape
    init, args = buf.init, buf.init_args
    if init is None:
        return torch.empty(shape, dtype=dt, device=device)
    if init in ("randn", "rand"):
        fn = torch.randn if init == "randn" else torch.rand
        wide = buf.dtype == "fp8e4m3"  # torch draws fp8 through f32
        t = fn(shape, dtype=torch.float32 if wide else dt, device=device, generator=gen)
        return t.to(dt) if wide else t
    if init == "randint":
        return torch.randint(args[0], args[1], shape, dtype=dt, device=device, generator=gen)
    if init == "perm":
        p = torch.randperm(args[0], device=device, generator=gen)[:buf.numel]
        return p.to(dt).reshape(shape).contiguous()
    if init == "arange":
        wide = torch.int64 if buf.kind != "f" else torch.float64
        return torch.arange(buf.numel, dtype=wide, device=device).to(dt).reshape(shape)
    return torch.zeros(shape, dtype=dt, device=device)


def poison(torch, t, kind):
    """NaN bytes (0xFF) in a floating-point buffer, 0x7F bytes in an integer
    one: what a kernel leaves unwritten then fails the comparison."""
    t.view(-1).view(torch.uint8).fill_(0xFF if kind == "f" else 0x7F)


def compare(torch, name, got, want, buf, chunk=1 << 26):
    """None when `got` (the kernel's output) matches `want` (torch's) within
    |got - want| <= atol + rtol * |want| (NaN matches NaN; exact for integer
    outputs with atol = rtol = 0), else what differs, in words."""
    if not torch.is_tensor(want):
        return f"{name}: the torch expression gives {type(want).__name__}, not a tensor"
    if want.numel() != got.numel():
        return f"{name}: the torch expression gives shape {list(want.shape)}, the buffer is {list(got.shape)}"
    g, w = got.reshape(-1), want.reshape(-1).to(got.device)
    exact = buf.kind != "f" and buf.atol == 0 and buf.rtol == 0
    bad, first = 0, None
    for s in range(0, g.numel(), chunk):
        gs, ws = g[s:s + chunk], w[s:s + chunk]
        if exact:
            ok = gs.to(torch.int64) == ws.to(torch.int64)
        else:
            wide = torch.float64 if buf.dtype in ("f32", "i32", "i64") else torch.float32
            ok = torch.isclose(gs.to(wide), ws.to(wide), rtol=buf.rtol, atol=buf.atol,
                               equal_nan=True)
        n = int((~ok).sum())
        if n and first is None:
            first = s + int((~ok).nonzero()[0])
        bad += n
    if not bad:
        return None
    idx, rest = [], first
    for d in reversed(buf.shape):
        idx.append(rest % d)
        rest //= d
    idx = ",".join(str(i) for i in reversed(idx))
    def show(t):
        return t.to(torch.float64).item() if buf.kind == "f" else t.item()
    return (f"{name}[{idx}] = {show(g[first])!r}, torch {show(w[first])!r} "
            f"({bad} of {g.numel()} differ; atol {buf.atol:g}, rtol {buf.rtol:g})")


def gpu_ms(torch, fn, samples, batch):
    """Median GPU ms of one call of fn: CUDA events around `batch` calls
    queued behind torch.cuda._sleep, `samples` times, after 3 warm-ups."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    sleep = getattr(torch.cuda, "_sleep", None)
    for _ in range(samples):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        if sleep is not None:
            sleep(SLEEP_CYCLES)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / batch)
    return statistics.median(out)


def launch_args(fleetjit, launch, tensors):
    """The fleetjit arguments of a corpus.Launch over the buffers' tensors."""
    out = []
    for a in launch.args:
        if a.kind == "buffer":
            out.append(tensors[a.buffer])
        elif a.kind == "tensor":
            t = tensors[a.buffer]
            if a.view is not None:
                t = t.view(a.view)
            out.append(fleetjit.Tensor(t, box=a.box or None, oob=a.oob, swizzle=a.swizzle))
        else:
            out.append(getattr(fleetjit, a.kind)(a.value))
    return out


# ----------------------------------------------------------------- builds

class Builds:
    """Every module the run needs, started at once on the runtime's build
    threads (fj_module_build_async); one build per distinct source, defines,
    target and implementation."""

    def __init__(self, rt):
        self.rt, self.futures, self.modules, self.started = rt, {}, {}, time.time()

    def start(self, launch, target, impl, extra=()):
        key = launch.build_key(target, impl) + tuple(extra)
        if key not in self.futures:
            self.futures[key] = self.rt.build_async(
                launch.source.read_text(), name=launch.source.name, target=target,
                copy_impl=impl,
                nvrtc_options=list(launch.defines) + [f"-D{e}" for e in extra])
        return key

    def kernel(self, launch, target, impl, extra=()):
        """The launch's kernel, or raises the build's error."""
        key = self.start(launch, target, impl, extra)
        if key not in self.modules:
            self.modules[key] = self.futures[key].result()
        return self.modules[key].kernel(launch.kernel)


def build_error(e):
    log_text = getattr(e, "build_log", "") or ""
    tail = " | ".join(l for l in log_text.splitlines() if "error" in l)[:400]
    return f"{type(e).__name__}: {getattr(e, 'message', e)}" + (f" [{tail}]" if tail else "")


# -------------------------------------------------------------- the runs

class Case:
    """A manifest at one size on the GPU: its tensors, torch's expected
    outputs, the anchors."""

    def __init__(self, torch, problem, device, seed):
        self.torch, self.p = torch, problem
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        self.tensors = {n: make_buffer(torch, b, device, gen) for n, b in problem.buffers.items()}
        # In/out buffers (outputs with an init) start each checked run from
        # their first contents; torch's expression reads clones, so an
        # in-place torch op changes nothing the kernels read.
        self.pristine = {n: self.tensors[n].clone() for n, b in problem.buffers.items()
                         if b.output and b.init is not None}
        self.ref_env = {n: t.clone() for n, t in self.tensors.items()}
        m = problem.manifest
        self.code = compile(m.torch, f"{m.path.name}:torch", "eval")
        self.globals = {"torch": torch, "F": torch.nn.functional, **problem.env, **self.ref_env}
        want = self.torch_call()
        if not isinstance(want, dict):
            raise corpus.ManifestError(f"{m.path}: the torch expression gives "
                                       f"{type(want).__name__}, not a dict")
        outs = {b.name for b in problem.outputs}
        if set(want) != outs:
            raise corpus.ManifestError(
                f"{m.path}: the torch expression gives {sorted(want)}, the outputs are {sorted(outs)}")
        self.want = {k: v.clone() if torch.is_tensor(v) else v for k, v in want.items()}
        half = problem.bytes // 2
        self.copy_src = torch.empty(half, dtype=torch.uint8, device=device).fill_(0x5A)
        self.copy_dst = torch.empty_like(self.copy_src)

    def torch_call(self):
        return eval(self.code, self.globals)

    def prepare(self):
        """Outputs poisoned, in/out buffers restored, scratch re-zeroed."""
        for n, b in self.p.buffers.items():
            t = self.tensors[n]
            if b.output and b.init is None:
                poison(self.torch, t, b.kind)
            elif n in self.pristine:
                t.copy_(self.pristine[n])
            elif b.init == "zeros":
                t.zero_()

    def check(self, run):
        """Runs `run` once on prepared buffers: None, or what is wrong."""
        self.prepare()
        run()
        if self.copy_src.is_cuda:
            self.torch.cuda.synchronize()
        errors = [compare(self.torch, b.name, self.tensors[b.name], self.want[b.name], b)
                  for b in self.p.outputs]
        errors = [e for e in errors if e]
        return "; ".join(errors) or None

    def free(self):
        self.tensors = self.pristine = self.ref_env = self.want = self.globals = None
        self.copy_src = self.copy_dst = None


def runner(fleetjit, kernel, launch, tensors, stream):
    args = launch_args(fleetjit, launch, tensors)
    grid, block, smem = launch.grid, launch.block, launch.smem

    def run():
        kernel.launch(grid=grid, block=block, args=args, stream=stream, shared_bytes=smem)
    return run


def gbps(nbytes, ms):
    return nbytes / (ms * 1e6) if ms and ms > 0 else 0.0


def ratio(a, b):
    return a / b if a and b else 0.0


def fmt_row(r):
    if r.get("layer_gbps") is None:
        return f"{r['kernel']:<28} {r['size']:<22} {r['impl']:<20} {r['verified']}"
    return (f"{r['kernel']:<28} {r['size']:<22} {r['impl']:<20} "
            f"{r['layer_gbps']:8.1f} {r['plain_gbps']:8.1f} {r['torch_gbps']:8.1f} "
            f"{r['copy_gbps']:8.1f} {r['layer_over_plain']:7.3f} {r['layer_over_copy']:7.3f} "
            f"{r['plain_over_copy']:7.3f} {r['torch_over_copy']:7.3f}  {r['verified']}")


HEADER = (f"{'kernel':<28} {'size':<22} {'impl':<20} {'layer':>8} {'plain':>8} {'torch':>8} "
          f"{'copy':>8} {'l/plain':>7} {'l/copy':>7} {'p/copy':>7} {'t/copy':>7}  verified\n"
          f"{'':<72} {'(GB/s of the manifest bytes)':>35}")


def summary(rows, variants):
    """Lines: per variant the median layer/plain and its lowest case."""
    lines = []
    for v in variants:
        rs = [r for r in rows if r["impl"] == v.name and r.get("layer_over_plain")]
        if not rs:
            continue
        med = statistics.median(r["layer_over_plain"] for r in rs)
        low = min(rs, key=lambda r: r["layer_over_plain"])
        lines.append(f"{v.name:<20} layer/plain median {med:.3f} over {len(rs)} case(s); "
                     f"lowest {low['layer_over_plain']:.3f} ({low['kernel']}, {low['size']})")
    rs = [r for r in rows if r.get("layer_over_plain")]
    if rs:
        low = min(rs, key=lambda r: r["layer_over_plain"])
        lines.append(f"{'all':<20} layer/plain median "
                     f"{statistics.median(r['layer_over_plain'] for r in rs):.3f} over "
                     f"{len(rs)} case(s); lowest {low['layer_over_plain']:.3f} "
                     f"({low['kernel']}, {low['size']}, {low['impl']})")
    return lines


def against_base(rows, variants, margin=0.02):
    """Lines: each variant with macros (impl+NAME=VALUE) against its bare
    implementation, case by case (same kernel and size, both timed in this
    run): the median change of layer/plain, and the cases that gained or
    lost more than `margin`, the largest of each named. What a default
    change needs to know: where a macro helps and what it costs."""
    by = {}
    for r in rows:
        if r.get("layer_over_plain"):
            by[(r["impl"], r["kernel"], r["size"])] = r["layer_over_plain"]
    lines = []
    for v in variants:
        if not v.extra:
            continue
        base = Variant(v.impl, v.target).name
        d = [(by[(v.name, k, s)] - x, k, s) for (i, k, s), x in by.items()
             if i == base and (v.name, k, s) in by]
        if not d:
            continue
        up = sorted((e for e in d if e[0] > margin), reverse=True)
        down = sorted(e for e in d if e[0] < -margin)
        line = (f"{v.name} vs {base}: median change {statistics.median(e[0] for e in d):+.3f} "
                f"over {len(d)} case(s); {len(up)} gained > {margin}, {len(down)} lost > {margin}")
        if up:
            line += f"; most gained {up[0][0]:+.3f} ({up[0][1]}, {up[0][2]})"
        if down:
            line += f"; most lost {down[0][0]:+.3f} ({down[0][1]}, {down[0][2]})"
        lines.append(line)
    return lines


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="The newcomer corpus (bench/corpus/README.md): layer kernel vs plain "
                    "twin vs torch vs a D2D copy, per copy implementation.")
    ap.add_argument("sets", nargs="*", help="set folders, or corpus roots holding set*/ "
                    "(default: every bench/corpus/set*/)")
    ap.add_argument("--check", action="store_true", help="correctness only (no timing)")
    ap.add_argument("--json", metavar="FILE", help="write every row (and the summary) as JSON")
    ap.add_argument("--variants", help="only these, e.g. tma,cp_async@compute_80 "
                    "(default: every implementation the GPU has, and cp_async@compute_80)")
    ap.add_argument("--filter", default="", help="only kernels whose set/name contains this")
    ap.add_argument("--samples", type=int, default=10, help="timings per figure (median)")
    ap.add_argument("--batch", type=int, default=10, help="calls per timing")
    ap.add_argument("--seed", type=int, help="the inputs' seed (default: a fresh one)")
    ap.add_argument("--device", type=int, default=0, help="the GPU (default 0)")
    a = ap.parse_args(argv)
    if a.samples < 1 or a.batch < 1:
        ap.error("--samples and --batch are >= 1")
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        manifests = corpus.load_sets(corpus.find_sets(a.sets))
        variants = parse_variants(a.variants) if a.variants else None
    except (corpus.ManifestError, ValueError) as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2
    manifests = [m for m in manifests if a.filter in m.id]
    if not manifests:
        if not a.sets and not a.filter:  # bench/corpus has no set yet
            print(f"run.py: no corpus sets under {corpus.ROOT} (set*/): nothing to run")
            return 0
        print("run.py: no manifests to run", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("run.py: torch is not installed", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("run.py: torch sees no GPU", file=sys.stderr)
        return 3
    import fleetjit
    device = torch.device(DEVICE_TYPE, a.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    rt = fleetjit.Runtime()
    dev = rt.device(a.device)
    sms = dev.sm_count
    if variants is None:
        variants = device_variants(fleetjit, dev.plan.target, dev.compute_capability)
    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little")
    log(f"corpus on GPU {a.device}: {dev.name} ({dev.plan.target}, {sms} SMs); "
        f"{len(manifests)} kernel(s); variants {', '.join(v.name for v in variants)}; "
        f"seed {seed}{'; correctness only' if a.check else ''}")
    try:
        problems = [(m, [corpus.resolve(m, s, sms) for s in m.sizes]) for m in manifests]
    except corpus.ManifestError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2
    builds = Builds(rt)
    for _, ps in problems:
        for p in ps:
            for v in variants:
                builds.start(p.layer, v.target, v.impl, v.extra)
                builds.start(p.plain, v.target, None)
    log(f"building {len(builds.futures)} module(s) in the background")
    stream = torch.cuda.current_stream()
    rows, total = [], sum(len(ps) for _, ps in problems) * len(variants)
    failed = 0
    for m, ps in problems:
        for k, p in enumerate(ps):
            try:
                case = Case(torch, p, device, (seed + 7919 * k + zlib.crc32(m.id.encode())) % 2**63)
            except corpus.ManifestError as e:
                print(f"run.py: {e}", file=sys.stderr)
                return 2
            except Exception as e:  # the torch expression raised, or memory ran out
                for v in variants:
                    rows.append({"kernel": m.id, "size": p.label, "impl": v.name,
                                 "bytes": p.bytes,
                                 "verified": f"torch: {type(e).__name__}: {e}"[:400]})
                    failed += 1
                    log(f"[{len(rows):>3}/{total}] {fmt_row(rows[-1])}")
                torch.cuda.empty_cache()
                continue
            # The anchors (copy, plain twin, torch) are timed once per size
            # and target, beside the first variant that needs them; each
            # variant's layer kernel is timed in the same run.
            anchors = {}
            for v in variants:
                row = {"kernel": m.id, "size": p.label, "impl": v.name, "bytes": p.bytes}
                verdict = []
                runs = {}
                for side, launch, impl in (("plain", p.plain, None), ("layer", p.layer, v.impl)):
                    try:
                        extra = v.extra if side == "layer" else ()
                        kern = builds.kernel(launch, v.target, impl, extra)
                        runs[side] = runner(fleetjit, kern, launch, case.tensors, stream)
                        info = kern.info
                        row[f"{side}_regs"] = info.num_regs
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", RuntimeWarning)  # bf16 as ushort*
                            err = case.check(runs[side])
                    except fleetjit.FleetjitError as e:
                        err = build_error(e)
                        runs.pop(side, None)
                    if err:
                        verdict.append(f"{side}: {err}")
                row["verified"] = "; ".join(verdict) or "ok"
                if verdict:
                    failed += 1
                if not a.check and len(runs) == 2:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)
                        if v.target not in anchors:
                            anchors[v.target] = {
                                "copy": gpu_ms(torch, lambda: case.copy_dst.copy_(case.copy_src),
                                               a.samples, a.batch),
                                "plain": gpu_ms(torch, runs["plain"], a.samples, a.batch),
                                "torch": gpu_ms(torch, case.torch_call, a.samples, a.batch)}
                        ms = dict(anchors[v.target],
                                  layer=gpu_ms(torch, runs["layer"], a.samples, a.batch))
                    for w in ("layer", "plain", "torch", "copy"):
                        row[f"{w}_us"] = ms[w] * 1e3
                        row[f"{w}_gbps"] = gbps(p.bytes, ms[w])
                    row["layer_over_plain"] = ratio(row["layer_gbps"], row["plain_gbps"])
                    for w in ("layer", "plain", "torch"):
                        row[f"{w}_over_copy"] = ratio(row[f"{w}_gbps"], row["copy_gbps"])
                rows.append(row)
                log(f"[{len(rows):>3}/{total}] {fmt_row(row)}")
            case.free()
            torch.cuda.empty_cache()
    log("\n" + HEADER)
    for r in rows:
        log(fmt_row(r))
    lines = summary(rows, variants) + against_base(rows, variants)
    log("")
    for line in lines:
        log(line)
    log(f"{len(rows) - failed} of {len(rows)} case(s) right" +
        (f"; WRONG or failed: {failed}" if failed else ""))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(
            {"device": dev.name, "target": dev.plan.target, "sms": sms, "seed": seed,
             "check_only": a.check, "variants": [v.name for v in variants],
             "rows": rows, "summary": lines}, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
