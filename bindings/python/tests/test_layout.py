"""The generated ctypes structs (fleetjit/_abi.py) against the C header:
every struct's size and every field's offset as a C compiler lays them out,
which checks the generator's type mapping. ctest sets FLEETJIT_STRUCT_LAYOUT
to tests/abi/struct_layout.c built (generated from the same header); run by
hand, the test skips without it."""
import ctypes
import os
import subprocess
import unittest

import _env  # noqa: F401
from fleetjit import _abi


@unittest.skipUnless(os.environ.get("FLEETJIT_STRUCT_LAYOUT"),
                     "FLEETJIT_STRUCT_LAYOUT (the struct_layout program) is not set")
class LayoutTest(unittest.TestCase):
    def test_offsets_and_sizes_match_the_header(self):
        out = subprocess.run([os.environ["FLEETJIT_STRUCT_LAYOUT"]], check=True,
                             capture_output=True, text=True).stdout
        checked, structs = 0, set()
        for line in out.splitlines():
            struct, field, value = line.split()
            mirror = getattr(_abi, struct, None)
            self.assertIsNotNone(mirror, f"_abi.py lacks {struct}: run scripts/dev/gen-bindings")
            if field == ".":
                self.assertEqual(ctypes.sizeof(mirror), int(value), struct)
                structs.add(struct)
            else:
                self.assertEqual(getattr(mirror, field).offset, int(value), f"{struct}.{field}")
            checked += 1
        self.assertGreaterEqual(len(structs), 25)
        self.assertGreater(checked, 250)


if __name__ == "__main__":
    unittest.main()
