"""bench/corpus/corpus.py and run.py without a GPU (ctest: python_corpus_test).

- the expression evaluator against the table the C++ one is tested on
  (tests/data/corpus_expr_cases.json);
- the sample corpus (tests/data/corpus_sample) resolved, and manifests that
  cannot run refused, naming what is wrong; every manifest of every
  bench/corpus/set*/ folder checked at every size;
- run.py's variants, arguments, rows and summary;
- with torch (CPU is enough): inputs per init, poisons and the comparison
  on a Case whose "kernels" are Python functions (right, one element
  skipped, nothing written, an in/out buffer), fresh random inputs;
- with the library (FLEETJIT_LIBRARY) and NVRTC: the sample's layer kernel
  and twin built through run.py's Builds for sm_90 (no GPU needed).
"""
import copy
import json
import os
import pathlib
import sys
import tempfile
import types
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "corpus"))
sys.path.insert(1, str(ROOT / "bindings" / "python"))

import corpus  # noqa: E402
import run  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "corpus_sample"
SAMPLE_JSON = SAMPLE / "gather_scale.json"

try:
    import torch
except ImportError:
    torch = None


class Expressions(unittest.TestCase):
    def test_the_table_both_evaluators_read(self):
        table = json.loads((ROOT / "tests" / "data" / "corpus_expr_cases.json").read_text())
        for expr, want in table["cases"]:
            with self.subTest(expr=expr):
                if isinstance(want, dict):
                    with self.assertRaises(corpus.ManifestError) as e:
                        corpus.evaluate(expr, table["env"])
                    self.assertIn(want["error"], str(e.exception))
                    self.assertIn(repr(expr), str(e.exception))
                else:
                    got = corpus.evaluate(expr, table["env"])
                    self.assertIs(type(got), type(want))
                    self.assertEqual(got, want)
        self.assertGreater(len(table["cases"]), 40)

    def test_numbers_and_define_text(self):
        self.assertEqual(corpus.evaluate(256, {}), 256)
        self.assertEqual(corpus.evaluate(0.5, {}), 0.5)
        for bad in (True, None, [1], 1 << 63):
            with self.assertRaises(corpus.ManifestError):
                corpus.evaluate(bad, {})
        self.assertEqual(corpus.define_text(-12), "-12")
        self.assertEqual(corpus.define_text(1e-5), "1e-05")
        self.assertEqual(corpus.define_text(2.0), "2.0")
        self.assertEqual(corpus.parse_call("randint(0, min(V, 7))"), ("randint", ["0", "min(V, 7)"]))
        self.assertEqual(corpus.parse_call(" randn "), ("randn", []))


