"""The 1.1 entries from Python, on a machine without a GPU: asynchronous
builds (future, timeout, asyncio), modules loaded from images, include
folders, the cache flush, the log callback from the library's threads,
exception classes per fj_code, and bad input (NUL, negative sizes)."""
import asyncio
import concurrent.futures
import logging
import os
import pathlib
import tempfile
import threading
import unittest

import _env
import fleetjit
from fleetjit import errors

needs_nvrtc_msg = None


class AsyncBuildTest(unittest.TestCase):
    def setUp(self):
        self.rt = fleetjit.Runtime()

    def tearDown(self):
        self.rt.close()

    def test_future_result_matches_a_blocking_build(self):
        src = _env.unique(_env.SAXPY)
        fut = self.rt.build_async(src, name="saxpy.cu", target="compute_80")
        module = fut.result(timeout=120)
        self.assertTrue(fut.done())
        self.assertIs(fut.result(), module)  # taken once, kept
        self.assertEqual(module.info.target, "compute_80")
        blocking = self.rt.build(src, name="saxpy.cu", target="compute_80")
        self.assertEqual(module.image, blocking.image)
        from fleetjit import _signature  # the source kept for dtype checks
        self.assertEqual(_signature.pointer_dtypes(module._source, "saxpy"),
                         [(2, 32, "float32", False), (2, 32, "float32", True), None, None])
        fut.close()

    def test_build_error_comes_from_result(self):
        fut = self.rt.build_async("__global__ void broken( {}", name=_env.unique("b") + ".cu",
                                  target="sm_90")
        with self.assertRaises(errors.BuildError) as cm:
            fut.result(timeout=120)
        self.assertEqual(cm.exception.code, "BUILD_ERROR")
        self.assertIn("broken", cm.exception.build_log or "")
        self.assertIsInstance(fut.exception(), errors.BuildError)

    def test_timeout_and_poll(self):
        # Eight builds of fresh sources queue behind each other: the last
        # cannot be done within 0 s of being started.
        futs = [self.rt.build_async(_env.unique(_env.SAXPY), target="sm_90")
                for _ in range(10)]
        with self.assertRaises(concurrent.futures.TimeoutError):
            futs[-1].result(timeout=0)
        self.assertIn(futs[-1].done(), (False, True))
        for f in futs:
            self.assertGreater(len(f.result(timeout=300).image), 0)
            f.close()

    def test_await_in_asyncio(self):
        async def main():
            futs = [self.rt.build_async(_env.unique(_env.SAXPY), target="sm_90")
                    for _ in range(3)]
            return await asyncio.gather(*futs)
        modules = asyncio.run(main())
        self.assertEqual(len(modules), 3)
        for m in modules:
            self.assertEqual(m.info.target, "sm_90")

    def test_bad_options_refused_at_start(self):
        with self.assertRaises(errors.InvalidArgumentError):
            self.rt.build_async(_env.SAXPY, copy_impl="bogus")
        with self.assertRaises(TypeError):
            self.rt.build_async(_env.SAXPY, colour="blue")


