"""Builds that do not block, modules built elsewhere, CUDA's header folders
and the cache's background work (fj_module_build_async, fj_build_*,
fj_module_load, fj_runtime_include_dir, fj_cache_flush).

    fut = rt.build_async(SOURCE, name="k.cu", target="sm_90")
    fut.done()                      # never blocks
    module = fut.result(timeout=30) # TimeoutError if still building
    module = await fut              # in an asyncio server
"""

import asyncio
import concurrent.futures
import ctypes
import threading

from . import _ffi
from . import _fast
from .errors import FleetjitError, _call, _destroyer, _no_nul, _seconds, lib

UINT32_MAX = 0xFFFFFFFF


def _need(name):
    fj = lib()
    if not hasattr(fj, name):
        raise FleetjitError("UNAVAILABLE", f"this libfleetjit.so.1 ({_ffi.library_path()}) "
                            f"has no {name} (fleetjit 1.1 or later has)")
    return getattr(fj, name)


def _timeout_ms(timeout):
    """Milliseconds of a timeout in seconds: None or inf wait forever
    (UINT32_MAX); NaN, a negative number or a non-number are refused."""
    t = _seconds(timeout)
    return UINT32_MAX if t == float("inf") else min(int(t * 1000), UINT32_MAX - 1)


class BuildFuture:
    """An asynchronous build: .done(), .result(timeout), .exception(timeout),
    `await`, .cancel(); a context manager (close() gives the build up)."""

    def __init__(self, runtime, handle, source):
        self._runtime = runtime
        # Its waits and polls in flight: close() destroys the build once they return.
        self._gate = _fast.new_gate(runtime._gate, handle)
        self._handle = handle
        self._source = source
        self._lock = threading.Lock()
        self._module = None
        self._error = None
        self._taken = False

    def _live(self):
        handle = self._handle  # one read, as runtime._Handle._live
        if not handle or self._runtime.closed:
            raise FleetjitError("INVALID_ARGUMENT", "this build is closed")
        return handle

    def done(self) -> bool:
        """Whether the build has finished (successfully or not). Never blocks."""
        if self._taken:
            return True
        out = ctypes.c_int32()
        _call(self, _need("fj_build_poll"), ctypes.byref(out))
        return bool(out.value)

    def wait(self, timeout=None) -> bool:
        """Waits up to `timeout` seconds (None: forever); True once finished."""
        if self._taken:
            return True
        out = ctypes.c_int32()
        _call(self, _need("fj_build_wait"), _timeout_ms(timeout), ctypes.byref(out))
        return bool(out.value)

    def result(self, timeout=None):
        """The built Module; raises the build's FleetjitError (BuildError with
        .build_log...), or concurrent.futures.TimeoutError after `timeout` s."""
        if not self.wait(timeout):
            raise concurrent.futures.TimeoutError(f"the build is still running after {timeout} s")
        with self._lock:
            if not self._taken:
                from .runtime import Module
                out = ctypes.c_void_p()
                try:
                    _call(self, _need("fj_build_take"), ctypes.byref(out))
                    self._module = Module(out.value, self._runtime)
                    self._module._source = self._source
                except FleetjitError as e:
                    self._error = e
                self._taken = True
        if self._error is not None:
            raise self._error
        return self._module

    def exception(self, timeout=None):
        """The build's FleetjitError, or None if it succeeded."""
        try:
            self.result(timeout)
        except FleetjitError as e:
            return e
        return None

    def cancel(self) -> bool:
        """Gives the build up (fj_build_destroy): one not started is skipped,
        one running finishes in the background. True unless already taken."""
        taken = self._taken
        self.close()
        return not taken

    def __await__(self):
        # fj_build_wait releases the GIL; a worker thread waits, the loop runs.
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(None, self.result).__await__()

    def close(self):
        """Refuses new calls at once; gives the build up (fj_build_destroy)
        once no wait, poll or take on another thread is in flight (else the
        closed runtime frees it)."""
        handle, self._handle = self._handle, None
        if handle:
            self._gate.close(_destroyer(self._runtime._gate, lib().fj_build_destroy, handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def start(runtime, source, options):
    o, keep = runtime._build_options(
        source, options.pop("name", ""), options.pop("target", None),
        options.pop("device", 0), options.pop("copy_impl", None),
        options.pop("nvrtc_options", ()), options.pop("name_expressions", ()),
        options.pop("output", None), options.pop("cache", True),
        options.pop("include_dirs", ()))
    if options:
        raise TypeError(f"build_async() got unexpected options {sorted(options)}")
    out = ctypes.c_void_p()
    _call(runtime, _need("fj_module_build_async"), ctypes.byref(o), ctypes.byref(out))
    del keep  # the library copied every string
    return BuildFuture(runtime, out.value, source)


def load(runtime, image, kind, name, target):
    from .runtime import Module
    if kind not in _ffi.IMAGE_KINDS:
        raise FleetjitError("INVALID_ARGUMENT",
                            f"kind must be one of {sorted(_ffi.IMAGE_KINDS)}, not {kind!r}")
    _no_nul(name, "name")
    data = _ffi.bytes_arg(image, "image")
    buf = ctypes.create_string_buffer(data, len(data))
    o = _ffi.new(_ffi.fj_module_load_options)
    o.image, o.image_size, o.kind = ctypes.addressof(buf), len(data), _ffi.IMAGE_KINDS[kind]
    keep = [_ffi.StrArg(name, "name"), _ffi.StrArg(target, "target")]
    o.name, o.target = keep[0].value, keep[1].value
    out = ctypes.c_void_p()
    _call(runtime, _need("fj_module_load"), ctypes.byref(o), ctypes.byref(out))
    return Module(out.value, runtime)


def include_dirs(runtime):
    fn = _need("fj_runtime_include_dir")
    count = ctypes.c_size_t()
    _call(runtime, fn, 0, ctypes.byref(count), None, None)
    dirs = []
    for i in range(count.value):
        path, origin = ctypes.c_char_p(), ctypes.c_char_p()
        _call(runtime, fn, i, None, ctypes.byref(path), ctypes.byref(origin))
        dirs.append((path.value.decode(errors="replace"), origin.value.decode(errors="replace")))
    return dirs


def flush(runtime, timeout):
    _call(runtime, _need("fj_cache_flush"), _timeout_ms(timeout))
