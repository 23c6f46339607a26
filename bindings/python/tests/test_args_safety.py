"""Issue 45, deliver 7, on the fake CUDA driver: a float passed for an
integer parameter is refused by the parameter's name (from the compiled
launch path and the ctypes path alike), and sizes are checked before
host memory is allocated for them."""
import ctypes
import mmap
import tracemalloc
import unittest

import _env  # noqa: F401
import fleetjit
from fleetjit import _fast, tensors
from fleetjit import runtime as fj_runtime

from test_refusals import DLPack, FakeDriverTest

# One parameter of each integer spelling the binding reads.
INTS = r'''
typedef long long int64_t;  // as <cstdint> and <cstddef> would (no CUDA headers needed)
namespace std { typedef unsigned long long size_t; }
extern "C" __global__ void ints(float* y, unsigned int count, long long offset,
                                const int64_t stride, float scale, std::size_t total) {
  if (threadIdx.x == 0) y[0] = scale * (count + offset + stride + total);
}
'''


class FloatForIntegerTest(FakeDriverTest):
    """saxpy(float* y, const float* x, float a, int n)."""

    def test_float_for_int_refused_by_name(self):
        b = self.buf
        for fast in (True, False):
            fj_runtime.USE_FAST_PATH = fast
            for what, value in (("float", 32.0), ("f32", fleetjit.f32(32.0)),
                                ("f64", fleetjit.f64(32.0)), ("f16", fleetjit.f16(32.0)),
                                ("bf16", fleetjit.bf16(32.0)),
                                ("c_float", ctypes.c_float(32.0))):
                with self.subTest(what=what, fast=fast):
                    before = self.launches()
                    with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                        self.k.launch(1, 32, [b, b, 2.0, value])
                    text = str(cm.exception)
                    self.assertIn("argument 3", text)
                    self.assertIn("'int n'", text)
                    self.assertEqual(self.launches(), before)

    def test_ints_and_floats_where_declared_still_launch(self):
        for fast in (True, False):
            fj_runtime.USE_FAST_PATH = fast
            before = self.launches()
            self.k.launch(1, 32, [self.buf, self.buf, 2.0, 32])
            self.k.launch(1, 32, [self.buf, self.buf, fleetjit.f32(2.0), fleetjit.i32(32)])
            self.assertEqual(self.launches(), before + 2)

    def test_int_for_float_still_refused(self):  # by the library, which knows floats
        self.refused([("int for float a", [self.buf, self.buf, 2, 32], "expects 4-byte float")])

    @unittest.skipUnless(_fast.module is not None, f"compiled path: {_fast.why_not}")
    def test_compiled_path_leaves_it_to_ctypes(self):
        self.assertEqual(_fast.module.INTEGER_PARAMS, 1)
        self.assertEqual(self.k._cai_dtypes(), ((2, 32), (2, 32), None, "int"))

    def test_every_integer_spelling(self):
        m = self.rt.build(_env.unique(INTS), name="ints.cu", target="compute_90")
        k = m.kernel("ints")
        self.assertEqual(k._integer_params(),
                         [None, ("unsigned int", "count"), ("long long", "offset"),
                          ("int64_t", "stride"), None, ("size_t", "total")])
        good = [self.buf, 3, fleetjit.i64(4), fleetjit.i64(5), 1.0, fleetjit.u64(6)]
        for fast in (True, False):
            fj_runtime.USE_FAST_PATH = fast
            before = self.launches()
            k.launch(1, 32, good)
            self.assertEqual(self.launches(), before + 1)
            for i, name, bad in ((1, "unsigned int count", 3.0),
                                 (2, "long long offset", fleetjit.f64(4.0)),
                                 (3, "int64_t stride", 5.0 + 0j),
                                 (5, "size_t total", fleetjit.f64(6.0))):
                args = list(good)
                args[i] = bad
                with self.subTest(fast=fast, param=name):
                    with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                        k.launch(1, 32, args)
                    self.assertIn(f"argument {i}", str(cm.exception))
                    self.assertIn(f"'{name}'", str(cm.exception))
                    self.assertEqual(self.launches(), before + 1)
        m.close()


