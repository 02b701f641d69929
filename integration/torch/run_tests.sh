#!/bin/sh
# CI entry point of the PyTorch integration: builds libringtail.so and the
# ringtail launcher, then runs tests/test_torch.py with Debian's python3
# (torch 1.13, CPU). Skips cleanly when /usr/bin/python3 has no torch,
# except under CI (CI=true, which .ci/run sets and which installs torch):
# there a missing torch, or a launcher that does not build, fails.
# About 1-2 minutes on 2 cores.
set -eu
PY=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if ! "$PY" -c "import torch, torch.distributed" >/dev/null 2>&1; then
	if [ "${CI:-}" = true ]; then
		echo "FAIL integration/torch: $PY cannot import torch (CI=true: .ci/run installs python3-torch)" >&2
		exit 1
	fi
	echo "SKIP integration/torch: $PY cannot import torch (install it: apt-get install python3-torch)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
"$here/build_lib.sh"
if (cd "$root" && go build -o "$tmp/ringtail" ./cmd/ringtail); then
	RINGTAIL_BIN="$tmp/ringtail"
	export RINGTAIL_BIN
elif [ "${CI:-}" = true ]; then
	echo "FAIL integration/torch: cmd/ringtail did not build (the ringtail run test needs it)" >&2
	exit 1
else
	echo "NOTE: cmd/ringtail did not build; the ringtail run test will be skipped"
fi
export OMP_NUM_THREADS=1
cd "$here/tests"
timeout 900 "$PY" -m unittest -v test_torch
