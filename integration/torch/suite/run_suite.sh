#!/bin/sh
# make torch-suite: torch's own distributed suite against ringtail (issue 39),
# the runs in $TORCH_SUITE (MODE:WORLD, MODE standin or plugin; see
# docs/pytorch-tests.md for what CI runs and why), each compared with the tests
# Gloo passes at that world size (baseline/gloo-w<WORLD>.txt), failing on
# any test Gloo passes that ringtail fails, except the listed artefacts.
# Skips cleanly when no Python has torch, except under CI=true (.ci/run
# installs python3-torch), where that fails. Logs and results go to
# $TORCH_SUITE_OUT (default: a temporary directory, kept when a run fails);
# $TORCH_SUITE_ARGS are more run.py arguments (e.g. -k test_get_backend).
# The default, standin:3 standin:4 plugin:3, is what fits CI's budget after
# make test: worlds 3 and 4 as Gloo, world 3 as a plugin, about 30 minutes
# on 2 cores (docs/pytorch-tests.md has plugin:4 too, as last run by hand).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
torch_dir=$(cd "$here/.." && pwd)
runs=${TORCH_SUITE:-standin:3 standin:4 plugin:3}
if ! PY=$("$torch_dir/find_python.sh" 2>&1) || ! "$PY" -c "import torch, torch.distributed" >/dev/null 2>&1; then
	if [ "${CI:-}" = true ]; then
		echo "FAIL torch-suite: ${PY:-no python with torch} (CI=true: .ci/run installs python3-torch)" >&2
		exit 1
	fi
	echo "SKIP torch-suite: ${PY:-no python} (install torch: apt-get install python3-torch)"
	exit 0
fi
if ! "$PY" -c "import torch; assert torch.__version__.startswith('1.13')" 2>/dev/null; then
	# The baselines and the driver's work-arounds are torch 1.13's.
	if [ "${CI:-}" = true ]; then
		echo "FAIL torch-suite: $PY has torch $("$PY" -c 'import torch; print(torch.__version__)'), the suite's baselines are torch 1.13's" >&2
		exit 1
	fi
	echo "SKIP torch-suite: $PY's torch is not 1.13 (the baselines are torch 1.13's)"
	exit 0
fi
out=${TORCH_SUITE_OUT:-$(mktemp -d)}
mkdir -p "$out"
"$torch_dir/build_lib.sh"
(cd "$here" && "$PY" -m unittest test_compare) # compare.py's verdicts on made-up runs
echo "torch-suite: $runs with $PY (logs in $out)"
results=""
for r in $runs; do
	mode=${r%%:*}
	world=${r#*:}
	start=$(date +%s)
	# Gloo's baseline tests only (--only-baseline). The bound is generous:
	# docs/pytorch-tests.md has each run's duration (plugin:3 took 470 s).
	rc=0
	# shellcheck disable=SC2086 # TORCH_SUITE_ARGS: more run.py arguments (-k NAME)
	timeout "${TORCH_SUITE_TIMEOUT:-2400}" "$PY" "$here/run.py" --mode "$mode" --world "$world" --only-baseline ${TORCH_SUITE_ARGS:-} \
		--out "$out/$mode-w$world.json" >"$out/$mode-w$world.log" 2>&1 || rc=$?
	echo "torch-suite: $mode w$world: run.py exit $rc after $(($(date +%s) - start)) s"
	results="$results $out/$mode-w$world.json"
done
if "$PY" "$here/compare.py" -v $results; then
	[ -n "${TORCH_SUITE_OUT:-}" ] || rm -rf "$out"
	echo "torch-suite: passed"
else
	echo "torch-suite: FAILED (logs and results in $out)" >&2
	exit 1
fi
