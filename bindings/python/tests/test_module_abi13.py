"""ABI 1.3's entries through the binding on a machine without a GPU:
complex arguments packed as cuFloatComplex / cuDoubleComplex, the build log
of a named-target build (memory hit included), and the errors of the
device entries (no GPU, closed handles, bad attribute names)."""
import ctypes
import random
import struct
import unittest

import _env  # noqa: F401
import fleetjit
from fleetjit import _ffi, args as fj_args

WARNS = r"""
extern "C" __global__ void k(int* out) {
  int unused_%d;
  out[0] = %d;
}
"""


class ComplexArgsTest(unittest.TestCase):
    def test_python_and_explicit_complex_pack_as_cucomplex(self):
        rng = random.Random()
        z64 = complex(rng.uniform(-9, 9), rng.uniform(-9, 9))
        z128 = complex(rng.uniform(-9, 9), rng.uniform(-9, 9))
        keep, arr, n = fj_args.build([fleetjit.c64(z64), z128, fleetjit.c128(z64)])
        self.assertEqual(n, 3)
        self.assertEqual(arr[0].kind, 16)
        self.assertEqual(struct.pack("<Q", arr[0].v.u64),
                         struct.pack("<ff", z64.real, z64.imag))
        for i, z in ((1, z128), (2, z64)):
            self.assertEqual(arr[i].kind, 17)
            self.assertEqual(ctypes.string_at(arr[i].v.bytes, 16),
                             struct.pack("<dd", z.real, z.imag))

    def test_numpy_complex_scalars(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy is not installed")
        keep, arr, n = fj_args.build([np.complex64(1.5 - 2j), np.complex128(3 + 4j)])
        self.assertEqual((arr[0].kind, arr[1].kind), (16, 17))
        self.assertEqual(struct.pack("<Q", arr[0].v.u64), struct.pack("<ff", 1.5, -2.0))
        self.assertEqual(ctypes.string_at(arr[1].v.bytes, 16), struct.pack("<dd", 3, 4))


class BuildLogTest(unittest.TestCase):
    def test_the_log_keeps_warnings_and_comes_back_on_a_hit(self):
        salt = random.randrange(1 << 30)
        src = WARNS % (salt, salt % 1000)
        with fleetjit.Runtime() as rt:
            try:
                mod = rt.build(src, name="warns.cu", target="sm_90")
            except fleetjit.FleetjitError as e:
                if e.code == "UNAVAILABLE":
                    self.skipTest(f"no NVRTC: {e.message}")
                raise
            log = mod.build_log
            self.assertIn("warning", log)
            self.assertIn(f"unused_{salt}", log)
            again = rt.build(src, name="warns.cu", target="sm_90")
            self.assertEqual(again.info.cache_result, "memory_hit")
            self.assertEqual(again.build_log, log)
            mod.close()
            with self.assertRaises(fleetjit.FleetjitError) as cm:
                mod.build_log
            self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")


class DeviceEntriesTest(unittest.TestCase):
    def test_without_a_gpu_the_device_entries_say_so(self):
        with fleetjit.Runtime() as rt:
            if rt.device_count > 0:
                self.skipTest("a GPU is present (tests/gpu covers it)")
            for call in (lambda: rt.stream_priority_range(0),
                         lambda: rt.stream_with_priority(0, 0),
                         lambda: rt.set_persisting_l2(0, 1 << 20)):
                with self.assertRaises(fleetjit.FleetjitError) as cm:
                    call()
                self.assertEqual(cm.exception.code, "UNAVAILABLE")

    def test_a_closed_module_is_refused(self):
        with fleetjit.Runtime() as rt:
            try:
                mod = rt.build("__device__ int counter;\n"
                               "extern \"C\" __global__ void k() { counter = 1; }",
                               name="g.cu", target="sm_90")
            except fleetjit.FleetjitError as e:
                if e.code == "UNAVAILABLE":
                    self.skipTest(f"no NVRTC: {e.message}")
                raise
            mod.close()
            for call in (lambda: mod.get_global("counter"),
                         lambda: mod.global_write("counter", b"\0" * 4),
                         lambda: mod.global_read("counter", 4)):
                with self.assertRaises(fleetjit.FleetjitError) as cm:
                    call()
                self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")

    def test_unknown_kernel_attributes_are_refused(self):
        k = fleetjit.Kernel.__new__(fleetjit.Kernel)
        with self.assertRaises(ValueError):
            k.set_attribute("carveout_percent", 50)


if __name__ == "__main__":
    unittest.main()
