#!/usr/bin/env python3
"""The paged-decode and GEMM reference kernels against their anchors, one run.

examples/paged_decode.cu and examples/gemm_mma.cu, built through the
fleetjit Python binding under tma, cp_async, sync and cp_async@compute_80,
checked against torch on the GPU and timed with CUDA events next to:
  - decode: a device-to-device copy of the K/V bytes the kernel reads
    (tensor.copy_, cudaMemcpyAsync D2D) and torch SDPA on K/V gathered
    beforehand into padded [B, H, L, 128] tensors with a length mask;
  - GEMM: cuBLAS through torch.matmul (f16 in, fp32 accumulation).
Timed launches queue behind torch.cuda._sleep, so Python's launch cost is
hidden; each figure is the median of 7 timings of 20 launches.

Run on the GPU host:
  PYTHONPATH=bindings/python FLEETJIT_LIBRARY=$PWD/build/lib/libfleetjit.so.1 \
    python3 bench/attn_gemm_torch.py [--quick] [--only decode|gemm] \
    [--examples DIR] [--ncu-case NAME]
"""
import argparse
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

import fleetjit

HERE = os.path.dirname(os.path.abspath(__file__))
ALL_IMPLS = [("tma", None), ("cp_async", None), ("sync", None),
             ("cp_async@compute_80", "compute_80")]
IMPLS = ALL_IMPLS


PROFILE = False  # --profile: one launch per case (for ncu), no timing
SIZES = (4096, 8192)  # GEMM M = N = K (--sizes)
MATCH = ""  # --match: only the GEMM configurations whose tag contains it


def time_ms(fn, launches=20, samples=7):
    """GPU milliseconds per call of fn: median over samples of `launches`
    calls queued behind a GPU sleep, timed with CUDA events."""
    if PROFILE:
        return 1.0
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(40_000_000)  # ~20 ms: the host enqueues meanwhile
        start.record()
        for _ in range(launches):
            fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / launches)
    return statistics.median(out)


_MODULES = {}


def finish_or_die(what, limit_s=10.0):
    """Waits for the GPU's queued work; exits the process if it hangs (a
    barrier protocol bug would otherwise stall the whole run)."""
    import time
    done = torch.cuda.Event()
    done.record()
    t0 = time.time()
    while not done.query():
        if time.time() - t0 > limit_s:
            print(f"HANG: {what} did not finish in {limit_s} s", flush=True)
            os._exit(3)
        time.sleep(0.001)


def build(rt, source, impl, defines):
    """The module for (source, impl, defines), built once (prebuild() builds
    them all on a thread pool first: NVRTC runs outside the GIL)."""
    key = (source, impl, tuple(sorted(defines.items())))
    if key not in _MODULES:
        name, target = impl
        copy_impl = name.split("@")[0]
        opts = [f"-D{k}={v}" for k, v in defines.items()]
        _MODULES[key] = rt.build(source, name="bench.cu", target=target,
                                 copy_impl=copy_impl, nvrtc_options=opts)
    return _MODULES[key]


def prebuild(rt, jobs):
    from concurrent.futures import ThreadPoolExecutor

    def one(job):
        try:
            build(rt, *job)
        except fleetjit.FleetjitError as e:
            print(f"  build failed ({job[1][0]}, {job[2]}): {e}")
    with ThreadPoolExecutor(max_workers=min(12, os.cpu_count() or 2)) as pool:
        list(pool.map(one, jobs))


# ------------------------------------------------------------------ decode
B, H, D, PAGE = 32, 16, 128, 16
MAX_LEN = 4096


