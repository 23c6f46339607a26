#!/usr/bin/env python3
"""RMSNorm bf16 [8192, 4096] once per variant, for Nsight Compute.

Run on the GPU host under ncu (needs torch):

    ncu --section SpeedOfLight --section Occupancy --section WarpStateStats \\
        -k regex:norm python3 bench/experiments/ncu_rmsnorm.py

Launches, in this order, each once after a warm-up: examples/rmsnorm.cu
under sync at the tuned shape (32 threads, 24 CTAs per SM, 1 stage,
-DRMS_L2AHEAD=1) and without the L2 prefetch, under tma (128 threads, 3 CTAs
per SM, 2 stages), then torch's F.rms_norm. Checks each output against
torch's. The figures are in docs/measurements.md.
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bindings" / "python"))
sys.path.insert(0, str(ROOT / "bench"))
from kernels_torch import gpu_session, r128  # noqa: E402

ROWS, COLS, EPS = 8192, 4096, 1e-6
# (implementation, threads, CTAs per SM, stages, defines)
VARIANTS = [("sync", 32, 24, 1, ["-DRMS_L2AHEAD=1"]), ("sync", 32, 24, 1, []),
            ("tma", 128, 3, 2, [])]


def main():
    got = gpu_session("ncu_rmsnorm")
    if got is None:
        return 2
    torch, fleetjit, rt, sms, stream = got
    import torch.nn.functional as F

    src = (ROOT / "examples" / "rmsnorm.cu").read_text()
    x = (torch.rand(ROWS, COLS, device="cuda") * 4 - 2).to(torch.bfloat16)
    w = (torch.rand(COLS, device="cuda") + 0.5).to(torch.bfloat16)
    y = torch.empty_like(x)
    ref = F.rms_norm(x, (COLS,), w, EPS)
    args = [x, w, y, fleetjit.i32(ROWS), fleetjit.i32(COLS), fleetjit.f32(EPS)]
    bad = 0
    for impl, threads, ctas, stages, defines in VARIANTS:
        k = rt.build(src, name="rmsnorm.cu", copy_impl=impl,
                     nvrtc_options=[f"-DRMS_STAGES={stages}"] + defines).kernel("rmsnorm")
        smem = 128 + r128(2 * COLS) + stages * r128(2 * COLS * (threads // 32))
        for _ in range(2):  # a warm-up, then the profiled launch
            y.view(torch.int16).fill_(-1)
            k.launch(ctas * sms, threads, args, stream=stream, shared_bytes=smem)
        torch.cuda.synchronize()
        ok = torch.allclose(y.float(), ref.float(), rtol=1.6e-2, atol=1e-5)
        bad += not ok
        print(f"{impl} {threads}/{ctas}/{stages} {' '.join(defines)}: "
              f"{k.info.num_regs} regs, {'ok' if ok else 'WRONG'}", flush=True)
    for _ in range(2):
        F.rms_norm(x, (COLS,), w, EPS)
    torch.cuda.synchronize()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
