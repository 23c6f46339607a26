#!/usr/bin/env python3
"""The transpose example's build options next to a plain transpose, one run.

Run on the GPU host (needs torch):

    PYTHONPATH=bindings/python FLEETJIT_LIBRARY=build/lib/libfleetjit.so.1 \\
        python3 bench/transpose_variants.py

For [5000, 4100] (aligned) and [4097, 3001] (ragged) f32, in one process and
on torch's stream:
- the anchors: a D2D copy of the same bytes, x.t().contiguous(), and
  bench/kernels/plain_transpose.cu (no copy layer; 32 x 32 and 64 x 64
  tiles, one per block);
- examples/transpose.cu under tma, cp_async and sync, for each set of build
  options in VARIANTS, over the launch shapes of its box; the fastest
  shape is timed again and its output compared with torch's.
Prints the fraction of the copy (copy time / kernel time, GPU time: CUDA
events around launches queued behind torch.cuda._sleep), the registers and
the shape.
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bindings" / "python"))
sys.path.insert(0, str(ROOT / "bench"))
from kernels_torch import gpu_ms, gpu_session, verdict  # noqa: E402

# Build options of the example tried (-D...); TR_BOX picks the tile.
VARIANTS = [(), ("FJ_NARROW_INLINE=1",), ("TR_BOX=32",), ("TR_BOX=32", "FJ_NARROW_INLINE=1"),
            ("TR_BOX=32", "TR_MAXNREG=64"), ("TR_BOX=32", "TR_MAXNREG=64", "FJ_NARROW_INLINE=1"),
            ("TR_L2AHEAD=1", "FJ_NARROW_INLINE=1")]
# (threads, CTAs per SM, stages) per box.
SHAPES = {64: [(128, 4, 1), (128, 5, 1), (128, 6, 1), (128, 4, 2), (256, 2, 3)],
          32: [(64, 16, 2), (64, 24, 1), (128, 12, 2), (32, 24, 1), (32, 24, 2), (64, 16, 1)]}
PLAIN = [(32, 8), (64, 8)]  # plain_transpose's (P_T, P_R)


def main():
    got = gpu_session("transpose_variants")
    if got is None:
        return 2
    torch, fleetjit, rt, sms, stream = got
    example = (ROOT / "examples" / "transpose.cu").read_text()
    plain = (ROOT / "bench" / "kernels" / "plain_transpose.cu").read_text()
    failures = []
    for rows, cols in ((5000, 4100), (4097, 3001)):
        x = torch.randn(rows, cols, device="cuda") * 1000
        y = torch.empty(cols, rows, device="cuda")
        ref = x.t().contiguous()
        nbytes = x.numel() * 4
        a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        copy_ms = gpu_ms(torch, lambda: b.copy_(a))
        torch_ms = gpu_ms(torch, lambda: x.t().contiguous())
        label = "aligned" if cols % 4 == 0 else "ragged"
        print(f"== transpose [{rows}, {cols}] f32 {label}: copy {copy_ms * 1e3:.1f} us, "
              f"x.t().contiguous() {copy_ms / torch_ms:.3f} of it", flush=True)

        def check(fn, what):
            y.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            if torch.equal(y, ref):
                return "ok"
            failures.append(f"{label} {what}")
            return "WRONG"

        for t, r in PLAIN:
            k = rt.build(plain, name="plain_transpose.cu",
                         nvrtc_options=[f"-DP_T={t}", f"-DP_R={r}"]).kernel("plain_transpose")
            grid = ((cols + t - 1) // t, (rows + t - 1) // t)
            fn = (lambda k=k, grid=grid, t=t, r=r:  # noqa: E731
                  k.launch(grid, (t, r), [x, y, fleetjit.i32(rows), fleetjit.i32(cols)], stream=stream))
            ok = check(fn, f"plain {t}x{r}")
            print(f"  {'plain ' + str(t) + ' x ' + str(r):38s} {copy_ms / gpu_ms(torch, fn):.3f} "
                  f"({k.info.num_regs} regs) {ok}", flush=True)
        for impl in ("tma", "cp_async", "sync"):
            for defines in VARIANTS:
                box = 32 if "TR_BOX=32" in defines else 64
                tiles_x = -(-cols // box)
                args = [fleetjit.Tensor(x, box=(box, box), oob="zeros"),
                        fleetjit.Tensor(y, box=(box, box), oob="zeros"),
                        fleetjit.i32(tiles_x), fleetjit.i32(tiles_x * -(-rows // box))]
                tried = []
                for threads, ctas, stages in SHAPES[box]:
                    opts = [f"-DTR_STAGES={stages}"] + [f"-D{d}" for d in defines]
                    k = rt.build(example, name="transpose.cu", copy_impl=impl,
                                 nvrtc_options=opts).kernel("transpose")
                    smem = 128 + (stages + (2 if impl == "tma" else 1)) * box * box * 4
                    fn = (lambda k=k, g=ctas * sms, t=threads, s=smem:  # noqa: E731
                          k.launch(g, t, args, stream=stream, shared_bytes=s))
                    try:
                        tried.append((gpu_ms(torch, fn, 3), f"{threads}/{ctas}/{stages}", k, fn))
                    except fleetjit.FleetjitError as e:  # e.g. more SMEM than the GPU has
                        print(f"  {impl} {defines} {threads}/{ctas}/{stages}: {e}")
                if not tried:
                    continue
                _, shape, k, fn = min(tried, key=lambda r: r[0])
                what = f"{impl} {' '.join(defines) or '(defaults)'}"
                ok = check(fn, what)
                print(f"  {what:38s} {copy_ms / gpu_ms(torch, fn):.3f} ({k.info.num_regs} regs, "
                      f"{shape}) {ok}", flush=True)
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
