"""Builds libringtail.so with Go when it is missing (set
RINGTAIL_SKIP_GO_BUILD=1 to skip; the package then loads $RINGTAIL_LIB).
Everything else is in pyproject.toml."""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, "ringtail_torch", "libringtail.so")
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


class BuildWithLib(build_py):
    def run(self):
        if not os.path.exists(LIB) and not os.environ.get("RINGTAIL_SKIP_GO_BUILD"):
            go = shutil.which("go")
            if go and os.path.isdir(os.path.join(ROOT, "integration", "capi")):
                subprocess.check_call([go, "build", "-buildmode=c-shared", "-o", LIB, "./integration/capi"], cwd=ROOT)
                header = LIB[:-3] + ".h"
                if os.path.exists(header):
                    os.remove(header)
            else:
                print("ringtail-torch: no Go toolchain or source tree: installing without libringtail.so "
                      "(set RINGTAIL_LIB at run time)")
        super().run()


class BinaryDistribution(Distribution):
    """The wheel carries a native library: tag it for this platform."""

    def has_ext_modules(self):
        return os.path.exists(LIB)


setup(cmdclass={"build_py": BuildWithLib}, distclass=BinaryDistribution)
