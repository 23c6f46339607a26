#!/usr/bin/env python3
"""The reference kernels through the Python binding next to torch's op.

Run on the GPU host (needs torch; Triton is used where it is installed):

    PYTHONPATH=bindings/python FLEETJIT_LIBRARY=build/lib/libfleetjit.so.1 \\
        python3 bench/kernels_torch.py

In ONE process and on one stream, for each kernel of reference/reference_kernels.cc
(RMSNorm [8192, 4096] and [8191, 4000] bf16, softmax [8192, 4096] bf16,
transpose [5000, 4100] and [4097, 3001] f32): the fleetjit example
(examples/*.cu) under tma, cp_async, sync and cp_async@compute_80, torch's op
(F.rms_norm, torch.softmax, x.t().contiguous()), a Triton kernel written here
for the row kernels, and a D2D copy of the input's bytes (dst.copy_(src),
cudaMemcpyAsync). GPU time: CUDA events around N launches queued behind
torch.cuda._sleep, so Python's launch cost is hidden; median of the samples.
Every output is checked against torch's. Prints one table: kernel, impl,
fraction of the copy, ratio to torch (> 1: faster than torch).
"""
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bindings" / "python"))

SAMPLES = 10
BATCH = 10
SLEEP_CYCLES = 20_000_000  # ~10 ms at 2 GHz: longer than queuing BATCH launches

# The launch shapes reference/reference_kernels.cc sweeps: (threads, CTAs/SM, stages).
ROW_SHAPES = [(256, 1, 2), (128, 2, 2), (128, 3, 2), (64, 4, 3), (128, 4, 1), (256, 2, 1),
              (128, 5, 1), (128, 6, 1), (256, 3, 1), (64, 6, 2), (64, 8, 1), (64, 12, 1),
              (32, 16, 1), (32, 24, 1)]
TR_SHAPES = [(256, 2, 3), (256, 3, 2), (128, 3, 2), (256, 2, 4), (128, 4, 1), (256, 4, 1),
             (128, 6, 1), (128, 4, 2), (64, 8, 1), (128, 2, 4)]
# (threads, CTAs/SM, stages, defines): as the C++ table's shapes with defines (NAME=VALUE, space-separated).
SMX_EXTRA = [(t, c, st, "SMX_RVECS=16") for t, c, st in ((128, 3, 2), (128, 2, 2), (256, 1, 2), (128, 4, 1), (64, 6, 2))]
TR_EXTRA = ([(t, c, st, "FJ_FAST_UNROLL=4") for t, c, st in ((128, 4, 1), (128, 3, 2), (256, 2, 1))]
            + [(t, c, st, "TR_BOX=32") for t, c, st in ((64, 16, 2), (64, 24, 1), (64, 16, 3), (128, 12, 2),
                                                         (128, 8, 3), (32, 24, 1), (32, 24, 2))]
            + [(t, c, st, "FJ_NARROW_INLINE=1") for t, c, st in ((128, 4, 2), (128, 4, 1), (128, 6, 1))]
            + [(t, c, st, "TR_BOX=32 FJ_NARROW_INLINE=1") for t, c, st in ((64, 24, 1), (32, 24, 2), (64, 16, 2),
                                                                          (32, 24, 1))])
TR_EXTRA += [(128, 4, 1, "TR_L2AHEAD=1"), (128, 4, 1, "TR_L2AHEAD=1 FJ_NARROW_INLINE=1")]
RMS_EXTRA = ([(t, c, st, "RMS_L2AHEAD=1") for t, c, st in ((32, 24, 1), (32, 16, 1), (64, 12, 1), (64, 8, 1), (128, 4, 1))]
             + [(32, 24, 1, "RMS_L2AHEAD=2")])
SWEEP_SAMPLES = 3  # each shape briefly; the fastest is timed with SAMPLES
VARIANTS = [("tma", "tma", None), ("cp_async", "cp_async", None), ("sync", "sync", None),
            ("cp_async@compute_80", "cp_async", "compute_80")]
BOX = 64  # transpose tiles, as the C++ table (32 for the shapes defining TR_BOX=32)


def tr_box(define):
    return 32 if define and "TR_BOX=32" in define.split() else BOX


def r128(n):
    return (n + 127) & ~127


