"""Builds libringtail.so with Go when it is missing (set
RINGTAIL_SKIP_GO_BUILD=1 to skip; the package then loads $RINGTAIL_LIB),
puts ringtail_torch_autoload.pth at the root of site-packages (Python runs
it at start-up: the "ringtail" backend registers itself once torch is
imported, see _ringtail_torch_autoload.py), and tags the wheel for the platforms the library runs on when it carries
it: py3-none-manylinux_2_N_<arch>, N the newest glibc symbol version the
library needs (Go's c-shared libraries link only libc), so pip refuses the
wheel on an older system instead of the import failing there; any Python 3
will do, the library is loaded through ctypes. Without glibc versions in
the library the tag is the build platform's (linux_x86_64). Everything
else is in pyproject.toml; build_wheel.sh builds the wheel offline."""

import os
import re
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # building an sdist or installing without the wheel package
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _ringtail_env import env_bool  # noqa: E402  (beside this file; imports nothing)
LIB = os.path.join(HERE, "ringtail_torch", "libringtail.so")
PTH = "ringtail_torch_autoload.pth"
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


class BuildWithLib(build_py):
    def run(self):
        if not os.path.exists(LIB) and not env_bool("RINGTAIL_SKIP_GO_BUILD"):
            go = shutil.which("go")
            if go and os.path.isdir(os.path.join(ROOT, "integration", "capi")):
                # go-nvml's cgo declares NVIDIA's deprecated calls: keep gcc
                # quiet about them (Go's default CGO_CFLAGS is "-O2 -g").
                env = dict(os.environ)
                env.setdefault("CGO_CFLAGS", "-O2 -g -Wno-deprecated-declarations")
                subprocess.check_call([go, "build", "-buildmode=c-shared", "-o", LIB, "./integration/capi"], cwd=ROOT,
                                      env=env)
                header = LIB[:-3] + ".h"
                if os.path.exists(header):
                    os.remove(header)
            else:
                print("ringtail-torch: no Go toolchain or source tree: installing without libringtail.so "
                      "(set RINGTAIL_LIB at run time)")
        super().run()
        # The .pth goes to the root of site-packages, beside the packages.
        self.copy_file(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH), preserve_mode=0)

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH)]


def manylinux_tag(plat):
    """manylinux_2_N_<arch> for a linux_<arch> platform, N the newest
    GLIBC_2.N version the library's dynamic symbols name; plat unchanged
    when there is none."""
    if not plat.startswith("linux_"):
        return plat
    with open(LIB, "rb") as f:
        versions = [int(m) for m in re.findall(rb"GLIBC_2\.(\d+)", f.read())]
    if not versions:
        return plat
    return "manylinux_2_%d_%s" % (max(versions), plat[len("linux_"):])


class BinaryDistribution(Distribution):
    """The wheel carries a native library: tag it for this platform."""

    def has_ext_modules(self):
        return os.path.exists(LIB)


cmdclass = {"build_py": BuildWithLib}
if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        """py3-none-<platform> when the wheel carries libringtail.so."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = not os.path.exists(LIB)

        def get_tag(self):
            python, abi, plat = super().get_tag()
            if not self.root_is_pure:
                python, abi, plat = "py3", "none", manylinux_tag(plat)
            return python, abi, plat

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