class LoadAndCacheTest(unittest.TestCase):
    def setUp(self):
        self.rt = fleetjit.Runtime()

    def tearDown(self):
        self.rt.close()

    def test_load_a_ptx_image_built_elsewhere(self):
        built = self.rt.build(_env.unique(_env.SAXPY), target="compute_80")
        image = built.image
        m = self.rt.load(image, kind="ptx", name="saxpy.ptx")
        self.assertEqual(m.image, image)
        self.assertEqual(m.info.cache_result, "compiled")
        self.assertEqual(m.info.build_ms, 0)

    def test_malformed_image_is_invalid_argument(self):
        with self.assertRaises(errors.InvalidArgumentError):
            self.rt.load(os.urandom(64), kind="cubin")
        with self.assertRaises(errors.InvalidArgumentError):
            self.rt.load(b"x", kind="elf")

    def test_include_dirs_and_user_folders(self):
        for path, origin in self.rt.include_dirs:
            self.assertTrue(path)
            self.assertTrue(origin)
        with tempfile.TemporaryDirectory() as d:
            value = int.from_bytes(os.urandom(2), "little")
            pathlib.Path(d, "fj_py_inc.h").write_text(f"#define FJ_PY_VALUE {value}\n")
            src = _env.unique('#include "fj_py_inc.h"\n'
                              'extern "C" __global__ void k(int* o) { *o = FJ_PY_VALUE; }\n')
            m = self.rt.build(src, target="compute_80", include_dirs=[d])
            self.assertIn(str(value), m.image.decode(errors="replace"))
            with self.assertRaises(errors.BuildError):
                self.rt.build(_env.unique(src), target="compute_80")

    def test_include_dirs_take_paths_and_bytes(self):
        # As open() takes them: a pathlib.Path (a TypeError before) and bytes
        # (str() made b'...' of them, a folder that is not there).
        with tempfile.TemporaryDirectory() as d:
            value = int.from_bytes(os.urandom(2), "little")
            pathlib.Path(d, "fj_py_inc.h").write_text(f"#define FJ_PY_VALUE {value}\n")
            for folder in (pathlib.Path(d), os.fsencode(d)):
                with self.subTest(folder=folder):
                    src = _env.unique('#include "fj_py_inc.h"\n'
                                      'extern "C" __global__ void k(int* o) '
                                      '{ *o = FJ_PY_VALUE; }\n')
                    m = self.rt.build(src, target="compute_80", include_dirs=[folder])
                    self.assertIn(str(value), m.image.decode(errors="replace"))
            with self.assertRaises(errors.InvalidArgumentError) as cm:
                self.rt.build(_env.SAXPY, target="sm_90", include_dirs=pathlib.Path(d))
            self.assertIn("include_dirs is a list", cm.exception.message)

    def test_flush_cache(self):
        self.rt.build(_env.unique(_env.SAXPY), target="sm_90")
        self.rt.flush_cache(timeout=30)
        self.rt.flush_cache()
        with self.assertRaises(errors.InvalidArgumentError):
            self.rt.flush_cache(timeout=-1)


class LogTest(unittest.TestCase):
    def test_log_lines_reach_python_from_library_threads(self):
        lines, threads = [], set()

        def log(level, message):
            lines.append((level, message))
            threads.add(threading.get_ident())
        # A forced copy implementation that the target lacks is softened,
        # with an info line naming the build (logged on a build thread).
        with fleetjit.Runtime(log=log, log_level="debug", copy_impl="tma") as rt:
            names = [f"logged_{os.urandom(4).hex()}.cu" for _ in range(2)]
            futs = [rt.build_async(_env.unique(_env.SAXPY), name=n, target="sm_80")
                    for n in names]
            for f in futs:
                f.result(timeout=120)
        for n in names:
            self.assertTrue(any(n in m and "tma" in m for _, m in lines), (n, lines))
        self.assertNotIn(threading.get_ident(), threads)
        self.assertTrue(all(lvl in ("error", "warn", "info", "debug") for lvl, _ in lines))
        self.assertTrue(all(isinstance(m, str) and m for _, m in lines))

    def test_a_logger_and_a_raising_callback(self):
        logger = logging.getLogger("fleetjit-test")
        with self.assertLogs(logger, level="INFO") as cm:
            with fleetjit.Runtime(log=logger, log_level="info", copy_impl="tma") as rt:
                rt.build(_env.unique(_env.SAXPY), name="via_logger.cu", target="sm_80")
        self.assertTrue(any("via_logger.cu" in r.getMessage() for r in cm.records))

        def boom(level, message):
            raise RuntimeError("callback failed")
        seen = []
        old = __import__("sys").unraisablehook
        __import__("sys").unraisablehook = lambda u: seen.append(u.exc_type)
        try:
            with fleetjit.Runtime(log=boom, log_level="info", copy_impl="tma") as rt:
                m = rt.build(_env.unique(_env.SAXPY), target="sm_80")  # keeps working
                self.assertEqual(m.info.target, "sm_80")
        finally:
            __import__("sys").unraisablehook = old
        self.assertIn(RuntimeError, seen)

    def test_bad_log_options(self):
        with self.assertRaises(errors.InvalidArgumentError):
            fleetjit.Runtime(log=print, log_level="loud")
        with self.assertRaises(errors.InvalidArgumentError):
            fleetjit.Runtime(log=42)


