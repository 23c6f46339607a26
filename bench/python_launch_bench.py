"""Host time per kernel launch from Python: the fleetjit binding next to its
anchors, one run, the same kernels.

    FLEETJIT_LIBRARY=build/lib/libfleetjit.so.1 PYTHONPATH=bindings/python \
        python3 bench/python_launch_bench.py [--out FILE] [--reps 25 --n 400]
        [--samples FILE.json]

Callers, each with the 4-argument saxpy (2 tensors) and a 12-argument
kernel (8 tensors, 4 scalars):
  - fleetjit binding, torch tensors / fleetjit.pointer(...) values, through
    the compiled path (fleetjit/_fastlaunch.c) and the pure-ctypes path;
  - CuPy RawKernel (CuPy arrays over the same memory, NumPy scalars);
  - NVIDIA cuda.core `launch` (raw device pointers), when importable;
  - a raw ctypes call of fj_launch with prebuilt arguments.
Every launch goes to one torch stream kept busy by torch.cuda._sleep, so the
host never waits on the GPU: the time is the caller's own. Each sample is
the wall time of `--n` launches divided by n. The callers take their
samples in turn, round by round (`--reps` rounds after a warm-up), so a
slow spell of the host reaches all of them alike; the table gives each
caller's median, and its ratio to CuPy's RawKernel as the median over the
rounds of its sample over CuPy's sample of the same round. The anchors are the goals of issue 21:
binding/CuPy <= 0.8 with tensors, at most 0.5 us per tensor argument over
a raw pointer.
"""

import argparse
import ctypes
import pathlib
import statistics
import sys
import time

import numpy as np
import torch

import fleetjit
from fleetjit import _fast, _ffi
from fleetjit import runtime as fj_runtime

REPO = pathlib.Path(__file__).resolve().parents[1]
SAXPY = (REPO / "examples" / "saxpy.cu").read_text()
SUM12 = r"""
extern "C" __global__ void sum12(float* y, const float* x0, const float* x1,
                                 const float* x2, const float* x3,
                                 const float* x4, const float* x5,
                                 const float* x6, float a, float b, int n,
                                 int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * (x0[i] + x1[i] + x2[i] + x3[i] + x4[i] + x5[i] + x6[i]) +
           b * (float)m;
  }
}
"""


def one_sample_us(launch, n, sleep_cycles):
    """Host microseconds per launch over n launches, the GPU kept busy."""
    torch.cuda._sleep(sleep_cycles)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        launch()
    t1 = time.perf_counter_ns()
    torch.cuda.synchronize()
    return (t1 - t0) / n / 1000.0


