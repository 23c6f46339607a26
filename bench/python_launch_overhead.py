"""The Python binding's own time per launch, on a machine without a GPU:
the fake CUDA driver (tests/common/fake_cuda) takes every launch, so what
is left is the caller's work. Companion of python_launch_bench.py (which
needs a GPU, torch and CuPy): it compares the binding's launch with a
direct call of the compiled path and a raw ctypes fj_launch, the fake's
cost being the same in each.

    FLEETJIT_LIBRARY=build/lib/libfleetjit.so.1 PYTHONPATH=bindings/python \
        python3 bench/python_launch_overhead.py [--n 20000 --reps 15]

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
import subprocess
import sys
import tempfile
import time
import types

REPO = pathlib.Path(__file__).resolve().parents[1]
SUM12 = r"""
extern "C" __global__ void sum12(float* y, const float* x0, const float* x1,
                                 const float* x2, const float* x3,
                                 const float* x4, const float* x5,
                                 const float* x6, float a, float b, int n,
                                 int m) {}
"""


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()

    sys.modules.setdefault("torch", stand_in_torch())
    torch = sys.modules["torch"]
    import fleetjit
    from fleetjit import _fast, _ffi
    from fleetjit import runtime as fj_runtime

    fake = os.environ.get("FLEETJIT_LIBCUDA") or str(
        pathlib.Path(_ffi.library_path()).parent / "libfj_fake_cuda.so")
    rt = fleetjit.Runtime(libcuda=fake, disk_cache=False)
    if rt.device_count != 1:
        sys.exit(f"the fake driver did not load ({fake}): {rt.driver_error}")
    saxpy = (REPO / "examples" / "saxpy.cu").read_text()
    k4 = rt.build(saxpy, name="saxpy.cu", target="compute_90").kernel("saxpy")
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

    print(f"python launch overhead, Python {sys.version.split()[0]}, compiled path: "
          f"{_fast.available()}; ns per launch, fastest of {a.reps} samples of {a.n}")
    print(f"{'caller':48s} {'args':>4s} {'fake':>7s} {'no-op':>7s}")
    for (name, nargs), by in table.items():
        print(f"{name:48s} {nargs:4d} " +
              " ".join(f"{by[c]:7.0f}" if c in by else f"{'-':>7s}" for c, _, _ in cols))
    del noop_lib
    rt.close()


if __name__ == "__main__":
    main()
