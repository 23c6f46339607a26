"""Launches on a live GPU; each test skips, saying why, where there is none
(or where torch / CuPy are missing). gpu_check.py is the fuller check."""
import array
import random
import struct
import unittest

import _env
import fleetjit


def _device_count():
    try:
        with fleetjit.Runtime() as rt:
            return rt.device_count, rt.driver_error
    except fleetjit.FleetjitError as e:
        return 0, str(e)


COUNT, WHY = _device_count()
needs_gpu = unittest.skipUnless(COUNT > 0, f"no GPU: {WHY or 'no CUDA device'}")


@needs_gpu
class GpuTest(unittest.TestCase):
    def setUp(self):
        self.rt = fleetjit.Runtime()

    def tearDown(self):
        self.rt.close()

    def test_saxpy_on_device_buffers(self):
        n = 100003
        x = array.array("f", (random.uniform(-4, 4) for _ in range(n)))
        y = array.array("f", (random.uniform(-4, 4) for _ in range(n)))
        a = 1.75
        k = self.rt.build(_env.SAXPY, name="saxpy.cu").kernel("saxpy")
        with self.rt.alloc(4 * n) as dx, self.rt.alloc(4 * n) as dy:
            dx.upload(x)
            dy.upload(y)
            k.launch((n + 255) // 256, 256, [dy, dx, a, n])
            out = array.array("f")
            out.frombytes(dy.download())
        ref = [struct.unpack("f", struct.pack("f", a * xi + yi))[0] for xi, yi in zip(x, y)]
        bad = sum(1 for o, r in zip(out, ref) if abs(o - r) > 1e-5 * (1 + abs(r)))
        self.assertEqual(bad, 0)
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            k.launch(1, 1, [dy, dx, a])  # too few arguments
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")

    def test_device_to_device_copy(self):
        n = 1 << 16
        data = bytes(random.getrandbits(8) for _ in range(n))
        with self.rt.alloc(n) as src, self.rt.alloc(n) as dst, \
                self.rt.create_stream() as s:
            src.upload(data)
            dst.fill(0xA5)  # poisoned
            dst.copy_from(src, n // 2, stream=s)
            s.synchronize()
            got = dst.download()
        self.assertEqual(got[:n // 2], data[:n // 2])
        self.assertEqual(got[n // 2:], bytes([0xA5]) * (n - n // 2))
        with self.assertRaises(fleetjit.FleetjitError):
            dst.copy_from(src, n + 1)

    def test_template_kernel_on_an_owned_stream(self):
        n = 4096
        m = self.rt.build(_env.SAXPY, name_expressions=["axpy<float>"])
        k = m.kernel("axpy<float>")
        self.assertGreater(k.info.num_params, 0)
        with self.rt.create_stream() as s, self.rt.alloc(4 * n) as dx, \
                self.rt.alloc(4 * n) as dy:
            dx.upload(array.array("f", [1.0] * n))
            dy.upload(array.array("f", [2.0] * n))
            k.launch(8, 128, [dy, dx, fleetjit.f32(3.0), n], stream=s)
            s.synchronize()
            out = array.array("f")
            out.frombytes(dy.download())
        self.assertEqual(set(out), {5.0})

    def test_torch_tensors(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        if not torch.cuda.is_available():
            self.skipTest("torch sees no CUDA device")
        n = 10000
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        ref = 2.0 * x + y
        k = self.rt.build(_env.SAXPY).kernel("saxpy")
        k.launch((n + 255) // 256, 256, [y, x, 2.0, n])  # default stream
        torch.cuda.synchronize()
        self.assertTrue(torch.allclose(y, ref))

    def test_cupy_arrays(self):
        try:
            import cupy
        except ImportError:
            self.skipTest("cupy is not installed")
        n = 10000
        x = cupy.random.randn(n, dtype=cupy.float32)
        y = cupy.random.randn(n, dtype=cupy.float32)
        ref = 2.0 * x + y
        k = self.rt.build(_env.SAXPY).kernel("saxpy")
        k.launch((n + 255) // 256, 256, [y, x, 2.0, n])  # legacy default stream
        cupy.cuda.runtime.deviceSynchronize()
        self.assertTrue(bool(cupy.allclose(y, ref)))


if __name__ == "__main__":
    unittest.main()
