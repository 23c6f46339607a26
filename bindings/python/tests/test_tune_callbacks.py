"""fleetjit.tune's Python functions (grid, shared, check), run end to end
through fj_tune on the fake CUDA driver (tests/common/fake_cuda: an sm_90
device whose launches check their parameters and do nothing, whose copies
are real), with candidates built by the real NVRTC.

What the fake can show honestly: which candidates the grid function is
called for and with what (macros, block, shared bytes), the grids and
skips it decides, the pairs shared= expands, what a check receives (host
copies of the outputs as they are in device memory: the kernel writes
nothing, so the test uploads them) and that its verdict decides
wrong_output, and how an exception in either is reported. What a kernel
writes is for test_tune_gpu.py."""
import array
import ctypes
import struct
import unittest

import _env
import fleetjit
from fleetjit import tuning

N = 1024


class FakeArray:
    """A device array by __cuda_array_interface__ (as CuPy and Numba give it)."""

    def __init__(self, buf, shape, typestr):
        self.buf = buf
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (buf.device_address, False), "version": 3}


class FakeTuneTest(unittest.TestCase):
    def setUp(self):
        _env.fake_driver_saxpy(self)  # skips without the fake driver or NVRTC
        self.addCleanup(self.rt.close)
        self.values = array.array("f", ((i % 37) * 0.25 - 3.0 for i in range(N)))
        self.y = self.rt.alloc(4 * N)
        self.x = self.rt.alloc(4 * N)
        self.y.upload(self.values)
        self.x.upload(self.values)

    def tune(self, **over):
        kw = dict(macro_sets=["-DTILE=64 -DSTAGES=2", "-DTILE=128 -DSTAGES=3"],
                  shapes=[64, 128], grid_extent=(N,), grid_divisor=("block.x",),
                  args=[self.y, self.x, 2.0, N], outputs=[self.y], target="compute_90",
                  retune=True, store=False)
        kw.update(over)
        return fleetjit.tune(self.rt, _env.SAXPY, "saxpy", **kw)

    def launches(self):
        return self.fake.fjfake_calls(b"cuLaunchKernelEx")

    # ------------------------------------------------------------ grid

    def test_the_grid_function_sees_each_candidates_macros_and_shape(self):
        seen = []

        def grid(macros, block, shared_bytes):
            seen.append((macros.text, macros.index, dict(macros), block, shared_bytes))
            return (N // block[0], macros["STAGES"])

        res = self.tune(grid=grid, grid_extent=None, grid_divisor=(),
                        shapes=[64, {"block": 128, "shared_bytes": 1024}, (32, 2)])
        m0, m1 = "-DTILE=64 -DSTAGES=2", "-DTILE=128 -DSTAGES=3"
        d0, d1 = {"TILE": 64, "STAGES": 2}, {"TILE": 128, "STAGES": 3}
        self.assertEqual(seen, [
            (m0, 0, d0, (64, 1, 1), 0), (m0, 0, d0, (128, 1, 1), 1024),
            (m0, 0, d0, (32, 2, 1), 0),
            (m1, 1, d1, (64, 1, 1), 0), (m1, 1, d1, (128, 1, 1), 1024),
            (m1, 1, d1, (32, 2, 1), 0)])
        self.assertEqual([r.grid for r in res.rows],
                         [(16, 2, 1), (8, 2, 1), (32, 2, 1), (16, 3, 1), (8, 3, 1), (32, 3, 1)])
        self.assertEqual([r.status for r in res.rows], ["ok"] * 6)
        self.assertIs(res.best, res.rows[res.winner])

    def test_none_skips_a_candidate(self):
        before = self.launches()
        res = self.tune(grid=lambda m, b, s: None if m["TILE"] == 128 else N // b[0],
                        grid_extent=None)
        self.assertEqual([r.status for r in res.rows],
                         ["ok", "ok", "launch_refused", "launch_refused"])
        self.assertEqual(res.rows[2].message, "skipped: the grid function returned None")
        self.assertEqual(res.rows[0].grid, (16, 1, 1))
        self.assertIn(res.winner, (0, 1))
        # Only the two kept candidates ran (each: check, warm-up, samples).
        with_all = self.launches() - before
        before = self.launches()
        self.tune(grid=lambda m, b, s: N // b[0], grid_extent=None)
        self.assertLess(with_all, self.launches() - before)

    def test_grid_fn_is_the_same_argument(self):
        calls = []
        res = self.tune(grid_fn=lambda m, b, s: calls.append(b) or 4, grid_extent=None)
        self.assertEqual(len(calls), 4)
        self.assertEqual({r.grid for r in res.rows}, {(4, 1, 1)})
        for over, says in (({"grid": (1, 1, 1), "grid_fn": lambda *a: 1}, "not both"),
                           ({"grid": lambda *a: 1}, "grid_extent, not both"),
                           ({"grid_fn": 5, "grid_extent": None}, "grid_fn is a function")):
            with self.subTest(says=says), self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                self.tune(**over)
            self.assertIn(says, cm.exception.message)

    def test_an_exception_in_the_grid_function_skips_its_candidate_and_raises_after(self):
        def grid(macros, block, shared_bytes):
            if macros["TILE"] == 128 and block[0] == 64:
                return 1 // 0
            return N // block[0]

        with self.assertRaises(fleetjit.TuneCallbackError) as cm:
            self.tune(grid=grid, grid_extent=None)
        e = cm.exception
        self.assertEqual(len(e.failures), 1)
        f = e.failures[0]
        self.assertEqual((f.where, f.candidate, f.macros, f.block),
                         ("grid", 2, "-DTILE=128 -DSTAGES=3", (64, 1, 1)))
        self.assertIsInstance(f.exception, ZeroDivisionError)
        self.assertIs(e.__cause__, f.exception)
        self.assertIsNone(e.error)
        self.assertEqual([r.status for r in e.result.rows],
                         ["ok", "ok", "launch_refused", "ok"])
        self.assertIn("ZeroDivisionError", e.result.rows[2].message)
        self.assertIn("grid function raised", str(e))

    def test_when_every_grid_raises_the_c_error_comes_with_the_callbacks(self):
        def grid(macros, block, shared_bytes):
            raise RuntimeError(f"no grid for {macros.text}")

        with self.assertRaises(fleetjit.TuneCallbackError) as cm:
            self.tune(grid=grid, grid_extent=None)
        e = cm.exception
        self.assertEqual(len(e.failures), 4)
        self.assertIsNone(e.result)
        self.assertEqual(e.error.code, "NOT_FOUND")
        self.assertIn("no grid for -DTILE=64", str(e.failures[0]))

    def test_a_bad_grid_is_reported_not_wrapped(self):
        # ctypes would wrap 2**32 to 0 (a grid of 1) or raise inside C.
        for bad, kind in (("abc", fleetjit.InvalidArgumentError), ((1, 2, 3, 4),
                          fleetjit.InvalidArgumentError), (-1, fleetjit.InvalidArgumentError),
                          (1 << 32, fleetjit.InvalidArgumentError), (True, TypeError)):
            with self.subTest(bad=bad), self.assertRaises(fleetjit.TuneCallbackError) as cm:
                self.tune(grid=lambda m, b, s: bad if b[0] == 64 else 1, grid_extent=None)
            self.assertEqual(len(cm.exception.failures), 2)
            self.assertIsInstance(cm.exception.failures[0].exception, kind)
            self.assertEqual([r.status for r in cm.exception.result.rows],
                             ["launch_refused", "ok", "launch_refused", "ok"])

    def test_keyboard_interrupt_stops_calling_and_is_raised_as_is(self):
        calls = []

        def grid(macros, block, shared_bytes):
            calls.append(block)
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            self.tune(grid=grid, grid_extent=None)
        self.assertEqual(len(calls), 1)

    def test_a_stored_result_calls_the_grid_again_and_the_check_not(self):
        grids, checks = [], []
        kw = dict(grid=lambda m, b, s: grids.append(b) or N // b[0], grid_extent=None,
                  check=lambda i, outs: checks.append(i) or True, retune=False, store=True,
                  macro_sets=["-DFJ_PY_TUNE_STORED=1"])
        first = self.tune(**kw)
        self.assertEqual(first.source, "tuned")
        self.assertEqual((len(grids), checks), (2, [0, 1]))
        second = self.tune(**kw)
        self.assertEqual(second.source, "memory")
        self.assertEqual(second.key, first.key)
        self.assertEqual((len(grids), checks), (4, [0, 1]))

    # ----------------------------------------------------------- check

    def test_a_check_function_gets_typed_host_copies_and_decides(self):
        seen = []
        out = FakeArray(self.y, (N // 64, 64), "<f4")

        def check(index, outputs):
            (o,) = outputs
            seen.append((index, o.name, o.dtype, o.shape, o.data))
            return index != 1

        res = self.tune(outputs=[out], check=check)
        self.assertEqual([s[0] for s in seen], [0, 1, 2, 3])
        for index, name, dtype, shape, data in seen:
            self.assertEqual((name, dtype, shape), (0, "f32", (N // 64, 64)))
            self.assertEqual(data, self.values.tobytes())
        self.assertEqual([r.status for r in res.rows], ["ok", "wrong_output", "ok", "ok"])
        self.assertEqual(res.rows[1].message, "the check function returned False")

    def test_a_dict_of_outputs_reaches_the_check_by_name(self):
        idx = self.rt.alloc(4 * 16)
        idx.upload(array.array("i", range(16)))
        seen = {}

        def check(index, outputs):
            seen.update({k: (v.dtype, v.shape, v.values()) for k, v in outputs.items()})
            return True

        self.tune(outputs={"y": FakeArray(self.y, (N,), "<f4"),
                           "index": fleetjit.TuneOutput(idx, dtype="int32")},
                  check=check, macro_sets=["-DTILE=64"])
        self.assertEqual(seen["index"], ("i32", (16,), list(range(16))))
        self.assertEqual(seen["y"][:2], ("f32", (N,)))
        self.assertEqual(seen["y"][2], list(self.values))

    def test_an_exception_in_the_check_refuses_its_candidate_and_raises_after(self):
        def check(index, outputs):
            if index == 3:
                raise ValueError("bad output")
            return None if index == 2 else True

        with self.assertRaises(fleetjit.TuneCallbackError) as cm:
            self.tune(check=check)
        e = cm.exception
        self.assertEqual([(f.where, f.candidate, type(f.exception)) for f in e.failures],
                         [("check", 2, TypeError), ("check", 3, ValueError)])
        self.assertIn("returned None", str(e.failures[0].exception))
        self.assertEqual([r.status for r in e.result.rows],
                         ["ok", "ok", "wrong_output", "wrong_output"])
        self.assertIn("ValueError: bad output", e.result.rows[3].message)
        self.assertFalse(e.result.stored)

    def test_a_stored_result_found_without_a_candidate_says_so(self):
        def check(index, outputs):
            if index == 0:
                raise ValueError("oops")
            return True

        with self.assertRaises(fleetjit.TuneCallbackError) as cm:
            self.tune(check=check, store=True, macro_sets=["-DFJ_PY_TUNE_STORED_RAISE=1"])
        self.assertTrue(cm.exception.result.stored)
        self.assertIn("was stored: tune with retune=True", str(cm.exception))
        self.assertEqual([r.status for r in cm.exception.result.rows], ["wrong_output", "ok"])

    def test_close_with_a_reference(self):
        ref = array.array("f", self.values)
        ref[100] += 1e-4
        out = FakeArray(self.y, (N,), "<f4")
        res = self.tune(outputs=[out], check=fleetjit.close(atol=1e-3), reference=[ref])
        self.assertEqual({r.status for r in res.rows}, {"ok"})
        with self.assertRaises(fleetjit.NotFoundError) as cm:
            self.tune(outputs=[out], check=fleetjit.close(atol=1e-6), reference=[ref])
        self.assertIn("wrong_output", cm.exception.message)
        # Without check=, a reference is compared exactly.
        with self.assertRaises(fleetjit.NotFoundError):
            self.tune(outputs=[out], reference=[ref])
        res = self.tune(outputs=[out], reference=[self.values])
        self.assertEqual({r.status for r in res.rows}, {"ok"})

    def test_close_says_where_an_output_differs(self):
        ref = array.array("f", self.values)
        ref[130] += 0.5
        with self.assertRaises(fleetjit.NotFoundError) as cm:
            self.tune(outputs=[FakeArray(self.y, (8, 128), "<f4")],
                      check=fleetjit.close(atol=1e-3), reference=[ref])
        want = (f"outputs[0]: 1 element(s) outside atol 0.001 + rtol 0 * |ref|; the first at "
                f"(1, 2): {self.values[130]!r} vs the reference's {ref[130]!r}")
        self.assertIn(want, cm.exception.message)
        self.assertIn("candidate 3 (", cm.exception.message)  # one line per candidate

    def test_integer_and_named_outputs_are_compared_exactly(self):
        idx = self.rt.alloc(4 * 16)
        idx.upload(array.array("i", range(16)))
        outputs = {"y": fleetjit.TuneOutput(self.y, dtype="f32"),
                   "index": fleetjit.TuneOutput(idx, dtype="i32")}
        near = array.array("f", self.values)
        near[5] += 1e-6
        off_by_one = array.array("i", range(16))
        off_by_one[7] += 1
        # The index is off by one: refused whatever the tolerance.
        with self.assertRaises(fleetjit.NotFoundError) as cm:
            self.tune(outputs=outputs, check=fleetjit.close(atol=10.0),
                      reference={"y": near, "index": off_by_one})
        self.assertIn("outputs['index'] differs from the reference at element 7: 7 != 8",
                      cm.exception.message)
        # y within the tolerance, the index right: correct.
        res = self.tune(outputs=outputs, check=fleetjit.close(atol=1e-3),
                        reference={"y": near, "index": array.array("i", range(16))})
        self.assertEqual({r.status for r in res.rows}, {"ok"})
        # y named exact: its 1e-6 is a difference.
        with self.assertRaises(fleetjit.NotFoundError) as cm:
            self.tune(outputs=outputs, check=fleetjit.close(atol=1e-3, exact=("y",)),
                      reference={"y": near, "index": array.array("i", range(16))})
        self.assertIn("outputs['y'] differs from the reference at element 5",
                      cm.exception.message)

    def test_close_without_a_reference_takes_the_first_candidate(self):
        # The fake's kernels write nothing, so every candidate's outputs are
        # the first's (test_tune_checks.py has the comparisons themselves).
        res = self.tune(outputs=[fleetjit.TuneOutput(self.y, dtype="f32")],
                        check=fleetjit.close(rtol=1e-5))
        self.assertEqual({r.status for r in res.rows}, {"ok"})

    def test_close_refuses_what_it_cannot_apply(self):
        for over, says in (
                ({"check": fleetjit.close(atol=1e-3)}, "outputs[0] has no dtype"),
                ({"check": fleetjit.close(exact=("nope",))}, "names 'nope'"),
                ({"check": fleetjit.close(), "reference": [b"\0" * 8]},
                 "reference[0] holds 8 bytes, outputs[0] 4096"),
                ({"check": fleetjit.close(), "reference": b"\0" * 4096},
                 "reference is a list"),
                ({"check": lambda i, o: True, "reference": [self.values]}, "reference= goes"),
                ({"check": 3}, "check is fleetjit.close"),
                ({"outputs": [fleetjit.TuneOutput(self.y, dtype="f32", shape=(3,))]},
                 "shape (3,) of f32 is 12 bytes, the buffer 4096"),
                ({"outputs": [fleetjit.TuneOutput((self.y.device_address, 6), dtype="f32")]},
                 "6 bytes are not whole f32 elements")):
            with self.subTest(says=says), self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                self.tune(**over)
            self.assertIn(says, cm.exception.message)
        with self.assertRaises(fleetjit.InvalidArgumentError):
            fleetjit.close(atol=-1)
        with self.assertRaises(fleetjit.InvalidArgumentError):
            fleetjit.TuneOutput(self.y, dtype="f24")

    # ---------------------------------------------------------- shared

    def test_shared_per_macro_set_expands_the_shapes(self):
        grids = []

        def grid(macros, block, shared_bytes):
            grids.append((macros["STAGES"], block[0], shared_bytes))
            return N // block[0]

        res = self.tune(shared=lambda m, b: m["STAGES"] * 1024, grid=grid, grid_extent=None)
        # The C call had 4 shapes: (64, 2 KiB), (128, 2 KiB), (64, 3 KiB), (128, 3 KiB).
        self.assertEqual(len(res.all_rows), 8)
        self.assertEqual(sorted(grids), [(2, 64, 2048), (2, 128, 2048),
                                         (3, 64, 3072), (3, 128, 3072)])
        self.assertEqual([(r.macro_index, r.shape_index, r.block[0], r.shared_bytes, r.status)
                          for r in res.rows],
                         [(0, 0, 64, 2048, "ok"), (0, 1, 128, 2048, "ok"),
                          (1, 0, 64, 3072, "ok"), (1, 1, 128, 3072, "ok")])
        # The C table: macro set 0 with shapes 2 and 3 (3 KiB) and macro
        # set 1 with shapes 0 and 1 (2 KiB) are the pairs made for the other.
        self.assertEqual([(r.macro_index, r.shape_index, r.shared_bytes, r.status)
                          for r in res.all_rows if r.status != "ok"],
                         [(0, 2, 3072, "launch_refused"), (0, 3, 3072, "launch_refused"),
                          (1, 0, 2048, "launch_refused"), (1, 1, 2048, "launch_refused")])
        for r in res.all_rows:
            if r.status != "ok":
                self.assertEqual(r.message, "(not a pair of this macro set: shared=)")
        self.assertEqual(res.best.status, "ok")
        self.assertIn(res.best, res.rows)

    def test_equal_shared_bytes_make_one_shape(self):
        res = self.tune(shared={"-DTILE=64 -DSTAGES=2": 4096, "-DTILE=128 -DSTAGES=3": 4096})
        self.assertEqual(len(res.all_rows), 4)  # two shapes: equal ones are refused by C
        self.assertEqual(res.all_rows, res.rows)
        self.assertEqual({r.shared_bytes for r in res.rows}, {4096})

    def test_shared_keeps_the_grid_rules(self):
        # The binding passes its own grid_fn, so it applies grid_extent /
        # grid_divisor (and a fixed grid) itself, as the library would.
        res = self.tune(shared=lambda m, b: m["STAGES"] * 512, grid_divisor=("TILE",))
        self.assertEqual([r.grid for r in res.rows],
                         [(16, 1, 1), (16, 1, 1), (8, 1, 1), (8, 1, 1)])
        with self.assertRaises(fleetjit.NotFoundError) as cm:
            self.tune(shared=lambda m, b: m["STAGES"] * 512, grid_divisor=("NOPE",))
        self.assertIn("grid divisor 0: the macro set defines no NOPE (-DNOPE=N)",
                      cm.exception.message)
        res = self.tune(shared=lambda m, b: 256, grid=(7, 3), grid_extent=None)
        self.assertEqual({r.grid for r in res.rows}, {(7, 3, 1)})

    def test_shared_refusals(self):
        for over, says in (
                ({"shared": lambda m, b: 1, "shapes": [{"block": 64, "shared_bytes": 8}]},
                 "shapes[0] has shared_bytes 8 and shared= is given"),
                ({"shared": {"-DTILE=64 -DSTAGES=2": 1}}, "shared has no entry for macro set 1"),
                ({"shared": lambda m, b: -1}, "shared for macro set 0"),
                ({"shared": 4096}, "shared is a function")):
            with self.subTest(says=says), self.assertRaises(fleetjit.InvalidArgumentError) as cm:
                self.tune(**over)
            self.assertIn(says, cm.exception.message)

    def test_a_check_sees_the_callers_candidate_indices_under_shared(self):
        seen = []
        res = self.tune(shared=lambda m, b: m["STAGES"] * b[0],
                        check=lambda i, outs: seen.append(i) or i != 2)
        self.assertEqual(seen, [0, 1, 2, 3])
        self.assertEqual([r.status for r in res.rows], ["ok", "ok", "wrong_output", "ok"])
        self.assertEqual((res.rows[2].macro_index, res.rows[2].shape_index), (1, 0))

    def test_the_gpu_tests_reduction_builds_and_expands(self):
        # test_tune_gpu.py's kernel, its macro sets and shared= on the fake:
        # every candidate builds, and each macro set gets its own bytes.
        from test_tune_gpu import BLOCKS, MACRO_SETS, ROW_STATS, row_stats_shared
        res = fleetjit.tune(self.rt, ROW_STATS, "row_stats", macro_sets=MACRO_SETS,
                            shapes=BLOCKS, shared=row_stats_shared,
                            grid=lambda m, b, s: 256, args=[self.x, self.y, self.y, 256, 4],
                            outputs=[self.y], check=lambda i, o: True, target="compute_90",
                            retune=True, store=False)
        self.assertEqual([(r.status, r.block[0], r.shared_bytes) for r in res.rows],
                         [("ok", b, (p + 2) * b * 4) for p in (1, 4) for b in BLOCKS])
        self.assertEqual(len(res.all_rows), 2 * 8)


if __name__ == "__main__":
    unittest.main()
