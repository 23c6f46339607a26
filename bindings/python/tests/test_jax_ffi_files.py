"""The JAX FFI handler is only loaded from a folder of the user's own.

No JAX or GPU needed: a stand-in `jax` module (include_dir, pycapsule,
register_ffi_target) and a stand-in C++ compiler ($CXX, a script that
builds a stub library whose FleetjitLaunch returns 42) exercise
jax_ffi.build() and register(). Planted libraries write a marker file from
a constructor, so a test sees whether their code ran. "Another user" is
simulated with os.chown to another uid (these tests run as root; without
root they skip).
"""
import ctypes
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import types
import unittest
import warnings

import _env  # noqa: F401  (library path, package import)

from fleetjit import jax_ffi
from fleetjit.errors import FleetjitError

OTHER_UID = 54321
HAVE_CC = shutil.which("cc") is not None
IS_ROOT = os.geteuid() == 0


def _stub_compiler(folder):
    """A $CXX that prints a version and builds a library returning 42."""
    path = os.path.join(folder, "stub-cxx")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n"
                "if [ \"$1\" = --version ]; then echo stub-cxx 1; exit 0; fi\n"
                "out=\n"
                "while [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n"
                "printf 'int FleetjitLaunch(void){return 42;}\\n' |"
                " cc -shared -fPIC -x c - -o \"$out\"\n")
    os.chmod(path, 0o755)
    return path


def _planted_library(path, marker):
    """A library whose constructor creates `marker`; FleetjitLaunch returns 666."""
    src = ("#include <stdio.h>\n"
           "__attribute__((constructor)) static void planted(void) {\n"
           f"  FILE* f = fopen(\"{marker}\", \"w\"); if (f) fclose(f);\n"
           "}\n"
           "int FleetjitLaunch(void) { return 666; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-x", "c", "-", "-o", path],
                   input=src.encode(), check=True)


