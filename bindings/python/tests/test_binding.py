"""The binding on a machine without a GPU: versions, devices, builds for
named targets, the cache, errors, arguments and streams."""
import ctypes
import os
import time
import unittest

import _env  # noqa: F401  (sets FLEETJIT_LIBRARY, the cache dir, sys.path)
import fleetjit
from fleetjit import _ffi, args as fj_args


class VersionTest(unittest.TestCase):
    def test_library_major_matches_binding(self):
        major, minor = fleetjit.library_version()
        self.assertEqual(major, fleetjit.EXPECTED_MAJOR)
        self.assertGreaterEqual(minor, fleetjit.EXPECTED_MINOR)
        self.assertEqual(fleetjit.check_version(), (major, minor))

    def test_other_major_is_refused(self):
        saved = _ffi.EXPECTED_MAJOR
        _ffi.EXPECTED_MAJOR = saved + 1
        try:
            with self.assertRaises(fleetjit.FleetjitError) as cm:
                fleetjit.Runtime()
            self.assertEqual(cm.exception.code, "FAILED_PRECONDITION")
            self.assertIn(f"needs {saved + 1}.x", cm.exception.message)
        finally:
            _ffi.EXPECTED_MAJOR = saved

    def test_code_names_match_the_library(self):
        fj = fleetjit.errors.lib()
        for value, name in enumerate(fleetjit.errors.CODES):
            self.assertEqual(fj.fj_code_name(value).decode(), name)
        self.assertEqual(fj.fj_code_name(len(fleetjit.errors.CODES)).decode(), "UNKNOWN")

    def test_library_path_comes_from_the_environment(self):
        self.assertEqual(fleetjit.library_path(), os.environ["FLEETJIT_LIBRARY"])


class RuntimeTest(unittest.TestCase):
    def setUp(self):
        self.rt = fleetjit.Runtime()

    def tearDown(self):
        self.rt.close()

    def test_device_report(self):
        n = self.rt.device_count
        self.assertGreaterEqual(n, 0)
        report = self.rt.device_report()
        self.assertEqual(len(report["devices"]), n)
        self.assertEqual(report["version"], "%d.%d" % fleetjit.library_version())
        if n == 0:
            self.assertNotEqual(report["driver_error"], "")  # says why
        for d in self.rt.devices:
            self.assertIn(d.plan.impl, ("sync", "cp_async", "tma"))

    def test_copy_plan_needs_no_gpu(self):
        plan = fleetjit.copy_plan("sm_90")
        self.assertEqual(plan.impl, "tma")
        self.assertEqual(len(plan.features), 10)
        self.assertEqual(fleetjit.copy_plan("sm_80").impl, "cp_async")
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            fleetjit.copy_plan("sm_80", impl="tma")
        self.assertEqual(cm.exception.code, "FAILED_PRECONDITION")

    def test_build_for_sm90_without_a_gpu(self):
        with self.rt.build(_env.unique(_env.SAXPY), name="saxpy.cu", target="sm_90",
                           name_expressions=["axpy<float>"]) as m:
            info = m.info
            self.assertEqual(info.target, "sm_90")
            self.assertEqual(info.copy_impl, "tma")
            self.assertEqual(info.output, "cubin")
            self.assertEqual(info.cache_result, "compiled")
            self.assertEqual(m.image[:4], b"\x7fELF")
            self.assertEqual(len(m.image), info.image_bytes)
            if self.rt.device_count == 0:
                with self.assertRaises(fleetjit.FleetjitError) as cm:
                    m.kernel("saxpy")
                self.assertIn(cm.exception.code, ("UNAVAILABLE", "NOT_FOUND"))

    def test_ptx_for_a_compute_target(self):
        m = self.rt.build(_env.SAXPY, target="compute_80")
        self.assertEqual(m.info.output, "ptx")
        self.assertIn(b".target sm_80", m.image)

    def test_cache_statistics(self):
        source = _env.unique(_env.SAXPY)
        before = self.rt.cache_stats()
        self.rt.build(source, name="saxpy.cu", target="sm_90").close()
        self.rt.build(source, name="saxpy.cu", target="sm_90").close()
        after = self.rt.cache_stats()
        self.assertEqual(after.compiles, before.compiles + 1)
        self.assertEqual(after.misses, before.misses + 1)
        self.assertEqual(after.memory_hits, before.memory_hits + 1)
        self.assertGreater(after.compile_ms_total, before.compile_ms_total)
        # The disk tier is written in the background: wait for the entry.
        deadline = time.monotonic() + 20
        while (self.rt.cache_stats().disk_entries <= before.disk_entries and
               time.monotonic() < deadline):
            time.sleep(0.05)
        self.assertGreater(self.rt.cache_stats().disk_entries, before.disk_entries)
        # A sibling process (here: a second runtime) finds it on disk.
        with fleetjit.Runtime() as rt2:
            m = rt2.build(source, name="saxpy.cu", target="sm_90")
            self.assertEqual(m.info.cache_result, "disk_hit")
            self.assertEqual(rt2.cache_stats().disk_hits, 1)
        m = self.rt.build(source, name="saxpy.cu", target="sm_90", cache=False)
        self.assertEqual(m.info.cache_result, "compiled")
        self.rt.clear_cache()
        self.assertEqual(self.rt.cache_stats().disk_entries, 0)

    def test_compile_error_carries_the_build_log(self):
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            self.rt.build("__global__ void broken( { }", name="broken.cu", target="sm_90")
        e = cm.exception
        self.assertEqual(e.code, "BUILD_ERROR")
        self.assertIsNotNone(e.build_log)
        self.assertIn("error", e.build_log)
        self.assertIn("broken.cu", e.build_log)
        self.assertEqual(e.details.get("target"), "sm_90")
        self.assertIn("BUILD_ERROR", str(e))

    def test_bad_target_is_invalid_argument(self):
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            self.rt.build(_env.SAXPY, target="sm_12345")
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")

    def test_closed_handles_raise(self):
        m = self.rt.build(_env.SAXPY, target="sm_90")
        self.rt.close()
        self.assertTrue(m.closed)
        with self.assertRaises(fleetjit.FleetjitError):
            m.info
        with self.assertRaises(fleetjit.FleetjitError):
            self.rt.device_count
        m.close()  # after the runtime: a no-op, not a crash

    def test_runtime_options(self):
        with fleetjit.Runtime(target="sm_80", copy_impl="sync", disk_cache=False,
                              thunks=False, cache_max_bytes=1 << 20) as rt:
            m = rt.build(_env.SAXPY)
            self.assertEqual(m.info.target, "sm_80")
            self.assertEqual(m.info.copy_impl, "sync")
        with self.assertRaises(fleetjit.FleetjitError):
            fleetjit.Runtime(copy_impl="fast")

    def test_framework_streams_need_fj_stream_wrap(self):
        if _ffi.has("fj_stream_wrap"):
            if self.rt.device_count == 0:
                with self.assertRaises(fleetjit.FleetjitError):
                    self.rt.wrap_stream(0x1234)
            return
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            self.rt._resolve_stream(0x1234, 0)
        self.assertEqual(cm.exception.code, "UNAVAILABLE")
        self.assertIn("fj_stream_wrap", cm.exception.message)

        class TorchLikeStream:
            cuda_stream = 0x5678
        with self.assertRaises(fleetjit.FleetjitError):
            self.rt._resolve_stream(TorchLikeStream(), 0)
        # The legacy default stream needs no wrapper.
        self.assertEqual(self.rt._resolve_stream(0, 0), (None, None, ()))
        self.assertEqual(self.rt._resolve_stream(None, 0), (None, None, ()))
        with self.assertRaises(fleetjit.FleetjitError):
            self.rt._resolve_stream("stream", 0)


