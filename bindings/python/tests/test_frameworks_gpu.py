"""On a GPU host with torch (and JAX): the torch custom op under eager,
torch.compile (fullgraph: no graph break) and CUDA graph capture; the JAX
FFI call inside jax.jit; the binding's tensor refusals and warnings. Each
test skips, saying why, without a GPU or the framework."""
import os
import unittest
import warnings

import _env
import fleetjit
from fleetjit import runtime as fj_runtime


def _have_cuda_torch():
    try:
        import torch
    except ImportError as e:
        return False, f"no torch ({e})"
    if not torch.cuda.is_available():
        return False, "torch sees no CUDA device"
    try:
        with fleetjit.Runtime() as rt:
            if rt.device_count == 0:
                return False, f"no GPU for fleetjit: {rt.driver_error}"
    except fleetjit.FleetjitError as e:
        return False, str(e)
    return True, ""


TORCH_OK, TORCH_WHY = _have_cuda_torch()
needs_torch = unittest.skipUnless(TORCH_OK, TORCH_WHY)


def _both_paths(test):
    """Runs `test(self)` through the compiled path (when built) and ctypes."""
    def run(self):
        from fleetjit import _fast
        paths = [False] + ([True] if _fast.available()[0] else [])
        for fast in paths:
            with self.subTest(compiled_path=fast):
                fj_runtime.USE_FAST_PATH = fast
                try:
                    test(self)
                finally:
                    fj_runtime.USE_FAST_PATH = True
    run.__name__ = test.__name__
    return run


@needs_torch
class TorchOpTest(unittest.TestCase):
    def setUp(self):
        import torch
        from fleetjit import torch_ops
        self.torch, self.ops = torch, torch_ops
        g = torch.Generator(device="cuda")
        g.manual_seed(int.from_bytes(os.urandom(4), "little"))
        self.rand = lambda *shape: torch.randn(*shape, device="cuda", generator=g)

    def test_eager_matches_reference(self):
        x, y = self.rand(100003), self.rand(100003)
        a = float(self.rand(1).item())
        out = self.torch.ops.fleetjit.saxpy(x, y, a)
        self.torch.testing.assert_close(out, a * x + y)
        self.assertNotEqual(out.data_ptr(), y.data_ptr())  # functional

    def test_torch_compile_fullgraph(self):
        torch = self.torch

        def f(x, y):
            return torch.relu(torch.ops.fleetjit.saxpy(x * 2.0, y, 3.0)) + 1.0
        compiled = torch.compile(f, fullgraph=True)  # a graph break raises
        for n in (4099, 65536):
            x, y = self.rand(n), self.rand(n)
            torch.testing.assert_close(compiled(x, y), torch.relu(6.0 * x + y) + 1.0)
        explain = torch._dynamo.explain(f)(self.rand(8), self.rand(8))
        self.assertEqual(explain.graph_break_count, 0, explain.break_reasons)

    def test_cuda_graph_capture_and_replay(self):
        torch = self.torch
        n = 1 << 16
        x, y = self.rand(n), self.rand(n)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # build, wrap the stream: before capture
            for _ in range(2):
                out = torch.ops.fleetjit.saxpy(x, y, 0.5)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            out = torch.ops.fleetjit.saxpy(x, y, 0.5)
            out2 = out * 3.0
        for _ in range(3):  # fresh inputs each replay, outputs poisoned
            x.copy_(self.rand(n))
            y.copy_(self.rand(n))
            out.fill_(float("nan"))
            out2.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            torch.testing.assert_close(out, 0.5 * x + y)
            torch.testing.assert_close(out2, 3.0 * (0.5 * x + y))

    def test_a_users_own_op_as_the_readme_registers_it(self):
        torch, torch_ops = self.torch, self.ops
        src = ('extern "C" __global__ void scale(float* o, const float* x, float a, int n)'
               '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = a * x[i]; }')
        scale = torch_ops.KernelCache(torch_ops.default_runtime(), src, "scale")

        @torch.library.custom_op("fleetjit_test::scale", mutates_args=(), device_types="cuda")
        def scale_op(x: torch.Tensor, a: float) -> torch.Tensor:
            x = x.contiguous()
            out = torch.empty_like(x)
            torch_ops.launch(scale.get(x.device), (x.numel() + 255) // 256, 256,
                             [out, x, a, x.numel()])
            return out
        scale_op.register_fake(lambda x, a: x.new_empty(x.shape))  # contiguous, as the op's
        f = torch.compile(lambda x: scale_op(x, 2.5).relu(), fullgraph=True)
        x = self.rand(64, 33).t()  # non-contiguous in: the op makes it so
        torch.testing.assert_close(f(x), (2.5 * x).relu())

    def test_runs_on_current_stream(self):
        torch = self.torch
        s = torch.cuda.Stream()
        n = 1 << 20
        with torch.cuda.stream(s):
            x, y = self.rand(n), self.rand(n)
            torch.cuda._sleep(20_000_000)  # the op must queue behind this
            out = torch.ops.fleetjit.saxpy(x, y, 2.0)
            ref = 2.0 * x + y
        s.synchronize()
        torch.testing.assert_close(out, ref)


