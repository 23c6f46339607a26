#!/usr/bin/env python3
"""fj_stream_wrap with PyTorch (run on the GPU host by hand; needs torch).

On a non-default stream made with torch.cuda.Stream() and made current:
torch writes a tensor, fleetjit launches a kernel that reads it on the
wrapped stream, torch reads the result, with no synchronisation in between.
A spinning torch kernel (a long matmul chain) first keeps the stream busy,
so a missing dependency would race. Compared with a host reference; prints
PASS or FAIL and exits non-zero on failure (2 when torch or a GPU is
missing).

    FLEETJIT_LIBRARY=.device/build/lib/libfleetjit.so.1 \
        python3 bindings/python/tests/torch_stream_test.py
"""
import pathlib
import sys

# bindings/python: this tree's package.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

AFFINE = r'''
extern "C" __global__ void affine(const float* x, float* y, float a, float b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + b;
}'''


def main():
    try:
        import torch
    except ImportError:
        print("FAIL: torch is not installed")
        return 2
    if not torch.cuda.is_available():
        print("FAIL: torch sees no GPU")
        return 2
    import fleetjit

    rt = fleetjit.Runtime()
    kernel = rt.build(AFFINE, name="torch_stream_test.cu").kernel("affine", device=0)
    failures = []
    side = torch.cuda.Stream(device=0)
    gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(__import__("os").urandom(4), "little"))
    n = 1 << 22
    a, b = 1.75, -0.5
    for rep in range(3):
        with torch.cuda.stream(side):
            current = torch.cuda.current_stream()
            assert current.cuda_stream == side.cuda_stream and current.cuda_stream != 0
            # Keep the stream busy, then write the input: both on `side`.
            m = torch.randn(2048, 2048, device="cuda", generator=gen)
            for _ in range(8):
                m = torch.tanh(m @ m)
            x = torch.randn(n, device="cuda", generator=gen) + m[0, 0] * 0
            y = torch.full((n,), float("nan"), device="cuda")  # poisoned
            # fleetjit on torch's current stream (wrapped), no sync before...
            kernel.launch(264, 256, [x, y, fleetjit.f32(a), fleetjit.f32(b), fleetjit.i32(n)],
                          stream=current)
            # ...and torch reads the result on the same stream, no sync after.
            got = (y * 2.0).cpu()  # .cpu() waits for `side` only
        want = (x.cpu() * a + b) * 2.0
        if not torch.allclose(got, want, rtol=1e-5, atol=1e-5):
            bad = (~torch.isclose(got, want, rtol=1e-5, atol=1e-5)).sum().item()
            failures.append(f"rep {rep}: {bad} of {n} elements differ from the reference")
    # The wrapper is forgotten with the runtime; torch's stream still works.
    rt.close()
    with torch.cuda.stream(side):
        z = torch.ones(16, device="cuda") * 3
    side.synchronize()
    if z.sum().item() != 48:
        failures.append("torch's stream is unusable after the runtime closed")
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else "FAIL")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
