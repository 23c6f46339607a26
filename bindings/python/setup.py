"""setuptools hook of pyproject.toml: a plain install stays pure Python.

scripts/dev/build-wheel stages the package with the library, its private
libraries, the CLI and the compiled launch path inside (fleetjit/lib,
fleetjit/bin, fleetjit/_fastlaunch.abi3.so) and sets FLEETJIT_WHEEL_PLAT
(e.g. manylinux_2_36_x86_64, the glibc floor `fleetjit info` states): the
wheel is then a platform wheel, tagged cp38-abi3-<plat>.
"""
import os

from setuptools import setup
from setuptools.dist import Distribution

plat = os.environ.get("FLEETJIT_WHEEL_PLAT")


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # binaries inside: a platform wheel
        return bool(plat)


options = {}
if plat:
    options["bdist_wheel"] = {"plat_name": plat, "py_limited_api": "cp38"}

setup(distclass=BinaryDistribution, options=options)
