"""fleetjit.close, HostOutput and Macros without a device: the comparisons
tune's check makes, with NumPy and without it (each test that compares
runs both ways where NumPy is installed)."""
import array
import math
import struct
import unittest
from unittest import mock

import _env  # noqa: F401  (sys.path)
import fleetjit
from fleetjit import tune_checks, tuning

try:
    import numpy
except ImportError:
    numpy = None


def spec(dtype, shape, index=0, name=None):
    n = 1
    for s in shape:
        n *= s
    return tune_checks.OutputSpec(index, index if name is None else name, 0x1000,
                                  n * tune_checks.itemsize(dtype), dtype, tuple(shape))


def f32(values):
    return array.array("f", values).tobytes()


def f32_sum(values):
    """A float32 running sum, in the given order (as one GPU thread adds)."""
    acc = 0.0
    for v in values:
        acc = struct.unpack("f", struct.pack("f", acc + v))[0]
    return acc


class BothWays(unittest.TestCase):
    """Runs a test's body with NumPy (when installed) and without it."""

    def ways(self):
        yield "python", mock.patch.object(tune_checks, "_numpy", lambda: None)
        if numpy is not None:
            yield "numpy", mock.patch.object(tune_checks, "_numpy", lambda: numpy)


class CloseTest(BothWays):
    def test_a_reduction_in_another_order_passes_a_tolerance_but_not_bytes(self):
        # What issue 49 met: a correct sum whose order follows the block size.
        vals = [((i * 7919) % 1000) / 997.0 - 0.3 for i in range(4096)]
        serial = f32_sum(vals)
        strided = f32_sum(f32_sum(vals[t::256]) for t in range(256))
        self.assertNotEqual(f32([serial]), f32([strided]))  # bytes differ
        s = spec("f32", (1,))
        for way, patch in self.ways():
            with self.subTest(way=way), patch:
                c = fleetjit.close(rtol=1e-5)
                rule = c.bind([s])[0]
                self.assertIsNone(c.compare(s, rule, f32([strided]), f32([serial])))
                exact = fleetjit.close(rtol=1e-5, exact=(0,))
                why = exact.compare(s, exact.bind([s])[0], f32([strided]), f32([serial]))
                self.assertIn("compared exactly", why)

    def test_the_rule_is_numpys_isclose(self):
        nan, inf = math.nan, math.inf
        cases = [  # (got, ref, atol, rtol, equal_nan, ok)
            (1.0, 1.0, 0, 0, True, True),
            (1.001, 1.0, 1e-3, 0, True, True),
            (1.0019, 1.0, 1e-3, 1e-3, True, True),     # 0.0019 <= 0.001 + 0.001 * |1.0|
            (1.0021, 1.0, 1e-3, 1e-3, True, False),
            (1.0, 1.01, 0, 1e-3, True, False),
            (100.5, 100.0, 0, 1e-2, True, True),
            (nan, nan, 0, 0, True, True),
            (nan, nan, 0, 0, False, False),
            (nan, 1.0, 1e9, 0, True, False),
            (inf, inf, 0, 0, True, True),
            (inf, -inf, 1e30, 1e30, True, False),
            (inf, 1e38, 1e30, 1e30, True, False),
        ]
        s = spec("f64", (1,))
        for way, patch in self.ways():
            with patch:
                for got, ref, atol, rtol, equal_nan, ok in cases:
                    with self.subTest(way=way, got=got, ref=ref, atol=atol, rtol=rtol):
                        c = fleetjit.close(atol=atol, rtol=rtol, equal_nan=equal_nan)
                        why = c.compare(s, c.bind([s])[0], struct.pack("<d", got),
                                        struct.pack("<d", ref))
                        self.assertEqual(why is None, ok, why)

    def test_half_bfloat_and_complex_are_decoded(self):
        def bf16(x):
            return struct.pack("<H", struct.unpack("<I", struct.pack("<f", x))[0] >> 16)

        cases = [
            ("f16", struct.pack("<2e", 1.0, 2.0), struct.pack("<2e", 1.0, 2.001953125), 1e-3,
             False),
            ("f16", struct.pack("<2e", 1.0, 2.0), struct.pack("<2e", 1.0, 2.001953125), 1e-2,
             True),
            ("bf16", bf16(3.0) + bf16(1.0), bf16(3.0) + bf16(1.0078125), 1e-3, False),
            ("bf16", bf16(3.0) + bf16(1.0), bf16(3.0) + bf16(1.0078125), 1e-2, True),
            ("c64", struct.pack("<4f", 1, 2, 3, 4), struct.pack("<4f", 1, 2, 3, 4.5), 0.4,
             False),
            ("c64", struct.pack("<4f", 1, 2, 3, 4), struct.pack("<4f", 1, 2, 3, 4.5), 0.6,
             True),
        ]
        for way, patch in self.ways():
            with patch:
                for dtype, got, ref, atol, ok in cases:
                    with self.subTest(way=way, dtype=dtype, atol=atol):
                        s = spec(dtype, (2,))
                        c = fleetjit.close(atol=atol)
                        why = c.compare(s, c.bind([s])[0], got, ref)
                        self.assertEqual(why is None, ok, why)
                        if not ok:
                            self.assertIn("the first at 1", why)

    def test_integers_are_exact_and_tolerances_may_be_per_output(self):
        a = spec("i32", (4,), 0, "index")
        b = spec("f32", (2, 2), 1, "sum")
        got_i, ref_i = array.array("i", [0, 1, 2, 3]).tobytes(), array.array(
            "i", [0, 1, 2, 4]).tobytes()
        for way, patch in self.ways():
            with self.subTest(way=way), patch:
                c = fleetjit.close(atol=100.0)
                ra, rb = c.bind([a, b])
                self.assertTrue(ra[0] and not rb[0])
                self.assertEqual(c.compare(a, ra, got_i, ref_i),
                                 "outputs['index'] differs from the reference at element 3: "
                                 "3 != 4 (compared exactly)")
                c = fleetjit.close(atol={"sum": 0.5})
                rule = c.bind([a, b])[1]
                self.assertIsNone(c.compare(b, rule, f32([1, 2, 3, 4]), f32([1, 2, 3, 4.4])))
                why = c.compare(b, rule, f32([1, 2, 3, 4]), f32([1, 2, 3.6, 4]))
                self.assertIn("outputs['sum']: 1 element(s) outside atol 0.5", why)
                self.assertIn("the first at (1, 0)", why)
        with self.assertRaises(fleetjit.InvalidArgumentError):
            fleetjit.close(atol={"nope": 1.0}).bind([a, b])
        with self.assertRaises(fleetjit.InvalidArgumentError):
            fleetjit.close(rtol=math.nan)

    def test_without_a_reference_the_first_candidate_is_it(self):
        s = spec("f32", (3,))
        for way, patch in self.ways():
            with self.subTest(way=way), patch:
                run = tuning._close_check(fleetjit.close(atol=1e-3), [s], None)
                self.assertEqual(run(0, [f32([1, 2, 3])]), (True, None))
                self.assertEqual(run(1, [f32([1, 2.0005, 3])]), (True, None))
                ok, why = run(2, [f32([1, 2, 3.01])])
                self.assertFalse(ok)
                self.assertIn("the first at 2", why)
                # A given reference is used from the first candidate on.
                run = tuning._close_check(fleetjit.close(), [s], [f32([1, 2, 3])])
                self.assertFalse(run(0, [f32([1, 2, 4])])[0])