@needs_torch
class TorchArgumentTest(unittest.TestCase):
    def setUp(self):
        import torch
        self.torch = torch
        self.rt = fleetjit.Runtime()
        self.k = self.rt.build(_env.SAXPY, name="saxpy.cu").kernel("saxpy")

    def tearDown(self):
        self.rt.close()

    @_both_paths
    def test_tensors_launch_on_torch_stream(self):
        torch = self.torch
        n = 10007
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        ref = 1.5 * x + y
        s = torch.cuda.current_stream()
        self.k.launch((n + 255) // 256, 256, [y, x, 1.5, n], stream=s)
        torch.cuda.synchronize()
        torch.testing.assert_close(y, ref)

    @_both_paths
    def test_non_contiguous_view_is_refused(self):
        torch = self.torch
        base = torch.randn(64, 64, device="cuda")
        view = base.t()  # strides (1, 64): not row-major
        y = torch.randn(64 * 64, device="cuda")
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            self.k.launch(16, 256, [y, view, 1.0, 64 * 64],
                          stream=torch.cuda.current_stream())
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        self.assertIn("non-contiguous", cm.exception.message)
        self.assertIn("argument 1", cm.exception.message)
        # A column slice through __cuda_array_interface__ (not torch): same.
        try:
            import cupy
        except ImportError:
            return
        c = cupy.asarray(base)[:, ::2]
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            self.k.launch(16, 256, [y, c, 1.0, 64 * 32],
                          stream=torch.cuda.current_stream())
        self.assertIn("non-contiguous", cm.exception.message)

    @_both_paths
    def test_dtype_mismatch_warns(self):
        torch = self.torch
        n = 256
        # 2n bf16 values: the n floats the kernel reads stay inside.
        x = torch.randn(2 * n, device="cuda").to(torch.bfloat16)
        y = torch.randn(n, device="cuda")
        self.assertEqual(self.k.param_dtypes, ["float32", "float32", None, None])
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.k.launch(1, 256, [y, x, 1.0, n], stream=torch.cuda.current_stream())
        torch.cuda.synchronize()
        msgs = [str(m.message) for m in w if issubclass(m.category, RuntimeWarning)]
        self.assertTrue(any("bfloat16" in m and "float32" in m for m in msgs), msgs)
        with warnings.catch_warnings(record=True) as w:  # the right dtype: silent
            warnings.simplefilter("always")
            self.k.launch(1, 256, [y, y, 1.0, n], stream=torch.cuda.current_stream())
        self.assertEqual([m for m in w if issubclass(m.category, RuntimeWarning)], [])


@needs_torch
class TorchShimTest(unittest.TestCase):
    """The compiled path's torch shim (fleetjit/_fastlaunch.c): on for this
    host's torch, and reading CUDA tensors as torch's own methods do."""

    def setUp(self):
        from fleetjit import _fast
        if _fast.module is None:
            self.skipTest(f"compiled path: {_fast.why_not}")
        import torch
        self.torch, self.fast = torch, _fast
        if _fast.torch_pending:
            _fast.maybe_register()

    def test_on_for_this_torch(self):
        self.assertEqual(self.fast.torch_shim, "on")

    def test_reads_cuda_tensors_as_torch_does(self):
        torch, read = self.torch, self.fast.module.torch_shim_read
        if self.fast.torch_shim != "on":
            self.skipTest(self.fast.torch_shim)
        g = torch.Generator(device="cuda")
        g.manual_seed(int.from_bytes(os.urandom(4), "little"))
        cuda = self.fast.torch_shim_codes["cuda"]
        dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64,
                  torch.int32, torch.int64, torch.uint8, torch.bool]
        for i in range(40):
            shape = tuple(int(d) for d in torch.randint(1, 9, (1 + i % 4,)))
            base = torch.randn(*shape, device="cuda", generator=g).to(dtypes[i % len(dtypes)])
            views = [base, base[..., 1:], base.transpose(0, -1), base.flatten()[i % 3:],
                     base.unsqueeze(0).expand(2, *shape)]
            for t in views:
                with self.subTest(shape=shape, dtype=t.dtype, strides=t.stride()):
                    got = read(t)
                    self.assertIsNotNone(got)
                    ptr, device, code, contiguous = got
                    self.assertEqual((ptr, device, contiguous),
                                     (t.data_ptr(), cuda, t.is_contiguous()))
                    self.assertIs(self.fast.torch_shim_dtypes.get(code), t.dtype)
        # A subclass (nn.Parameter) is not read through the shim.
        with self.assertRaises(TypeError):
            read(torch.nn.Parameter(torch.randn(4, device="cuda")))

    def test_launch_reads_the_tensors_through_the_shim(self):
        torch = self.torch
        if self.fast.torch_shim != "on":
            self.skipTest(self.fast.torch_shim)
        with fleetjit.Runtime() as rt:
            k = rt.build(_env.SAXPY, name="saxpy.cu").kernel("saxpy")
            n = 4099
            x = torch.randn(2 * n, device="cuda")[n:]  # an offset: data_ptr past the base
            y = torch.randn(n, device="cuda")
            ref = 0.75 * x + y
            k.launch((n + 255) // 256, 256, [y, x, 0.75, n], stream=torch.cuda.current_stream())
            torch.cuda.synchronize()
            torch.testing.assert_close(y, ref)

    def test_registration_warns_nothing(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.fast.register()
        self.assertEqual([str(m.message) for m in w], [])
        self.assertEqual(self.fast.torch_shim, "on")

    def test_environment_turns_it_off(self):
        import subprocess
        import sys
        code = ("import torch, fleetjit\n"
                "from fleetjit import _fast\n"
                "_fast.maybe_register()\n"
                "print(_fast.module is not None, _fast.torch_shim)\n")
        package = os.path.dirname(os.path.dirname(fleetjit.__file__))
        path = os.pathsep.join(p for p in (package, os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, FLEETJIT_TORCH_SHIM="0", PYTHONPATH=path)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split(), ["True", "FLEETJIT_TORCH_SHIM=0"])


@needs_torch
class CopyGpuTest(unittest.TestCase):
    """fj_copy / fj_prefetch / fj_peer_query on torch tensors, DLPack
    capsules and CuPy arrays; random data, poisoned outputs."""

    def setUp(self):
        import torch
        self.torch = torch
        self.rt = fleetjit.Runtime()
        self.s = torch.cuda.current_stream()

    def tearDown(self):
        self.rt.close()

    def test_window_copy_from_tensors_and_capsules(self):
        torch = self.torch
        from torch.utils.dlpack import to_dlpack
        src = torch.randn(64, 96, device="cuda")
        dst = torch.full((16, 32), float("nan"), device="cuda")
        self.rt.copy(dst, src, src_start=(8, 40), stream=self.s)
        torch.cuda.synchronize()
        torch.testing.assert_close(dst, src[8:24, 40:72])
        dst2 = torch.full((16, 32), float("nan"), device="cuda")
        self.rt.copy(to_dlpack(dst2), to_dlpack(src), src_start=(1, 2), stream=self.s)
        torch.cuda.synchronize()
        torch.testing.assert_close(dst2, src[1:17, 2:34])

    def test_out_of_bounds_zeros_and_gather(self):
        torch = self.torch
        src = torch.randn(64, 96, device="cuda")
        dst = torch.full((16, 32), float("nan"), device="cuda")
        self.rt.copy(dst, src, src_start=(-4, 80), oob="zeros", stream=self.s)
        padded = torch.zeros(72, 128, device="cuda")
        padded[4:68, :96] = src
        torch.cuda.synchronize()
        torch.testing.assert_close(dst, padded[0:16, 80:112])
        rows = torch.randint(0, 64, (16,), device="cuda", dtype=torch.int32)
        dst.fill_(float("nan"))
        self.rt.copy(dst, src, src_start=(0, 8), gather_index=rows, stream=self.s)
        torch.cuda.synchronize()
        torch.testing.assert_close(dst, src[rows.long(), 8:40])

    def test_cupy_source_and_prefetch_and_peers(self):
        torch = self.torch
        try:
            import cupy
        except ImportError:
            self.skipTest("no CuPy")
        src = cupy.random.standard_normal((32, 32), dtype=cupy.float32)
        dst = torch.full((32, 32), float("nan"), device="cuda")
        cupy.cuda.Device().synchronize()
        self.rt.copy(dst, src)
        torch.cuda.synchronize()
        torch.testing.assert_close(dst, torch.as_tensor(src, device="cuda"))
        before = dst.clone()
        self.rt.prefetch(dst, mode="local_l2", stream=self.s)
        self.rt.prefetch(dst.data_ptr(), dst.numel() * 4, stream=self.s)
        torch.cuda.synchronize()
        torch.testing.assert_close(dst, before)  # a hint: data unchanged
        self.assertTrue(self.rt.peer_query(0, 0))


def _have_jax():
    if not TORCH_OK:
        return False, TORCH_WHY
    try:
        import jax
        if not any(d.platform == "gpu" for d in jax.devices()):
            return False, "JAX sees no GPU"
    except Exception as e:  # noqa: BLE001 - any import/backend failure skips
        return False, f"no JAX GPU backend ({type(e).__name__}: {e})"
    return True, ""


JAX_OK, JAX_WHY = _have_jax() if os.environ.get("FLEETJIT_TEST_JAX", "1") != "0" \
    else (False, "FLEETJIT_TEST_JAX=0")


@unittest.skipUnless(JAX_OK, JAX_WHY)
class JaxFfiTest(unittest.TestCase):
    def test_saxpy_inside_jit(self):
        import jax
        import jax.numpy as jnp
        import numpy as np
        from fleetjit import jax_ffi
        rt = fleetjit.Runtime()
        self.addCleanup(rt.close)
        k = rt.build(_env.SAXPY, name="saxpy.cu").kernel("saxpy")
        rng = np.random.default_rng()
        for n in (1000, 1 << 18):
            a = float(rng.uniform(-3, 3))
            call = jax_ffi.kernel_call(
                k, jax.ShapeDtypeStruct((n,), jnp.float32),
                order=(jax_ffi.result(0, num_inputs=2), 0, jax_ffi.F32, jax_ffi.COUNT),
                f32s=(a,), input_output_aliases={1: 0})

            @jax.jit
            def f(x, y):
                return call(x * 1.0, y) * 2.0  # XLA ops around the FFI call
            x = jnp.asarray(rng.standard_normal(n, dtype=np.float32))
            y = jnp.asarray(rng.standard_normal(n, dtype=np.float32))
            got = np.asarray(f(x, y))
            ref = 2.0 * (a * np.asarray(x) + np.asarray(y))
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


if __name__ == "__main__":
    unittest.main()
