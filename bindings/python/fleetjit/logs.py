"""The library's log lines, delivered to Python (fj_runtime_options.log_fn).

The library may log from any of its threads (builds, the cache's writer):
ctypes takes the GIL for each call, and the callback never lets an
exception escape into C (ctypes hands it to sys.unraisablehook). Callbacks are kept
alive for the life of the process, so a line logged while a runtime is
being destroyed never reaches a freed trampoline.
"""

import logging
import threading

from . import _ffi
from .errors import FleetjitError

LEVEL_NAMES = {1: "error", 2: "warn", 3: "info", 4: "debug"}
_TO_LOGGING = {1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG}
_alive = []  # every trampoline handed to the library
_alive_lock = threading.Lock()


def callback(log, level="warn"):
    """(LOG_FN trampoline, fj_log_level) for `log`: a logging.Logger, or a
    callable(level_name, message) - level_name "error", "warn", "info" or
    "debug"."""
    if level not in _ffi.LOG_LEVELS or level == "off":
        raise FleetjitError("INVALID_ARGUMENT",
                            f"log_level must be error, warn, info or debug, not {level!r}")
    if isinstance(log, logging.Logger):
        logger = log

        def deliver(lvl, text):
            logger.log(_TO_LOGGING.get(lvl, logging.INFO), "%s", text)
    elif callable(log):
        def deliver(lvl, text):
            log(LEVEL_NAMES.get(lvl, str(lvl)), text)
    else:
        raise FleetjitError("INVALID_ARGUMENT", "log must be a callable or a logging.Logger")

    def trampoline(user, lvl, message):
        # An exception here does not reach C: ctypes reports it through
        # sys.unraisablehook and returns to the library.
        import ctypes
        text = ctypes.string_at(message.data, message.size).decode(
            "utf-8", errors="replace") if message.data else ""
        deliver(lvl, text)

    fn = _ffi.LOG_FN(trampoline)
    with _alive_lock:
        _alive.append(fn)
    return fn, _ffi.LOG_LEVELS[level]
