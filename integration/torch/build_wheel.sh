#!/bin/sh
# Builds the ringtail-torch wheel offline: a fresh libringtail.so (needs
# Go), then `pip wheel` with a Python's setuptools and wheel ($PYTHON, or
# the first python3 that has them: find_python.sh --build) (no build
# isolation, no index: nothing is downloaded). The wheel is tagged
# py3-none-<platform> and carries libringtail.so; install it with
#   pip install --no-deps dist/ringtail_torch-*.whl
# (see docs/pytorch-install.md for venv, --user and conda). Usage:
#   integration/torch/build_wheel.sh [OUTDIR]   (default integration/torch/dist)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PY=$("$here/find_python.sh" --build) # $PYTHON, else a python3 with pip, setuptools and wheel
out=${1:-$here/dist}
"$here/build_lib.sh"
rm -rf "$here/build" "$here"/*.egg-info
mkdir -p "$out"
"$PY" -m pip wheel --no-build-isolation --no-deps --no-index --wheel-dir "$out" "$here"
rm -rf "$here/build" "$here"/*.egg-info
ls "$out"/ringtail_torch-*.whl
