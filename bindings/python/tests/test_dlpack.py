"""Tensor borrowing without a GPU: DLPack from NumPy (legacy capsules), a
hand-made DLPack 1.0 versioned capsule, and __cuda_array_interface__, each
read back through the library's own tensor check (fj_tensor_arg_check)."""
import ctypes
import gc
import os
import random
import unittest

import _env  # noqa: F401
import fleetjit
from fleetjit import tensors

try:
    import numpy as np
except ImportError:  # Debian: apt-get install python3-numpy
    np = None


@unittest.skipIf(np is None or not hasattr(np.ndarray, "__dlpack__"),
                 "NumPy >= 1.22 is not installed (Debian: python3-numpy)")
class NumpyDlpackTest(unittest.TestCase):
    def test_contiguous_array(self):
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        t = fleetjit.borrow(a)
        self.assertIn(t.source, ("dltensor", "dltensor_versioned"))
        self.assertEqual(t.device, (tensors.KDL_CPU, 0))
        self.assertEqual(t.shape, (3, 4))
        self.assertIn(t.strides, (None, (4, 1)))
        self.assertEqual(t.dtype, (tensors.KDL_FLOAT, 32, 1))
        self.assertEqual(t.data_ptr, a.ctypes.data)

    def test_strided_view_and_dtypes(self):
        base = np.zeros((8, 9), dtype=np.int16)
        v = base[1::2, 2::3]
        t = fleetjit.borrow(v)
        self.assertEqual(t.shape, (4, 3))
        self.assertEqual(t.strides, (18, 3))  # elements, not bytes
        self.assertEqual(t.dtype, (tensors.KDL_INT, 16, 1))
        self.assertEqual(t.data_ptr, v.ctypes.data)
        for dtype, code in ((np.uint8, tensors.KDL_UINT), (np.float64, tensors.KDL_FLOAT),
                            (np.int64, tensors.KDL_INT)):
            self.assertEqual(fleetjit.borrow(np.ones(3, dtype)).dtype,
                             (code, np.dtype(dtype).itemsize * 8, 1))

    def test_capsule_keeps_the_array_alive(self):
        t = fleetjit.borrow(np.full((5, 7), 3.0, dtype=np.float32))
        gc.collect()  # the array has no other reference
        self.assertEqual(t.shape, (5, 7))
        self.assertEqual(ctypes.c_float.from_address(t.data_ptr).value, 3.0)

    def test_library_reads_the_dltensor(self):
        # fj_tensor_arg_check gets the producer's DLTensor* as is: it reads
        # NumPy's device type (CPU) and refuses it, naming it.
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            fleetjit.tensor_check(fleetjit.Tensor(np.zeros((64, 64), np.float32), box=(8, 8)))
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        self.assertIn("device_type is 1", cm.exception.message)


class _CudaArrayInterface:
    """A stand-in for a CuPy array: host memory described as CUDA memory
    (the tensor check never dereferences it)."""

    def __init__(self, array):
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape, "typestr": array.dtype.str,
            "data": (array.ctypes.data, False), "strides": array.strides, "version": 3}


