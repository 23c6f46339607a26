"""fleetjit.tune (fj_tune) on a machine without a GPU: the structs match the
header's sizes, bad spaces are refused naming the field, status names."""
import ctypes
import os
import subprocess
import unittest

import _env  # noqa: F401  (sets FLEETJIT_LIBRARY, the cache dir, sys.path)
import fleetjit
from fleetjit import tuning as fj_tune

SOURCE = r'''
extern "C" __global__ void fill(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = TILE;
}
'''


class TuneTest(unittest.TestCase):
    def setUp(self):
        self.rt = fleetjit.Runtime()

    def tearDown(self):
        self.rt.close()

    def kwargs(self, **over):
        kw = dict(macro_sets=["-DTILE=1", "-DTILE=2"], shapes=[64, (128, 1, 1)],
                  grid_extent=(4096,), grid_divisor=("block.x",),
                  args=[fleetjit.pointer(0x1000), fleetjit.i32(4096)],
                  outputs=[(0x1000, 4096 * 4)])
        kw.update(over)
        return kw

    def assertRefused(self, field, **over):
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            fleetjit.tune(self.rt, SOURCE, "fill", **self.kwargs(**over))
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT", cm.exception.message)
        self.assertIn(field, cm.exception.message)

    def test_bad_spaces_are_refused(self):
        self.assertRefused("num_shapes", shapes=[])
        self.assertRefused("shapes[1]", shapes=[64, 64])
        self.assertRefused("macro_sets[1]", macro_sets=["-DTILE=1", " -DTILE=1"])
        self.assertRefused("check_fn", outputs=[])
        self.assertRefused("output_bytes[0]", outputs=[(0x1000, 0)])
        with self.assertRaises(fleetjit.FleetjitError):
            fleetjit.tune(self.rt, SOURCE, "fill", **self.kwargs(shapes=[(1, 2, 3, 4)]))

    def test_without_a_gpu_the_call_says_why(self):
        if self.rt.device_count:
            self.skipTest("a GPU is present")
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            fleetjit.tune(self.rt, SOURCE, "fill", **self.kwargs())
        self.assertNotEqual(cm.exception.code, "INTERNAL")

    def test_status_names(self):
        self.assertEqual(fj_tune.status_name(0), "ok")
        self.assertEqual(fj_tune.status_name(3), "wrong_output")
        self.assertEqual(fj_tune.status_name(99), "unknown")

    def test_struct_sizes_match_the_header(self):
        # Sizes as a C compiler lays them out on LP64 (the header's structs).
        self.assertEqual(ctypes.sizeof(fj_tune.fj_tune_shape), 48)
        self.assertEqual(ctypes.sizeof(fj_tune.fj_tune_summary), 136)
        self.assertEqual(ctypes.sizeof(fj_tune.fj_tune_row), 152)
        self.assertEqual(ctypes.sizeof(fj_tune.fj_tune_options), 256)


if __name__ == "__main__":
    unittest.main()
