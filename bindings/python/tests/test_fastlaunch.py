"""The compiled launch path (fleetjit/_fastlaunch.c) on the CPU: it is
handed a stand-in fj_launch (a ctypes callback) that records what it
received, and must pack exactly what the pure-ctypes path packs: kinds and
values of random scalars, pointers, config and stream; and leave to that
path (NotImplemented) what it cannot pack or must refuse."""
import ctypes
import random
import struct
import unittest

import _env  # noqa: F401 - sets up the import path and the library
try:
    import numpy as np
except ImportError:
    np = None
import fleetjit
from fleetjit import _fast, _ffi

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.POINTER(_ffi.fj_launch_config),
                          ctypes.POINTER(_ffi.fj_arg), ctypes.c_size_t)


class FakeCai:
    def __init__(self, ptr, shape, strides=None, typestr="<f4"):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape,
                                         "strides": strides, "typestr": typestr,
                                         "version": 3}


class Buffer:
    def __init__(self, address):
        self.device_address = address


@unittest.skipUnless(_fast.module is not None, f"compiled path: {_fast.why_not}")
class FastLaunchTest(unittest.TestCase):
    def setUp(self):
        self.calls = []
        self.status = 0

        def fake(kernel, cfg, args, count):
            c = cfg.contents
            self.calls.append({
                "kernel": kernel, "grid": tuple(c.grid), "block": tuple(c.block),
                "shared": c.shared_bytes, "stream": c.stream or 0,
                "args": [(args[i].struct_size, args[i].kind, args[i].v.u64)
                         for i in range(count)]})
            return self.status
        self.cb = LAUNCH(fake)
        self.addr = ctypes.cast(self.cb, ctypes.c_void_p).value
        _fast.register()
        if np is not None:
            self.assertTrue(_fast.numpy_registered)

    def launch(self, args, grid=7, block=(32, 2), stream_obj=None, streams=None,
               fj_stream=0, dtypes=None):
        return _fast.module.launch(self.addr, 0x1234, grid, block, 96, fj_stream,
                                   stream_obj, streams or {}, args, dtypes)

    def expected(self, values):
        """What the ctypes path packs for the same values."""
        keep, arr, count = fleetjit.args.build(values)
        return [(arr[i].struct_size, arr[i].kind, arr[i].v.u64) for i in range(count)]

    def test_random_scalars_and_pointers_pack_like_ctypes(self):
        rng = random.Random()
        for _ in range(50):
            values = []
            for _ in range(rng.randrange(0, 13)):
                pick = rng.randrange(8)
                if pick == 0:
                    values.append(rng.randrange(-2**31, 2**31))
                elif pick == 1:
                    values.append(struct.unpack("f", struct.pack("f", rng.uniform(-1e6, 1e6)))[0])
                elif pick == 2:
                    values.append(fleetjit.i64(rng.randrange(-2**63, 2**63)))
                elif pick == 3:
                    values.append(fleetjit.u8(rng.randrange(256)))
                elif pick == 4:
                    values.append(fleetjit.f64(rng.uniform(-1, 1)))
                elif pick == 5:
                    values.append(fleetjit.pointer(rng.randrange(2**48)))
                elif pick == 6:
                    values.append(Buffer(rng.randrange(1, 2**48)))
                elif np is not None:  # NumPy scalars keep their type
                    values.append(rng.choice((
                        np.float32(rng.uniform(-9, 9)), np.float64(rng.uniform(-9, 9)),
                        np.int64(rng.randrange(-2**63, 2**63)), np.int8(rng.randrange(-128, 128)),
                        np.uint16(rng.randrange(2**16)), np.uint64(rng.randrange(2**64)),
                        np.int32(rng.randrange(-2**31, 2**31)))))
            self.calls.clear()
            self.assertIsNone(self.launch(values))
            self.assertEqual(len(self.calls), 1)
            # The union's unused bytes are zero in both, so u64 compares all.
            self.assertEqual(self.calls[0]["args"], self.expected(values))
            self.assertEqual(self.calls[0]["grid"], (7, 1, 1))
            self.assertEqual(self.calls[0]["block"], (32, 2, 1))
            self.assertEqual(self.calls[0]["shared"], 96)

    def test_contiguous_cuda_array_interface_is_a_pointer(self):
        p = random.randrange(1, 2**48)
        self.assertIsNone(self.launch([FakeCai(p, (4, 8)), FakeCai(p + 64, (3,), None)]))
        self.assertEqual([a[2] for a in self.calls[0]["args"]], [p, p + 64])
        self.assertEqual(self.calls[0]["args"][0][1], _ffi.ARG_POINTER)

    def test_left_to_the_ctypes_path(self):
        for values in ([True], [2**40], [FakeCai(256, (4, 8), strides=(4, 16))],
                       [b"bytes"], [object()], [fleetjit.Tensor(FakeCai(256, (4,)))]):
            self.assertIs(self.launch(values), NotImplemented, values)
        self.assertIs(self.launch([1], grid=(1, 2, 3, 4)), NotImplemented)
        self.assertEqual(self.calls, [])

    def test_streams(self):
        self.launch([], fj_stream=0xABC0)
        self.assertEqual(self.calls[-1]["stream"], 0xABC0)

        class TorchLike:
            cuda_stream = 0x5550

        class CupyLike:
            ptr = 0x6660
        self.assertEqual(self.launch([], stream_obj=TorchLike()), ("wrap", 0x5550))
        self.assertIsNone(self.launch([], stream_obj=TorchLike(), streams={0x5550: 0x77}))
        self.assertEqual(self.calls[-1]["stream"], 0x77)
        self.assertIsNone(self.launch([], stream_obj=CupyLike(), streams={0x6660: 0x88}))
        self.assertEqual(self.calls[-1]["stream"], 0x88)
        self.assertIsNone(self.launch([], stream_obj=0))  # legacy default
        self.assertEqual(self.calls[-1]["stream"], 0)

    def test_failed_status_comes_back(self):
        self.status = 0xDEAD0
        self.assertEqual(self.launch([1]), 0xDEAD0)

    def test_layout_matches_the_ctypes_mirror(self):
        self.assertEqual(tuple(_fast.module.layout()),
                         (ctypes.sizeof(_ffi.fj_arg), ctypes.sizeof(_ffi.fj_launch_config_13)))

    def test_torch_shim_refuses_what_it_cannot_read(self):
        m = _fast.module
        # The calls below turn the shim off in this process: set it up again
        # after (the tests of test_frameworks_gpu read through it).
        self.addCleanup(_fast.register)
        for value in (object(), 3, FakeCai(256, (4,))):  # no exact torch.Tensor
            with self.assertRaises(TypeError):
                m.torch_shim_read(value)
            with self.assertRaises(TypeError):
                m.torch_shim_words(value)
        with self.assertRaises(ValueError):  # on, with no functions to call
            m.torch_shim(16, -1, 1, (0,) * 7, {}, True)
        with self.assertRaises(ValueError):  # the flag past the tensor
            m.torch_shim(24, 24, 1, (1,) * 7, {}, True)
        with self.assertRaises(TypeError):
            m.torch_shim(0, -1, 0, (0,) * 7, [], False)
        with self.assertRaises(TypeError):  # a dtype code that is no int
            m.torch_shim(16, -1, 1, (1,) * 7, {"f32": None}, False)
        self.assertIsNone(m.torch_shim(0, -1, 0, (0,) * 7, {}, False))  # off again
        with self.assertRaises(TypeError):  # six functions
            m.torch_shim(0, -1, 0, (0,) * 6, {}, False)


if __name__ == "__main__":
    unittest.main()