class ArgumentsTest(unittest.TestCase):
    def kinds(self, values):
        keep, arr, n = fj_args.build(values)
        self.assertEqual(n, len(values))
        return [(arr[i].kind, arr[i]) for i in range(n)], keep

    def test_scalars(self):
        values = [7, 2.5, fleetjit.i64(-2**40), fleetjit.u8(255), fleetjit.f64(0.25),
                  fleetjit.f16(1.0), fleetjit.bf16(1.0), fleetjit.pointer(0xdeadbeef00),
                  ctypes.c_uint16(9), b"\x01\x02\x03"]
        got, _ = self.kinds(values)
        self.assertEqual([k for k, _ in got],
                         [_ffi.ARG_I32, _ffi.ARG_F32, _ffi.ARG_I64, _ffi.ARG_U8, _ffi.ARG_F64,
                          _ffi.ARG_F16, _ffi.ARG_BF16, _ffi.ARG_POINTER, _ffi.ARG_U16,
                          _ffi.ARG_BYTES])
        self.assertEqual(got[0][1].v.i32, 7)
        self.assertEqual(got[1][1].v.f32, 2.5)
        self.assertEqual(got[2][1].v.i64, -2**40)
        self.assertEqual(got[3][1].v.u8, 255)
        self.assertEqual(got[5][1].v.u16, 0x3C00)  # IEEE half 1.0
        self.assertEqual(got[6][1].v.u16, 0x3F80)  # bfloat16 1.0
        self.assertEqual(got[7][1].v.pointer, 0xdeadbeef00)
        self.assertEqual(got[8][1].v.u16, 9)
        self.assertEqual(got[9][1].size, 3)
        self.assertEqual(ctypes.string_at(got[9][1].v.bytes, 3), b"\x01\x02\x03")
        for _, a in got:
            self.assertEqual(a.struct_size, ctypes.sizeof(_ffi.fj_arg))

    def test_refusals(self):
        for bad in (True, 2**40, object()):
            with self.assertRaises(fleetjit.FleetjitError):
                fj_args.build([bad])
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:  # the README's class
            fleetjit.u8(256)
        self.assertIn("does not fit u8", cm.exception.message)

    def test_numpy_scalars(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy is not installed (Debian: python3-numpy)")
        got, _ = self.kinds([np.float32(1.5), np.int64(-3), np.uint32(4), np.float16(2.0)])
        self.assertEqual([k for k, _ in got],
                         [_ffi.ARG_F32, _ffi.ARG_I64, _ffi.ARG_U32, _ffi.ARG_F16])
        self.assertEqual(got[0][1].v.f32, 1.5)
        self.assertEqual(got[1][1].v.i64, -3)
        self.assertEqual(got[3][1].v.u16, 0x4000)

    def test_host_arrays_are_not_pointers(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy is not installed (Debian: python3-numpy)")
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            fj_args.build([1, np.zeros(4, np.float32)])
        self.assertIn("argument 1", cm.exception.message)
        self.assertIn("not CUDA memory", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