class Manifests(unittest.TestCase):
    def test_the_sample_resolves_at_each_size(self):
        m = corpus.load(SAMPLE_JSON)
        self.assertEqual(m.id, "corpus_sample/gather_scale")
        p = corpus.resolve(m, m.sizes[0], 132)
        self.assertEqual(p.label, "1024 x 2048")
        self.assertEqual(p.bytes, 2 * 1024 * 2048 * 2 + 1024 * 8)
        x = p.buffers["x"]
        self.assertEqual((x.shape, x.dtype, x.init, x.nbytes), ((1024, 2048), "bf16", "randn",
                                                                1024 * 2048 * 2))
        self.assertEqual((p.buffers["idx"].init, p.buffers["idx"].init_args), ("perm", (1024,)))
        s = p.buffers["sums"]
        self.assertEqual((s.output, s.init, s.atol, s.rtol), (True, None, 0.001, 0.0001))
        self.assertEqual([b.name for b in p.outputs], ["y", "sums"])
        self.assertEqual(p.layer.grid, (1024, 1, 1))
        self.assertEqual(p.layer.block, (128, 1, 1))
        self.assertEqual(p.layer.defines, ["-DTILE=256"])
        a = p.layer.args[0]
        self.assertEqual((a.kind, a.buffer, a.box, a.oob, a.swizzle), ("tensor", "x", (1, 256),
                                                                      "zeros", 0))
        self.assertEqual([(a.kind, a.value) for a in p.layer.args[4:]],
                         [("i32", 1024), ("i32", 2048), ("f32", 0.5)])
        self.assertEqual(p.plain.source, SAMPLE / "gather_scale_plain.cu")
        p = corpus.resolve(m, m.sizes[1], 8)
        self.assertEqual(p.layer.grid, (64, 1, 1))
        self.assertEqual(p.layer.defines, ["-DTILE=200"])
        self.assertNotEqual(p.layer.build_key(None, "tma"),
                            corpus.resolve(m, m.sizes[0], 8).layer.build_key(None, "tma"))

    def test_refuses_what_cannot_run_naming_it(self):
        sample = json.loads(SAMPLE_JSON.read_text())
        edits = [  # (path, value or DELETE, error, caught at resolve)
            (("torch",), DELETE, "'torch' is missing", False),
            (("torch",), "{'y': x +}", "not a Python expression", False),
            (("sizes",), [], "sizes: a non-empty list", False),
            (("sizes", 0, "vars", "sms"), 3, "'sms' cannot be a variable's name", False),
            (("bytes2",), 1, "unknown key 'bytes2'", False),
            (("notes",), "free text", None, False),
            (("buffers", "x", "dtype"), "bfloat16", "is not one of f32", False),
            (("buffers", "x", "init"), DELETE, "an input needs an init", False),
            (("buffers", "x", "atol"), 0.1, "only outputs are compared", False),
            (("buffers", "x", "shape", 0), "R / 2", "not an integer (// divides", True),
            (("buffers", "x", "shape", 1), "Q", "unknown name 'Q'", True),
            (("buffers", "idx", "init"), "perm(R - 1)", "distinct values", True),
            (("buffers", "idx", "init"), "randn", "fills floating-point buffers", True),
            (("buffers", "idx", "dtype"), "i8", "distinct values that fit i8", True),
            (("layer", "source"), "missing.cu", "no file missing.cu", False),
            (("layer", "args", 1), {"pointer": "idx"}, "give exactly one of", False),
            (("layer", "args", 1), {"buffer": "nope"}, "no buffer 'nope'", False),
            (("layer", "args", 0), {"tensor": "x", "box": [1, "C + 8"]}, "past the extent", True),
            (("layer", "args", 0, "view"), ["R", "C", 2], "does not hold", True),
            (("layer", "args", 5), {"i32": "R * 100000000"}, "does not fit i32", True),
            (("layer", "args", 6), {"f32": "1e39"}, "not a finite f32", True),
            (("layer", "block"), [64, 64], "4096 threads", True),
            (("layer", "smem"), "-1", "smem is -1", True),
        ]
        for path, value, error, at_resolve in edits:
            with self.subTest(path=path, value=value):
                data = copy.deepcopy(sample)
                node = data
                for k in path[:-1]:
                    node = node[k]
                if value is DELETE:
                    del node[path[-1]]
                else:
                    node[path[-1]] = value
                if error is None:  # accepted
                    corpus.validate(corpus.check(data, SAMPLE_JSON))
                    continue
                if not at_resolve:
                    with self.assertRaises(corpus.ManifestError) as e:
                        corpus.check(data, SAMPLE_JSON)
                else:
                    m = corpus.check(data, SAMPLE_JSON)
                    with self.assertRaises(corpus.ManifestError) as e:
                        corpus.resolve(m, m.sizes[0], 132)
                    self.assertIn("size '1024 x 2048'", str(e.exception))
                self.assertIn(error, str(e.exception))

    def test_not_json_names_the_file(self):
        with tempfile.TemporaryDirectory() as d:
            p = pathlib.Path(d, "bad.json")
            p.write_text('{"name": ')
            with self.assertRaises(corpus.ManifestError) as e:
                corpus.load(p)
            self.assertIn("bad.json: not JSON", str(e.exception))

    def test_sets_a_folder_of_manifests_or_a_root_of_set_folders(self):
        with tempfile.TemporaryDirectory() as d:
            root = pathlib.Path(d, "root")
            for s in ("set2", "set1", "results"):
                (root / s).mkdir(parents=True)
                for f in SAMPLE.iterdir():
                    (root / s / f.name).write_bytes(f.read_bytes())
            self.assertEqual(corpus.find_sets([root]), [root / "set1", root / "set2"])
            sets = corpus.find_sets([SAMPLE, root / "set2"])
            self.assertEqual([m.id for m in corpus.load_sets(sets)],
                             ["corpus_sample/gather_scale", "corpus_sample/row_quant",
                              "set2/gather_scale", "set2/row_quant"])
            with self.assertRaises(corpus.ManifestError):
                corpus.find_sets([root / "nowhere"])

    def test_every_manifest_resolves_at_every_size(self):
        ms = corpus.load_sets(corpus.find_sets([]) + [SAMPLE])
        for m in ms:
            with self.subTest(m=m.id):
                corpus.validate(m, (132, 78))
        self.assertGreaterEqual(len(ms), 1)


