#!/bin/sh
# Builds the ringtail-torch wheel offline: a fresh libringtail.so (needs
# Go), then `pip wheel` with the system's setuptools and wheel (no build
# isolation, no index: nothing is downloaded). The wheel is tagged
# py3-none-<platform> and carries libringtail.so; install it with
#   pip install --no-deps dist/ringtail_torch-*.whl
# (see docs/pytorch.md for venv, --user and conda). Usage:
#   integration/torch/build_wheel.sh [OUTDIR]   (default integration/torch/dist)
set -eu
PY=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/dist}
"$here/build_lib.sh"
rm -rf "$here/build" "$here"/*.egg-info
mkdir -p "$out"
"$PY" -m pip wheel --no-build-isolation --no-deps --no-index --wheel-dir "$out" "$here"
rm -rf "$here/build" "$here"/*.egg-info
ls "$out"/ringtail_torch-*.whl