def gpu_ms(torch, fn, samples=SAMPLES):
    """Median GPU ms of one call of fn (events around BATCH queued calls)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(SLEEP_CYCLES)
        start.record()
        for _ in range(BATCH):
            fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / BATCH)
    return statistics.median(out)


def triton_kernels():
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def rms_kernel(x, w, y, cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        m = offs < cols
        v = tl.load(x + row * cols + offs, mask=m, other=0.0).to(tl.float32)
        r = tl.rsqrt(tl.sum(v * v, axis=0) / cols + eps)
        g = tl.load(w + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(y + row * cols + offs, (v * r * g).to(tl.bfloat16), mask=m)

    @triton.jit
    def softmax_kernel(x, y, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        m = offs < cols
        v = tl.load(x + row * cols + offs, mask=m, other=-float("inf")).to(tl.float32)
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(y + row * cols + offs, (e / tl.sum(e, axis=0)).to(tl.bfloat16), mask=m)

    return triton, rms_kernel, softmax_kernel


def torch_and_fleetjit(who):
    """(torch, fleetjit) on a host where torch sees a GPU, else None after
    saying why (`who` names the program)."""
    try:
        import torch
    except ImportError:
        print(f"{who}: torch is not installed")
        return None
    if not torch.cuda.is_available():
        print(f"{who}: torch sees no GPU")
        return None
    import fleetjit
    return torch, fleetjit


def gpu_session(who):
    """(torch, fleetjit, a fleetjit Runtime, the GPU's SM count, torch's
    current stream), or None after saying why there is no GPU."""
    got = torch_and_fleetjit(who)
    if got is None:
        return None
    torch, fleetjit = got
    return (torch, fleetjit, fleetjit.Runtime(),
            torch.cuda.get_device_properties(0).multi_processor_count, torch.cuda.current_stream())


def verdict(failures):
    """The exit status: 1 after naming each output that differed from
    torch's, else 0."""
    if failures:
        print("FAIL: " + ", ".join(failures))
        return 1
    print("PASS: every output matches torch's")
    return 0


