#!/usr/bin/env python3
"""The Python binding on a GPU host with torch and CuPy, checked against host
references. Prints one PASS/FAIL/SKIP line per case and a summary; exits 1 if
any case failed (or if torch/CuPy/the GPU are missing, unless --allow-missing).

    FLEETJIT_LIBRARY=.device/build/lib/libfleetjit.so.1 \
        python3 bindings/python/tests/gpu_check.py

Cases:
  1. tiled_copy (examples/tiled_copy.cu, FJ_TENSOR parameters) from a strided
     torch view into a larger torch tensor, zero-padded, on torch's current
     stream: the default stream, then a side stream (needs fj_stream_wrap).
  2. the same from a CuPy array and a strided CuPy view, on CuPy's current
     stream: the null stream, then a non-blocking stream.
  3. saxpy with torch tensors as pointer arguments on a side stream.
"""
import argparse
import importlib.util
import pathlib
import sys
import traceback

HERE = pathlib.Path(__file__).resolve()
if importlib.util.find_spec("fleetjit") is None:  # this tree's package unless installed
    sys.path.insert(0, str(HERE.parents[1]))
import fleetjit  # noqa: E402
from fleetjit import _ffi  # noqa: E402

TILED_COPY = HERE.parents[3] / "examples" / "tiled_copy.cu"
# The corpus kernel (saxpy and the axpy<T> template), one file for every
# test, bench and binding.
SAXPY = (pathlib.Path(__file__).resolve().parents[3] / "examples" / "saxpy.cu").read_text()
BOX_Y, BOX_X = 32, 64

results = []  # (status, name, detail)


def record(status, name, detail=""):
    results.append((status, name, detail))
    print(f"{status:4}  {name}{': ' + detail if detail else ''}", flush=True)


def case(name):
    def wrap(fn):
        def run(*a, **kw):
            try:
                detail = fn(*a, **kw)
                record("PASS", name, detail or "")
            except Skip as s:
                record("SKIP", name, str(s))
            except Exception as e:  # noqa: BLE001 - every failure is reported
                record("FAIL", name, f"{type(e).__name__}: {e}")
                traceback.print_exc()
        return run
    return wrap


class Skip(Exception):
    pass


def launch_tiled_copy(kernel, src, dst, stream):
    """dst (H2 x W2) = src (H x W) zero-padded; both FJ_TENSOR(float, 2)."""
    h2, w2 = dst.shape
    kernel.launch(grid=((w2 + BOX_X - 1) // BOX_X, (h2 + BOX_Y - 1) // BOX_Y), block=256,
                  args=[fleetjit.Tensor(src, box=(BOX_Y, BOX_X), oob="zeros"),
                        fleetjit.Tensor(dst, box=(BOX_Y, BOX_X))],
                  shared_bytes=BOX_X * BOX_Y * 4 + 128, stream=stream)


def expected_padded(np, src_host, shape):
    want = np.zeros(shape, dtype=np.float32)
    want[:src_host.shape[0], :src_host.shape[1]] = src_host
    return want


def check_equal(np, got, want, what):
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape}, want {want.shape}")
    bad = int(np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)))
    if bad:
        raise AssertionError(f"{what}: {bad} of {want.size} elements differ")
    return f"{want.shape[0]}x{want.shape[1]} bit-exact"


def torch_cases(rt, kernel, saxpy, np, stream_wrap):
    import torch
    if not torch.cuda.is_available():
        raise Skip("torch sees no CUDA device")

    def strided_view():
        big = torch.randn(1200, 1700, device="cuda")
        return big[3:1003:1, 5:1505]  # 1000 x 1500, row stride 1700, misaligned start

    @case("torch strided view -> tensor, default stream")
    def default_stream():
        src = strided_view()
        dst = torch.full((1040, 1536), float("nan"), device="cuda")
        stream = torch.cuda.current_stream()
        launch_tiled_copy(kernel, src, dst, stream)
        torch.cuda.synchronize()
        return check_equal(np, dst.cpu().numpy(),
                           expected_padded(np, src.cpu().numpy(), dst.shape), "out")

    @case("torch strided view -> tensor, side stream (current)")
    def side_stream():
        if not stream_wrap:
            raise AssertionError("libfleetjit.so.1 lacks fj_stream_wrap: cannot launch on "
                                 "torch's side stream")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            src = strided_view()  # produced on s
            dst = torch.full((1040, 1536), float("nan"), device="cuda")
            launch_tiled_copy(kernel, src, dst, torch.cuda.current_stream())
            got = dst.cpu().numpy()  # ordered after the kernel on s
            src_host = src.cpu().numpy()
        return check_equal(np, got, expected_padded(np, src_host, dst.shape), "out")

    @case("torch saxpy, pointer arguments, side stream (current)")
    def saxpy_side_stream():
        if not stream_wrap:
            raise AssertionError("libfleetjit.so.1 lacks fj_stream_wrap")
        n = 1 << 20
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = torch.randn(n, device="cuda")
            y = torch.randn(n, device="cuda")
            want = (np.float32(2.5) * x.cpu().numpy() + y.cpu().numpy()).astype(np.float32)
            saxpy.launch((n + 255) // 256, 256, [y, x, 2.5, n],
                         stream=torch.cuda.current_stream().cuda_stream)
            got = y.cpu().numpy()
        bad = int(np.count_nonzero(np.abs(got - want) > 1e-5 * (1 + np.abs(want))))
        if bad:
            raise AssertionError(f"{bad} of {n} elements differ")
        return f"{n} elements"

    default_stream()
    side_stream()
    saxpy_side_stream()


