"""Bad input and races found by an adversarial review, on the fake CUDA
driver: each is refused by name (the same refusal from the compiled launch
path and the ctypes path), and close() of a Runtime, Module, Stream,
DeviceBuffer or BuildFuture on another thread never frees it under a
running call that uses it (a build, a launch, a copy, a wait)."""
import ctypes
import math
import os
import pathlib
import subprocess
import sys
import textwrap
import unittest
import warnings

import _env
import fleetjit
from fleetjit import _fast, _ffi, tensors
from fleetjit import runtime as fj_runtime

FAKE = os.environ.get("FLEETJIT_LIBCUDA") or str(
    pathlib.Path(_ffi.library_path()).parent / "libfj_fake_cuda.so")
GLOBALS = ('__device__ float table[16];\n'
           'extern "C" __global__ void use(float* o) { o[0] = table[0]; }\n')


class Cai:
    def __init__(self, address, **override):
        self.__cuda_array_interface__ = dict(
            {"data": (address, False), "shape": (16,), "typestr": "<f4", "strides": None,
             "version": 3}, **override)


def cai_without(address, key):
    c = Cai(address)
    del c.__cuda_array_interface__[key]
    return c


class DLPack:
    """A DLPack 1.0 producer of a float32 tensor (never read)."""
    _NAME = b"dltensor_versioned"  # must outlive the capsules

    def __init__(self, data, shape=(16,), device=(tensors.KDL_CUDA, 0), flags=0):
        self.data, self.shape, self.device, self.flags = data, shape, device, flags

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None):
        m = tensors.DLManagedTensorVersioned()
        m.version.major, m.flags = 1, self.flags
        self._shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        t = m.dl_tensor
        t.data = self.data or None
        t.device.device_type, t.device.device_id = self.device
        t.ndim = len(self.shape)
        t.dtype.code, t.dtype.bits, t.dtype.lanes = tensors.KDL_FLOAT, 32, 1
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        self._managed = m
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(m), self._NAME, None)


class FakeDriverTest(unittest.TestCase):
    def setUp(self):
        _env.fake_driver_saxpy(self)  # saxpy(float* y, const float* x, float a, int n)
        self.addr = self.buf.device_address

    def tearDown(self):
        fj_runtime.USE_FAST_PATH = True
        self.rt.close()

    def launches(self):
        return self.fake.fjfake_calls(b"cuLaunchKernelEx")

    def refused(self, rows, exc=fleetjit.InvalidArgumentError):
        """Each (what, args, text): k.launch(1, 32, args) raises `exc` holding
        `text` and launches nothing, from the compiled path and the ctypes path."""
        for fast in (True, False):
            fj_runtime.USE_FAST_PATH = fast
            for what, args, text in rows:
                with self.subTest(what=what, fast=fast):
                    before = self.launches()
                    with self.assertRaises(exc) as cm:
                        self.k.launch(1, 32, args)
                    self.assertIn(text, str(cm.exception))
                    self.assertEqual(self.launches(), before)


