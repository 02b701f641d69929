#!/bin/sh
# Prints the Python 3 to use with ringtail-torch: $PYTHON if set, else the
# first of `python3` on PATH, /usr/bin/python3 and /usr/local/bin/python3
# that can import torch (found without importing it). With --build, the
# first of those ($PYTHON included) that has pip, setuptools and wheel
# (building the wheel needs those, not torch; the wheel then installs into
# any Python 3). Exits 1, saying what it tried, when none will do.
#   integration/torch/find_python.sh [--build]
set -eu
want=torch
[ "${1:-}" = "--build" ] && want="pip setuptools wheel"
check() {
	"$1" -c "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None for m in '$want'.split()))" >/dev/null 2>&1
}
if [ -n "${PYTHON:-}" ]; then
	if check "$PYTHON"; then
		echo "$PYTHON"
		exit 0
	fi
	if [ "$want" = torch ]; then
		echo "find_python.sh: \$PYTHON=$PYTHON cannot import torch" >&2
		exit 1
	fi
fi
tried=""
for py in "$(command -v python3 || true)" /usr/bin/python3 /usr/local/bin/python3; do
	[ -n "$py" ] && [ -x "$py" ] || continue
	tried="$tried $py"
	if check "$py"; then
		echo "$py"
		exit 0
	fi
done
echo "find_python.sh: no Python 3 here can import $want (tried:${PYTHON:+ $PYTHON}$tried); Debian: apt-get install python3-torch python3-wheel" >&2
exit 1