class HostOutputTest(unittest.TestCase):
    def test_values_and_tolist_follow_dtype_and_shape(self):
        o = tune_checks.HostOutput(spec("f16", (2, 3)), struct.pack("<6e", *range(6)))
        self.assertEqual(o.tolist(), [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
        self.assertEqual((o.dtype, o.shape, len(o)), ("f16", (2, 3), 2))
        o = tune_checks.HostOutput(spec("bf16", (2,)), struct.pack("<2H", 0x3F80, 0xC000))
        self.assertEqual(o.values(), [1.0, -2.0])
        o = tune_checks.HostOutput(spec("c64", (1,)), struct.pack("<2f", 1.5, -2))
        self.assertEqual(o.values(), [complex(1.5, -2)])
        o = tune_checks.HostOutput(spec("bool", (2,)), b"\x00\x01")
        self.assertEqual(o.values(), [False, True])
        o = tune_checks.HostOutput(spec(None, (3,)), b"abc")
        self.assertEqual(o.values(), [97, 98, 99])
        with mock.patch.object(tune_checks, "_numpy", lambda: None):
            with self.assertRaises(ImportError):
                o.numpy()

    @unittest.skipIf(numpy is None, "NumPy is not installed")
    def test_numpy_arrays(self):
        o = tune_checks.HostOutput(spec("i16", (2, 2)), struct.pack("<4h", 1, -2, 3, -4))
        a = numpy.asarray(o)
        self.assertEqual((a.dtype, a.shape), (numpy.dtype("int16"), (2, 2)))
        self.assertEqual(a.tolist(), [[1, -2], [3, -4]])
        o = tune_checks.HostOutput(spec("bf16", (2,)), struct.pack("<2H", 0x3F80, 0xC000))
        self.assertEqual(o.numpy().dtype, numpy.float32)  # widened exactly
        self.assertEqual(o.numpy().tolist(), [1.0, -2.0])
        self.assertTrue(numpy.allclose(o, [1.0, -2.0]))

    @unittest.skipIf(numpy is None, "NumPy is not installed")
    def test_a_numpy_reference_must_have_the_outputs_dtype(self):
        s = spec("f32", (4,))
        self.assertEqual(tune_checks.reference_bytes(numpy.arange(4, dtype=numpy.float32),
                                                     s, None, "reference[0]"),
                         f32([0, 1, 2, 3]))
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            tune_checks.reference_bytes(numpy.arange(4, dtype=numpy.int32), s, None,
                                        "reference[0]")
        self.assertIn("reference[0] is i32, the output f32", cm.exception.message)
        # Fortran order is copied to the output's C order.
        m = numpy.asfortranarray(numpy.arange(4, dtype=numpy.float32).reshape(2, 2))
        self.assertEqual(tune_checks.reference_bytes(m, s, None, "r"), f32([0, 1, 2, 3]))

    def test_a_buffers_format_must_be_the_outputs_dtype(self):
        s = spec("f32", (4,))
        for ok in (array.array("f", range(4)), f32(range(4)), bytearray(f32(range(4)))):
            self.assertEqual(tune_checks.reference_bytes(ok, s, None, "r"), f32(range(4)))
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            tune_checks.reference_bytes(array.array("i", range(4)), s, None, "reference[0]")
        self.assertIn("reference[0] is i32, the output f32", cm.exception.message)
        with self.assertRaises(fleetjit.InvalidArgumentError) as cm:
            tune_checks.reference_bytes(array.array("d", range(4)), s, None, "reference[0]")
        self.assertIn("reference[0] is f64, the output f32", cm.exception.message)
        # bf16 has no format of its own: its bits as u16 are taken.
        self.assertEqual(tune_checks.reference_bytes(array.array("H", [0x3F80]),
                                                     spec("bf16", (1,)), None, "r"),
                         b"\x80\x3f")

    def test_dtype_names(self):
        for given, want in (("f32", "f32"), ("float32", "f32"), ("bfloat16", "bf16"),
                            ("torch.bfloat16", "bf16"), ("int64", "i64"), ("half", "f16"),
                            ("complex64", "c64")):
            self.assertEqual(tune_checks.dtype_name(given), want)
        if numpy is not None:
            self.assertEqual(tune_checks.dtype_name(numpy.float16), "f16")
            self.assertEqual(tune_checks.dtype_name(numpy.dtype("uint8")), "u8")
        with self.assertRaises(fleetjit.InvalidArgumentError):
            tune_checks.dtype_name("f8")


class Cai:
    def __init__(self, shape, typestr="<f4", strides=None, address=0x7F0000000000):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "version": 3,
                                         "data": (address, False), "strides": strides}


class OutputSpecTest(unittest.TestCase):
    def test_a_tensor_brings_its_dtype_and_shape(self):
        s = tune_checks.output_spec(Cai((3, 5), "<i2"), 1, "idx", 0)
        self.assertEqual((s.address, s.nbytes, s.dtype, s.shape, s.label),
                         (0x7F0000000000, 30, "i16", (3, 5), "outputs['idx']"))
        s = tune_checks.output_spec(fleetjit.Tensor(Cai((4,))), 0, 0, 0)
        self.assertEqual((s.dtype, s.shape, s.label), ("f32", (4,), "outputs[0]"))
        s = tune_checks.output_spec(fleetjit.TuneOutput((0x1000, 64), dtype="f16",
                                                        shape=(4, 8)), 0, 0, 0)
        self.assertEqual((s.nbytes, s.dtype, s.shape), (64, "f16", (4, 8)))
        s = tune_checks.output_spec((0x1000, 64), 0, 0, 0)
        self.assertEqual((s.dtype, s.shape), (None, (64,)))

    def test_what_cannot_be_an_output(self):
        cases = [(Cai((4, 4), strides=(4, 16)), "is not contiguous"),
                 (fleetjit.TuneOutput(Cai((4,)), dtype="i32"),
                  "TuneOutput's dtype i32 differs from the tensor's, f32"),
                 ((0x1000,), "expected (address, nbytes)")]
        if numpy is not None:  # a host array: DLPack's CPU device
            cases.append((numpy.zeros(4, numpy.float32), "is not in CUDA memory"))
        for value, says in cases:
            with self.subTest(says=says), self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                tune_checks.output_spec(value, 0, 0, 0)
            self.assertIn(says, cm.exception.message)


class MacrosTest(unittest.TestCase):
    def test_macros_read_as_the_library_reads_them(self):
        m = fleetjit.Macros("-DTILE=0x40\t-DFLAG  -DNAME=abc -O3 -DNEG=-1\n-DBIG=99", 2)
        self.assertEqual(dict(m), {"TILE": 64, "FLAG": 1, "NAME": "abc", "NEG": "-1",
                                   "BIG": 99})
        self.assertEqual((m.text, m.index), ("-DTILE=0x40\t-DFLAG  -DNAME=abc -O3 -DNEG=-1\n"
                                             "-DBIG=99", 2))
        self.assertIsNone(tuning._macro_number(str(1 << 64)))
        self.assertIsNone(tuning._macro_number("0x"))
        self.assertEqual(tuning._macro_number("0XfF"), 255)

    def test_the_grid_rule_is_the_librarys(self):
        m = fleetjit.Macros("-DTILE=100 -DZ=0", 0)
        self.assertEqual(tuning._rule_grid((0, 0, 0), (1000, 7, 0), ("TILE", "block.y", ""),
                                           m, (32, 2, 1)), (10, 4, 1))
        self.assertEqual(tuning._rule_grid((5, 0, 2), (0, 0, 0), ("", "", ""), m, (1, 1, 1)),
                         (5, 1, 2))
        for divisor, says in (("NOPE", "defines no NOPE"), ("Z", "('Z') is 0")):
            with self.subTest(divisor=divisor), self.assertRaises(tuning._Skip) as cm:
                tuning._rule_grid((0, 0, 0), (8, 0, 0), (divisor, "", ""), m, (1, 1, 1))
            self.assertIn(says, str(cm.exception))
        with self.assertRaises(tuning._Skip):
            tuning._rule_grid((0, 0, 0), (1 << 40, 0, 0), ("", "", ""), m, (1, 1, 1))


if __name__ == "__main__":
    unittest.main()