class LaunchRefusalTest(FakeDriverTest):
    def test_malformed_cuda_array_interface(self):
        b, a = self.buf, self.addr
        self.refused([
            ("big-endian", [Cai(a, typestr=">f4"), b, 1.0, 16], "typestr '>f4'"),
            ("garbage typestr", [Cai(a, typestr="garbage"), b, 1.0, 16], "typestr 'garbage'"),
            ("no shape", [cai_without(a, "shape"), b, 1.0, 16], "no 'shape' entry"),
            ("no typestr", [cai_without(a, "typestr"), b, 1.0, 16], "no 'typestr' entry"),
            ("no data", [cai_without(a, "data"), b, 1.0, 16], "no 'data' entry"),
            ("1-tuple data", [Cai(a, data=(a,)), b, 1.0, 16], "not (address, read_only)"),
            ("shape an int", [Cai(a, shape=16), b, 1.0, 16], "shape is 16, not a tuple"),
            ("negative shape", [Cai(a, shape=(-4,)), b, 1.0, 16], "negative extent"),
            ("a mask", [Cai(a, mask=Cai(a)), b, 1.0, 16], "has a mask"),
        ])

    def test_dtype_mismatch_warns_from_both_paths(self):
        for fast in (True, False):
            fj_runtime.USE_FAST_PATH = fast
            for typestr, name in (("<f8", "float64"), ("<i4", "int32")):
                with self.subTest(typestr=typestr, fast=fast):
                    before = self.launches()
                    with self.assertWarns(RuntimeWarning) as cm:
                        self.k.launch(1, 32, [Cai(self.addr, typestr=typestr), self.buf,
                                              1.0, 16])
                    self.assertIn(f"a {name} tensor", str(cm.warning))
                    self.assertEqual(self.launches(), before + 1)

    @unittest.skipUnless(_fast.module is not None, f"compiled path: {_fast.why_not}")
    def test_a_checked_cuda_array_interface_launches_from_c(self):
        took = []
        self.k._launch_ctypes = lambda *a: took.append(a)
        before = self.launches()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            self.k.launch(1, 32, [Cai(self.addr), Cai(self.addr + 32, typestr="=f4"), 1.0, 16])
        self.assertEqual((self.launches(), took), (before + 1, []))
        self.k.launch(1, 32, [Cai(self.addr, typestr="<f8"), self.buf, 1.0, 16])
        self.assertEqual(len(took), 1)  # the ctypes path warns about that one

    def test_null_and_out_of_range_addresses(self):
        b, a = self.buf, self.addr
        self.refused([
            ("CAI -8", [Cai(a, data=(-8, False)), b, 1.0, 16], "out of range for a uint64"),
            ("CAI 1 << 70", [Cai(a, data=(1 << 70, False)), b, 1.0, 16],
             "out of range for a uint64"),
            ("CAI None", [Cai(a, data=(None, False)), b, 1.0, 16], "data is NULL"),
            ("CAI 0", [Cai(a, data=(0, False)), b, 1.0, 16], "data is NULL"),
            ("DLPack NULL", [DLPack(0), b, 1.0, 16], "data is NULL"),
        ])

    def test_closed_buffers(self):
        mine = self.rt.alloc(64)
        mine.close()
        other_rt = fleetjit.Runtime(libcuda=FAKE, disk_cache=False)
        other = other_rt.alloc(64)
        other_rt.close()
        self.assertTrue(other.closed)
        self.refused([
            ("closed", [mine, self.buf, 1.0, 16], "argument 0: this DeviceBuffer is closed"),
            ("its runtime closed", [self.buf, other, 1.0, 16],
             "argument 1: this DeviceBuffer is closed"),
        ])

    def test_read_only_device_and_shape_of_tensors(self):
        b, a = self.buf, self.addr
        self.refused([
            ("read-only CAI to float* y", [Cai(a, data=(a, True)), b, 1.0, 16],
             "read-only Cai passed to a parameter the kernel declares as a non-const"),
            ("read-only DLPack to float* y",
             [DLPack(a, flags=tensors.DLPACK_FLAG_READ_ONLY), b, 1.0, 16],
             "read-only DLPack passed"),
            ("DLPack on device 3", [DLPack(a, device=(tensors.KDL_CUDA, 3)), b, 1.0, 16],
             "lives on CUDA device 3, the kernel on device 0"),
            ("DLPack of shape (-4,)", [DLPack(a, shape=(-4,)), b, 1.0, 16],
             "negative shape (-4,)"),
        ])
        for fast in (True, False):  # const float* x takes a read-only tensor
            fj_runtime.USE_FAST_PATH = fast
            before = self.launches()
            self.k.launch(1, 32, [b, Cai(a, data=(a, True)), 1.0, 16])
            self.k.launch(1, 32, [b, DLPack(a, flags=tensors.DLPACK_FLAG_READ_ONLY), 1.0, 16])
            self.assertEqual(self.launches(), before + 2)

    def test_a_float_past_float32(self):
        self.refused([("1e300", [self.buf, self.buf, 1e300, 16], "does not fit f32"),
                      ("-1e39", [self.buf, self.buf, -1e39, 16], "does not fit f32")])
        before = self.launches()
        self.k.launch(1, 32, [self.buf, self.buf, math.inf, 16])  # inf is a float32
        self.assertEqual(self.launches(), before + 1)

    def test_grid_that_is_not_dimensions(self):
        for fast in (True, False):
            fj_runtime.USE_FAST_PATH = fast
            for grid in ((), None, True):
                with self.subTest(grid=grid, fast=fast):
                    before = self.launches()
                    with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                        self.k.launch(grid, 32, [self.buf, self.buf, 1.0, 16])
                    self.assertIn("grid", cm.exception.message)
                    self.assertEqual(self.launches(), before)

    def test_launch_ex_l2_window_needs_three_values(self):
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            self.k.launch_ex(1, 32, [self.buf, self.buf, 1.0, 16], l2_window=(self.addr, 64))
        self.assertIn("expected (base, bytes, hit_ratio)", cm.exception.message)


