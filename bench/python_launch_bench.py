"""Host time per kernel launch from Python: the fleetjit binding next to its
anchors, one run, the same kernels.

    FLEETJIT_LIBRARY=build/lib/libfleetjit.so.1 PYTHONPATH=bindings/python \
        python3 bench/python_launch_bench.py [--out FILE] [--reps 25 --n 400]
        [--samples FILE.json]
    ... python3 bench/python_launch_bench.py --fake-driver [--n 20000 --reps 15]

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

--fake-driver: the binding's own time per launch, on a machine without a
GPU, torch or CuPy: the fake CUDA driver (tests/common/fake_cuda) takes
every launch, so what is left is the caller's work. It compares the
binding's launch with a direct call of the compiled path and a raw ctypes
fj_launch, the fake's cost being the same in each.

The driver is libfj_fake_cuda.so next to the library, or $FLEETJIT_LIBCUDA.
Each row is timed twice: launching on the fake driver, and with the
binding pointed at a no-op fj_launch (compiled here with $CC, default cc),
which leaves the Python side alone: the fake's own time varies by a
microsecond between runs on a shared host. Each figure is the fastest of
--reps samples of --n launches, in ns per launch.
"Tensors" are a stand-in torch.Tensor (installed as sys.modules["torch"]
when torch is not importable; this script never imports the real one):
its is_cuda / dtype / is_contiguous() / data_ptr() are C-level
attributes, as torch's are, and its metaclass makes isinstance() go
through __instancecheck__, as torch._C._TensorMeta does.
"""

import argparse
import ctypes
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import types

# Imported by the mode that runs (the GPU table needs torch and NumPy; the
# fake driver's installs a stand-in torch first).
np = torch = fleetjit = _fast = _ffi = fj_runtime = None


def import_binding():
    global fleetjit, _fast, _ffi, fj_runtime
    import fleetjit
    from fleetjit import _fast, _ffi
    from fleetjit import runtime as fj_runtime


def import_gpu():
    global np, torch
    import numpy as np
    import torch
    import_binding()

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


def gpu_main(a):
    import_gpu()

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


# The fake driver's table (--fake-driver).

def stand_in_torch():
    torch = types.ModuleType("torch")
    torch.float32 = type("dtype", (), {})()

    class _TensorMeta(type):
        pass

    class Tensor(metaclass=_TensorMeta):
        # Methods of the class, as torch.Tensor has them (the compiled path
        # calls the class's own for a tensor of exactly this type).
        is_cuda = True

        def __init__(self, ptr):
            self.dtype = torch.float32
            self._ptr = int(ptr)

        def is_contiguous(self):
            return True

        def data_ptr(self):
            return self._ptr

    torch.Tensor = Tensor
    return torch


def per_launch_ns(fns, n, reps):
    """{key: ns per launch} of each fn: the fastest of `reps` samples of n
    calls, the fns taking turns so that each sees the same host load."""
    best = {}
    for fn in fns.values():
        for _ in range(3):
            fn()
    for _ in range(reps):
        for key, fn in fns.items():
            t0 = time.thread_time_ns()
            for _ in range(n):
                fn()
            ns = (time.thread_time_ns() - t0) / n
            best[key] = min(ns, best.get(key, ns))
    return best


def noop_launch():
    """(library, address) of an fj_launch that does nothing and succeeds."""
    d = tempfile.mkdtemp(prefix="fj-noop-")
    src, so = os.path.join(d, "noop.c"), os.path.join(d, "noop.so")
    with open(src, "w") as f:
        f.write("void* noop_launch(void* k, const void* c, const void* a, unsigned long n)"
                " { (void)k; (void)c; (void)a; (void)n; return 0; }\n")
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", src, "-o", so],
                   check=True)
    lib = ctypes.CDLL(so)
    return lib, ctypes.cast(lib.noop_launch, ctypes.c_void_p).value