DELETE = object()


class RunnerParts(unittest.TestCase):
    def test_variants(self):
        vs = run.parse_variants("tma, cp_async@compute_80,sync")
        self.assertEqual([v.name for v in vs], ["tma", "cp_async@compute_80", "sync"])
        self.assertEqual((vs[1].impl, vs[1].target, vs[0].target), ("cp_async", "compute_80", None))
        with self.assertRaises(ValueError):
            run.parse_variants("bulk")

        class Err(Exception):
            pass

        def plan(target, impl):
            if target == "sm_80" and impl == "tma":
                raise Err()
        fake = types.SimpleNamespace(copy_plan=plan, FleetjitError=Err)
        self.assertEqual([v.name for v in run.device_variants(fake, "sm_90", (9, 0))],
                         ["tma", "cp_async", "sync", "cp_async@compute_80"])
        self.assertEqual([v.name for v in run.device_variants(fake, "sm_80", (8, 0))],
                         ["cp_async", "sync"])

    def test_launch_args(self):
        m = corpus.load(SAMPLE_JSON)
        p = corpus.resolve(m, m.sizes[1], 132)

        class View:
            def __init__(self, name, shape=None):
                self.name, self.shape = name, shape

            def view(self, shape):
                return View(self.name, shape)
        made = []

        def tensor(t, box=None, oob=None, swizzle=None):
            made.append((t.name, box, oob, swizzle))
            return ("tensor", t.name)
        fake = types.SimpleNamespace(Tensor=tensor, i32=lambda v: ("i32", v),
                                     i64=lambda v: ("i64", v), f32=lambda v: ("f32", v))
        tensors = {n: View(n) for n in p.buffers}
        args = run.launch_args(fake, p.layer, tensors)
        self.assertEqual(args[0], ("tensor", "x"))
        self.assertEqual(made, [("x", (1, 200), "zeros", 0)])
        self.assertIs(args[1], tensors["idx"])
        self.assertEqual(args[4:], [("i32", 1000), ("i32", 200), ("f32", 0.5)])

    def test_rows_and_summary(self):
        rows = []
        for impl, r in (("tma", 0.8), ("tma", 0.6), ("tma", 1.0), ("sync", 0.5)):
            rows.append({"kernel": "set1/k", "size": f"s{len(rows)}", "impl": impl,
                         "layer_gbps": 100 * r, "plain_gbps": 100.0, "torch_gbps": 90.0,
                         "copy_gbps": 120.0, "layer_over_plain": r, "layer_over_copy": r / 1.2,
                         "plain_over_copy": 1 / 1.2, "torch_over_copy": 0.75, "verified": "ok"})
        rows.append({"kernel": "set1/k", "size": "s9", "impl": "sync",
                     "verified": "layer: BuildError: boom"})
        lines = run.summary(rows, run.parse_variants("tma,sync,cp_async"))
        self.assertEqual(len(lines), 3)
        self.assertIn("tma", lines[0])
        self.assertIn("median 0.800 over 3 case(s); lowest 0.600 (set1/k, s1)", lines[0])
        self.assertIn("median 0.500 over 1 case(s)", lines[1])
        self.assertIn("all", lines[2])
        self.assertIn("lowest 0.500 (set1/k, s3, sync)", lines[2])
        self.assertIn("0.800", run.fmt_row(rows[0]))
        self.assertIn("BuildError: boom", run.fmt_row(rows[-1]))

    def test_a_macro_against_its_bare_implementation(self):
        # tma+X against tma case by case: s0 gains 0.25, s1 loses 0.05, s2
        # moves 0.01 (inside the margin); s3 has no tma row and is left out;
        # a failed case (no ratio) is left out too.
        def row(impl, size, r):
            return {"kernel": "set1/k", "size": size, "impl": impl, "layer_over_plain": r}
        rows = [row("tma", "s0", 0.25), row("tma+X=1", "s0", 0.50),
                row("tma", "s1", 0.90), row("tma+X=1", "s1", 0.85),
                row("tma", "s2", 0.70), row("tma+X=1", "s2", 0.71),
                row("tma+X=1", "s3", 0.10),
                {"kernel": "set1/k", "size": "s4", "impl": "tma", "verified": "boom"},
                row("sync", "s0", 0.30)]
        lines = run.against_base(rows, run.parse_variants("tma,tma+X=1,sync"))
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("tma+X=1 vs tma: median change +0.010 over 3 case(s)", lines[0])
        self.assertIn("1 gained > 0.02, 1 lost > 0.02", lines[0])
        self.assertIn("most gained +0.250 (set1/k, s0)", lines[0])
        self.assertIn("most lost -0.050 (set1/k, s1)", lines[0])
        self.assertEqual(run.against_base(rows, run.parse_variants("tma,sync")), [])