class JaxKernelCallScalarsTest(FakeDriverTest):
    """jax_ffi.kernel_call checks its scalars before JAX (or a compiler) is
    needed: no F32 for an integer parameter, i32s integers that fit."""

    def test_f32_for_int_parameter_refused(self):
        from fleetjit import jax_ffi
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            jax_ffi.kernel_call(self.k, None, order=(2, 0, jax_ffi.F32, jax_ffi.F32),
                                f32s=(2.0, 32.0))
        self.assertIn("order[3] is F32", str(cm.exception))
        self.assertIn("'int n'", str(cm.exception))

    def test_i32s_and_f32s_values_checked(self):
        from fleetjit import jax_ffi
        order = (2, 0, jax_ffi.F32, jax_ffi.I32)
        for i32s, f32s, text in (((2.5,), (1.0,), "i32s[0]"), (("16",), (1.0,), "i32s[0]"),
                                 ((1 << 31,), (1.0,), "i32s[0] is 2147483648"),
                                 ((16,), (1e300,), "f32s[0]"), ((16,), ("2",), "f32s[0]")):
            with self.subTest(i32s=i32s, f32s=f32s):
                with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                    jax_ffi.kernel_call(self.k, None, order=order, f32s=f32s, i32s=i32s)
                self.assertIn(text, str(cm.exception))


class _Rank(DLPack):
    """A DLPack producer whose DLTensor claims `ndim` dimensions."""

    def __init__(self, data, ndim):
        super().__init__(data, shape=(1,) * max(ndim, 1))
        self.ndim = ndim

    def __dlpack__(self, stream=None, max_version=None):
        capsule = super().__dlpack__(stream, max_version)
        self._managed.dl_tensor.ndim = self.ndim
        return capsule


class SizesBeforeAllocationTest(FakeDriverTest):
    def _peak(self, fn):
        """(exception raised by fn(), peak bytes traced while it ran)."""
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                raised = e
            else:
                raised = None
            return raised, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def test_download_past_the_buffer_allocates_nothing(self):
        self.assertEqual(self.buf.nbytes, 64)
        for n in (65, 1 << 31):
            raised, peak = self._peak(lambda: self.buf.download(n))
            self.assertIsInstance(raised, fleetjit.OutOfRangeError, n)
            self.assertIn(f"nbytes is {n}", str(raised))
            self.assertIn("64 bytes", str(raised))
            self.assertLess(peak, 1 << 20, f"download({n}) allocated {peak} bytes first")
        self.assertEqual(len(self.buf.download(64)), 64)
        self.assertEqual(len(self.buf.download(16)), 16)

    def test_download_of_a_closed_buffer_allocates_nothing(self):
        buf = self.rt.alloc(1 << 20)
        buf.close()
        raised, peak = self._peak(buf.download)
        self.assertIsInstance(raised, fleetjit.InvalidArgumentError)
        self.assertIn("closed", str(raised))
        self.assertLess(peak, 1 << 19)

    def test_by_value_bytes_larger_than_any_parameter_not_copied(self):
        big = mmap.mmap(-1, 64 << 20)  # untouched pages: no memory until copied
        self.addCleanup(big.close)
        view = memoryview(big)
        self.addCleanup(view.release)
        for fast in (True, False):
            fj_runtime.USE_FAST_PATH = fast
            before = self.launches()
            raised, peak = self._peak(
                lambda: self.k.launch(1, 32, [self.buf, self.buf, 1.0, view]))
            self.assertIsInstance(raised, fleetjit.InvalidArgumentError)
            self.assertIn(f"a {64 << 20}-byte memoryview", str(raised))
            self.assertIn("at most 32768 bytes", str(raised))
            self.assertLess(peak, 1 << 20)
            self.assertEqual(self.launches(), before)

    def test_dlpack_rank_checked_before_shape_is_read(self):
        for ndim in (-1, tensors.MAX_NDIM + 1, 1000):
            with self.subTest(ndim=ndim):
                self.refused([(f"ndim {ndim}", [_Rank(self.addr, ndim), self.buf, 1.0, 16],
                               f"ndim {ndim}")])
        before = self.launches()  # 64 dimensions are read
        self.k.launch(1, 32, [_Rank(self.addr, tensors.MAX_NDIM), self.buf, 1.0, 16])
        self.assertEqual(self.launches(), before + 1)


if __name__ == "__main__":
    unittest.main()
