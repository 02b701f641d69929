#!/usr/bin/env bash
# scripts/bench-network-straggler.sh — the main job across hosts with a slow
# link (issue 12's table): 4 ranks, one per network namespace of the test bed
# (docs/testbed.md), ringtail-train's MLP with two hidden layers of 1024
# (4.5 MB of gradient), 100 ms of padded compute per step, BSP against the
# straggler driver, every link at RATE and optionally one rank's link at
# RATE/10.
#
#   scripts/bench-network-straggler.sh [--epochs N] [--rate 1gbit] [--slow-rate 100mbit]
#        [--policy shares] [--cases unshaped,shaped] [--modes bsp,adaptive] [--out DIR]
#
# Prints one line per run — time per applied global batch (the mean over the
# run's steps of step time × batch ÷ rows applied), the epoch mean step,
# evicting steps, mean staleness, test accuracy, the time to 95% held-out
# accuracy (the summed step time until the first epoch at ≥ 95%) — and the
# ratios to the unshaped run of the same mode. Each run's --json report is
# kept in DIR. Needs root, iproute2 and nftables (like the test bed), and
# builds bin/ with make. The mode "adaptive" is ringtail-train's --mode
# adaptive (the straggler driver) under the preset --policy names (default
# shares: exact modes only). Its time to 95% is counted in whole epochs
# from one seed: for time to synchronous SGD's accuracy at fine
# granularity over seeds (issue 28), use scripts/bench-tta.sh.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
epochs=6 rate=1gbit slow=100mbit policy=shares cases=unshaped,shaped modes=bsp,adaptive out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --slow-rate) slow=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench-network-straggler: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out="$(mktemp -d "${TMPDIR:-/tmp}/ringtail-netbench.XXXXXX")"
mkdir -p "$out"
make -s build >/dev/null

summary() { # the numbers of one --json report
  jq -r '
    def ms: . / 1e6;
    (.epochs | map(.steps) | add) as $steps
    | (.epochs | map(.step_mean_ns * .steps) | add) as $busy
    | (.epochs | map(.applied) | add) as $applied
    | (.epochs | map(.modes.evict // 0) | add) as $evict
    | (.epochs | map((.staleness // 0) * (.modes.evict // 0)) | add) as $stale
    | ([foreach .epochs[] as $e (0; . + $e.step_mean_ns * $e.steps; [., $e.test_accuracy])]
       | map(select(.[1] >= 0.95)) | first // [null]) as $t95
    | [($busy * .batch / $applied | ms), ($busy / $steps | ms), $evict, $steps,
       (if $evict > 0 then $stale / $evict else 0 end), .test_accuracy * 100,
       (if $t95[0] == null then "never" else ($t95[0] / 1e9 | tostring) end)]
    | @tsv' "$1"
}

declare -A batch
printf '%-9s %-9s %12s %10s %12s %7s %8s %10s\n' case mode "batch(ms)" "step(ms)" "evict" stale "acc(%)" "t95(s)"
for c in ${cases//,/ }; do
  links="link=0,1,2,3:rate=$rate"
  [ "$c" = shaped ] && links="link=0,1,2:rate=$rate;link=3:rate=$slow"
  for m in ${modes//,/ }; do
    json="$out/$c-$m.json"
    scripts/testbed.sh --hosts 4 --links "$links" -- sh -c "ip netns exec \$TB_HUB bin/ringtail run -H \$TB_HOSTLIST \
      --ssh 'ip netns exec' --master-addr \$TB_HUB_ADDR -- $repo/bin/ringtail-train --hidden 1024,1024 \
      --epochs $epochs --mode $m --policy $policy --json" >"$out/$c-$m.out" 2>"$out/$c-$m.err" || {
      echo "bench-network-straggler: $c $m failed; see $out/$c-$m.err" >&2; exit 1; }
    grep '^\[0\] {' "$out/$c-$m.out" | sed 's/^\[0\] //' >"$json"
    IFS=$'\t' read -r bt sm ev st stale acc t95 < <(summary "$json")
    batch[$c-$m]=$bt
    printf '%-9s %-9s %12.1f %10.1f %8s/%-3s %7.1f %8.2f %10s\n' "$c" "$m" "$bt" "$sm" "$ev" "$st" "$stale" "$acc" "$t95"
  done
done
for m in ${modes//,/ }; do
  if [ -n "${batch[shaped-$m]:-}" ] && [ -n "${batch[unshaped-$m]:-}" ]; then
    echo "$m: shaped / unshaped time per applied batch = $(jq -n "${batch[shaped-$m]} / ${batch[unshaped-$m]} * 100 | round / 100")"
  fi
done
echo "reports: $out"