@unittest.skipIf(np is None, "numpy is not installed (Debian: python3-numpy)")
class CudaArrayInterfaceTest(unittest.TestCase):
    def test_fields(self):
        a = np.zeros((6, 10), dtype=np.float32)[:, ::2]
        t = fleetjit.borrow(_CudaArrayInterface(a), device_id=3)
        self.assertEqual(t.source, "cuda_array_interface")
        self.assertEqual(t.device, (tensors.KDL_CUDA, 3))
        self.assertEqual(t.shape, (6, 5))
        self.assertEqual(t.strides, (10, 2))
        self.assertEqual(t.dtype, (tensors.KDL_FLOAT, 32, 1))
        self.assertEqual(t.data_ptr, a.ctypes.data)

    def test_tensor_check_tma_and_fallback(self):
        dense = np.zeros((256, 256), dtype=np.float32)
        tma, reason = fleetjit.tensor_check(
            fleetjit.Tensor(_CudaArrayInterface(dense), box=(32, 64), oob="zeros"))
        self.assertTrue(tma, reason)
        # An inner stride of 2 elements: no TMA tensor map, cp.async instead.
        tma, reason = fleetjit.tensor_check(
            fleetjit.Tensor(_CudaArrayInterface(dense[:, ::2]), box=(32, 64)))
        self.assertFalse(tma)
        self.assertNotEqual(reason, "")

    def test_box_order_is_named_and_checked(self):
        # box is outermost-first like shape; box_innermost_first= is the
        # device's order. Both describe the same tile.
        seed = os.environ.get("FJ_TEST_SEED") or str(random.randrange(1 << 30))
        rng = random.Random(seed)
        rows, cols = rng.randrange(17, 128), 64 * rng.randrange(2, 6)
        self._testMethodDoc = f"FJ_TEST_SEED={seed}: rows {rows}, cols {cols}"
        dense = np.zeros((rows, cols), dtype=np.float32)
        by_outer = fleetjit.Tensor(_CudaArrayInterface(dense), box=(16, 64))
        by_inner = fleetjit.Tensor(_CudaArrayInterface(dense),
                                   box_innermost_first=(64, 16))
        self.assertEqual(by_outer.box, by_inner.box)
        self.assertEqual(fleetjit.tensor_check(by_inner), (True, ""))
        with self.assertRaises(ValueError):
            fleetjit.Tensor(dense, box=(1, 1), box_innermost_first=(1, 1))
        # A 3-D box on a 2-D tensor: refused, naming the order.
        with self.assertRaises(ValueError) as cm:
            fleetjit.tensor_check(
                fleetjit.Tensor(_CudaArrayInterface(dense), box=(2, 16, 64)))
        self.assertIn("outermost-first", str(cm.exception))
        self.assertIn("2 dimensions", str(cm.exception))
        # The box given innermost-first by mistake runs past the rows.
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            fleetjit.tensor_check(
                fleetjit.Tensor(_CudaArrayInterface(dense), box=(cols, 16)))
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        self.assertIn(f"box[0] = {cols} exceeds shape[0] = {rows}",
                      cm.exception.message)
        self.assertIn("innermost-first?", cm.exception.message)
        # With a fill the same box is valid: the rows past the end read as 0.
        tma, reason = fleetjit.tensor_check(fleetjit.Tensor(
            _CudaArrayInterface(dense), box=(cols, 16), oob="zeros"))
        self.assertEqual((tma, reason), (True, ""))
        # Over 256 in a dimension: valid, and still one tensor map: the
        # runtime splits the box into hardware boxes of at most 256.
        tma, reason = fleetjit.tensor_check(fleetjit.Tensor(
            _CudaArrayInterface(dense), box=(1, cols), oob="zeros"))
        self.assertEqual((tma, reason), (True, ""))

    def test_misaligned_strides_are_refused(self):
        class Odd:
            __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (4096, False),
                                        "strides": (6,), "version": 3}
        with self.assertRaises(fleetjit.FleetjitError):
            fleetjit.borrow(Odd())


