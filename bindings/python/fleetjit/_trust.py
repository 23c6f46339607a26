"""Owner and mode checks for the files the binding turns into code.

What the binding compiles and then loads (the JAX FFI handler) lives in a
private folder: owned by this process's effective uid, writable by no one
else, not a symbolic link. The folder is opened once (O_NOFOLLOW) and its
descriptor checked with fstat; files inside are opened relative to that
descriptor (O_NOFOLLOW), checked the same way, and loaded through
/proc/self/fd, so what runs is the file that was checked, whatever happens
to the path meanwhile. The checks are those of the library's disk cache
(base/files.cc, OwnershipProblem).
"""

import ctypes
import errno
import os
import stat

from .errors import FleetjitError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC

# Descriptors of the libraries loaded through /proc/self/fd/N, held open for
# the process's life: the dynamic loader knows a library by that name, and
# a later dlopen of a reused /proc/self/fd/N would get the old library back.
_held = []


def ownership_problem(st, allow_root=False):
    """Why a stat result is not safe to load code from, or "" when it is:
    owned by another uid than the effective one (root too, with
    allow_root), or writable by its group or by everyone."""
    euid = os.geteuid()
    if st.st_uid != euid and not (allow_root and st.st_uid == 0):
        return f"owned by uid {st.st_uid}, not {euid}"
    mode = stat.S_IMODE(st.st_mode)
    if mode & stat.S_IWOTH:
        return f"world-writable (mode {mode:04o})"
    if mode & stat.S_IWGRP:
        return f"group-writable (mode {mode:04o})"
    return ""


def _refused(what, path, problem, hint=""):
    return FleetjitError("FAILED_PRECONDITION",
                         f"refusing {what} {path}: {problem}{hint}")


def open_private_dir(path, what="the folder", hint=""):
    """A descriptor of the folder `path`, created 0700 if missing (its
    parents as the umask says), after checking that it is a directory and
    not a symbolic link, owned by the effective uid and writable by no one
    else. A folder that fails is a FAILED_PRECONDITION naming it and why
    (`hint` is appended), never used or changed."""
    path = os.fspath(path)
    created = False
    for _ in range(2):
        try:
            fd = os.open(path, _DIR_FLAGS)
        except FileNotFoundError:
            if created:
                raise
            parent = os.path.dirname(os.path.abspath(path))
            os.makedirs(parent, exist_ok=True)
            try:
                os.mkdir(path, 0o700)
                created = True
            except FileExistsError:  # another process made it: check theirs
                created = True
            continue
        except OSError as e:
            if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            try:  # the folder itself, or a path that cannot lead to one?
                os.lstat(path)
            except OSError:
                raise e from None
            raise _refused(what, path, "a symbolic link or not a directory",
                           hint) from None
        try:
            st = os.fstat(fd)
            problem = ownership_problem(st)
        except BaseException:
            os.close(fd)
            raise
        if problem:
            os.close(fd)
            raise _refused(what, path, problem, hint)
        return fd
    raise FileNotFoundError(errno.ENOENT, "cannot create", path)


def open_private_file(dir_fd, name):
    """(descriptor, "") of the regular file `name` in the checked folder
    `dir_fd`, opened without following a symbolic link and owned by the
    effective uid, writable by no one else; (None, "") when there is none;
    (None, why) when there is one that fails a check."""
    try:
        fd = os.open(name, _FILE_FLAGS | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        return None, ""
    except OSError as e:
        if e.errno == errno.ELOOP:
            return None, "a symbolic link"
        return None, os.strerror(e.errno)
    try:
        st = os.fstat(fd)
        problem = "" if stat.S_ISREG(st.st_mode) else "not a regular file"
        problem = problem or ownership_problem(st)
    except BaseException:
        os.close(fd)
        raise
    if problem:
        os.close(fd)
        return None, problem
    return fd, ""


def open_checked_file(path, allow_root=True):
    """A descriptor of `path` (symbolic links followed: the caller named
    it) after checking that the file it opened is a regular file owned by
    the effective uid (or root) and writable by no one else; a
    FAILED_PRECONDITION naming it otherwise."""
    path = os.fspath(path)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        problem = "" if stat.S_ISREG(st.st_mode) else "not a regular file"
        problem = problem or ownership_problem(st, allow_root=allow_root)
    except BaseException:
        os.close(fd)
        raise
    if problem:
        os.close(fd)
        raise _refused("the library", path, problem)
    return fd


def load_fd(fd):
    """ctypes.CDLL of the open file `fd` (through /proc/self/fd): the file
    that was checked is the one loaded. The descriptor stays open."""
    proc = f"/proc/self/fd/{fd}"
    if not os.path.exists(proc):
        os.close(fd)
        raise FleetjitError("UNAVAILABLE", "no /proc/self/fd: cannot load a checked "
                            "library by its descriptor")
    try:
        lib = ctypes.CDLL(proc)
    except OSError:
        os.close(fd)
        raise
    _held.append(fd)
    return lib


def world_writable(path):
    """Why the file `path` names is one any user can replace, or "": the
    file (links followed) is world-writable, or the folder of the name or
    of the file it leads to is world-writable without the sticky bit. For
    paths named by trusted variables (FLEETJIT_LIBRARY, FLEETJIT_PYTHON_EXT),
    which are otherwise loaded as given."""
    path = os.path.abspath(os.fspath(path))
    try:
        real = os.path.realpath(path)
        mode = stat.S_IMODE(os.stat(real).st_mode)
    except OSError:
        return ""  # not there: the loader's error says so
    if mode & stat.S_IWOTH:
        return f"{real} is world-writable (mode {mode:04o})"
    for folder in dict.fromkeys((os.path.dirname(path), os.path.dirname(real))):
        try:
            fmode = stat.S_IMODE(os.stat(folder).st_mode)
        except OSError:
            continue
        if fmode & stat.S_IWOTH and not fmode & stat.S_ISVTX:
            return (f"its folder {folder} is world-writable without the sticky bit "
                    f"(mode {fmode:04o})")
    return ""