def interleaved_us(callers, stream, n, reps, sleep_cycles):
    """Samples of every caller taken in turn, `reps` rounds, so drift of the
    host (other tenants, clocks) reaches every caller alike. Returns one
    list of samples per caller, round r's at index r."""
    samples = [[] for _ in callers]
    with torch.cuda.stream(stream):
        for c in callers:  # warm-up
            c["setup"]()
            for _ in range(3):
                c["fn"]()
        torch.cuda.synchronize()
        for _ in range(reps):
            for i, c in enumerate(callers):
                c["setup"]()
                samples[i].append(one_sample_us(c["fn"], n, sleep_cycles))
    fj_runtime.USE_FAST_PATH = True
    return samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--samples", help="also write every caller's samples (JSON)")
    a = ap.parse_args()

    n_elems = 1 << 12
    grid, block = (n_elems + 255) // 256, 256
    dev = torch.device("cuda")
    stream = torch.cuda.Stream()
    cu = stream.cuda_stream
    # Enough GPU sleep to outlast n launches of 40 us.
    sleep_cycles = int(a.n * 40e-6 * 2.0e9)

    rt = fleetjit.Runtime()
    k4 = rt.build(SAXPY, name="saxpy.cu").kernel("saxpy")
    k12 = rt.build(SUM12, name="sum12.cu").kernel("sum12")
    y = torch.randn(n_elems, device=dev)
    xs = [torch.randn(n_elems, device=dev) for _ in range(7)]
    args4_t = [y, xs[0], 2.0, n_elems]
    args4_p = [fleetjit.pointer(y.data_ptr()), fleetjit.pointer(xs[0].data_ptr()),
               2.0, n_elems]
    args12_t = [y] + xs + [0.5, 0.25, n_elems, 3]
    args12_p = ([fleetjit.pointer(t.data_ptr()) for t in [y] + xs] +
                [0.5, 0.25, n_elems, 3])

    # Correctness of the compiled and the ctypes path before timing them.
    for fast in (True, False):
        fj_runtime.USE_FAST_PATH = fast
        y0, x0 = torch.randn(n_elems, device=dev), torch.randn(n_elems, device=dev)
        ref = 2.0 * x0 + y0
        yy = y0.clone()
        with torch.cuda.stream(stream):
            k4.launch(grid, block, [yy, x0, 2.0, n_elems], stream=stream)
        torch.cuda.synchronize()
        assert torch.allclose(yy, ref), f"saxpy wrong (fast={fast})"
        with torch.cuda.stream(stream):
            yy = torch.full_like(y0, float("nan"))
            k12.launch(grid, block, [yy] + xs + [0.5, 0.25, n_elems, 3], stream=stream)
        torch.cuda.synchronize()
        ref12 = 0.5 * sum(xs) + 0.25 * 3
        assert torch.allclose(yy, ref12, atol=1e-5), f"sum12 wrong (fast={fast})"
    fj_runtime.USE_FAST_PATH = True

    callers = []  # timed together, interleaved, once all are set up

    def set_fast(flag):
        def setup():
            fj_runtime.USE_FAST_PATH = flag
        return setup

    def bench(name, nargs, fn, setup=set_fast(True), keep=None):
        # One launch now, so a caller that cannot launch fails where it is
        # set up (CuPy's and cuda.core's are caught and reported there).
        with torch.cuda.stream(stream):
            setup()
            fn()
        torch.cuda.synchronize()
        fj_runtime.USE_FAST_PATH = True
        callers.append(dict(name=name, nargs=nargs, fn=fn, setup=setup, keep=keep))

    fast_ok, why = _fast.available()
    for nargs, kern, at, ap_ in ((4, k4, args4_t, args4_p), (12, k12, args12_t, args12_p)):
        if fast_ok:
            bench("fleetjit, torch tensors (compiled path)", nargs,
                  lambda kern=kern, at=at: kern.launch(grid, block, at, stream=stream))
            bench("fleetjit, fleetjit.pointer (compiled path)", nargs,
                  lambda kern=kern, ap_=ap_: kern.launch(grid, block, ap_, stream=stream))
        bench("fleetjit, torch tensors (ctypes path)", nargs,
              lambda kern=kern, at=at: kern.launch(grid, block, at, stream=stream),
              setup=set_fast(False))
        bench("fleetjit, fleetjit.pointer (ctypes path)", nargs,
              lambda kern=kern, ap_=ap_: kern.launch(grid, block, ap_, stream=stream),
              setup=set_fast(False))

    # Raw ctypes fj_launch, prebuilt config and arguments.
    lib = _ffi.load()
    fjs = rt.wrap_stream(cu)._live()
    for nargs, kern, vals in ((4, k4, args4_p), (12, k12, args12_p)):
        keep, arr, count = fleetjit.args.build(vals)
        cfg = _ffi.new(_ffi.fj_launch_config)
        cfg.grid[0], cfg.block[0], cfg.stream = grid, block, fjs
        cfg_ref, arr_p, handle = ctypes.byref(cfg), ctypes.cast(arr, ctypes.c_void_p), kern._handle
        fn = lib.fj_launch

        def raw(fn=fn, handle=handle, cfg_ref=cfg_ref, arr_p=arr_p, count=count):
            st = fn(handle, cfg_ref, arr_p, count)
            if st:
                fleetjit.errors.check(st)
        bench("raw ctypes fj_launch, prebuilt args", nargs, raw, keep=(keep, cfg))

    # CuPy RawKernel.
    cupy_note = ""
    try:
        import cupy
        cs = cupy.cuda.ExternalStream(cu)
        cy = cupy.asarray(y)
        cxs = [cupy.asarray(t) for t in xs]
        rk4 = cupy.RawKernel(SAXPY, "saxpy")
        rk12 = cupy.RawKernel(SUM12, "sum12")
        c4 = (cy, cxs[0], np.float32(2.0), np.int32(n_elems))
        c12 = (cy, *cxs, np.float32(0.5), np.float32(0.25), np.int32(n_elems), np.int32(3))
        bench("CuPy RawKernel", 4, lambda: rk4((grid,), (block,), c4, stream=cs))
        bench("CuPy RawKernel", 12, lambda: rk12((grid,), (block,), c12, stream=cs))
    except Exception as e:  # noqa: BLE001 - report and go on
        cupy_note = f"CuPy: not measured ({type(e).__name__}: {e})"

    # NVIDIA cuda.core.
    core_note = ""
    try:
        try:
            from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
        except ImportError:
            from cuda.core.experimental import (Device, LaunchConfig, Program,
                                                ProgramOptions, launch)
        d = Device(0)
        d.set_current()
        cc = d.compute_capability
        arch = f"sm_{cc[0]}{cc[1]}"
        cstream = d.create_stream(stream) if hasattr(stream, "__cuda_stream__") else None
        if cstream is None:
            class _S:  # the __cuda_stream__ protocol over torch's stream
                def __cuda_stream__(self):
                    return (0, cu)
            cstream = d.create_stream(_S())
        cfg = LaunchConfig(grid=grid, block=block)
        for nargs, src, name, vals in (
                # cuda.core takes a Python int as a pointer (intptr_t).
                (4, SAXPY, "saxpy", (y.data_ptr(), xs[0].data_ptr(), np.float32(2.0),
                                     np.int32(n_elems))),
                (12, SUM12, "sum12", tuple(t.data_ptr() for t in [y] + xs) +
                 (np.float32(0.5), np.float32(0.25), np.int32(n_elems), np.int32(3)))):
            prog = Program(src, code_type="c++", options=ProgramOptions(arch=arch))
            kern = prog.compile("cubin").get_kernel(name)
            bench("cuda.core launch, raw pointers", nargs,
                  lambda kern=kern, vals=vals: launch(cstream, cfg, kern, *vals))
    except Exception as e:  # noqa: BLE001
        core_note = f"cuda.core: not measured ({type(e).__name__}: {e})"

    samples = interleaved_us(callers, stream, a.n, a.reps, sleep_cycles)
    if a.samples:
        import json
        pathlib.Path(a.samples).write_text(json.dumps(
            [dict(name=c["name"], nargs=c["nargs"], us=smp)
             for c, smp in zip(callers, samples)], indent=1))
    cupy = {c["nargs"]: samples[i] for i, c in enumerate(callers)
            if c["name"] == "CuPy RawKernel"}
    rows, ratios = [], {}
    for c, smp in zip(callers, samples):
        rows.append((c["name"], c["nargs"], statistics.median(smp)))
        if c["nargs"] in cupy:  # each round against CuPy's sample of that round
            ratios[(c["name"], c["nargs"])] = statistics.median(
                x / y for x, y in zip(smp, cupy[c["nargs"]]))
    lines = [f"python launch bench: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
             f"Python {sys.version.split()[0]}, fleetjit {fleetjit.library_version()}",
             f"compiled path: {'built' if fast_ok else 'not available: ' + why}; "
             f"torch shim: {_fast.torch_shim}",
             f"host us per launch, median of {a.reps} samples of {a.n} launches, every "
             "caller's samples interleaved round by round, GPU kept busy by "
             "torch.cuda._sleep; x CuPy: the median over the rounds of the caller's "
             "sample / CuPy's in the same round", "",
             f"{'caller':46s} {'args':>4s} {'us':>8s} {'x CuPy':>8s}"]
    for r in rows:
        ratio = ratios.get((r[0], r[1]), float("nan"))
        lines.append(f"{r[0]:46s} {r[1]:4d} {r[2]:8.2f} {ratio:8.2f}")
    lines.append("")
    by = {(r[0], r[1]): r[2] for r in rows}
    for path in ("compiled path", "ctypes path"):
        for nargs, ntensors in ((4, 2), (12, 8)):
            t = by.get((f"fleetjit, torch tensors ({path})", nargs))
            p = by.get((f"fleetjit, fleetjit.pointer ({path})", nargs))
            if t is not None and p is not None:
                lines.append(f"{path}, {nargs} args: each tensor adds "
                             f"{(t - p) / ntensors:.3f} us over a raw pointer "
                             f"(goal <= 0.5)")
    for nargs in (4, 12):
        ratio = ratios.get(("fleetjit, torch tensors (compiled path)", nargs))
        if ratio is not None:
            lines.append(f"compiled path, torch tensors, {nargs} args: {ratio:.2f}x "
                         "CuPy RawKernel (goal <= 0.8)")
    for note in (cupy_note, core_note):
        if note:
            lines.append(note)
    text = "\n".join(lines)
    print(text)
    if a.out:
        pathlib.Path(a.out).write_text(text + "\n")
    rt.close()


if __name__ == "__main__":
    main()