def cupy_cases(rt, kernel, np, stream_wrap):
    import cupy

    def run(src, name):
        dst = cupy.full((1040, 1536), cupy.nan, dtype=cupy.float32)
        launch_tiled_copy(kernel, src, dst, cupy.cuda.get_current_stream())
        got = cupy.asnumpy(dst, stream=cupy.cuda.get_current_stream())
        cupy.cuda.get_current_stream().synchronize()
        return check_equal(np, got, expected_padded(np, cupy.asnumpy(src), dst.shape), name)

    @case("cupy array -> array, null stream")
    def null_stream():
        return run(cupy.random.standard_normal((1000, 1500), dtype=cupy.float32), "out")

    @case("cupy strided view -> array, non-blocking stream (current)")
    def side_stream():
        if not stream_wrap:
            raise AssertionError("libfleetjit.so.1 lacks fj_stream_wrap: cannot launch on "
                                 "CuPy's stream")
        with cupy.cuda.Stream(non_blocking=True):
            big = cupy.random.standard_normal((1000, 3000), dtype=cupy.float32)
            return run(big[:, ::2], "out")  # inner stride 2: no TMA map, cp.async

    null_stream()
    side_stream()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--allow-missing", action="store_true",
                    help="skip (not fail) when torch, CuPy or the GPU are absent")
    opts = ap.parse_args()
    missing = "SKIP" if opts.allow_missing else "FAIL"
    print(f"fleetjit binding {fleetjit.__version__}, library {fleetjit.library_path()}")
    try:
        import numpy as np
    except ImportError:
        record(missing, "numpy", "not installed")
        return summary()
    try:
        rt = fleetjit.Runtime()
    except fleetjit.FleetjitError as e:
        record("FAIL", "runtime", str(e))
        return summary()
    with rt:
        print("library %d.%d; " % fleetjit.library_version() +
              f"{rt.device_count} device(s) {rt.driver_error}")
        for d in rt.devices:
            print(f"  device {d.ordinal}: {d.name}, sm_{d.compute_capability[0]}"
                  f"{d.compute_capability[1]}, copy impl {d.plan.impl}")
        if rt.device_count == 0:
            record(missing, "gpu", rt.driver_error or "no CUDA device")
            return summary()
        stream_wrap = _ffi.has("fj_stream_wrap")
        print(f"fj_stream_wrap: {'present' if stream_wrap else 'ABSENT'}")
        if not TILED_COPY.exists():
            record("FAIL", "tiled_copy source", f"{TILED_COPY} is missing")
            return summary()
        module = rt.build(TILED_COPY.read_text(), name="examples/tiled_copy.cu")
        kernel = module.kernel("tiled_copy")
        saxpy = rt.build(SAXPY, name="saxpy.cu").kernel("saxpy")
        print(f"tiled_copy built for {module.info.target} ({module.info.copy_impl}, "
              f"{module.info.cache_result})")
        for name, runner in (("torch", lambda: torch_cases(rt, kernel, saxpy, np, stream_wrap)),
                             ("cupy", lambda: cupy_cases(rt, kernel, np, stream_wrap))):
            try:
                runner()
            except ImportError as e:
                record(missing, name, f"not installed ({e})")
            except Skip as e:
                record(missing, name, str(e))
    return summary()


def summary():
    counts = {s: sum(1 for r in results if r[0] == s) for s in ("PASS", "FAIL", "SKIP")}
    verdict = "FAIL" if counts["FAIL"] or not counts["PASS"] else "PASS"
    print(f"\ngpu_check: {verdict} ({counts['PASS']} passed, {counts['FAIL']} failed, "
          f"{counts['SKIP']} skipped)")
    for status, name, detail in results:
        if status != "PASS":
            print(f"  {status} {name}: {detail}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
