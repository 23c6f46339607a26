"""The libraries named by FLEETJIT_LIBRARY and FLEETJIT_PYTHON_EXT.

Both variables are trusted input (docs/security-python.md): the binding
loads the file they name. It refuses one that any user can replace: a
world-writable file, or one named in or lying in a world-writable folder
without the sticky bit. Each case runs in a fresh interpreter (the library
and the extension are loaded once, at import); a planted library writes a
marker file from a constructor, so the test sees whether its code ran.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

import _env  # noqa: F401  (sets FLEETJIT_LIBRARY when the build has one)

from fleetjit import _ffi, _trust

PACKAGE_DIR = str(pathlib.Path(__file__).resolve().parents[1])


def _planted_library(path, marker):
    src = ("#include <stdio.h>\n"
           "__attribute__((constructor)) static void planted(void) {\n"
           f"  FILE* f = fopen(\"{marker}\", \"w\"); if (f) fclose(f);\n"
           "}\n"
           "int PyInit__fastlaunch(void) { return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-x", "c", "-", "-o", path],
                   input=src.encode(), check=True)


def _run(code, **env):
    full = dict(os.environ)
    full["PYTHONPATH"] = PACKAGE_DIR + os.pathsep + full.get("PYTHONPATH", "")
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=120)


@unittest.skipUnless(shutil.which("cc"), "no C compiler (cc) to build stub libraries")
class NamedLibraryTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fj-loadpaths-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.marker = os.path.join(self.tmp, "planted-code-ran")

    def _library_refused(self, path, why):
        r = _run("import fleetjit\n"
                 "try:\n"
                 "    fleetjit.library_version()\n"
                 "except fleetjit.FleetjitError as e:\n"
                 "    print('REFUSED', e.message)\n",
                 FLEETJIT_LIBRARY=path)
        self.assertFalse(os.path.exists(self.marker), "the planted library's code ran")
        self.assertIn("REFUSED refusing $FLEETJIT_LIBRARY", r.stdout, r.stdout + r.stderr)
        self.assertIn(why, r.stdout)

    def test_world_writable_library_refused(self):
        lib = os.path.join(self.tmp, "libfleetjit.so.1")
        _planted_library(lib, self.marker)
        os.chmod(lib, 0o757)
        self._library_refused(lib, "world-writable (mode 0757)")

    def test_library_named_in_an_open_folder_refused(self):
        real = _ffi.library_path()
        if not os.path.isabs(real) or not os.path.exists(real):
            self.skipTest("no built library path (FLEETJIT_LIBRARY) to link to")
        shared = os.path.join(self.tmp, "shared")
        os.makedirs(shared)
        os.chmod(shared, 0o777)  # anyone may replace the link
        link = os.path.join(shared, "libfleetjit.so.1")
        os.symlink(real, link)
        self._library_refused(link, "world-writable without the sticky bit")

    def test_sticky_folder_and_private_file_pass(self):
        # As in /tmp: only a name's owner may replace it there.
        sticky = os.path.join(self.tmp, "sticky")
        os.makedirs(sticky)
        os.chmod(sticky, 0o1777)
        lib = os.path.join(sticky, "libfleetjit.so.1")
        _planted_library(lib, self.marker)
        os.chmod(lib, 0o755)
        self.assertEqual(_trust.world_writable(lib), "")
        os.chmod(lib, 0o775)  # group-writable: the variable's owner chose it
        self.assertEqual(_trust.world_writable(lib), "")
        os.chmod(lib, 0o777)
        self.assertIn("world-writable (mode 0777)", _trust.world_writable(lib))

    def test_world_writable_extension_refused(self):
        ext = os.path.join(self.tmp, "_fastlaunch.abi3.so")
        _planted_library(ext, self.marker)
        os.chmod(ext, 0o666)
        r = _run("import warnings, fleetjit\n"
                 "from fleetjit import _fast\n"
                 "print('AVAILABLE', _fast.available())\n",
                 FLEETJIT_PYTHON_EXT=ext, FLEETJIT_PYTHON_FAST="1")
        self.assertFalse(os.path.exists(self.marker), "the planted extension's code ran")
        self.assertIn("AVAILABLE (False, 'refusing $FLEETJIT_PYTHON_EXT", r.stdout,
                      r.stdout + r.stderr)
        self.assertIn("RuntimeWarning: fleetjit: refusing $FLEETJIT_PYTHON_EXT", r.stderr)


if __name__ == "__main__":
    unittest.main()