def decode_data(gen):
    lens = torch.randint(1, MAX_LEN + 1, (B,), generator=gen)
    lens[:4] = torch.tensor([1, 16, 17, MAX_LEN])  # the edges, always
    seq_pages = [(int(n) + PAGE - 1) // PAGE for n in lens]
    used = sum(seq_pages)
    num_pages = used + 64  # 64 pages nobody owns, all NaN
    max_pages = MAX_LEN // PAGE
    perm = torch.randperm(num_pages, generator=gen)
    table = torch.full((B, max_pages), -1, dtype=torch.int32)
    off = 0
    for b, n in enumerate(seq_pages):
        table[b, :n] = perm[off:off + n].to(torch.int32)
        off += n
    g = torch.Generator(device="cuda").manual_seed(int(perm[0]))
    k = torch.randn(num_pages, H, PAGE, D, generator=g, device="cuda").half()
    v = torch.randn(num_pages, H, PAGE, D, generator=g, device="cuda").half()
    nan = float("nan")
    unused = perm[used:].cuda()
    k[unused] = nan
    v[unused] = nan
    for b, n in enumerate(lens.tolist()):
        last = int(table[b, seq_pages[b] - 1])
        if n % PAGE:
            k[last, :, n % PAGE:] = nan
            v[last, :, n % PAGE:] = nan
    q = torch.randn(B, H, D, generator=g, device="cuda").half()
    dev = "cuda"
    return dict(lens=lens.to(dev, torch.int32), lens_list=lens.tolist(),
                seq_pages=seq_pages, table=table.to(dev), k=k, v=v, q=q,
                max_pages=max_pages)


def decode_reference(d):
    out = torch.empty(B, H, D, device="cuda", dtype=torch.float32)
    for b, n in enumerate(d["lens_list"]):
        pages = d["table"][b, :d["seq_pages"][b]].long()
        kb = d["k"][pages].permute(1, 0, 2, 3).reshape(H, -1, D)[:, :n].float()
        vb = d["v"][pages].permute(1, 0, 2, 3).reshape(H, -1, D)[:, :n].float()
        s = torch.einsum("hd,hld->hl", d["q"][b].float(), kb) / math.sqrt(D)
        out[b] = torch.einsum("hl,hld->hd", torch.softmax(s, -1), vb)
    return out


def decode_gathered(d):
    """K/V gathered into padded [B, H, L, D] (zeros past each length)."""
    lmax = max(d["lens_list"])
    kg = torch.zeros(B, H, lmax, D, device="cuda", dtype=torch.half)
    vg = torch.zeros_like(kg)
    mask = torch.zeros(B, 1, 1, lmax, device="cuda", dtype=torch.bool)
    for b, n in enumerate(d["lens_list"]):
        pages = d["table"][b, :d["seq_pages"][b]].long()
        kg[b, :, :n] = d["k"][pages].permute(1, 0, 2, 3).reshape(H, -1, D)[:, :n]
        vg[b, :, :n] = d["v"][pages].permute(1, 0, 2, 3).reshape(H, -1, D)[:, :n]
        mask[b, ..., :n] = True
    return kg, vg, mask


def decode_launcher(rt, src, impl, cfg, d):
    mod = build(rt, src, impl, cfg)
    kern = mod.kernel("paged_decode")
    chunks = (d["max_pages"] + cfg["CHUNK_PAGES"] - 1) // cfg["CHUNK_PAGES"]
    part = torch.empty(B * H * chunks * (D + 2), device="cuda")
    counters = torch.zeros(B * H, device="cuda", dtype=torch.int32)
    out = torch.empty(B, H, D, device="cuda", dtype=torch.half)
    box = (PAGE, D)
    # oob="nan": a page id outside the cache would read NaN and fail the check.
    kt = fleetjit.Tensor(d["k"].view(-1, D), box=box, oob="nan")
    vt = fleetjit.Tensor(d["v"].view(-1, D), box=box, oob="nan")
    smem = cfg["NSTAGES"] * cfg["STAGE_PAGES"] * 2 * PAGE * D * 2 + 128
    args = [kt, vt, d["q"], d["table"], d["lens"], d["max_pages"],
            (1.0 / math.sqrt(D)) * math.log2(math.e), part, counters, out]
    stream = torch.cuda.current_stream()

    def launch():
        kern.launch(grid=(chunks, H, B), block=32 * (cfg["WARPS"] + cfg["PRODUCER"]),
                    args=args,
                    stream=stream, shared_bytes=smem)
    launch.tensor = kt
    return launch, out, kern, smem


def decode_configs(quick):
    base = dict(NSTAGES=3, STAGE_PAGES=2, CHUNK_PAGES=16, WARPS=4, PRODUCER=4)
    configs = [base]
    if not quick:
        for change in (dict(PRODUCER=2), dict(PRODUCER=1), dict(PRODUCER=0),
                       dict(NSTAGES=2), dict(NSTAGES=2, STAGE_PAGES=4),
                       dict(PRODUCER=2, NSTAGES=2),
                       dict(PRODUCER=2, NSTAGES=2, STAGE_PAGES=4),
                       dict(NSTAGES=4), dict(NSTAGES=4, PRODUCER=1),
                       dict(CHUNK_PAGES=8), dict(CHUNK_PAGES=32),
                       dict(NSTAGES=3, STAGE_PAGES=4),
                       dict(NSTAGES=6, STAGE_PAGES=4, WARPS=8),
                       dict(NSTAGES=2, PRODUCER=0),
                       dict(NSTAGES=2, STAGE_PAGES=4, PRODUCER=0),
                       dict(MIN_CTAS=4), dict(MIN_CTAS=4, NSTAGES=2)):
            configs.append({**base, **change})
    return configs


def run_decode(rt, quick, examples, results, only_case=None):
    src = open(os.path.join(examples, "paged_decode.cu")).read()
    gen = torch.Generator().manual_seed(20261201)
    d = decode_data(gen)
    ref = decode_reference(d)
    kv_bytes = sum(d["seq_pages"]) * PAGE * H * D * 2 * 2
    moved = kv_bytes + 2 * B * H * D * 2  # + q and out
    src_buf = torch.empty(moved, device="cuda", dtype=torch.uint8)
    dst_buf = torch.empty_like(src_buf)
    copy_ms = time_ms(lambda: dst_buf.copy_(src_buf))
    half = moved // 2
    copy_half_ms = time_ms(lambda: dst_buf[:half].copy_(src_buf[:half]))
    kg, vg, mask = decode_gathered(d)
    qs = d["q"].view(B, H, 1, D)
    sdpa = lambda: F.scaled_dot_product_attention(qs, kg, vg, attn_mask=mask)
    sdpa_err = (sdpa().view(B, H, D).float() - ref).abs().max().item()
    sdpa_ms = time_ms(sdpa)
    print(f"decode B={B} H={H} d={D} pages of {PAGE}, lengths 1..{MAX_LEN} "
          f"(sum {sum(d['lens_list'])} tokens), K/V read {kv_bytes / 1e6:.1f} MB")
    print(f"  D2D copy of the same {moved / 1e6:.1f} MB: {copy_ms * 1e3:.1f} us "
          f"({2 * moved / copy_ms / 1e6:.0f} GB/s read+written); copy of half "
          f"(same traffic as the kernel): {copy_half_ms * 1e3:.1f} us")
    print(f"  torch SDPA on pre-gathered K/V: {sdpa_ms * 1e3:.1f} us = "
          f"{copy_ms / sdpa_ms:.2f} of the copy (max err {sdpa_err:.1e})")
    configs = decode_configs(quick)
    prebuild(rt, [(src, impl, cfg) for impl in IMPLS for cfg in configs])
    ok_all = True
    for impl in IMPLS:
        best = None
        for cfg in configs:
            tag = (f"S{cfg['NSTAGES']} P{cfg['STAGE_PAGES']} "
                   f"C{cfg['CHUNK_PAGES']} W{cfg['WARPS']} "
                   f"{('producer x%d' % cfg['PRODUCER']) if cfg['PRODUCER'] else 'block'}"
                   + (f" min{cfg['MIN_CTAS']}" if "MIN_CTAS" in cfg else ""))
            try:
                launch, out, kern, smem = decode_launcher(rt, src, impl, cfg, d)
            except fleetjit.FleetjitError as e:
                print(f"  {impl[0]:20s} {tag}: not built: {e}")
                ok_all = False
                continue
            out.fill_(float("nan"))
            try:
                launch()
            except fleetjit.FleetjitError as e:
                print(f"  {impl[0]:20s} {tag}: launch refused: {e}")
                ok_all = False
                continue
            finish_or_die(f"paged_decode {impl[0]} {tag}")
            if impl == IMPLS[0] and cfg == configs[0]:
                print(f"  K/V tensor through TMA: {fleetjit.tensor_check(launch.tensor)}")
            err = (out.float() - ref).abs().max().item()
            ok = not math.isnan(err) and err < 2e-2
            ms = time_ms(launch)
            info = kern.info
            line = (f"  {impl[0]:20s} {tag}: {ms * 1e3:7.1f} us  "
                    f"{copy_ms / ms:5.2f} of copy ({copy_half_ms / ms:4.2f} "
                    f"same-traffic)  {sdpa_ms / ms:5.2f}x torch  "
                    f"{info.num_regs} regs  smem {smem + info.static_shared_bytes} B  "
                    f"err {err:.1e} {'ok' if ok else 'WRONG'}")
            print(line, flush=True)
            ok_all = ok_all and ok
            if ok and (best is None or ms < best[0]):
                best = (ms, tag, info.num_regs, smem + info.static_shared_bytes)
        if best:
            results.append(("paged_decode", impl[0], copy_ms / best[0],
                            sdpa_ms / best[0], best[2], best[3], best[1]))
    return ok_all


# -------------------------------------------------------------------- GEMM
def gemm_launcher(rt, src, impl, cfg, a, b, c):
    mod = build(rt, src, impl, cfg)
    kern = mod.kernel("gemm_mma")
    m, kdim = a.shape
    n = b.shape[0]
    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    if cfg.get("SWIZZLE"):  # 2-D tiles in the 128-byte swizzle, BK = 64
        bk = 64
        at = fleetjit.Tensor(a, box=(bm, bk), swizzle=128)
        bt = fleetjit.Tensor(b, box=(bn, bk), swizzle=128)
    else:
        # Panel views (K / 8, rows, 8): see examples/gemm_mma.cu.
        av = a.view(m, kdim // 8, 8).permute(1, 0, 2)
        bv = b.view(n, kdim // 8, 8).permute(1, 0, 2)
        at = fleetjit.Tensor(av, box=(bk // 8, bm, 8))
        bt = fleetjit.Tensor(bv, box=(bk // 8, bn, 8))
    smem = cfg["NSTAGES"] * (bm + bn) * bk * 2 + (1024 if cfg.get("SWIZZLE") else 128)
    threads = 32 * (cfg["WM"] * cfg["WN"] + cfg["PRODUCER"])
    stream = torch.cuda.current_stream()
    args = [at, bt, c, m, n, kdim]

    def launch():
        kern.launch(grid=(n // bn, m // bm), block=threads, args=args,
                    stream=stream, shared_bytes=smem)
    launch.tensor = at
    return launch, kern, smem


def gemm_tag(cfg):
    return (f"{cfg['BM']}x{cfg['BN']}x{cfg['BK']} S{cfg['NSTAGES']} "
            f"{cfg['WM']}x{cfg['WN']} warps "
            f"{('producer x%d' % cfg['PRODUCER']) if cfg['PRODUCER'] else 'block'}"
            f"{' swz128' if cfg.get('SWIZZLE') else ' panels'}"
            f" group{cfg.get('GROUP_M', 8)}")  # the example's default: 8


def run_gemm(rt, quick, examples, results):
    src = open(os.path.join(examples, "gemm_mma.cu")).read()
    # The example's best on the H200 first (the --quick configuration):
    # 128-byte swizzled 2-D tiles, BK = 64, 64 x 64 warp tiles, 3 stages,
    # two producer warps.
    base = dict(BM=256, BN=128, BK=64, NSTAGES=3, WM=4, WN=2, PRODUCER=2,
                SWIZZLE=128)
    configs = [base]
    if not quick:
        swz = {**base, "BM": 128, "WM": 2, "WN": 4, "PRODUCER": 1}  # 64 x 32 warp tiles
        for change in (dict(), dict(NSTAGES=2), dict(NSTAGES=4),
                       dict(PRODUCER=0), dict(NSTAGES=2, PRODUCER=0),
                       dict(NSTAGES=4, PRODUCER=0),
                       dict(BN=256, NSTAGES=3),
                       dict(BN=256, NSTAGES=3, PRODUCER=0)):
            configs.append({**swz, **change})
        for change in (dict(NSTAGES=4), dict(PRODUCER=0), dict(PRODUCER=1),
                       dict(PRODUCER=1, NSTAGES=4), dict(PRODUCER=4)):
            configs.append({**base, **change})
        # Two producer warps (A tiles and B tiles) on the 128 x 128 tiles.
        for change in (dict(PRODUCER=2), dict(PRODUCER=2, NSTAGES=4),
                       dict(PRODUCER=4), dict(PRODUCER=4, NSTAGES=4)):
            configs.append({**swz, **change})
        # The block order: row by row (1) and larger groups than the
        # example's default (8).
        for g in (1, 16):
            configs.append({**base, "GROUP_M": g})
            configs.append({**swz, "GROUP_M": g})
            configs.append({**swz, "PRODUCER": 0, "GROUP_M": g})
        # Panel views (16-byte TMA rows), BK = 32 or 64.
        panels = dict(BM=128, BN=128, BK=32, NSTAGES=4, WM=2, WN=4,
                      PRODUCER=1, SWIZZLE=0)
        for change in (dict(), dict(PRODUCER=0), dict(BK=64, NSTAGES=3),
                       dict(BN=256, NSTAGES=3),
                       dict(BM=256, NSTAGES=3, WM=4, WN=2)):
            configs.append({**panels, **change})
    if MATCH:
        configs = [c for c in configs if MATCH in gemm_tag(c)]
    prebuild(rt, [(src, impl, cfg) for impl in IMPLS for cfg in configs])
    ok_all = True
    for size in ((4096,) if PROFILE else SIZES):
        gen = torch.Generator(device="cuda").manual_seed(size)
        a = torch.randn(size, size, device="cuda", generator=gen).half()
        b = torch.randn(size, size, device="cuda", generator=gen).half()
        ref = a.float() @ b.float().t()
        scale = ref.abs().max().item()
        cub = torch.empty(size, size, device="cuda", dtype=torch.half)
        cublas = lambda: torch.matmul(a, b.t(), out=cub)
        cublas()
        cub_err = (cub.float() - ref).abs().max().item() / scale
        cub_ms = time_ms(cublas, launches=10, samples=5)
        tflops = 2 * size ** 3 / cub_ms / 1e9
        print(f"gemm M=N=K={size}: cuBLAS (torch.matmul f16, fp32 acc) "
              f"{cub_ms:.3f} ms {tflops:.0f} TFLOP/s, rel err {cub_err:.1e}")
        c = torch.empty(size, size, device="cuda", dtype=torch.half)
        for impl in IMPLS:
            best = None
            for cfg in configs:
                tag = gemm_tag(cfg)
                try:
                    launch, kern, smem = gemm_launcher(rt, src, impl, cfg, a, b, c)
                except fleetjit.FleetjitError as e:
                    print(f"  {impl[0]:20s} {tag}: not built: {e}")
                    ok_all = False
                    continue
                c.fill_(float("nan"))
                try:
                    launch()
                except fleetjit.FleetjitError as e:
                    print(f"  {impl[0]:20s} {tag}: launch refused: {e}")
                    ok_all = False
                    continue
                finish_or_die(f"gemm_mma {impl[0]} {tag}")
                if impl == IMPLS[0] and cfg == configs[0]:
                    print(f"  A panel view through TMA: "
                          f"{fleetjit.tensor_check(launch.tensor)}")
                err = (c.float() - ref).abs().max().item() / scale
                ok = not math.isnan(err) and err < max(4 * cub_err, 2e-3)
                ms = time_ms(launch, launches=10, samples=5)
                info = kern.info
                print(f"  {impl[0]:20s} {tag}: {ms:.3f} ms "
                      f"{2 * size ** 3 / ms / 1e9:4.0f} TFLOP/s  "
                      f"{cub_ms / ms:.2f} of cuBLAS  {info.num_regs} regs  "
                      f"smem {smem + info.static_shared_bytes} B  rel err "
                      f"{err:.1e} {'ok' if ok else 'WRONG'}", flush=True)
                ok_all = ok_all and ok
                if ok and (best is None or ms < best[0]):
                    best = (ms, tag, info.num_regs, smem + info.static_shared_bytes)
            if best:
                results.append((f"gemm_mma {size}", impl[0], cub_ms / best[0],
                                cub_ms / best[0], best[2], best[3], best[1]))
        del a, b, ref, cub, c
        torch.cuda.empty_cache()
    return ok_all


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one configuration each")
    ap.add_argument("--only", choices=["decode", "gemm"])
    ap.add_argument("--examples", default=os.path.join(HERE, "..", "examples"))
    ap.add_argument("--impl", choices=[name for name, _ in ALL_IMPLS],
                    help="only this implementation (one process each keeps "
                         "a hang in one from losing the others)")
    ap.add_argument("--profile", action="store_true",
                    help="launch each case once, untimed (run under ncu)")
    ap.add_argument("--sizes", default="4096,8192",
                    help="GEMM sizes M = N = K, comma-separated")
    ap.add_argument("--match", default="",
                    help="only GEMM configurations whose tag contains this "
                         "(e.g. 'S3 2x4 warps producer swz128')")
    args = ap.parse_args()
    global PROFILE, IMPLS, SIZES, MATCH
    MATCH = args.match
    PROFILE = args.profile
    SIZES = tuple(int(x) for x in args.sizes.split(","))
    if args.impl:
        IMPLS = [i for i in ALL_IMPLS if i[0] == args.impl]
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, {props.multi_processor_count} SMs, torch "
          f"{torch.__version__}, fleetjit {fleetjit.library_version()}")
    results = []
    ok = True
    with fleetjit.Runtime() as rt:
        import traceback
        for part, fn in (("decode", run_decode), ("gemm", run_gemm)):
            if args.only not in (None, part):
                continue
            try:
                ok = fn(rt, args.quick, args.examples, results) and ok
            except Exception:  # report it, and still run the other part
                traceback.print_exc()
                ok = False
    print("\nkernel x impl (best configuration): fraction of the anchor "
          "(decode: D2D copy of the same bytes; GEMM: cuBLAS), ratio to torch")
    print(f"{'kernel':18s} {'impl':20s} {'of anchor':>9s} {'x torch':>8s} "
          f"{'regs':>5s} {'smem B':>7s}  config")
    for k, impl, frac, tor, regs, smem, tag in results:
        print(f"{k:18s} {impl:20s} {frac:9.2f} {tor:8.2f} {regs:5d} {smem:7d}  {tag}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