class CloseWhileInFlightTest(FakeDriverTest):
    def test_close_waits_for_a_call_in_flight(self):
        fj = _ffi.load()
        destroyed = []
        real = fj.fj_runtime_destroy
        fj.fj_runtime_destroy = lambda h: destroyed.append(h) or real(h)
        try:
            gate = self.rt._gate
            self.assertTrue(gate.enter())  # as a build or launch on another thread
            handle = self.rt._handle
            self.rt.close()
            self.assertEqual(destroyed, [])  # not under the call in flight
            with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                self.k.launch(1, 32, [self.buf, self.buf, 1.0, 16])
            self.assertIn("closed", cm.exception.message)
            with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                self.rt.alloc(16)
            self.assertIn("this Runtime is closed", cm.exception.message)
            gate.exit()  # the last call out destroys it
            self.assertEqual(destroyed, [handle])
        finally:
            fj.fj_runtime_destroy = real

    def test_close_under_launching_threads_and_a_build(self):
        child = textwrap.dedent("""
            import sys, threading, time
            import _env, fleetjit
            for rnd in range(8):
                rt = fleetjit.Runtime(libcuda=sys.argv[1], disk_cache=False)
                k = rt.build(_env.SAXPY, name="saxpy.cu", target="compute_90").kernel("saxpy")
                b = rt.alloc(64)
                seen = []
                def launch():
                    while True:
                        try:
                            k.launch(1, 32, [b, b, 1.0, 16])
                        except fleetjit.InvalidArgumentError as e:
                            seen.append(e.message)
                            return
                def build():
                    try:
                        rt.build(_env.unique(_env.SAXPY), target="sm_90", cache=False)
                    except fleetjit.InvalidArgumentError as e:
                        seen.append(e.message)
                ts = [threading.Thread(target=f) for f in (launch, launch, launch, build)]
                [t.start() for t in ts]
                time.sleep(0.05)
                rt.close()
                [t.join(60) for t in ts]
                assert all("closed" in m for m in seen), seen
            print("survived")
            """)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        r = subprocess.run([sys.executable, "-c", child, FAKE], env=env,
                           cwd=os.path.dirname(os.path.abspath(__file__)),
                           capture_output=True, text=True, timeout=300)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "survived"), r.stderr[-2000:])

    def test_module_stream_and_buffer_close_wait_for_a_call_in_flight(self):
        fj = _ffi.load()
        destroyed = []
        names = ("fj_module_destroy", "fj_stream_destroy", "fj_mem_free")
        real = {n: getattr(fj, n) for n in names}
        for n in names:
            setattr(fj, n, lambda *a, n=n: destroyed.append(n) or real[n](*a))
        try:
            s = self.rt.create_stream()
            for obj, name, refusal in (
                    (self.mod, "fj_module_destroy", "the kernel's module is closed"),
                    (s, "fj_stream_destroy", "this Stream is closed"),
                    (self.buf, "fj_mem_free", "this DeviceBuffer is closed")):
                gate = obj._gate
                self.assertIs(gate.parent, self.rt._gate)
                self.assertTrue(gate.enter())  # as a launch or copy on another thread
                obj.close()
                self.assertEqual(destroyed, [])  # not under the call in flight
                with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                    if obj is s:
                        s.synchronize()
                    elif obj is self.buf:
                        self.buf.fill(0)
                    else:
                        self.k.launch(1, 32, [self.buf, self.buf, 1.0, 16])
                self.assertIn(refusal, cm.exception.message)
                gate.exit()  # the last call out destroys it
                self.assertEqual(destroyed, [name])
                destroyed.clear()
            self.assertTrue(self.rt.alloc(16))  # the runtime is untouched
        finally:
            for n in names:
                setattr(fj, n, real[n])

    def _stress(self, child, rounds):
        """Runs `child` (argv: the fake driver, rounds) in a fresh interpreter
        with freed memory poisoned, so that a call on a destroyed handle
        crashes or hangs rather than passing silently; it must print survived."""
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), MALLOC_PERTURB_="85")
        try:
            r = subprocess.run([sys.executable, "-c", textwrap.dedent(child), FAKE,
                                str(rounds)], env=env,
                               cwd=os.path.dirname(os.path.abspath(__file__)),
                               capture_output=True, text=True, timeout=240)
        except subprocess.TimeoutExpired:
            self.fail("hung: a close() under a call in flight")
        self.assertEqual((r.returncode, r.stdout.strip()[-8:]), (0, "survived"),
                         r.stdout[-1000:] + r.stderr[-2000:])

    # One child for the three races: each round, three threads call on a
    # module's kernel, a stream or a buffer while the main thread closes it.
    RACE = """
        import sys, threading, time
        import _env, fleetjit
        rt = fleetjit.Runtime(libcuda=sys.argv[1], disk_cache=False)
        seen = set()
        for rnd in range(int(sys.argv[2])):
            m = rt.build(_env.SAXPY, name="saxpy.cu", target="compute_90")
            k = m.kernel("saxpy")
            b, s = rt.alloc(64), rt.create_stream()
            victim = (m, s, b)[rnd % 3]
            def use():
                while True:
                    try:
                        if victim is m:
                            k.launch(1, 32, [b, b, 1.0, 16])
                        elif victim is s:
                            k.launch(1, 32, [b, b, 1.0, 16], stream=s)
                            s.synchronize()
                        else:
                            b.fill(0)
                            b.download(16)
                    except fleetjit.InvalidArgumentError as e:
                        seen.add(e.message)
                        return
            ts = [threading.Thread(target=use) for _ in range(3)]
            [t.start() for t in ts]
            time.sleep(0.001)
            victim.close()
            [t.join(60) for t in ts]
            m.close(), s.close(), b.close()
        # Refused by the binding, never a destroyed handle reaching the library
        assert seen <= {"the kernel's module is closed", "this Stream is closed",
                        "this DeviceBuffer is closed"}, seen
        print("survived")
        """

    def test_close_of_a_module_stream_or_buffer_under_calls_in_flight(self):
        self._stress(self.RACE, 300)

    def test_build_future_close_under_waiting_threads(self):
        self._stress("""
            import sys, threading, time
            import _env, fleetjit
            rt = fleetjit.Runtime(libcuda=sys.argv[1], disk_cache=False)
            seen = set()
            for rnd in range(int(sys.argv[2])):
                fut = rt.build_async(_env.unique(_env.SAXPY), target="sm_90", cache=False)
                def wait():
                    for _ in range(200):
                        try:
                            fut.done()
                            fut.wait(0.001)
                        except fleetjit.InvalidArgumentError as e:
                            seen.add(e.message)
                            return
                ts = [threading.Thread(target=wait) for _ in range(2)]
                [t.start() for t in ts]
                time.sleep(0.003)
                fut.close()
                [t.join(60) for t in ts]
            assert seen <= {"this build is closed"}, seen
            print("survived")
            """, 60)

    def test_build_future_after_close_names_the_runtime(self):
        fut = self.rt.build_async(_env.unique(_env.SAXPY), target="sm_90")
        self.rt.close()
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            fut.result(timeout=60)
        self.assertEqual(cm.exception.message, "this Runtime is closed")  # not "this build"


