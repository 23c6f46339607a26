"""Device linking through the binding (since 1.3), on a machine without a
GPU: a link for a named target, its cache hit, nvJitLink's log for an
undefined symbol, and bad input refused."""
import os
import pathlib
import random
import subprocess
import tempfile
import ctypes
import unittest

import _env  # noqa: F401
import fleetjit
from fleetjit import LinkInput
from fleetjit import link as fj_link

CALLER = """extern "C" __device__ float fj_py_link_scale(float x);
extern "C" __global__ void py_scale_all(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fj_py_link_scale(in[i]);
}
"""


def callee(factor):
    return ('extern "C" __device__ float fj_py_link_scale(float x) '
            f'{{ return x * {factor}.0f; }}\n')


class LinkTest(unittest.TestCase):
    def setUp(self):
        self.rt = fleetjit.Runtime()
        self.factor = random.randrange(2, 10 ** 6)

    def tearDown(self):
        self.rt.close()

    def test_two_sources_link_for_a_named_target(self):
        for lto in (False, True):
            inputs = [LinkInput("source", CALLER, name="caller.cu"),
                      LinkInput("source", callee(self.factor), name="callee.cu")]
            mod = self.rt.link(inputs, target="sm_90", lto=lto)
            info = mod.info
            self.assertEqual(info.target, "sm_90")
            self.assertEqual(info.output, "cubin")
            self.assertEqual(info.cache_result, "compiled")
            image = mod.image
            self.assertEqual(image[:4], b"\x7fELF")
            self.assertIn(b"py_scale_all", image)
            # The same link again: the memory tier answers, same image.
            again = fj_link.link(self.rt, inputs, target="sm_90", lto=lto)
            self.assertEqual(again.info.cache_result, "memory_hit")
            self.assertEqual(again.image, image)

    def test_undefined_symbol_carries_nvjitlinks_log(self):
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            self.rt.link([LinkInput("source", CALLER, name="caller.cu")], target="sm_80")
        self.assertEqual(cm.exception.code, "BUILD_ERROR")
        self.assertIn("fj_py_link_scale", cm.exception.details["link_log"])
        self.assertIn("fj_py_link_scale", cm.exception.build_log)

    def test_bad_input_is_refused(self):
        cases = [
            ([], "INVALID_ARGUMENT", "inputs is"),
            ([LinkInput("source", "")], "INVALID_ARGUMENT", "empty"),
            ([LinkInput("source", "int x;\0int y;")], "INVALID_ARGUMENT", "NUL byte"),
            ([LinkInput("cubin", b"\x7fELF", nvrtc_options=["-DX"])], "INVALID_ARGUMENT",
             "not a source"),
            ([LinkInput("object", b"123")], "INVALID_ARGUMENT", "kind"),
        ]
        for inputs, code, says in cases:
            with self.subTest(says=says):
                with self.assertRaises(fleetjit.FleetjitError) as cm:
                    self.rt.link(inputs, target="sm_90")
                self.assertEqual(cm.exception.code, code)
                self.assertIn(says, cm.exception.message)
        with self.assertRaises(fleetjit.FleetjitError) as cm:
            self.rt.link([LinkInput("source", CALLER)], target="compute_90")
        self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")
        # Embedded NULs in a name, an option, a name expression or a folder:
        # refused by the binding, naming the field (a link that works
        # without them; NVRTC and nvJitLink would cut them short).
        good = [LinkInput("source", CALLER, name="caller.cu"),
                LinkInput("source", callee(self.factor), name="callee.cu")]
        rows = [
            ({"inputs": [LinkInput("source", CALLER, name="caller\0.cu"), good[1]]},
             "the inputs[0].name holds a NUL"),
            ({"inputs": [good[0], LinkInput("source", callee(self.factor),
                                            nvrtc_options=["-DX=1\0-DY"])]},
             "the inputs[1].nvrtc_options holds a NUL"),
            ({"inputs": [LinkInput("source", CALLER, name_expressions=["py_scale_all\0"]),
                         good[1]]},
             "the inputs[0].name_expressions holds a NUL"),
            ({"name": "link\0junk"}, "the name holds a NUL"),
            ({"target": "sm_90\0junk"}, "the target holds a NUL"),
            ({"link_options": ["-O3\0-g"]}, "the link_options holds a NUL"),
            ({"include_dirs": ["/tmp\0/x"]}, "the include_dirs holds a NUL"),
            ({"link_options": "-O3"}, "link_options is a list"),
            ({"inputs": [LinkInput("source", CALLER, nvrtc_options="-DX=1"), good[1]]},
             "inputs[0].nvrtc_options is a list"),
        ]
        for over, says in rows:
            with self.subTest(says=says):
                kwargs = {"inputs": good, "target": "sm_90", **over}
                with self.assertRaises(fleetjit.FleetjitError) as cm:
                    self.rt.link(kwargs.pop("inputs"), **kwargs)
                self.assertEqual(cm.exception.code, "INVALID_ARGUMENT", cm.exception.message)
                self.assertIn(says, cm.exception.message)

    def test_include_folders_as_paths(self):
        # A folder as open() takes it: str, bytes or pathlib.Path.
        with tempfile.TemporaryDirectory() as d:
            pathlib.Path(d, "fj_py_link_scale.h").write_text(
                f"#define FJ_PY_LINK_FACTOR {self.factor}.0f\n")
            source = ('#include "fj_py_link_scale.h"\n'
                      'extern "C" __device__ float fj_py_link_scale(float x) '
                      '{ return x * FJ_PY_LINK_FACTOR; }\n')
            for folder in (d, os.fsencode(d), pathlib.Path(d)):
                with self.subTest(folder=folder):
                    mod = self.rt.link([LinkInput("source", CALLER, name="caller.cu"),
                                        LinkInput("source", source, name="callee.cu")],
                                       target="sm_90", include_dirs=[folder])
                    self.assertIn(b"py_scale_all", mod.image)

    @unittest.skipUnless(os.environ.get("FLEETJIT_STRUCT_LAYOUT"),
                         "FLEETJIT_STRUCT_LAYOUT (the struct_layout program) is not set")
    def test_structs_match_the_header(self):
        out = subprocess.run([os.environ["FLEETJIT_STRUCT_LAYOUT"]], check=True,
                             capture_output=True, text=True).stdout
        mirrors = {"fj_link_input": fj_link.fj_link_input,
                   "fj_link_options": fj_link.fj_link_options}
        checked = 0
        for line in out.splitlines():
            struct, field, value = line.split()
            if struct not in mirrors:
                continue
            if field == ".":
                self.assertEqual(ctypes.sizeof(mirrors[struct]), int(value), struct)
            else:
                self.assertEqual(getattr(mirrors[struct], field).offset, int(value))
            checked += 1
        self.assertEqual(checked, 2 + 10 + 12)


if __name__ == "__main__":
    unittest.main()
