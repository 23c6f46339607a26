"""The ctypes mirror against the C header: offsets and sizes as a C compiler
lays them out. ctest sets FLEETJIT_STRUCT_LAYOUT to tests/abi/struct_layout.c
built; run by hand, the test skips without it."""
import ctypes
import os
import subprocess
import unittest

import _env  # noqa: F401
from fleetjit import _ffi

MIRRORS = {name: getattr(_ffi, name) for name in (
    "fj_str", "fj_copy_plan", "fj_runtime_options", "fj_device_info", "fj_build_options",
    "fj_module_info", "fj_dl_device", "fj_dl_dtype", "fj_tensor", "fj_tensor_arg",
    "fj_tensor_check", "fj_arg", "fj_launch_config", "fj_kernel_info", "fj_cache_stats")}


@unittest.skipUnless(os.environ.get("FLEETJIT_STRUCT_LAYOUT"),
                     "FLEETJIT_STRUCT_LAYOUT (the struct_layout program) is not set")
class LayoutTest(unittest.TestCase):
    def test_offsets_and_sizes_match_the_header(self):
        out = subprocess.run([os.environ["FLEETJIT_STRUCT_LAYOUT"]], check=True,
                             capture_output=True, text=True).stdout
        checked = 0
        for line in out.splitlines():
            struct, field, value = line.split()
            mirror = MIRRORS.get(struct)
            if mirror is None:
                continue
            if field == ".":
                # The header may append fields (minor versions): a shorter
                # mirror still works, thanks to struct_size. Never longer.
                self.assertLessEqual(ctypes.sizeof(mirror), int(value), struct)
                if ctypes.sizeof(mirror) < int(value):
                    print(f"note: {struct} grew to {value} bytes; the binding knows "
                          f"{ctypes.sizeof(mirror)}")
            else:
                self.assertEqual(getattr(mirror, field).offset, int(value), f"{struct}.{field}")
            checked += 1
        self.assertGreater(checked, 80)


if __name__ == "__main__":
    unittest.main()
