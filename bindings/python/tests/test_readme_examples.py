"""The Python blocks of bindings/python/README.md's "Tuning, occupancy and
launch options" run as they stand: on a live GPU every block runs whole
(the torch one where torch is installed); without a GPU, on the fake CUDA
driver, the occupancy / launch_ex block runs whole and the tune block runs
up to its result, which the fake cannot give: its kernels write nothing,
so every candidate is checked (built, launched, compared with the
reference) and refused as wrong_output."""
import contextlib
import io
import pathlib
import re
import unittest
from unittest import mock

import _env
import fleetjit
from test_gpu import COUNT

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Tuning, occupancy and launch options"


def blocks():
    """{first heading above the block: code} of the section's python blocks."""
    text = README.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    out, heading = {}, None
    for m in re.finditer(r"^### ([^\n]*)$|^```python\n(.*?)^```$", text[start:end], re.M | re.S):
        if m.group(1):
            heading = m.group(1)
        else:
            out[heading] = m.group(2)
    return out


def run(code):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    return out.getvalue()


class ReadmeBlocksTest(unittest.TestCase):
    def test_the_section_has_its_blocks_and_they_compile(self):
        found = blocks()
        self.assertEqual(list(found), [
            "`fleetjit.tune`: the fastest macro set and launch shape",
            "`Kernel.occupancy`, `Kernel.suggest_block`, `Kernel.launch_ex`",
            "`fleetjit.tensor_check`"])
        for heading, code in found.items():
            with self.subTest(heading=heading):
                compile(code, str(README), "exec")
        # What the README names exists in the binding.
        for name in ("tune", "close", "TuneOutput", "HostOutput", "Macros",
                     "TuneCallbackError", "tensor_check", "Tensor"):
            self.assertTrue(hasattr(fleetjit, name), name)
        for name in ("occupancy", "suggest_block", "launch_ex", "attributes", "set_attribute"):
            self.assertTrue(hasattr(fleetjit.Kernel, name), name)

    @unittest.skipUnless(COUNT > 0, "no GPU")
    def test_every_block_runs_on_the_gpu(self):
        for heading, code in blocks().items():
            with self.subTest(heading=heading):
                if "import torch" in code:
                    try:
                        import torch  # noqa: F401
                    except ImportError:
                        self.skipTest("torch is not installed")
                printed = run(code)
                self.assertTrue(printed)
                if "scale_then_sum" in code:
                    self.assertTrue(printed.rstrip().endswith("131072.0"), printed)
                if "row_sum" in code:
                    self.assertNotIn("wrong_output", printed)


class ReadmeOnTheFakeDriverTest(unittest.TestCase):
    def setUp(self):
        if COUNT > 0:
            self.skipTest("a GPU is present: ReadmeBlocksTest runs the blocks on it")
        _env.fake_driver_saxpy(self)
        self.addCleanup(self.rt.close)
        patch = mock.patch.object(fleetjit, "Runtime", lambda *a, **k: self.rt)
        patch.start()
        self.addCleanup(patch.stop)

    def test_occupancy_and_launch_ex(self):
        code = blocks()["`Kernel.occupancy`, `Kernel.suggest_block`, `Kernel.launch_ex`"]
        before = self.fake.fjfake_calls(b"cuLaunchKernelEx")
        printed = run(code).split()
        # The fake is an H100-like sm_90 of 132 SMs.
        self.assertEqual(len(printed), 4)
        self.assertGreater(int(printed[0]), 0)
        self.assertEqual(self.fake.fjfake_calls(b"cuLaunchKernelEx"), before + 1)

    def test_tune_checks_every_candidate(self):
        code = blocks()["`fleetjit.tune`: the fastest macro set and launch shape"]
        with self.assertRaises(fleetjit.NotFoundError) as cm:
            run(code)
        message = cm.exception.message
        # 3 macro sets x 3 blocks, each built, run and compared; the pairs
        # shared= made for other macro sets are skipped by its grid function.
        self.assertEqual(message.count("wrong_output"), 9, message)
        self.assertEqual(message.count("grid_fn returned 1"), 27 - 9, message)
        self.assertNotIn("build_failed", message)
        self.assertIn("outputs['sums']:", message)


if __name__ == "__main__":
    unittest.main()
