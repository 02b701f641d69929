#!/usr/bin/env bash
# scripts/bench-tta.sh — time to synchronous SGD's accuracy (issue 28's
# table): the main job across hosts, 4 ranks, one per network namespace of
# the test bed (docs/testbed.md), ringtail-train's MLP with two hidden
# layers of 1024 (4.4 MB of gradient), 100 ms of padded compute per step,
# SGD with momentum, held-out accuracy every --eval-every steps.
#
#   scripts/bench-tta.sh [--seeds 1,2] [--epochs 6] [--eval-every 6] [--rate 1gbit]
#        [--cases none,compute3x,link5,link10,lossy,stall] [--modes bsp,shares] [--unit 1] [--out DIR]
#
# For each seed it first runs BSP with every link at --rate and no
# straggler: its held-out accuracy after epoch 4 is the target, and the
# training time at which its curve first reaches it the no-straggler time.
# Every case × mode then runs with the same seed; its time to the target
# is the training time (rank 0's, evaluations taken out) at the first
# evaluation at or above it. One line per run: the time to the target and
# its ratio to the no-straggler time, the final accuracy and its
# difference to BSP's, the mean step and the steps by mode. Cases:
#   none       every link at --rate
#   compute3x  rank 3 computes 3x slower (--inject slow=3:3x)
#   link5      rank 3's link at --rate/5
#   link10     rank 3's link at --rate/10
#   lossy      rank 3's link drops 2% of its packets each way
#   stall      rank 3's link holds its bytes for 3 s, 12 s into the run
#   powerlaw4  FlexRR's power law, alpha 4, per rank per step (seed=7;powerlaw=4)
#   flexrr     FlexRR's slow workers at its own p (seed=7;flexrr-slow=0.01:400%)
#   persistent rank 3 late by 100 ms every step, whatever its share
#   transient  AntDT's transient stragglers (seed=7;transient=0.5)
# Modes: bsp, a straggler policy (shares, adaptive, star, exact), or
# POLICY+reassign: that policy with in-step work reassignment in units of
# --unit samples (ringtail-train --reassign-unit).
# Each run's --json report is kept in DIR (default: a new temporary
# directory). Needs root, iproute2 and nftables, jq, and builds bin/ with
# make.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
seeds=1,2 epochs=6 every=6 rate=1gbit cases=none,compute3x,link5,link10,lossy,stall modes=bsp,shares unit=1 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --eval-every) every=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --unit) unit=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "bench-tta: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$epochs" -ge 4 ] || { echo "bench-tta: --epochs must be ≥ 4 (the target is BSP's epoch-4 accuracy)" >&2; exit 2; }
[ -n "$out" ] || out="$(mktemp -d "${TMPDIR:-/tmp}/ringtail-tta.XXXXXX")"
mkdir -p "$out"
make -s build >/dev/null

bits() { # a rate like 1gbit / 200mbit in bit/s
  local r=${1%bit} m=1
  case "$r" in *g) m=1000000000; r=${r%g} ;; *m) m=1000000; r=${r%m} ;; *k) m=1000; r=${r%k} ;; esac
  echo $((r * m))
}
fifth=$(( $(bits "$rate") / 5 ))
tenth=$(( $(bits "$rate") / 10 ))

# run CASE MODE SEED: one job on a fresh bed; its rank-0 report in $out.
run() {
  local c=$1 m=$2 seed=$3 links="link=0,1,2,3:rate=$rate" inj=""
  case "$c" in
    none) ;;
    compute3x) inj="slow=3:3x" ;;
    link5) links="link=0,1,2:rate=$rate;link=3:rate=$fifth" ;;
    link10) links="link=0,1,2:rate=$rate;link=3:rate=$tenth" ;;
    lossy) links="link=0,1,2:rate=$rate;link=3:rate=$rate:loss=2%" ;;
    stall) links="link=0,1,2:rate=$rate;link=3:rate=$rate:stall=3s@12s" ;;
    powerlaw4) inj="seed=7;powerlaw=4" ;;
    flexrr) inj="seed=7;flexrr-slow=0.01:400%" ;;
    persistent) inj="persistent=3:+100ms" ;;
    transient) inj="seed=7;transient=0.5" ;;
    *) echo "bench-tta: unknown case $c" >&2; exit 2 ;;
  esac
  local mode=adaptive policy=${m%+reassign} extra=""
  [ "$m" = bsp ] && mode=bsp && policy=shares
  [ "$m" = "${m%+reassign}" ] || extra="--reassign-unit $unit"
  local base="$out/$c-$m-s$seed"
  scripts/testbed.sh --hosts 4 --links "$links" -- sh -c "ip netns exec \$TB_HUB bin/ringtail run -H \$TB_HOSTLIST \
    --ssh 'ip netns exec' --master-addr \$TB_HUB_ADDR -- $repo/bin/ringtail-train --hidden 1024,1024 \
    --epochs $epochs --seed $seed --eval-every $every --mode $mode --policy $policy $extra ${inj:+--inject $(printf '%q' "$inj")} --json" >"$base.out" 2>"$base.err" || {
    echo "bench-tta: $c $m seed $seed failed; see $base.err" >&2; return 1; }
  grep '^\[0\] {' "$base.out" | sed 's/^\[0\] //' >"$base.json"
}

# tta JSON TARGET: the training seconds at the first evaluation ≥ TARGET.
tta() { jq -r --argjson t "$2" '[.curve[] | select(.test_accuracy >= $t) | .seconds] | first // "never"' "$1"; }

printf '%-10s %-9s %4s %9s %7s %8s %8s %9s  %s\n' case mode seed "tta(s)" ratio "acc(%)" "Δacc" "step(ms)" modes
for seed in ${seeds//,/ }; do
  run none bsp "$seed"
  ref="$out/none-bsp-s$seed.json"
  target=$(jq '.epochs[3].test_accuracy' "$ref")
  t0=$(tta "$ref" "$target")
  acc0=$(jq '.test_accuracy' "$ref")
  echo "# seed $seed: target $(jq -n "$target * 10000 | round / 100")% (BSP's epoch-4 accuracy), no-straggler time ${t0}s, BSP final $(jq -n "$acc0 * 10000 | round / 100")%"
  for c in ${cases//,/ }; do
    for m in ${modes//,/ }; do
      j="$out/$c-$m-s$seed.json"
      [ "$c-$m" = none-bsp ] || run "$c" "$m" "$seed" || continue
      t=$(tta "$j" "$target")
      ratio=never
      [ "$t" = never ] || ratio=$(jq -n "$t / $t0 * 100 | round / 100")
      read -r acc step mix < <(jq -r --argjson a0 "$acc0" '
        [(.test_accuracy * 100), ((.epochs | map(.step_mean_ns * .steps) | add) / (.epochs | map(.steps) | add) / 1e6),
         ([.epochs[].modes // {} | to_entries[]] | group_by(.key) | map("\(.[0].key):\(map(.value) | add)") | join(","))]
        | "\(.[0]) \(.[1]) \(if .[2] == "" then "ring" else .[2] end)"' "$j")
      printf '%-10s %-9s %4s %9s %7s %8.2f %+8.2f %9.1f  %s\n' "$c" "$m" "$seed" "$t" "$ratio" "$acc" \
        "$(jq -n "$acc - $acc0 * 100")" "$step" "$mix"
    done
  done
done
echo "reports: $out"