def main():
    got = gpu_session("kernels_torch")
    if got is None:
        return 2
    torch, fleetjit, rt, sms, stream = got
    import torch.nn.functional as F

    dev = torch.cuda.get_device_properties(0)
    src = {n: (ROOT / "examples" / f"{n}.cu").read_text() for n in ("rmsnorm", "softmax", "transpose")}
    tri = triton_kernels()
    gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(__import__("os").urandom(4), "little"))
    rows_out = []
    failures = []

    def build(name, impl, target, macro, stages, define=None):
        m = rt.build(src[name], name=f"{name}.cu", copy_impl=impl, target=target,
                     nvrtc_options=[f"-D{macro}={stages}"] + [f"-D{d}" for d in (define or "").split()])
        return m.kernel(name)

    cases = []
    for rows, cols in ((8192, 4096), (8191, 4000)):
        cases.append(("rmsnorm", rows, cols))
    cases.append(("softmax", 8192, 4096))
    cases.append(("transpose", 5000, 4100))
    cases.append(("transpose", 4097, 3001))

    for kind, rows, cols in cases:
        if kind == "transpose":
            label = f"transpose [{rows}, {cols}] f32 " + ("aligned" if cols % 4 == 0 else "ragged")
            x = torch.randn(rows, cols, device="cuda", generator=gen) * 1000
            y = torch.empty(cols, rows, device="cuda")
            ref = x.t().contiguous()
            torch_fn = lambda: x.t().contiguous()  # noqa: E731
            torch_name = "x.t().contiguous()"
            args_of = {}
            for box in (32, BOX):
                tiles_x = -(-cols // box)
                args_of[box] = [fleetjit.Tensor(x, box=(box, box), oob="zeros"),
                                fleetjit.Tensor(y, box=(box, box), oob="zeros"),
                                fleetjit.i32(tiles_x), fleetjit.i32(tiles_x * -(-rows // box))]
            shapes, macro = [sh + (None,) for sh in TR_SHAPES] + TR_EXTRA, "TR_STAGES"
            # TR_OUTS out tiles: two under tma, one under cp_async and sync.
            smem = lambda t, st, impl, d=None: (128 + (st + (2 if impl == "tma" else 1))  # noqa: E731
                                                * tr_box(d) ** 2 * 4)
            tri_fn = None
        else:
            label = f"{kind} [{rows}, {cols}] bf16"
            x = torch.rand(rows, cols, device="cuda", generator=gen, dtype=torch.float32)
            x = ((x * 4 - 2) if kind == "rmsnorm" else (x * 16 - 8)).to(torch.bfloat16)
            y = torch.empty_like(x)
            if kind == "rmsnorm":
                w = (torch.rand(cols, device="cuda", generator=gen) + 0.5).to(torch.bfloat16)
                eps = 1e-6
                torch_fn = lambda: F.rms_norm(x, (cols,), w, eps)  # noqa: E731
                torch_name = "F.rms_norm"
                args = [x, w, y, fleetjit.i32(rows), fleetjit.i32(cols), fleetjit.f32(eps)]
                macro = "RMS_STAGES"
                smem = lambda t, st, impl, d=None: 128 + r128(2 * cols) + st * r128(2 * cols * (t // 32))  # noqa: E731
                if tri is not None:
                    blk = tri[0].next_power_of_2(cols)
                    tri_fn = lambda: tri[1][(rows,)](x, w, y, cols, eps, BLOCK=blk)  # noqa: E731
            else:
                torch_fn = lambda: torch.softmax(x, -1)  # noqa: E731
                torch_name = "torch.softmax"
                args = [x, y, fleetjit.i32(rows), fleetjit.i32(cols)]
                macro = "SMX_STAGES"
                smem = lambda t, st, impl, d=None: 128 + st * r128(2 * cols * (t // 32))  # noqa: E731
                if tri is not None:
                    blk = tri[0].next_power_of_2(cols)
                    tri_fn = lambda: tri[2][(rows,)](x, y, cols, BLOCK=blk)  # noqa: E731
            if tri is None:
                tri_fn = None
            shapes = [sh + (None,) for sh in ROW_SHAPES] + (SMX_EXTRA if kind == "softmax" else RMS_EXTRA)
            ref = torch_fn()
        nbytes = x.numel() * x.element_size()
        a, b = torch.empty(nbytes, dtype=torch.uint8, device="cuda"), torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        copy_ms = gpu_ms(torch, lambda: b.copy_(a))
        torch_ms = gpu_ms(torch, torch_fn)
        rows_out.append((label, torch_name, copy_ms / torch_ms, 1.0, "", ""))
        if tri_fn is not None:
            y.fill_(float("nan"))
            tri_fn()
            torch.cuda.synchronize()
            torch.testing.assert_close(y.float(), ref.float(), rtol=1.6e-2, atol=1e-5)
            tri_ms = gpu_ms(torch, tri_fn)
            rows_out.append((label, "triton (written here)", copy_ms / tri_ms, torch_ms / tri_ms, "", ""))
        for vname, impl, target in VARIANTS:
            best = None
            for t, c, st, define in shapes:
                try:
                    k = build(kind, impl, target, macro, st, define)
                except fleetjit.FleetjitError as e:
                    print(f"  {label} {vname}: not built: {e}")
                    break
                a_ = args_of[tr_box(define)] if kind == "transpose" else args
                launch = (lambda k=k, g=c * sms, t=t, sh=smem(t, st, impl, define), a_=a_:  # noqa: E731
                          k.launch(g, t, a_, stream=stream, shared_bytes=sh))
                try:
                    ms = gpu_ms(torch, launch, SWEEP_SAMPLES)
                except fleetjit.FleetjitError as e:
                    print(f"  {label} {vname} {t}/{c}/{st}: launch refused: {e}")
                    continue
                if best is None or ms < best[0]:
                    best = (ms, k, (t, c, st, define), launch)
            if best is None:
                continue
            ms, k, shape, launch = best
            ms = gpu_ms(torch, launch)  # the winner, timed once more
            if kind == "transpose":
                y.fill_(float("nan"))
            else:
                y.view(torch.int16).fill_(-1)  # 0xFFFF: a bf16 NaN
            launch()
            torch.cuda.synchronize()
            try:
                if kind == "transpose":
                    ok = torch.equal(y, ref)
                else:
                    torch.testing.assert_close(y.float(), ref.float(), rtol=1.6e-2, atol=1e-5)
                    ok = True
            except AssertionError as e:
                ok = False
                print(f"  {label} {vname}: {e}")
            if not ok:
                failures.append(f"{label} {vname}")
            info = k.info
            rows_out.append((label, vname, copy_ms / ms, torch_ms / ms,
                             f"{info.num_regs} regs, {smem(shape[0], shape[2], impl, shape[3]) + info.static_shared_bytes} B smem, "
                             f"{shape[0]}/{shape[1]}/{shape[2]}" + (f",{shape[3]}" if shape[3] else ""),
                             "ok" if ok else "WRONG"))
            print(f"  {label:34s} {vname:20s} {copy_ms / ms:.3f} of copy, {torch_ms / ms:.2f}x torch", flush=True)

    print(f"\nkernels_torch on {dev.name} ({sms} SMs), torch {torch.__version__}; "
          f"fraction = D2D copy of the input's bytes / time; ratio = torch's time / time")
    print(f"{'kernel':36s} {'impl':22s} {'of copy':>8s} {'x torch':>8s}  {'regs, smem, thr/cta/stages':34s} check")
    for label, impl, frac, ratio, notes, check in rows_out:
        print(f"{label:36s} {impl:22s} {frac:8.3f} {ratio:8.2f}  {notes:34s} {check}")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