@unittest.skipIf(torch is None, "torch is not installed")
class TorchParts(unittest.TestCase):
    """run.py's inputs, poisons and comparisons on CPU tensors."""

    def problem(self, size=1, edit=None):
        data = json.loads(SAMPLE_JSON.read_text())
        if edit:
            edit(data)
        m = corpus.check(data, SAMPLE_JSON)
        return corpus.resolve(m, m.sizes[size], 8)

    def test_inputs_follow_their_init(self):
        gen = torch.Generator()
        gen.manual_seed(int.from_bytes(os.urandom(4), "little"))
        mk = lambda dtype, init, args=(), shape=(1000,): corpus.Buffer(  # noqa: E731
            "b", dtype, shape, init, args, False, 0, 0)
        t = run.make_buffer(torch, mk("bf16", "randn"), "cpu", gen)
        self.assertEqual(t.dtype, torch.bfloat16)
        self.assertTrue(0.8 < float(t.float().std()) < 1.2)
        t = run.make_buffer(torch, mk("f32", "rand"), "cpu", gen)
        self.assertTrue(0 <= float(t.min()) and float(t.max()) < 1)
        t = run.make_buffer(torch, mk("i32", "randint", (-3, 5)), "cpu", gen)
        self.assertEqual((t.dtype, int(t.min()), int(t.max())), (torch.int32, -3, 4))
        t = run.make_buffer(torch, mk("i64", "perm", (5000,), (10, 100)), "cpu", gen)
        self.assertEqual((t.shape, t.dtype), (torch.Size([10, 100]), torch.int64))
        self.assertEqual(len(set(t.flatten().tolist())), 1000)
        self.assertTrue(0 <= int(t.min()) and int(t.max()) < 5000)
        t = run.make_buffer(torch, mk("u8", "arange", (), (4, 50)), "cpu", gen)
        self.assertEqual(t.flatten().tolist(), list(range(200)))
        t = run.make_buffer(torch, mk("f16", "zeros"), "cpu", gen)
        self.assertEqual(float(t.abs().sum()), 0)

    def test_poison_and_compare(self):
        b = corpus.Buffer("y", "f32", (4, 5), None, (), True, 1e-3, 1e-2)
        want = torch.randn(4, 5)
        got = want.clone()
        self.assertIsNone(run.compare(torch, "y", got, want, b))
        got[2, 3] += 0.5
        msg = run.compare(torch, "y", got, want, b)
        self.assertIn("y[2,3] = ", msg)
        self.assertIn("1 of 20 differ", msg)
        run.poison(torch, got, "f")
        self.assertTrue(bool(got.isnan().all()))
        self.assertIn("20 of 20 differ", run.compare(torch, "y", got, want, b))
        bi = corpus.Buffer("i", "i32", (3,), None, (), True, 0, 0)
        gi = torch.tensor([1, 2, 3], dtype=torch.int32)
        run.poison(torch, gi, "i")
        self.assertEqual(gi.tolist(), [0x7F7F7F7F] * 3)
        self.assertIn("3 of 3 differ", run.compare(torch, "i", gi, torch.tensor([1, 2, 3]), bi))
        self.assertIn("torch expression gives shape [2]",
                      run.compare(torch, "i", gi, torch.tensor([1, 2]), bi))

    def case(self, p):
        seed = int.from_bytes(os.urandom(4), "little")
        return run.Case(torch, p, "cpu", seed)

    def test_a_case_checks_what_its_kernels_write(self):
        p = self.problem()
        c = self.case(p)
        t = c.tensors
        self.assertFalse(bool(t["x"].float().abs().sum() == 0))  # fresh random inputs

        def right():
            rows = t["x"][t["idx"].long()].float() * 0.5
            t["y"].copy_(rows.to(torch.bfloat16))
            t["sums"].copy_(rows.sum(dim=1))
        self.assertIsNone(c.check(right))

        def skips_one():
            right()
            t["sums"][7] = float("nan")
        self.assertIn("sums[7] = nan", c.check(skips_one))
        err = c.check(lambda: None)  # writes nothing: both outputs poisoned
        self.assertIn("y[0,0] = nan", err)
        self.assertIn("sums[0] = nan", err)
        self.assertIsNone(c.check(right))  # outputs poisoned again first

    def test_in_out_buffers_start_each_run_from_their_first_contents(self):
        def edit(d):  # y += x[idx] * 0.5, in place; torch's op in place too
            d["buffers"]["y"]["init"] = "randn"
            d["torch"] = ("{'y': y.add_((x[idx.long()].float() * 0.5).to(torch.bfloat16)), "
                          "'sums': (x[idx.long()].float() * 0.5).sum(dim=1)}")
        p = self.problem(edit=edit)
        c = self.case(p)
        t = c.tensors
        y0 = t["y"].clone()

        def kernel():
            rows = t["x"][t["idx"].long()].float() * 0.5
            t["y"].add_(rows.to(torch.bfloat16))
            t["sums"].copy_(rows.sum(dim=1))
        self.assertIsNone(c.check(kernel))
        self.assertIsNone(c.check(kernel))  # not y0 + 2 x[idx]: restored first
        self.assertFalse(torch.equal(t["y"], y0))

    def test_the_torch_expression_must_give_every_output(self):
        def edit(d):
            d["torch"] = "{'y': x[idx.long()]}"
        with self.assertRaises(corpus.ManifestError) as e:
            self.case(self.problem(edit=edit))
        self.assertIn("the outputs are ['sums', 'y']", str(e.exception))


