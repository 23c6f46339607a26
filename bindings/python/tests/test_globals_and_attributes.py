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
                self.skipTest("a GPU is present (globals_and_attributes_gpu_test covers it)")
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


FAKE_SOURCE = r"""
__constant__ float table[8];
namespace ns { __device__ int value[4]; }
extern "C" __global__ void use(float* out) { out[threadIdx.x] = table[threadIdx.x] + ns::value[0]; }
"""


class FakeDriverTest(unittest.TestCase):
    """The device entries on the fake CUDA driver (tests/common/fake_cuda,
    an H100-like sm_90 with 132 SMs whose copies are real), when the build
    has it next to the library."""

    def setUp(self):
        import pathlib
        import os
        fake = pathlib.Path(os.environ.get("FLEETJIT_LIBRARY", "")).parent / "libfj_fake_cuda.so"
        if not fake.exists():
            self.skipTest(f"no fake CUDA driver at {fake}")
        self.rt = fleetjit.Runtime(libcuda=str(fake), disk_cache=False)
        if self.rt.device_count != 1:
            self.rt.close()
            self.skipTest("the fake driver did not load")
        try:
            self.mod = self.rt.build(FAKE_SOURCE, name="fake.cu", target="compute_90",
                                     name_expressions=["&ns::value"])
        except fleetjit.FleetjitError as e:
            self.rt.close()
            if e.code == "UNAVAILABLE":
                self.skipTest(f"no NVRTC: {e.message}")
            raise

    def tearDown(self):
        self.rt.close()

    def test_globals_round_trip(self):
        rng = random.Random()
        table = struct.pack("<8f", *[rng.uniform(-9, 9) for _ in range(8)])
        g = self.mod.get_global("table")
        self.assertEqual(g.bytes, 32)
        self.assertEqual(self.mod.get_global("ns::value").lowered_name, "_ZN2ns5valueE")
        with self.rt.create_stream(0) as s:
            keep = self.mod.global_write("table", table, stream=s)
            back = self.mod.global_read("table", stream=s)
            s.synchronize()
            del keep
        self.assertEqual(bytes(back), table)
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            self.mod.global_write("table", b"\0" * 8, offset=28)
        self.assertEqual(cm.exception.code, "OUT_OF_RANGE")
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            self.mod.get_global("missing")
        self.assertEqual(cm.exception.code, "NOT_FOUND")

    def test_cooperative_grid_and_occupancy(self):
        k = self.mod.kernel("use")
        per_sm = k.occupancy(256)
        self.assertGreater(per_sm, 0)
        block, grid = k.suggest_block()
        self.assertGreater(block, 0)
        out = self.rt.alloc(4096)
        most = per_sm * 132
        k.launch_ex(grid=most, block=256, args=[out], cooperative=True)
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            k.launch_ex(grid=most + 1, block=256, args=[out], cooperative=True)
        self.assertEqual(cm.exception.code, "OUT_OF_RANGE")
        self.assertIn(f"{most + 1} blocks exceeds the {most}", cm.exception.message)
        k.launch_ex(grid=1, block=32, args=[out], programmatic=True,
                    l2_window=(out.device_address, 4096, 1.0))
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            k.set_attribute("preferred_carveout", 101)
        self.assertEqual(cm.exception.code, "OUT_OF_RANGE")
        k.set_attribute("preferred_carveout", 50)
        self.assertIsInstance(k.attributes.ptx_version, int)

    def test_priorities_and_persisting_l2(self):
        least, greatest = self.rt.stream_priority_range(0)
        self.assertEqual((least, greatest), (0, -5))
        self.rt.stream_with_priority(0, greatest).close()
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            self.rt.stream_with_priority(0, greatest - 1)
        self.assertEqual(cm.exception.code, "OUT_OF_RANGE")
        self.assertEqual(self.rt.set_persisting_l2(0, 1 << 20), 1 << 20)

    def refused(self, rows):
        """Each (what, call, named): InvalidArgument naming `named`. Before,
        ctypes wrapped the number and the fake driver took the call."""
        for what, call, named in rows:
            with self.subTest(what=what):
                with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                    call()
                self.assertIn(named, cm.exception.message)

    def test_launch_numbers_that_do_not_fit_are_refused(self):
        k = self.mod.kernel("use")
        out = self.rt.alloc(4096)
        big = 1 << 32
        self.refused([
            ("grid past uint32", lambda: k.launch(big + 1, 32, [out]), "grid[0]"),
            ("block.y past uint32", lambda: k.launch(1, (32, big + 1), [out]), "block[1]"),
            ("negative block", lambda: k.launch(1, -1, [out]), "block[0]"),
            ("float grid", lambda: k.launch(2.5, 32, [out]), "grid[0]"),
            ("shared_bytes past uint32",
             lambda: k.launch(1, 32, [out], shared_bytes=big), "shared_bytes"),
            ("negative shared_bytes",
             lambda: k.launch(1, 32, [out], shared_bytes=-1), "shared_bytes"),
            ("launch_ex grid past uint32",
             lambda: k.launch_ex(big + 1, 32, [out], cooperative=True), "grid[0]"),
            ("launch_ex cluster past uint32",
             lambda: k.launch_ex(1, 32, [out], cluster=big + 1), "cluster[0]"),
            ("launch_ex shared_bytes past uint32",
             lambda: k.launch_ex(1, 32, [out], shared_bytes=big), "shared_bytes"),
            ("l2_window base past uint64",
             lambda: k.launch_ex(1, 32, [out], l2_window=(out.device_address + (1 << 64),
                                                          4096, 1.0)), "base"),
            ("l2_window negative bytes",
             lambda: k.launch_ex(1, 32, [out], l2_window=(out.device_address, -1, 1.0)),
             "bytes"),
        ])

    def test_entry_numbers_that_do_not_fit_are_refused(self):
        k = self.mod.kernel("use")
        big = 1 << 32
        four = b"\0" * 4
        rows = []
        for d in (big, -(1 << 31) - 1, 0.0):
            rows += [
                (f"get_global on {d!r}", lambda d=d: self.mod.get_global("table", d),
                 "device ordinal"),
                (f"global_write on {d!r}",
                 lambda d=d: self.mod.global_write("table", four, device=d), "device ordinal"),
                (f"global_read on {d!r}",
                 lambda d=d: self.mod.global_read("table", 4, device=d), "device ordinal"),
                (f"priority range on {d!r}", lambda d=d: self.rt.stream_priority_range(d),
                 "device ordinal"),
                (f"priority stream on {d!r}", lambda d=d: self.rt.stream_with_priority(d, 0),
                 "device ordinal"),
                (f"persisting L2 on {d!r}", lambda d=d: self.rt.set_persisting_l2(d, 1 << 20),
                 "device ordinal"),
            ]
        rows += [
            ("global_write offset past uint64",
             lambda: self.mod.global_write("table", four, offset=1 << 64), "offset"),
            ("global_write negative offset",
             lambda: self.mod.global_write("table", four, offset=-4), "offset"),
            ("global_read offset past uint64",
             lambda: self.mod.global_read("table", 4, offset=1 << 64), "offset"),
            ("global_read negative nbytes", lambda: self.mod.global_read("table", -4), "nbytes"),
            ("priority past int32", lambda: self.rt.stream_with_priority(0, big - 5), "priority"),
            ("float priority", lambda: self.rt.stream_with_priority(0, -1.5), "priority"),
            ("persisting L2 past uint64",
             lambda: self.rt.set_persisting_l2(0, (1 << 64) + (1 << 20)), "nbytes"),
            ("occupancy block past uint32", lambda: k.occupancy(big + 256), "block_threads"),
            ("occupancy shared past uint32",
             lambda: k.occupancy(256, big), "dynamic_shared_bytes"),
            ("suggest_block shared past uint32",
             lambda: k.suggest_block(big), "dynamic_shared_bytes"),
            ("carveout past int32",
             lambda: k.set_attribute("preferred_carveout", big + 50), "preferred_carveout"),
        ]
        self.refused(rows)
        # With nbytes left out, an offset past the end is still the library's
        # OUT_OF_RANGE (the binding asks for 0 bytes there), not a refusal.
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            self.mod.global_read("table", offset=36)
        self.assertEqual(cm.exception.code, "OUT_OF_RANGE")

    def test_copy_prefetch_and_peer_numbers_that_do_not_fit_are_refused(self):
        buf = self.rt.alloc(64)
        a = buf.device_address
        big = 1 << 32

        class Cai:  # 4 floats of the fake's memory
            def __init__(self, address):
                self.__cuda_array_interface__ = {"data": (address, False), "shape": (4,),
                                                 "typestr": "<f4", "version": 3}
        other = self.rt.alloc(64)
        src, dst = Cai(a), Cai(other.device_address)
        self.rt.copy(dst, src, src_start=(1,), oob="zeros")
        rows = []
        for d in (big, -(1 << 31) - 1, 1.5):
            rows += [
                (f"peer_query reader {d!r}", lambda d=d: self.rt.peer_query(d, 0),
                 "reader device ordinal"),
                (f"peer_enable owner {d!r}", lambda d=d: self.rt.peer_enable(0, d),
                 "owner device ordinal"),
                (f"peer_disable owner {d!r}", lambda d=d: self.rt.peer_disable(0, d),
                 "owner device ordinal"),
                (f"prefetch reader {d!r}",
                 lambda d=d: self.rt.prefetch(a, 64, reader_device=d), "reader_device"),
            ]
        rows += [
            ("prefetch nbytes past uint64", lambda: self.rt.prefetch(a, 1 << 64), "nbytes"),
            ("prefetch address past uint64", lambda: self.rt.prefetch(a + (1 << 64), 64),
             "address"),
            ("prefetch stage address past uint64",
             lambda: self.rt.prefetch(a, 32, mode="stage_local",
                                      stage=(a + 32 + (1 << 64), 32)), "stage's address"),
            ("prefetch stage bytes past uint64",
             lambda: self.rt.prefetch(a, 32, mode="stage_local",
                                      stage=(a + 32, 32 + (1 << 64))), "stage's bytes"),
            ("copy src_start past int64",
             lambda: self.rt.copy(dst, src, src_start=((1 << 64) + 1,), oob="zeros"),
             "src_start[0]"),
            ("copy src_start float",
             lambda: self.rt.copy(dst, src, src_start=(0.5,), oob="zeros"), "src_start[0]"),
        ]
        self.refused(rows)

    def test_device_buffer_numbers_that_do_not_fit_are_refused(self):
        buf, other = self.rt.alloc(64), self.rt.alloc(64)
        buf.fill(255)
        self.assertEqual(buf.download(4), b"\xff" * 4)
        self.refused([
            ("fill 256", lambda: buf.fill(256), "fill value"),
            ("fill -1", lambda: buf.fill(-1), "fill value"),
            ("fill 1.5", lambda: buf.fill(1.5), "fill value"),
            ("download -1", lambda: buf.download(-1), "nbytes"),
            ("download 2.5", lambda: buf.download(2.5), "nbytes"),
            ("copy_from 2.5", lambda: buf.copy_from(other, 2.5), "nbytes"),
        ])
        self.assertEqual(buf.download(4), b"\xff" * 4)  # no refused fill reached it


if __name__ == "__main__":
    unittest.main()
