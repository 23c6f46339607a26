"""kernel.launch as the compiled Launcher (fleetjit/_fastlaunch.c) on the
fake CUDA driver: bad input raises what the Python method raises
(TypeError for a call that does not bind, FleetjitError, a ValueError, for
a closed handle, a bad stream, grid or argument), never a crash; and what
the Launcher leaves to Python (a stream to wrap, a generator of arguments,
a cluster, USE_FAST_PATH off) still launches once."""
import ctypes
import gc
import os
import pathlib
import subprocess
import sys
import textwrap
import unittest

import _env
import fleetjit
from fleetjit import _fast, _ffi
from fleetjit import runtime as fj_runtime


class LauncherTest(unittest.TestCase):
    def setUp(self):
        _env.fake_driver_saxpy(self)
        self.args = [self.buf, self.buf, 1.0, 16]

    def tearDown(self):
        fj_runtime.USE_FAST_PATH = True
        self.rt.close()

    def launches(self):
        return self.fake.fjfake_calls(b"cuLaunchKernelEx")

    def raises(self, rows):
        """Each (what, call, exception, text): the call raises `exception`
        whose message holds `text`, and launches nothing."""
        for what, call, exc, text in rows:
            with self.subTest(what=what):
                before = self.launches()
                with self.assertRaises(exc) as cm:
                    call()
                self.assertIn(text, str(cm.exception))
                self.assertEqual(self.launches(), before)

    @unittest.skipUnless(_fast.module is not None, f"compiled path: {_fast.why_not}")
    def test_launch_is_the_compiled_callable(self):
        self.assertEqual(type(self.k.launch.__self__).__name__, "Launcher")
        # The class keeps the documented method, which the Launcher falls back to.
        self.assertIn("Launches asynchronously", fleetjit.Kernel.launch.__doc__)

        class Mine(fleetjit.Kernel):
            def launch(self, *args, **kwargs):
                return "mine"
        mine = Mine(self.mod, self.k._handle, "saxpy", 0)
        self.assertEqual(mine.launch(1, 32), "mine")  # an override is not shadowed

    def test_calls_that_do_not_bind_are_type_errors(self):
        k, a = self.k, self.args
        self.raises([
            ("no arguments", lambda: k.launch(), TypeError, "'grid' and 'block'"),
            ("no block", lambda: k.launch(1), TypeError, "'block'"),
            ("seven positional", lambda: k.launch(1, 32, a, None, 0, None, 7), TypeError,
             "positional arguments"),
            ("unknown keyword", lambda: k.launch(1, 32, a, bogus=1), TypeError, "'bogus'"),
            ("grid twice", lambda: k.launch(1, 32, a, grid=1), TypeError, "'grid'"),
            ("args an int", lambda: k.launch(1, 32, 5), TypeError, "not iterable"),
            ("args None", lambda: k.launch(1, 32, None), TypeError, "not iterable"),
        ])

    def test_closed_handles_are_refused(self):
        k, a = self.k, self.args
        s = self.rt.create_stream()
        s.close()
        self.raises([("closed stream", lambda: k.launch(1, 32, a, stream=s),
                      fleetjit.InvalidArgumentError, "this Stream is closed")])
        self.mod.close()
        self.raises([("closed module", lambda: k.launch(1, 32, a),
                      fleetjit.InvalidArgumentError, "module is closed")])
        other = self.rt.build(_env.SAXPY, name="saxpy.cu", target="compute_90").kernel("saxpy")
        self.rt.close()
        self.raises([("closed runtime", lambda: other.launch(1, 32, a),
                      fleetjit.InvalidArgumentError, "closed")])

    def test_bad_streams_are_refused(self):
        k, a = self.k, self.args

        class NotAStream:
            cuda_stream = "x"
        self.raises([
            ("a str", lambda: k.launch(1, 32, a, stream="x"),
             fleetjit.InvalidArgumentError, "not str"),
            ("cuda_stream not an int", lambda: k.launch(1, 32, a, stream=NotAStream()),
             fleetjit.InvalidArgumentError, "not NotAStream"),
            ("not a live CUstream", lambda: k.launch(1, 32, a, stream=12345),
             fleetjit.InvalidArgumentError, "not a live CUstream"),
            ("negative", lambda: k.launch(1, 32, a, stream=-1),
             fleetjit.InvalidArgumentError, "CUstream is -1"),
        ])

    def test_bad_grid_block_and_shared_bytes_are_refused(self):
        k, a = self.k, self.args
        self.raises([
            ("4 dimensions", lambda: k.launch((1, 2, 3, 4), 32, a),
             fleetjit.InvalidArgumentError, "more than 3 dimensions"),
            ("a str", lambda: k.launch("a", 32, a), fleetjit.InvalidArgumentError, "grid[0]"),
            ("negative", lambda: k.launch(-1, 32, a), fleetjit.InvalidArgumentError, "grid[0]"),
            ("a float block", lambda: k.launch(1, 2.5, a), fleetjit.InvalidArgumentError,
             "block[0]"),
            ("past the device", lambda: k.launch(1, 4096, a), fleetjit.OutOfRangeError,
             "block.x = 4096"),
            ("negative shared", lambda: k.launch(1, 32, a, shared_bytes=-1),
             fleetjit.InvalidArgumentError, "shared_bytes"),
            ("shared None", lambda: k.launch(1, 32, a, shared_bytes=None),
             fleetjit.InvalidArgumentError, "shared_bytes"),
            ("a str cluster", lambda: k.launch(1, 32, a, cluster="x"),
             fleetjit.InvalidArgumentError, "cluster[0]"),
        ])

    def test_bad_kernel_arguments_are_refused(self):
        k, b = self.k, self.buf
        self.raises([
            ("too few", lambda: k.launch(1, 32, [b]), fleetjit.InvalidArgumentError,
             "takes 4 arguments, the call passed 1"),
            ("int for float", lambda: k.launch(1, 32, [b, b, 1, 16]),
             fleetjit.InvalidArgumentError, "argument 2"),
            ("bool", lambda: k.launch(1, 32, [b, b, 1.0, True]), fleetjit.FleetjitError,
             "bool"),
        ])

    def test_what_goes_back_to_python_still_launches_once(self):
        k, a = self.k, self.args
        framework = type("FrameworkStream", (), {"cuda_stream":
                                                 self.fake.fjfake_create_stream(0)})()
        rows = [
            ("a framework stream to wrap", lambda: k.launch(1, 32, a, stream=framework)),
            ("the same, wrapped", lambda: k.launch(1, 32, a, stream=framework)),
            ("a fleetjit Stream", lambda: k.launch(1, 32, a, stream=self.rt.create_stream())),
            ("a keyword built at run time", lambda: k.launch(1, 32, **{"".join("args"): a})),
            ("every keyword", lambda: k.launch(grid=1, block=32, args=a, stream=None,
                                               shared_bytes=0, cluster=None)),
            ("a generator", lambda: k.launch(1, 32, (v for v in a))),
            ("a cluster", lambda: k.launch(1, 32, a, cluster=(1, 1, 1))),
            ("the legacy stream", lambda: k.launch(1, 32, tuple(a), 0)),
        ]
        for what, call in rows:
            with self.subTest(what=what):
                before = self.launches()
                self.assertIsNone(call())
                self.assertEqual(self.launches(), before + 1)
        self.assertIn(framework.cuda_stream, self.rt._fj_by_cu)
        fj_runtime.USE_FAST_PATH = False
        before = self.launches()
        k.launch(1, 32, a, stream=framework)
        self.assertEqual(self.launches(), before + 1)

    @unittest.skipUnless(_fast.module is not None, f"compiled path: {_fast.why_not}")
    def test_tensors_it_must_refuse_or_warn_about_go_to_the_ctypes_path(self):
        """With a stand-in torch (a child process: this one may have the real
        one, or must not get a fake): a contiguous CUDA tensor of the
        parameter's dtype launches from C; a CPU tensor, a non-contiguous
        view, another dtype and a subclass of the wrong kind go to
        Kernel._launch_ctypes, which refuses or warns (test_frameworks_gpu)."""
        child = textwrap.dedent("""
            import ctypes, sys, types
            torch = types.ModuleType("torch")
            torch.float32, torch.float16 = object(), object()
            class Meta(type):
                pass
            class Tensor(metaclass=Meta):  # methods of the class, as torch's
                def __init__(self, ptr, cuda=True, contiguous=True, dtype=torch.float32):
                    self.is_cuda, self.dtype = cuda, dtype
                    self._ptr, self._contiguous = int(ptr), contiguous
                def is_contiguous(self):
                    return self._contiguous
                def data_ptr(self):
                    return self._ptr
            class Parameter(Tensor):  # a subclass may override them
                def data_ptr(self):
                    return self._ptr
            torch.Tensor = Tensor
            sys.modules["torch"] = torch
            import _env, fleetjit
            fake = ctypes.CDLL(sys.argv[1])
            fake.fjfake_calls.restype = ctypes.c_uint64
            rt = fleetjit.Runtime(libcuda=sys.argv[1], disk_cache=False)
            k = rt.build(_env.SAXPY, name="saxpy.cu", target="compute_90").kernel("saxpy")
            took = []
            k._launch_ctypes = lambda *a: took.append(a[2])
            p = rt.alloc(64).device_address
            for what, t, c in (("cuda", Tensor(p), 1), ("subclass", Parameter(p), 1),
                               ("cpu", Tensor(p, cuda=False), 0),
                               ("view", Tensor(p, contiguous=False), 0),
                               ("subclass view", Parameter(p, contiguous=False), 0),
                               ("dtype", Tensor(p, dtype=torch.float16), 0)):
                before = fake.fjfake_calls(b"cuLaunchKernelEx")
                k.launch(1, 32, [t, t, 1.0, 4])
                launched = fake.fjfake_calls(b"cuLaunchKernelEx") - before
                print(what, launched, len(took))
                assert launched == c and len(took) == 1 - c, what
                took.clear()
            rt.close()
            """)
        fake = os.environ.get("FLEETJIT_LIBCUDA") or str(
            pathlib.Path(_ffi.library_path()).parent / "libfj_fake_cuda.so")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        r = subprocess.run([sys.executable, "-c", child, fake], env=env,
                           cwd=os.path.dirname(os.path.abspath(__file__)),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_kept_launch_keeps_its_kernel(self):
        launch = self.mod.kernel("saxpy").launch
        gc.collect()
        before = self.launches()
        launch(1, 32, self.args)
        self.assertEqual(self.launches(), before + 1)
        del launch
        gc.collect()
        by_cu = self.rt._fj_by_cu
        self.rt.close()  # emptied in place: launchers hold this dict
        self.assertEqual(by_cu, {})


if __name__ == "__main__":
    unittest.main()
