#!/usr/bin/env python3
"""check_versions.py REPO PREFIX: one version everywhere.

The release's version is the header's FJ_VERSION_MAJOR.FJ_VERSION_MINOR and
the patch of CMakeLists.txt (set(FJ_VERSION_PATCH N)), read here from those
two files. Every place a user reads a version must say it: the installed
library's file name, the CMake package (find_package(fleetjit MAJOR.MINOR)
accepts it, MAJOR.MINOR+1 does not), pkg-config, `fleetjit --version`, the
Rust crates (their manifests and lock file), the Python package (the
version a wheel built from it carries, and fleetjit.__version__) and the Go
module (fleetjit.ModuleVersion). Prints "versions OK: X.Y.Z" or each one
that differs.
"""

import os
import re
import subprocess
import sys
import tempfile


def read(path):
    with open(path) as f:
        return f.read()


def main():
    repo, prefix = (os.path.abspath(p) for p in sys.argv[1:3])
    header = read(os.path.join(repo, "include/fleetjit/fleetjit.h"))
    major = re.search(r"^#define FJ_VERSION_MAJOR (\d+)$", header, re.M).group(1)
    minor = re.search(r"^#define FJ_VERSION_MINOR (\d+)$", header, re.M).group(1)
    patch = re.search(r"set\(FJ_VERSION_PATCH (\d+)\)", read(os.path.join(repo, "CMakeLists.txt"))).group(1)
    want = "%s.%s.%s" % (major, minor, patch)
    seen = {}

    # The installed C library, CMake package, pkg-config and CLI.
    seen["lib/libfleetjit.so.X.Y.Z"] = ",".join(sorted(
        f[len("libfleetjit.so."):] for f in os.listdir(os.path.join(prefix, "lib"))
        if re.fullmatch(r"libfleetjit\.so\.\d+\.\d+\.\d+", f)))
    cfg = read(os.path.join(prefix, "lib/cmake/fleetjit/fleetjitConfigVersion.cmake"))
    seen["fleetjitConfigVersion.cmake"] = re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)', cfg).group(1)
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib/pkgconfig"))
    seen["pkg-config --modversion"] = subprocess.run(
        ["pkg-config", "--modversion", "fleetjit"], env=env, check=True, capture_output=True,
        text=True).stdout.strip()
    ok = subprocess.run(["pkg-config", "--atleast-version=%s.%s" % (major, minor), "fleetjit"],
                        env=env).returncode == 0
    seen["pkg-config --atleast-version=MAJOR.MINOR"] = want if ok else "refused"
    cli = subprocess.run([os.path.join(prefix, "bin/fleetjit"), "--version"], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"^fleetjit CLI (\S+)$", cli, re.M)
    seen["fleetjit --version (CLI)"] = m.group(1) if m else cli
    m = re.search(r"^libfleetjit (\d+\.\d+) ", cli, re.M)
    seen["fleetjit --version (library loaded)"] = (m.group(1) + "." + patch) if m else cli

    # find_package(fleetjit MAJOR.MINOR) takes it; a newer minor does not.
    with tempfile.TemporaryDirectory() as tmp:
        for ask, expect in (("%s.%s" % (major, minor), True),
                            ("%s.%d" % (major, int(minor) + 1), False)):
            src = os.path.join(tmp, "src-" + ask)
            os.makedirs(src)
            with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
                f.write("cmake_minimum_required(VERSION 3.16)\nproject(v NONE)\n"
                        "find_package(fleetjit %s REQUIRED)\n"
                        'message(STATUS "found fleetjit ${fleetjit_VERSION}")\n' % ask)
            r = subprocess.run(["cmake", "-S", src, "-B", os.path.join(tmp, "b-" + ask),
                                "-DCMAKE_PREFIX_PATH=" + prefix], capture_output=True, text=True)
            found = re.search(r"found fleetjit (\S+)", r.stdout)
            if expect:
                seen["find_package(fleetjit %s)" % ask] = found.group(1) if found else r.stderr[-300:]
            elif r.returncode == 0:
                seen["find_package(fleetjit %s) refused" % ask] = "accepted"

    # The bindings.
    rust = os.path.join(repo, "bindings/rust")
    seen["Cargo.toml [workspace.package]"] = re.search(
        r'^version = "([^"]+)"', read(os.path.join(rust, "Cargo.toml")), re.M).group(1)
    seen["fleetjit's dependency on fleetjit-sys"] = re.search(
        r'^fleetjit-sys = \{[^}]*version = "=?([^"]+)"',
        read(os.path.join(rust, "fleetjit/Cargo.toml")), re.M).group(1)
    for name, v in re.findall(r'^name = "(fleetjit(?:-sys)?)"\nversion = "([^"]+)"',
                              read(os.path.join(rust, "Cargo.lock")), re.M):
        seen["Cargo.lock " + name] = v
    sys.path.insert(0, os.path.join(repo, "bindings/python"))
    import fleetjit  # imports no library: that is loaded on first use
    seen["fleetjit.__version__ (Python)"] = fleetjit.__version__
    backend_dir = os.path.join(repo, "bindings/python/build_backend")
    if os.path.isdir(backend_dir):
        sys.path.insert(0, backend_dir)
        import fleetjit_build
        with tempfile.TemporaryDirectory() as tmp:
            info = fleetjit_build.prepare_metadata_for_build_wheel(tmp)
            meta = read(os.path.join(tmp, info, "METADATA"))
        seen["the wheel's METADATA"] = re.search(r"^Version: (\S+)$", meta, re.M).group(1)
    go = read(os.path.join(repo, "bindings/go/abi_gen.go"))
    seen["fleetjit.ModuleVersion (Go)"] = re.search(r'const ModuleVersion = "([^"]+)"', go).group(1)

    bad = ["%s says %s" % (k, v) for k, v in seen.items() if v != want]
    for k, v in seen.items():
        print("  %-45s %s" % (k, v))
    if bad:
        print("versions differ from %s (header %s.%s, patch %s):\n  %s"
              % (want, major, minor, patch, "\n  ".join(bad)))
        return 1
    print("versions OK: %s in %d places" % (want, len(seen)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