class ErrorsAndBadInputTest(unittest.TestCase):
    def setUp(self):
        self.rt = fleetjit.Runtime()

    def tearDown(self):
        self.rt.close()

    def test_each_code_has_its_class(self):
        for code, cls in errors._BY_CODE.items():
            e = fleetjit.FleetjitError(code, "m")
            self.assertIsInstance(e, cls)
            self.assertIsInstance(e, fleetjit.FleetjitError)
            self.assertEqual(e.code, code)
        self.assertIsInstance(fleetjit.FleetjitError("DEADLINE_EXCEEDED", "m"), TimeoutError)
        self.assertIs(type(fleetjit.FleetjitError("SOMETHING_NEW", "m")), fleetjit.FleetjitError)

    def test_library_statuses_raise_the_subclass(self):
        with self.assertRaises(errors.InvalidArgumentError):
            self.rt.build(_env.SAXPY, target="sm_12345")

    def test_embedded_nul_is_refused(self):
        src = _env.SAXPY + "\0 garbage that NVRTC would never see"
        for kwargs in ({}, {"name": "a\0b.cu"}, {"nvrtc_options": ["-DX=1\0"]}):
            with self.subTest(**{k: repr(v) for k, v in kwargs.items()}):
                with self.assertRaises(errors.InvalidArgumentError) as cm:
                    self.rt.build(src if not kwargs else _env.SAXPY, target="sm_90", **kwargs)
                self.assertIn("NUL", cm.exception.message)
        with self.assertRaises(errors.InvalidArgumentError):
            self.rt.build_async(src, target="sm_90")
        m = self.rt.build(_env.SAXPY, target="sm_90")
        with self.assertRaises(errors.InvalidArgumentError):
            m.kernel("saxpy\0")

    def test_option_ordinal_past_int32_is_refused(self):
        # ctypes wraps an int32_t field silently: 1 << 32 built for device 0.
        calls = {
            "build": lambda d: self.rt.build(_env.SAXPY, target="sm_90", device=d),
            "build_async": lambda d: self.rt.build_async(_env.SAXPY, target="sm_90", device=d),
            "link": lambda d: self.rt.link([fleetjit.LinkInput("source", _env.SAXPY)],
                                           target="sm_90", device=d),
            "tune": lambda d: fleetjit.tune(
                self.rt, _env.SAXPY, "saxpy", shapes=[128], args=[], device=d,
                outputs=[(0x1000, 64)]),
        }
        for what, call in calls.items():
            for device in (1 << 32, -(1 << 31) - 1, 1.0):
                with self.subTest(what=what, device=device):
                    with self.assertRaises(errors.InvalidArgumentError) as cm:
                        call(device)
                    self.assertIn("device ordinal", cm.exception.message)

    def test_call_ordinals_past_int32_are_refused(self):
        # The device arguments of the calls that pass them straight to the
        # library (an int32_t): ctypes wrapped 1 << 32 to device 0 and
        # raised TypeError for a float.
        m = self.rt.build(_env.SAXPY, target="sm_90")
        calls = {
            "kernel": (lambda d: m.kernel("saxpy", d), "device ordinal"),
            "device": (lambda d: self.rt.device(d), "device ordinal"),
            "alloc": (lambda d: self.rt.alloc(16, d), "device ordinal"),
            "create_stream": (lambda d: self.rt.create_stream(d), "device ordinal"),
            "wrap_stream": (lambda d: self.rt.wrap_stream(1, d), "device ordinal"),
            "preopen_devices": (lambda d: fleetjit.Runtime(preopen_devices=[0, d]).close(),
                                "preopen_devices[1]"),
        }
        for what, (call, named) in calls.items():
            for device in (1 << 32, -(1 << 31) - 1, 1.0):
                with self.subTest(what=what, device=device):
                    with self.assertRaises(errors.InvalidArgumentError) as cm:
                        call(device)
                    self.assertIn(named, cm.exception.message)

    def test_call_sizes_past_uint64_are_refused(self):
        # uint64_t arguments and fields: ctypes wrapped 1 << 64 to 0 and -1
        # to 2**64 - 1, and int() cut 2.5 to 2.
        calls = {
            "alloc size": lambda v: self.rt.alloc(v),
            "CUstream": lambda v: self.rt.wrap_stream(v),
            "cache_max_bytes": lambda v: fleetjit.Runtime(cache_max_bytes=v).close(),
        }
        for what, call in calls.items():
            for value in (1 << 64, -1, 2.5):
                if what == "alloc size" and value == -1:
                    continue  # test_negative_alloc_is_invalid_argument
                with self.subTest(what=what, value=value):
                    with self.assertRaises(errors.InvalidArgumentError) as cm:
                        call(value)
                    self.assertIn(what, cm.exception.message)
        # A launch or copy stream given as an integer goes through wrap_stream.
        with self.assertRaises(errors.InvalidArgumentError) as cm:
            self.rt.copy(None, None, stream=-1)
        self.assertIn("CUstream", cm.exception.message)

    def test_cuda_array_interface_device_past_int32_is_refused(self):
        # borrow builds the fj_tensor of a __cuda_array_interface__ object
        # itself: its device_id field wrapped 1 << 32 to device 0.
        class Cai:
            __cuda_array_interface__ = {"data": (0x1000, False), "shape": (4,),
                                        "typestr": "<f4", "version": 3}
        self.assertEqual(fleetjit.borrow(Cai(), device_id=3).device, (2, 3))
        for device in (1 << 32, -(1 << 31) - 1, 1.0):
            with self.subTest(device=device):
                with self.assertRaises(errors.InvalidArgumentError) as cm:
                    fleetjit.borrow(Cai(), device_id=device)
                self.assertIn("device_id", cm.exception.message)

    def test_float_box_extent_is_refused(self):
        # int() cut a box extent of 2.5 to 2 (the tile of the launch).
        for kw in ({"box": (8, 2.5)}, {"box_innermost_first": (2.5, 8)}):
            with self.subTest(**kw):
                with self.assertRaises(errors.InvalidArgumentError) as cm:
                    fleetjit.Tensor(object(), **kw)
                self.assertIn("box extent", cm.exception.message)

    def test_negative_alloc_is_invalid_argument(self):
        for n in (-1, -4096, -(2**63)):
            with self.assertRaises(errors.InvalidArgumentError) as cm:
                self.rt.alloc(n)
            self.assertEqual(cm.exception.code, "INVALID_ARGUMENT")

    def test_copy_of_host_arrays_is_refused_without_a_gpu(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("no numpy")
        a = np.random.rand(8, 8).astype(np.float32)
        b = np.zeros((8, 8), np.float32)
        with self.assertRaises(fleetjit.FleetjitError):
            self.rt.copy(b, a)
        with self.assertRaises(errors.InvalidArgumentError):
            self.rt.copy(b, a, oob="wrap")
        with self.assertRaises(errors.InvalidArgumentError):
            self.rt.prefetch(0x1000, mode="l3")

    def test_peer_query_without_a_gpu(self):
        if self.rt.device_count:
            self.skipTest("has a GPU: test_gpu covers peers")
        with self.assertRaises(fleetjit.FleetjitError):
            self.rt.peer_query(0, 1)


if __name__ == "__main__":
    unittest.main()
