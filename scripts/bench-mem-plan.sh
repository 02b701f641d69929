#!/usr/bin/env bash
# scripts/bench-mem-plan.sh — issue 38's Go-driver benchmark: a V100/P100
# mix emulated with NVML's mock (ringtail-train --fake-gpu), each rank's
# micro-batch bounded by its device's memory (--sample-bytes), time to
# synchronous SGD's accuracy with equal batches (--mode bsp) against the
# shares policy's memory plan (micro-batch × accumulation per rank).
#
#   scripts/bench-mem-plan.sh [--seeds 1,2,3] [--epochs 4] [--eval-every 5]
#        [--step-compute 60ms] [--sample-bytes 2GiB] [--gpus V100,V100,P100,P100]
#        [--modes bsp,shares,shares-nomem] [--out DIR]
#
# Ranks 0 and 1 are V100s (32 GB), 2 and 3 P100s (16 GB, 3.03× slower: the
# prior table); at 2 GiB of activations per sample their micro-batch caps
# are 15 and 7 samples; the global batch is 64. Rank 0, whose report is
# read, is a V100: the shares policy may exclude a P100 for a while (its
# rows go to the others, exactly), and an excluded rank 0 would report
# only the steps it computed. For each seed, modes run
# interleaved: bsp first, the best held-out accuracy its curve reached
# within epochs−1 epochs is the target; each mode's time to it is rank 0's
# training time (evaluations taken out) at its first evaluation at or
# above it, and its steps to it how many steps that was.
# Modes: bsp (equal batches of 16, each computed in micro-batches under
# the rank's cap), shares (the shares policy with the memory plan),
# shares-nomem (the shares policy without --sample-bytes: shares by speed
# alone, one pass each — its largest micro-batch is what a device without
# that memory would be asked to hold). One line per run: the time to the
# target, the final accuracy, the mean step, every rank's mean time to the
# reduction and its spread (slowest over fastest − 1), and each rank's
# largest micro-batch against its cap. Each run's --json report is kept in
# DIR (default: a new temporary directory). Needs jq; builds bin/ with make.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
seeds=1,2,3 epochs=4 every=5 compute=60ms sample=2GiB gpus=V100,V100,P100,P100 modes=bsp,shares,shares-nomem out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --eval-every) every=$2; shift 2 ;;
    --step-compute) compute=$2; shift 2 ;;
    --sample-bytes) sample=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "bench-mem-plan: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out="$(mktemp -d)"
mkdir -p "$out"
make -s build
np=$(awk -F, '{print NF}' <<<"$gpus")
echo "# out $out  gpus $gpus  sample-bytes $sample  step-compute $compute  epochs $epochs  eval-every $every"
printf '%-5s %-13s %8s %6s %8s %8s %-34s %7s  %s\n' seed mode tta_s steps acc step_ms "busy_ms by rank" spread "micro/cap by rank"
for seed in ${seeds//,/ }; do
  target=""
  for mode in ${modes//,/ }; do
    args=(--fake-gpu "$gpus" --epochs "$epochs" --eval-every "$every" --step-compute "$compute" --seed "$seed" --json)
    case "$mode" in
      bsp) args+=(--mode bsp --sample-bytes "$sample") ;;
      shares) args+=(--mode adaptive --policy shares --sample-bytes "$sample") ;;
      shares-nomem) args+=(--mode adaptive --policy shares) ;;
      *) echo "bench-mem-plan: unknown mode $mode" >&2; exit 2 ;;
    esac
    f="$out/seed$seed-$mode.json"
    bin/ringtail run -np "$np" -- bin/ringtail-train "${args[@]}" 2>/dev/null | sed -n 's/^\[0\] {/{/p' >"$f"
    if [ -z "$target" ]; then
      target=$(jq '(.epochs[0].steps * (.epochs | length - 1)) as $n | [.curve[] | select(.step <= $n) | .test_accuracy] | max' "$f")
      echo "# seed $seed: target $target (bsp's best within epoch $((epochs - 1)))"
    fi
    # shares-nomem has no caps in its report: the mock's are the ones to compare with.
    jq -r --argjson target "$target" --arg seed "$seed" --arg mode "$mode" '
      ([.curve[] | select(.test_accuracy >= $target)] | first // null) as $hit |
      [$seed, $mode,
       (if $hit == null then "never" else ($hit.seconds * 100 | round / 100 | tostring) end),
       (if $hit == null then "-" else ($hit.step | tostring) end),
       (.test_accuracy * 1000 | round / 1000 | tostring),
       (.step_mean_ns / 1e6 * 10 | round / 10 | tostring),
       ([.ranks[].busy_mean_ns / 1e6 * 10 | round / 10 | tostring] | join(",")),
       ((.busy_spread * 1000 | round / 10 | tostring) + "%"),
       ([.ranks[] | "\(.max_micro)/\(.micro_cap // "-")x\(.max_accum)"] | join(" "))] | @tsv' "$f" |
      awk -F'\t' '{printf "%-5s %-13s %8s %6s %8s %8s %-34s %7s  %s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
  done
done