class ScalarTest(unittest.TestCase):
    def test_integer_kinds_take_integers(self):
        for make, value in ((fleetjit.i32, 2.5), (fleetjit.u64, "16"),
                            (fleetjit.pointer, 4096.7), (fleetjit.i64, True)):
            with self.subTest(make=make.__name__, value=value):
                with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                    make(value)
                self.assertIn(f"the {make.__name__} value is {value!r}, not an integer",
                              cm.exception.message)

    def test_out_of_range_is_invalid_argument_naming_the_kind(self):
        for make, value in ((fleetjit.i32, 1 << 40), (fleetjit.u8, -1),
                            (fleetjit.pointer, -1), (fleetjit.f16, 1e10),
                            (fleetjit.f32, 1e300), (fleetjit.bf16, -1e300),
                            (fleetjit.c64, complex(1e300, 0))):
            with self.subTest(make=make.__name__, value=value):
                with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                    make(value)
                self.assertIn(f"does not fit {make.__name__}", cm.exception.message)
        self.assertEqual(fleetjit.f32(math.inf).value, math.inf)
        with self.assertRaises(fleetjit.InvalidArgumentError):
            fleetjit.f64("1.5")


class StringArgumentTest(unittest.TestCase):
    def setUp(self):
        self.rt = fleetjit.Runtime(libcuda=FAKE, disk_cache=False)

    def tearDown(self):
        self.rt.close()

    def test_an_int_where_a_string_is_expected(self):
        rows = [
            ("cache_dir", lambda: fleetjit.Runtime(cache_dir=3)),
            ("target", lambda: fleetjit.Runtime(target=90)),
            ("target", lambda: fleetjit.copy_plan(90)),
            ("image", lambda: self.rt.load(100)),
            ("name", lambda: self.rt.build(_env.SAXPY, name=5, target="sm_90")),
            ("nvrtc_options", lambda: self.rt.build(_env.SAXPY, target="sm_90",
                                                    nvrtc_options=[5])),
            ("nvrtc_options[0] is None", lambda: self.rt.build(_env.SAXPY, target="sm_90",
                                                               nvrtc_options=[None])),
            ("inputs[0].data", lambda: self.rt.link([fleetjit.LinkInput("cubin", 100)],
                                                    target="sm_90")),
            ("inputs[0] is a tuple", lambda: self.rt.link([("source", _env.SAXPY)],
                                                          target="sm_90")),
        ]
        for named, call in rows:
            with self.subTest(named=named):
                with self.assertRaises(TypeError) as cm:
                    call()
                self.assertIn(named, str(cm.exception))

    def test_embedded_nul_in_cache_dir(self):
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            fleetjit.Runtime(cache_dir="/tmp/fj\0/elsewhere")
        self.assertIn("the cache_dir holds a NUL character at offset 7", cm.exception.message)

    def test_global_names(self):
        try:
            m = self.rt.build(GLOBALS, name="g.cu", target="compute_90")
        except fleetjit.FleetjitError as e:
            self.skipTest(f"no NVRTC: {e.message}")
        rows = [("get_global", lambda n: m.get_global(n)),
                ("global_write", lambda n: m.global_write(n, b"\1" * 64)),
                ("global_read", lambda n: m.global_read(n))]
        for what, call in rows:
            with self.subTest(what=what):
                with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                    call("table\0junk")
                self.assertIn("global name holds a NUL", cm.exception.message)
                with self.assertRaises(TypeError) as cm:
                    call(5)
                self.assertIn("global name must be a str", str(cm.exception))

    def test_global_read_past_the_variable(self):
        if self.rt.device_count != 1:
            self.skipTest("needs a device (the fake driver)")
        m = self.rt.build(GLOBALS, name="g.cu", target="compute_90")
        with self.assertRaises(fleetjit.OutOfRangeError) as cm:
            m.global_read("table", 1 << 62)
        self.assertIn("the global 'table' has 64 bytes", cm.exception.message)