class VersionedCapsuleTest(unittest.TestCase):
    """DLPack 1.0: a DLManagedTensorVersioned in a "dltensor_versioned"
    capsule; the DLTensor sits at offset 32, after version, manager_ctx,
    deleter and flags."""

    _NAME = b"dltensor_versioned"  # must outlive the capsule

    def make_capsule(self, shape, strides, data, major=1, flags=0):
        ndim = len(shape)
        shape_arr = (ctypes.c_int64 * ndim)(*shape)
        strides_arr = (ctypes.c_int64 * ndim)(*strides)
        m = tensors.DLManagedTensorVersioned()
        m.version.major, m.version.minor = major, 0
        m.flags = flags
        t = m.dl_tensor
        t.data = data
        t.device.device_type, t.device.device_id = tensors.KDL_CUDA, 0
        t.ndim = ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = tensors.KDL_FLOAT, 32, 1
        t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
        t.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        capsule = new(ctypes.addressof(m), self._NAME, None)
        self._keep = (m, shape_arr, strides_arr)
        return capsule

    def test_offset_is_computed_from_the_layout(self):
        self.assertEqual(tensors.VERSIONED_TENSOR_OFFSET, 32)
        self.assertEqual(tensors.LEGACY_TENSOR_OFFSET, 0)

    def test_versioned_producer(self):
        buf = (ctypes.c_float * (128 * 128))()
        capsule = self.make_capsule((128, 128), (128, 1), ctypes.addressof(buf),
                                    flags=tensors.DLPACK_FLAG_READ_ONLY)

        class Producer:
            def __dlpack_device__(self):
                return (tensors.KDL_CUDA, 0)

            def __dlpack__(self, stream=None, max_version=None):
                Producer.seen = (stream, max_version)
                return capsule

        t = fleetjit.borrow(Producer())
        self.assertEqual(Producer.seen, (1, (1, 0)))  # legacy default stream, DLPack 1.0
        self.assertEqual(t.source, "dltensor_versioned")
        self.assertTrue(t.read_only)
        self.assertEqual(t.shape, (128, 128))
        self.assertEqual(t.strides, (128, 1))
        self.assertEqual(t.data_ptr, ctypes.addressof(buf))
        tma, reason = fleetjit.tensor_check(fleetjit.Tensor(t, box=(16, 16)))
        self.assertTrue(tma, reason)

    def test_legacy_producer_without_max_version(self):
        class Old:
            def __dlpack_device__(self):
                return (tensors.KDL_CUDA, 0)

            def __dlpack__(self, stream=None):
                raise BufferError("reached")
        with self.assertRaises(BufferError):  # retried without max_version
            fleetjit.borrow(Old())

    def test_newer_major_is_refused(self):
        capsule = self.make_capsule((4,), (1,), 4096, major=2)
        with self.assertRaises(fleetjit.FleetjitError):
            tensors.from_capsule(capsule)

    def test_foreign_capsule_is_refused(self):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        with self.assertRaises(fleetjit.FleetjitError):
            tensors.from_capsule(new(4096, b"used_dltensor", None))


class _Interface:
    """A CUDA array (never touched: tensor_check reads no memory)."""

    def __init__(self, shape, typestr="<f4"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (1 << 20, False), "strides": None,
                                         "version": 3}


class SwizzleAndBoxTest(unittest.TestCase):
    def test_swizzle_and_boxes_over_256(self):
        dense = _Interface((256, 4096))
        # 32 f32 = 128 bytes per box row: the 128-byte swizzle fits.
        tma, reason = fleetjit.tensor_check(fleetjit.Tensor(dense, box=(8, 32), swizzle=128))
        self.assertTrue(tma, reason)
        # 64 f32 = 256 bytes: refused, whatever the implementation.
        with self.assertRaisesRegex(fleetjit.FleetjitError, "swizzle 128B"):
            fleetjit.tensor_check(fleetjit.Tensor(dense, box=(8, 64), swizzle=128))
        with self.assertRaises(ValueError):
            fleetjit.Tensor(dense, swizzle=48)
        # A 2048-wide row is split into tensor copies of 256: still TMA.
        tma, reason = fleetjit.tensor_check(fleetjit.Tensor(dense, box=(1, 2048)))
        self.assertTrue(tma, reason)
        # A 4000-wide f16 row has no 128-byte piece: no map, and why.
        tma, reason = fleetjit.tensor_check(
            fleetjit.Tensor(_Interface((8, 4000), "<f2"), box=(1, 4000)))
        self.assertFalse(tma)
        self.assertIn("multiple of 64", reason)


if __name__ == "__main__":
    unittest.main()