@unittest.skipUnless(HAVE_CC, "no C compiler (cc) to build stub libraries")
class JaxFfiFolderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fj-jaxffi-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.marker = os.path.join(self.tmp, "planted-code-ran")
        # The stand-in jax: its FFI headers and the registration it records.
        inc = os.path.join(self.tmp, "jax-include")
        os.makedirs(os.path.join(inc, "xla", "ffi", "api"))
        self.header = os.path.join(inc, "xla", "ffi", "api", "ffi.h")
        with open(self.header, "w") as f:
            f.write("// stand-in XLA FFI header\n")
        self.registered = []
        ffi = types.ModuleType("jax.ffi")
        ffi.include_dir = lambda: inc
        ffi.pycapsule = lambda fn: fn
        ffi.register_ffi_target = lambda name, fn, platform: self.registered.append(fn)
        jax = types.ModuleType("jax")
        jax.__version__ = "0.4.test"
        jax.ffi = ffi
        saved = {k: sys.modules.get(k) for k in ("jax", "jax.ffi")}
        sys.modules["jax"], sys.modules["jax.ffi"] = jax, ffi

        def restore():
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        self.addCleanup(restore)
        # A private environment: home, temporary folder, compiler.
        env = {"HOME": os.path.join(self.tmp, "home"), "XDG_CACHE_HOME": None,
               "FLEETJIT_JAX_FFI_DIR": None, "TMPDIR": os.path.join(self.tmp, "tmp"),
               "CXX": _stub_compiler(self.tmp)}
        os.makedirs(env["TMPDIR"])
        for k, v in env.items():
            old = os.environ.get(k)
            self.addCleanup(self._setenv, k, old)
            self._setenv(k, v)
        old_tempdir = tempfile.tempdir
        tempfile.tempdir = env["TMPDIR"]
        self.addCleanup(setattr, tempfile, "tempdir", old_tempdir)
        # register() is once per process: start unregistered, and leave
        # whatever a real JAX test registered before as it was.
        self.addCleanup(setattr, jax_ffi, "_registered", jax_ffi._registered)
        jax_ffi._registered = None
        self.home_dir = os.path.join(env["HOME"], ".cache", "fleetjit-jax-ffi")

    @staticmethod
    def _setenv(k, v):
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v

    def _loaded(self):
        """FleetjitLaunch() of what register() registered (one call)."""
        self.assertEqual(len(self.registered), 1)
        fn = self.registered[0]
        fn.restype, fn.argtypes = ctypes.c_int, []
        return fn()

    def _expected_name(self):
        """The file name build() uses (built once to learn it)."""
        path = jax_ffi.build()
        os.unlink(path)
        return os.path.basename(path)

    # -- where it lives

    def test_the_old_shared_tmp_name_is_never_loaded(self):
        # What issue 45 found: a library planted at
        # $TMPDIR/fleetjit-jax-ffi/libfleetjit_xla-<jax>-<mtime>.so ran.
        shared = os.path.join(os.environ["TMPDIR"], "fleetjit-jax-ffi")
        os.makedirs(shared)
        os.chmod(shared, 0o777)
        planted = os.path.join(
            shared, f"libfleetjit_xla-0.4.test-{int(jax_ffi.SOURCE.stat().st_mtime)}.so")
        _planted_library(planted, self.marker)
        if IS_ROOT:
            os.chown(planted, OTHER_UID, -1)
        path = jax_ffi.register()
        self.assertFalse(os.path.exists(self.marker), "the planted library's code ran")
        self.assertEqual(self._loaded(), 42)
        self.assertEqual(os.path.dirname(path), self.home_dir)

    def test_folder_and_file_are_private(self):
        old = os.umask(0o002)  # group-writable by default, as on many hosts
        try:
            path = jax_ffi.build()
        finally:
            os.umask(old)
        folder = os.stat(self.home_dir)
        self.assertEqual(stat.S_IMODE(folder.st_mode), 0o700)
        self.assertEqual(folder.st_uid, os.geteuid())
        st = os.stat(path)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o700)
        self.assertEqual(st.st_uid, os.geteuid())
        # No temporary file is left behind.
        self.assertEqual(os.listdir(self.home_dir), [os.path.basename(path)])

    def test_xdg_cache_home_and_explicit_folder(self):
        xdg = os.path.join(self.tmp, "xdg")
        os.environ["XDG_CACHE_HOME"] = xdg
        self.assertEqual(os.path.dirname(jax_ffi.build()),
                         os.path.join(xdg, "fleetjit-jax-ffi"))
        mine = os.path.join(self.tmp, "mine")
        os.environ["FLEETJIT_JAX_FFI_DIR"] = mine
        self.assertEqual(os.path.dirname(jax_ffi.build()), mine)
        self.assertEqual(stat.S_IMODE(os.stat(mine).st_mode), 0o700)
        other = os.path.join(self.tmp, "other")
        self.assertEqual(os.path.dirname(jax_ffi.build(other)), other)

    def test_name_covers_the_content_of_what_is_compiled(self):
        first = jax_ffi.build()
        self.assertEqual(jax_ffi.build(), first)  # found, not rebuilt
        with open(self.header, "a") as f:  # an edited XLA header
            f.write("// edited\n")
        second = jax_ffi.build()
        self.assertNotEqual(second, first)
        source = os.path.join(self.tmp, "fleetjit_xla.cc")  # an edited handler source
        shutil.copy(jax_ffi.SOURCE, source)
        with open(source, "a") as f:
            f.write("// edited\n")
        old_source = jax_ffi.SOURCE
        jax_ffi.SOURCE = type(old_source)(source)
        try:
            os.utime(source, (old_source.stat().st_mtime,) * 2)  # same mtime
            third = jax_ffi.build()
        finally:
            jax_ffi.SOURCE = old_source
        self.assertNotIn(third, (first, second))
        os.environ["CXX"] = _stub_compiler(os.path.join(self.tmp, "home"))  # another compiler
        self.assertNotIn(jax_ffi.build(), (first, second, third))

    # -- a bad entry in the folder: refused, rebuilt

    def _plant_at_name(self, how):
        name = self._expected_name()
        planted = os.path.join(self.home_dir, name)
        elsewhere = os.path.join(self.tmp, "elsewhere.so")
        _planted_library(elsewhere, self.marker)
        if how == "symlink":
            os.symlink(elsewhere, planted)
        else:
            shutil.copy(elsewhere, planted)
            if how == "other-uid":
                os.chown(planted, OTHER_UID, -1)
                os.chmod(planted, 0o755)
            elif how == "group-writable":
                os.chmod(planted, 0o775)
            elif how == "world-writable":
                os.chmod(planted, 0o757)
        return planted, elsewhere

    def _refused_and_rebuilt(self, how):
        planted, elsewhere = self._plant_at_name(how)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            jax_ffi.register()
        self.assertFalse(os.path.exists(self.marker), f"a {how} library's code ran")
        self.assertEqual(self._loaded(), 42)
        self.assertTrue(any("refusing" in str(w.message) and planted in str(w.message)
                            for w in caught), [str(w.message) for w in caught])
        st = os.lstat(planted)  # replaced by the user's own build
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(st.st_uid, os.geteuid())
        self.assertTrue(os.path.exists(elsewhere))  # a link's target is not touched

    @unittest.skipUnless(IS_ROOT, "needs root to give a file to another uid")
    def test_entry_of_another_uid_refused(self):
        self._refused_and_rebuilt("other-uid")

    def test_group_writable_entry_refused(self):
        self._refused_and_rebuilt("group-writable")

    def test_world_writable_entry_refused(self):
        self._refused_and_rebuilt("world-writable")

    def test_symlinked_entry_refused(self):
        self._refused_and_rebuilt("symlink")

    # -- a bad folder: refused, nothing built or loaded

    def _folder_refused(self, folder, why):
        with self.assertRaises(FleetjitError) as e:
            jax_ffi.register()
        self.assertEqual(e.exception.code, "FAILED_PRECONDITION")
        self.assertIn(folder, e.exception.message)
        self.assertIn(why, e.exception.message)
        self.assertEqual(self.registered, [])
        self.assertIsNone(jax_ffi._registered)

    @unittest.skipUnless(IS_ROOT, "needs root to give a folder to another uid")
    def test_folder_of_another_uid_refused(self):
        os.makedirs(self.home_dir, mode=0o755)
        os.chown(self.home_dir, OTHER_UID, -1)
        self._folder_refused(self.home_dir, f"owned by uid {OTHER_UID}")

    def test_group_writable_folder_refused(self):
        os.makedirs(self.home_dir)
        os.chmod(self.home_dir, 0o775)
        self._folder_refused(self.home_dir, "group-writable")
        self.assertEqual(os.listdir(self.home_dir), [])

    def test_symlinked_folder_refused(self):
        target = os.path.join(self.tmp, "target")
        os.makedirs(target, mode=0o700)
        os.makedirs(os.path.dirname(self.home_dir))
        os.symlink(target, self.home_dir)
        self._folder_refused(self.home_dir, "symbolic link")
        self.assertEqual(os.listdir(target), [])

    def test_explicit_folder_checked_too(self):
        mine = os.path.join(self.tmp, "shared")
        os.makedirs(mine)
        os.chmod(mine, 0o777)
        os.environ["FLEETJIT_JAX_FFI_DIR"] = mine
        self._folder_refused(mine, "world-writable")
        with self.assertRaises(FleetjitError):
            jax_ffi.build(mine)

    # -- no usable home: a per-uid folder under TMPDIR

    def _unusable_home(self):
        blocker = os.path.join(self.tmp, "a-file")
        open(blocker, "w").close()
        os.environ["HOME"] = os.path.join(blocker, "home")  # cannot be made
        return os.path.join(os.environ["TMPDIR"], f"fleetjit-jax-ffi-{os.geteuid()}")

    def test_tmp_fallback_is_per_uid_and_private(self):
        expected = self._unusable_home()
        path = jax_ffi.register()
        self.assertEqual(os.path.dirname(path), expected)
        self.assertEqual(stat.S_IMODE(os.stat(expected).st_mode), 0o700)
        self.assertEqual(self._loaded(), 42)

    @unittest.skipUnless(IS_ROOT, "needs root to give a folder to another uid")
    def test_tmp_fallback_made_by_another_uid_refused(self):
        expected = self._unusable_home()
        os.makedirs(expected, mode=0o755)  # another user got there first
        os.chown(expected, OTHER_UID, -1)
        with self.assertRaises(FleetjitError) as e:
            jax_ffi.register()
        self.assertIn(expected, e.exception.message)
        self.assertIn(f"owned by uid {OTHER_UID}", e.exception.message)
        self.assertEqual(self.registered, [])

    # -- register(path): the caller's file, checked

    def test_register_path_checks_the_file(self):
        lib = os.path.join(self.tmp, "handler.so")
        _planted_library(lib, self.marker)
        os.chmod(lib, 0o775)
        with self.assertRaises(FleetjitError) as e:
            jax_ffi.register(lib)
        self.assertIn("group-writable", e.exception.message)
        self.assertFalse(os.path.exists(self.marker))
        if IS_ROOT:
            os.chmod(lib, 0o755)
            os.chown(lib, OTHER_UID, -1)
            with self.assertRaises(FleetjitError) as e:
                jax_ffi.register(lib)
            self.assertIn(f"owned by uid {OTHER_UID}", e.exception.message)
            self.assertFalse(os.path.exists(self.marker))
            os.chown(lib, os.geteuid(), -1)
        os.chmod(lib, 0o755)
        self.assertEqual(jax_ffi.register(lib), lib)
        self.assertTrue(os.path.exists(self.marker))  # the caller's own library ran
        self.assertEqual(self._loaded(), 666)


if __name__ == "__main__":
    unittest.main()
