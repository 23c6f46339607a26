"""The PEP 517 build backend of the fleetjit package: the standard library only.

pip runs it from this folder (pyproject.toml's backend-path), so neither
setuptools nor wheel is needed: `pip install bindings/python` works offline
in a fresh venv, with or without --no-build-isolation. The wheel holds every
file under fleetjit/ (sources, and what scripts/dev/build-wheel stages
there: the library, the CLI, the header, the compiled launch path).

The version is the library's, from fleetjit/_abi.py (scripts/dev/gen-bindings
writes it from the header). FLEETJIT_WHEEL_PLAT (e.g. manylinux_2_36_x86_64,
set by scripts/dev/build-wheel) makes a platform wheel tagged
cp38-abi3-<plat>; without it the wheel is pure Python, py3-none-any.
"""

import base64
import hashlib
import io
import os
import re
import stat
import tarfile
import zipfile

NAME = "fleetjit"
SUMMARY = ("CUDA kernels built at run time for the GPU they land on "
           "(ctypes binding of libfleetjit.so.1)")
REQUIRES_PYTHON = ">=3.8"
# The CLI a wheel carries (fleetjit/bin/fleetjit); from a source install it
# says that the CLI is not inside.
ENTRY_POINTS = "[console_scripts]\nfleetjit = fleetjit._cli:main\n"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# 1980-01-01: zip's earliest date, so a wheel's bytes depend on its content.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def version():
    with open(os.path.join(ROOT, NAME, "_abi.py")) as f:
        return re.search(r'^VERSION = "([^"]+)"$', f.read(), re.M).group(1)


def _tag():
    plat = os.environ.get("FLEETJIT_WHEEL_PLAT")
    return ("cp38", "abi3", plat) if plat else ("py3", "none", "any")


def _dist_info():
    return "%s-%s.dist-info" % (NAME, version())


def _metadata():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\n"
            "Requires-Python: %s\nDescription-Content-Type: text/markdown\n\n%s"
            % (NAME, version(), SUMMARY, REQUIRES_PYTHON, readme))


def _wheel_file():
    return ("Wheel-Version: 1.0\nGenerator: fleetjit_build\nRoot-Is-Purelib: %s\nTag: %s\n"
            % ("false" if os.environ.get("FLEETJIT_WHEEL_PLAT") else "true", "-".join(_tag())))


def _package_files():
    """(path in the wheel, path on disk) of every file under fleetjit/."""
    out = []
    for d, dirs, files in os.walk(os.path.join(ROOT, NAME)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if not f.endswith((".pyc", ".pyo")):
                full = os.path.join(d, f)
                out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    return out


def _zip_write(z, arcname, data, mode=0o644):
    info = zipfile.ZipInfo(arcname, ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (stat.S_IFREG | mode) << 16
    z.writestr(info, data)


# --------------------------------------------------------------- PEP 517

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, _dist_info())
    os.makedirs(d, exist_ok=True)
    for name, text in (("METADATA", _metadata()), ("WHEEL", _wheel_file()),
                       ("entry_points.txt", ENTRY_POINTS), ("top_level.txt", NAME + "\n")):
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            f.write(text)
    return _dist_info()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = "%s-%s-%s.whl" % (NAME, version(), "-".join(_tag()))
    record = []

    def add(z, arcname, data, mode=0o644):
        _zip_write(z, arcname, data, mode)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append("%s,sha256=%s,%d" % (arcname, digest.decode(), len(data)))

    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for arcname, path in _package_files():
            with open(path, "rb") as f:  # a link is followed: a wheel holds files
                data = f.read()
            add(z, arcname, data, 0o755 if os.access(path, os.X_OK) else 0o644)
        info = _dist_info()
        for fname, text in (("METADATA", _metadata()), ("WHEEL", _wheel_file()),
                            ("entry_points.txt", ENTRY_POINTS), ("top_level.txt", NAME + "\n")):
            add(z, "%s/%s" % (info, fname), text.encode("utf-8"))
        record.append("%s/RECORD,," % info)
        _zip_write(z, "%s/RECORD" % info, ("\n".join(record) + "\n").encode("utf-8"))
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, version())
    name = base + ".tar.gz"
    files = [(a, p) for a, p in _package_files() if not a.endswith(".so") and "/lib/" not in a
             and "/bin/" not in a]
    for extra in ("pyproject.toml", "README.md", "build_backend/fleetjit_build.py"):
        files.append((extra, os.path.join(ROOT, extra)))
    pkg_info = _metadata().encode("utf-8")
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for arcname, path in files:
            t.add(path, "%s/%s" % (base, arcname), recursive=False)
        info = tarfile.TarInfo("%s/PKG-INFO" % base)
        info.size = len(pkg_info)
        t.addfile(info, io.BytesIO(pkg_info))
    return name