class _FakeFleetjit:
    """The part of the fleetjit binding run.main() uses, over CPU tensors:
    each kernel is a Python function of the launch's arguments."""

    class FleetjitError(Exception):
        def __init__(self, message):
            super().__init__(message)
            self.message, self.code, self.build_log = message, "BUILD_ERROR", "x.cu(3): error: boom"

    class Tensor:
        def __init__(self, obj, box=None, oob=None, swizzle=0):
            self.obj = obj

    def __init__(self, kernels):
        self.kernels, self.builds = kernels, []  # name -> fn(args), the builds asked for
        self.i32 = self.i64 = self.f32 = lambda v: v

    def copy_plan(self, target, impl):
        return None

    def Runtime(self):
        fj = self

        class Future:
            def __init__(self, options):
                self.options = options

            def result(self, timeout=None):
                if "-DBREAK=1" in self.options["nvrtc_options"]:
                    raise fj.FleetjitError("the build failed")
                return types.SimpleNamespace(kernel=lambda name: Kernel(name))

        class Kernel:
            def __init__(self, name):
                self.name, self.info = name, types.SimpleNamespace(num_regs=40)

            def launch(self, grid, block, args, stream=None, shared_bytes=0):
                fj.kernels[self.name]([a.obj if isinstance(a, fj.Tensor) else a for a in args])

        class Rt:
            def device(self, i):
                return types.SimpleNamespace(sm_count=8, name="fake GPU", compute_capability=(9, 0),
                                             plan=types.SimpleNamespace(target="sm_90"))

            def build_async(self, source, **options):
                fj.builds.append(options)
                return Future(options)
        return Rt()


