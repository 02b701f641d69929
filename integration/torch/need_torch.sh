#!/bin/sh
# Prints the Python with torch (find_python.sh) for the entry point NAME,
# or says why there is none: under CI=true (.ci/run installs python3-torch)
# a FAIL line and exit 1; elsewhere a SKIP line and exit 3, which the
# caller turns into a clean skip:
#   PY=$("$here/need_torch.sh" NAME) || { [ $? -eq 3 ] && exit 0; exit 1; }
set -u
name=${1:?usage: need_torch.sh NAME}
here=$(cd "$(dirname "$0")" && pwd)
if ! why=$("$here/find_python.sh" 2>&1); then
	: # why: find_python.sh's line saying what it tried
elif "$why" -c "import torch, torch.distributed" >/dev/null 2>&1; then
	echo "$why"
	exit 0
else
	why="$why cannot import torch.distributed"
fi
if [ "${CI:-}" = true ]; then
	echo "FAIL $name: $why (CI=true: .ci/run installs python3-torch)" >&2
	exit 1
fi
echo "SKIP $name: $why (install torch: apt-get install python3-torch)" >&2
exit 3