def fake_main(a):
    sys.modules.setdefault("torch", stand_in_torch())
    torch = sys.modules["torch"]
    import_binding()

    fake = os.environ.get("FLEETJIT_LIBCUDA") or str(
        pathlib.Path(_ffi.library_path()).parent / "libfj_fake_cuda.so")
    rt = fleetjit.Runtime(libcuda=fake, disk_cache=False)
    if rt.device_count != 1:
        sys.exit(f"the fake driver did not load ({fake}): {rt.driver_error}")
    k4 = rt.build(SAXPY, name="saxpy.cu", target="compute_90").kernel("saxpy")
    k12 = rt.build(SUM12, name="sum12.cu", target="compute_90").kernel("sum12")
    bufs = [rt.alloc(4096) for _ in range(8)]
    ptrs = [b.device_address for b in bufs]

    # A framework's stream (what torch.cuda.Stream exposes), made in the
    # fake's context as PyTorch would make its own.
    fake_lib = ctypes.CDLL(fake)
    fake_lib.fjfake_create_stream.restype = ctypes.c_uint64

    class FrameworkStream:
        cuda_stream = fake_lib.fjfake_create_stream(0)
    stream = FrameworkStream()
    rt.wrap_stream(stream.cuda_stream)
    fjs = rt._fj_by_cu[stream.cuda_stream]

    noop_lib, noop_addr = noop_launch()
    fj_launch = _ffi.load().fj_launch
    noop_fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_size_t)(noop_addr)
    fake_addr = _fast.launch_address
    fast = _fast.module
    cols = (("fake", fake_addr, fj_launch), ("no-op", noop_addr, noop_fn))
    fns = {}  # (caller, nargs, column) -> a launch
    slow = {}  # the ctypes path: fewer calls per sample

    for nargs, kname, nptr, scalars in ((4, "saxpy", 2, [2.0, 4096]),
                                        (12, "sum12", 8, [0.5, 0.25, 4096, 3])):
        tensors = [torch.Tensor(p) for p in ptrs[:nptr]] + scalars
        pointers = [fleetjit.pointer(p) for p in ptrs[:nptr]] + scalars
        for col, addr, fn in cols:
            # Kernels made while the binding's fj_launch is `addr`.
            _fast.launch_address = addr
            kern = (k4 if nargs == 4 else k12)._module.kernel(kname)
            for what, vals in (("tensors", tensors), ("fleetjit.pointer", pointers)):
                fns[(f"kernel.launch, {what}", nargs, col)] = (
                    lambda kern=kern, vals=vals: kern.launch(16, 256, vals, stream=stream))
            if fast is not None:
                dtypes = kern._torch_dtype_tuple()
                for what, vals in (("tensors", tensors), ("fleetjit.pointer", pointers)):
                    fns[(f"_fastlaunch.launch direct, {what}", nargs, col)] = (
                        lambda addr=addr, h=kern._handle, vals=vals, dtypes=dtypes:
                        fast.launch(addr, h, 16, 256, 0, 0, stream, rt._fj_by_cu, vals,
                                    dtypes))
            if col == "fake":  # the ctypes path calls the library's own

                def ctypes_path(kern=kern, vals=pointers):
                    fj_runtime.USE_FAST_PATH = False
                    try:
                        kern.launch(16, 256, vals, stream=stream)
                    finally:
                        fj_runtime.USE_FAST_PATH = True
                slow[("kernel.launch, ctypes path, fleetjit.pointer", nargs, col)] = \
                    ctypes_path
            keep, arr, count = fleetjit.args.build(pointers)
            cfg = _ffi.new(_ffi.fj_launch_config)
            cfg.grid[0], cfg.block[0], cfg.stream = 16, 256, fjs

            def raw(fn=fn, handle=kern._handle, cfg_ref=ctypes.byref(cfg),
                    arr_p=ctypes.cast(arr, ctypes.c_void_p), count=count, keep=(keep, cfg)):
                st = fn(handle, cfg_ref, arr_p, count)
                if st:
                    fleetjit.errors.check(st)
            fns[("raw ctypes fj_launch, prebuilt args", nargs, col)] = raw
    table = {}
    for col, addr, _ in cols:  # one column at a time: fj_launch is a global
        _fast.launch_address = addr
        for group, n in ((fns, a.n), (slow, max(1, a.n // 20))):
            mine = {k: f for k, f in group.items() if k[2] == col}
            for (name, nargs, _), ns in per_launch_ns(mine, n, a.reps).items():
                table.setdefault((name, nargs), {})[col] = ns
    _fast.launch_address = fake_addr

    lines = [f"python launch bench --fake-driver, Python {sys.version.split()[0]}, "
             f"compiled path: {_fast.available()}; ns per launch, fastest of {a.reps} "
             f"samples of {a.n}",
             f"{'caller':48s} {'args':>4s} {'fake':>7s} {'no-op':>7s}"]
    for (name, nargs), by in table.items():
        lines.append(f"{name:48s} {nargs:4d} " + " ".join(
            f"{by[c]:7.0f}" if c in by else f"{'-':>7s}" for c, _, _ in cols))
    print("\n".join(lines))
    if a.out:
        pathlib.Path(a.out).write_text("\n".join(lines) + "\n")
    del noop_lib
    rt.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fake-driver", action="store_true",
                    help="no GPU: the binding's own share over the fake driver")
    ap.add_argument("--out")
    ap.add_argument("--n", type=int, help="launches per sample (400; fake driver 20000)")
    ap.add_argument("--reps", type=int, help="samples per caller (25; fake driver 15)")
    ap.add_argument("--samples", help="also write every caller's samples (JSON)")
    a = ap.parse_args()
    if a.fake_driver:
        a.n, a.reps = a.n or 20000, a.reps or 15
        fake_main(a)
    else:
        a.n, a.reps = a.n or 400, a.reps or 25
        gpu_main(a)


if __name__ == "__main__":
    main()