@unittest.skipIf(torch is None, "torch is not installed")
class MainOnCpu(unittest.TestCase):
    """run.main() end to end on CPU tensors, its kernels Python functions:
    progress, table, summary, JSON and exit status."""

    def setUp(self):
        self.saved = (run.DEVICE_TYPE, sys.modules.get("fleetjit"), torch.cuda.is_available,
                      torch.cuda.synchronize, torch.cuda.Event, torch.cuda.current_stream,
                      torch.cuda.empty_cache, getattr(torch.cuda, "_sleep", None))
        run.DEVICE_TYPE = "cpu"
        torch.cuda.is_available = lambda: True
        torch.cuda.synchronize = torch.cuda.empty_cache = lambda *a: None
        torch.cuda.current_stream = lambda *a: None
        torch.cuda._sleep = lambda cycles: None
        import time as _time

        class Event:
            def __init__(self, enable_timing=False):
                self.t = 0.0

            def record(self):
                self.t = _time.perf_counter()

            def elapsed_time(self, end):
                return (end.t - self.t) * 1e3
        torch.cuda.Event = Event

    def tearDown(self):
        (run.DEVICE_TYPE, fj, torch.cuda.is_available, torch.cuda.synchronize, torch.cuda.Event,
         torch.cuda.current_stream, torch.cuda.empty_cache, sleep) = self.saved
        torch.cuda._sleep = sleep
        if fj is None:
            sys.modules.pop("fleetjit", None)
        else:
            sys.modules["fleetjit"] = fj

    def main(self, kernels, *argv):
        fake = _FakeFleetjit(kernels)
        sys.modules["fleetjit"] = fake
        import contextlib
        import io
        out = io.StringIO()
        with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(out):
            rc = run.main([*argv, "--filter", "gather", "--json", f"{d}/rows.json",
                           "--samples", "2", "--batch", "2"])
            rows = json.loads(pathlib.Path(d, "rows.json").read_text())
        return rc, out.getvalue(), rows, fake

    @staticmethod
    def right(args):
        x, idx, y, sums, rows, cols, scale = args
        r = x[idx.long()].float() * scale
        y.copy_(r.to(torch.bfloat16))
        sums.copy_(r.sum(dim=1))

    def test_right_kernels_pass_and_are_measured(self):
        rc, out, rows, fake = self.main({"gather_scale": self.right,
                                         "gather_scale_plain": self.right}, str(SAMPLE))
        self.assertEqual(rc, 0, out)
        self.assertEqual(len(rows["rows"]), 8)  # 2 sizes x 4 variants
        self.assertEqual(rows["variants"], ["tma", "cp_async", "sync", "cp_async@compute_80"])
        for r in rows["rows"]:
            self.assertEqual(r["verified"], "ok")
            for k in ("layer", "plain", "torch", "copy"):
                self.assertGreater(r[f"{k}_gbps"], 0)
        self.assertIn("[  8/8] corpus_sample/gather_scale", out)
        self.assertIn("layer/plain median", out)
        self.assertIn("8 of 8 case(s) right", out)
        # Builds: the layer per size (its defines differ) and variant.
        layer = [b for b in fake.builds if b["name"] == "gather_scale.cu"]
        self.assertEqual({(b["copy_impl"], b["target"]) for b in layer},
                         {("cp_async", None), ("cp_async", "compute_80"), ("sync", None),
                          ("tma", None)})
        self.assertEqual(len(layer), 8)
        self.assertEqual({tuple(b["nvrtc_options"]) for b in layer}, {("-DTILE=256",),
                                                                       ("-DTILE=200",)})
        # The twin has no defines: one build per target serves both sizes.
        plain = [b for b in fake.builds if b["name"] == "gather_scale_plain.cu"]
        self.assertEqual({(b["copy_impl"], b["target"]) for b in plain},
                         {(None, None), (None, "compute_80")})
        self.assertEqual(len(plain), 2)

    def test_a_wrong_kernel_fails_the_run_and_check_times_nothing(self):
        def off_by_one_row(args):
            self.right(args)
            args[3][-1] += 1.0
        rc, out, rows, _ = self.main({"gather_scale": off_by_one_row,
                                      "gather_scale_plain": self.right},
                                     str(SAMPLE), "--check", "--variants", "sync")
        self.assertEqual(rc, 1, out)
        self.assertEqual(len(rows["rows"]), 2)
        for r in rows["rows"]:
            self.assertTrue(r["verified"].startswith("layer: sums["), r["verified"])
            self.assertNotIn("layer_gbps", r)
        self.assertIn("WRONG or failed: 2", out)

    def test_a_build_that_fails_fails_its_cases_with_the_log(self):
        with tempfile.TemporaryDirectory() as d:
            for f in SAMPLE.glob("gather_scale*"):
                pathlib.Path(d, f.name).write_bytes(f.read_bytes())
            m = json.loads(SAMPLE_JSON.read_text())
            m["layer"]["defines"]["BREAK"] = 1
            pathlib.Path(d, SAMPLE_JSON.name).write_text(json.dumps(m))
            rc, out, rows, _ = self.main({"gather_scale": self.right,
                                          "gather_scale_plain": self.right},
                                         d, "--variants", "tma")
        self.assertEqual(rc, 1, out)
        self.assertEqual(len(rows["rows"]), 2)
        for r in rows["rows"]:
            self.assertIn("layer: FleetjitError: the build failed", r["verified"])
            self.assertIn("x.cu(3): error: boom", r["verified"])
            self.assertNotIn("layer_gbps", r)

    def test_a_twin_that_writes_nothing_fails_too(self):
        rc, out, rows, _ = self.main({"gather_scale": self.right,
                                      "gather_scale_plain": lambda args: None},
                                     str(SAMPLE), "--check", "--variants", "tma")
        self.assertEqual(rc, 1, out)
        self.assertIn("plain: y[0,0] = nan", rows["rows"][0]["verified"])


@unittest.skipUnless(os.environ.get("FLEETJIT_LIBRARY"), "FLEETJIT_LIBRARY is not set")
class Builds(unittest.TestCase):
    def test_the_sample_builds_for_sm_90_through_runs_builds(self):
        import fleetjit
        m = corpus.load(SAMPLE_JSON)
        p = corpus.resolve(m, m.sizes[1], 132)
        with fleetjit.Runtime() as rt:
            b = run.Builds(rt)
            keys = {b.start(p.layer, "sm_90", "tma"), b.start(p.plain, "sm_90", None),
                    b.start(p.layer, "sm_90", "tma")}
            self.assertEqual(len(keys), 2)
            try:
                layer = b.futures[b.start(p.layer, "sm_90", "tma")].result(timeout=300)
            except fleetjit.FleetjitError as e:
                if e.code == "UNAVAILABLE" and "NVRTC" in str(e):
                    self.skipTest(str(e))
                raise
            plain = b.futures[b.start(p.plain, "sm_90", None)].result(timeout=300)
            self.assertEqual((layer.info.target, layer.info.copy_impl), ("sm_90", "tma"))
            self.assertEqual(plain.info.target, "sm_90")


if __name__ == "__main__":
    unittest.main()