class OtherArgumentTest(unittest.TestCase):
    def setUp(self):
        self.rt = fleetjit.Runtime(disk_cache=False)

    def tearDown(self):
        self.rt.close()

    def test_typestrs_are_refused_by_name(self):
        for typestr in ("<f0", "<fx", "<f-4", "<f3", "<f99999", "<f", 4):
            with self.subTest(typestr=typestr):
                with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                    fleetjit.borrow(Cai(0x1000, typestr=typestr, strides=(0,)))
                self.assertIn(f"typestr {typestr!r}", cm.exception.message)
        self.assertEqual(fleetjit.borrow(Cai(0x1000, typestr="|u1")).dtype, (1, 8, 1))

    def test_copy_needs_a_src(self):
        for dst in (Cai(0x1000), Cai(0x1000, data=(0x1000, True))):
            with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                self.rt.copy(dst, None)
            self.assertIn("src is None", cm.exception.message)

    def test_copy_refuses_a_read_only_dst(self):
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            self.rt.copy(Cai(0x1000, data=(0x1000, True)), Cai(0x2000))
        self.assertIn("dst is a read-only tensor", cm.exception.message)

    def test_prefetch_stage_needs_two_values(self):
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            self.rt.prefetch(0x1000, 64, mode="stage_local", stage=(0x2000,))
        self.assertIn("stage is (8192,): expected (address, bytes)", cm.exception.message)

    def test_tune_refuses_unknown_shape_keys_and_short_outputs(self):
        common = dict(args=[], grid=(1,))
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            fleetjit.tune(self.rt, _env.SAXPY, "saxpy", shapes=[{"blok": 256}],
                          outputs=[(0x1000, 64)], **common)
        self.assertIn("shapes[0] has the unknown key 'blok'", cm.exception.message)
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            fleetjit.tune(self.rt, _env.SAXPY, "saxpy", shapes=[128], outputs=[(0x1000,)],
                          **common)
        self.assertIn("outputs[0] is (4096,): expected (address, nbytes)", cm.exception.message)

    def test_dlpack_device_that_is_not_integers(self):
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            fleetjit.borrow(DLPack(0x1000, device=("cuda", 0)))
        self.assertIn("device_type is 'cuda', not an integer", cm.exception.message)

    def test_timeouts(self):
        for timeout in (math.nan, "5", -1):
            with self.subTest(timeout=timeout):
                with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                    self.rt.flush_cache(timeout=timeout)
                self.assertIn(f"timeout is {timeout!r}", cm.exception.message)
        self.rt.flush_cache(timeout=math.inf)  # forever, as None


if __name__ == "__main__":
    unittest.main()
