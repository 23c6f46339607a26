"""fleetjit.tune (fj_tune) on a machine without a GPU: the structs match the
header's sizes, bad spaces are refused naming the field, the base build is
converted as Runtime.build converts it, status names."""
import ctypes
import os
import pathlib
import subprocess
import tempfile
import unittest
from unittest import mock

import _env  # noqa: F401  (sets FLEETJIT_LIBRARY, the cache dir, sys.path)
import fleetjit
from fleetjit import _ffi
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

    def test_numbers_past_their_c_fields_are_refused(self):
        # ctypes wraps a uint32/uint64 field silently: each was tuned with
        # the wrapped value (or raised ValueError for a 4th dimension).
        big32, big64 = 1 << 32, 1 << 64
        self.assertRefused("shapes[1].block[0]", shapes=[64, (big32 + 128, 1, 1)])
        self.assertRefused("shapes[0].shared_bytes", shapes=[{"block": 64, "shared_bytes": -1}])
        self.assertRefused("shapes[0].cluster[2]", shapes=[{"block": 64, "cluster": (1, 1, big32)}])
        self.assertRefused("grid[0]", grid=big32 + 1)
        self.assertRefused("grid: expected 1 to 3", grid=(1, 1, 1, 1))
        self.assertRefused("grid_extent[1]", grid_extent=(4096, big64))
        self.assertRefused("grid_extent[0]", grid_extent=(-1,))
        self.assertRefused("grid_divisor has 4", grid_divisor=("", "", "", "TILE"))
        self.assertRefused("warmup", warmup=big32)
        self.assertRefused("samples", samples=-1)
        self.assertRefused("timeout_ms", timeout_ms=big32 + 5)
        self.assertRefused("outputs[0]'s address", outputs=[(-0x1000, 64)])
        self.assertRefused("outputs[0]'s size", outputs=[(0x1000, big64 + 64)])
        self.assertRefused("not an integer", samples=2.5)

    def test_base_build_options_reach_fj_tune(self):
        # The library reads the base build before it looks for a device, so
        # without a GPU these are its own INVALID_ARGUMENT naming the field
        # (UNAVAILABLE before: the options never reached fj_tune).
        folder = tempfile.mkdtemp(prefix="fleetjit-tune-inc-")
        self.addCleanup(os.rmdir, folder)
        self.assertRefused("include_dirs[1]", include_dirs=[pathlib.Path(folder), ""])
        self.assertRefused("target", target="sm_9x")

    def test_an_embedded_nul_gets_builds_error(self):
        def build_error(source, **over):
            with self.assertRaises(fleetjit.FleetjitError) as cm:
                self.rt.build(source, target="sm_90", **over)
            return cm.exception

        def tune_error(source, **over):
            with self.assertRaises(fleetjit.FleetjitError) as cm:
                fleetjit.tune(self.rt, source, "fill", **self.kwargs(**over))
            return cm.exception

        cases = [("source", SOURCE + "\0junk", {}),
                 ("name", SOURCE, {"name": "fill.cu\0x"}),
                 ("nvrtc_options", SOURCE, {"nvrtc_options": ["-DX=1\0-DY"]}),
                 ("name_expressions", SOURCE, {"name_expressions": ["fill\0"]}),
                 ("include_dirs", SOURCE, {"include_dirs": ["/tmp\0/x"]})]
        for field, source, over in cases:
            with self.subTest(field=field):
                want = build_error(source, **over)
                got = tune_error(source, **over)
                self.assertEqual(got.code, "INVALID_ARGUMENT", got.message)
                self.assertEqual(got.message, want.message)
                self.assertIn(f"the {field} holds a NUL", got.message)
        # The tune's own strings: the kernel, a macro set, a grid divisor.
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            fleetjit.tune(self.rt, SOURCE, "fill\0", **self.kwargs())
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        self.assertIn("kernel name holds a NUL", cm.exception.message)
        for field, over in (("macro_sets", {"macro_sets": ["-DTILE=1", "-DTILE=2\0"]}),
                            ("grid_divisor", {"grid_divisor": ("TILE\0",)})):
            with self.subTest(field=field):
                got = tune_error(SOURCE, **over)
                self.assertEqual(got.code, "INVALID_ARGUMENT", got.message)
                self.assertIn(f"{field} holds a NUL", got.message)
        # A bare string is not a list of macro sets (its characters were).
        self.assertRefused("macro_sets is a list", macro_sets="-DTILE=1")

    def test_every_build_option_reaches_the_struct(self):
        # fj_tune replaced: the fj_tune_options it is given, read back.
        seen = {}

        class Stop(Exception):
            pass

        class Lib:
            def fj_tune(self, runtime, options, out):
                o = options._obj
                b = _ffi.fj_build_options.from_address(o.build)  # const fj_build_options*
                strs = lambda p, n: [fj_tune._text(p[i]) for i in range(n)]
                seen.update(
                    source=fj_tune._text(b.source), name=fj_tune._text(b.name),
                    target=fj_tune._text(b.target), device=b.device,
                    copy_impl=b.copy_impl, output=b.output, flags=b.flags,
                    nvrtc_options=strs(b.nvrtc_options, b.num_nvrtc_options),
                    name_expressions=strs(b.name_expressions, b.num_name_expressions),
                    include_dirs=strs(b.include_dirs, b.num_include_dirs),
                    kernel=fj_tune._text(o.kernel))
                raise Stop

        with mock.patch.object(fj_tune, "_lib", Lib), self.assertRaises(Stop):
            fleetjit.tune(self.rt, SOURCE, "fill", **self.kwargs(
                name="fill.cu", target="sm_90", device=1, copy_impl="cp_async",
                output="ptx", cache=False, include_dirs=[pathlib.Path("/opt/inc"), "rel"],
                nvrtc_options=["-DX=1"], name_expressions=["fill"]))
        self.assertEqual(seen, dict(
            source=SOURCE, name="fill.cu", target="sm_90", device=1,
            copy_impl=_ffi.COPY_IMPLS["cp_async"], output=_ffi.OUTPUTS["ptx"],
            flags=_ffi.BUILD_NO_CACHE, nvrtc_options=["-DX=1"], name_expressions=["fill"],
            include_dirs=["/opt/inc", "rel"], kernel="fill"))

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
