#!/usr/bin/env bash
# scripts/bench-straggler-bed.sh — `ringtail bench straggler` with its ranks
# as processes on the multi-host test bed (docs/testbed.md): one rank per
# network namespace, started by `ringtail run --ssh "ip netns exec"` from the
# hub, every link at RATE (tbf both ways), compute patterns and network
# patterns (one rank's link slow, delayed, lossy or stalled) for BSP and
# each policy against FlexRR's Ideal.
#
#   scripts/bench-straggler-bed.sh [--ranks 4] [--rate 1gbit] [--policies adaptive,star,exact]
#        [--patterns none,slow-3x,...] [--grad 4M] [--steps 20] [--warmup 3] [--out DIR]
#
# Rank 0 sets each run's links through the bed's control socket
# (TB_CONTROL, passed to the ranks with ringtail run -x): every link at
# RATE for the compute patterns, the pattern's link clauses for the network
# ones, before the run's connections open. Prints rank 0's table; the raw
# output, the JSON rows and the ranks' stderr are kept in DIR. Needs root,
# iproute2 and nftables (like the test bed).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
export PATH="/usr/local/go/bin:$PATH"
ranks=4 rate=1gbit policies=adaptive,star,exact grad=4M steps=20 warmup=3 out=""
patterns=none,slow-3x,persistent,powerlaw-4,flexrr-200%,slow-link-10x,delay-10ms,lossy-1%,stall-1s
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --patterns) patterns=$2; shift 2 ;;
    --grad) grad=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench-straggler-bed: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out="$(mktemp -d "${TMPDIR:-/tmp}/ringtail-straggler-bed.XXXXXX")"
mkdir -p "$out" bin
go build -o bin/ringtail ./cmd/ringtail
bin="$repo/bin/ringtail"
args=(bench straggler --patterns "$patterns" --policy "$policies" --grad "$grad" --steps "$steps" --warmup "$warmup" --link-rate "$rate" --json)
echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); ranks $ranks, links $rate"
echo "# ringtail run -H \$TB_HOSTLIST --ssh 'ip netns exec' -x TB_CONTROL -- ringtail ${args[*]}"
set +e
scripts/testbed.sh --hosts "$ranks" -- sh -c "ip netns exec \$TB_HUB $bin run -H \$TB_HOSTLIST --ssh 'ip netns exec' \
  --master-addr \$TB_HUB_ADDR -x TB_CONTROL -- $bin $(printf '%q ' "${args[@]}")" >"$out/out" 2>"$out/err"
rc=$?
set -e
sed -n 's/^\[0\] {/{/p' "$out/out" >"$out/rows.json"
if [ "$rc" -ne 0 ]; then
  echo "bench-straggler-bed: the bench failed (exit $rc); see $out/err" >&2
  tail -5 "$out/err" >&2
fi
# pol/none and bsp/none are "-" when the bench ran no "none" before the row.
printf '%-14s %-8s %8s %9s %8s %8s %8s %9s %9s %7s %5s\n' pattern policy "bsp_s" "policy_s" "ideal_s" "pol/id" "bsp/id" "pol/none" "bsp/none" applied evict
jq -r '[.pattern, .policy, .bsp_s, .adaptive_s, .ideal_s, .ratio, .bsp_ratio,
        (if .vs_none then (.vs_none * 1000 | round / 1000 | tostring) else "-" end),
        (if .bsp_vs_none then (.bsp_vs_none * 1000 | round / 1000 | tostring) else "-" end),
        .adaptive_applied_per_step, .evict_steps] | @tsv' "$out/rows.json" |
  while IFS=$'\t' read -r p pol b a i r br vn bvn ap ev; do
    [ "$vn" = - ] || printf -v vn '%.3f' "$vn"
    [ "$bvn" = - ] || printf -v bvn '%.3f' "$bvn"
    printf '%-14s %-8s %8.4f %9.4f %8.4f %8.3f %8.3f %9s %9s %7.1f %5d\n' "$p" "$pol" "$b" "$a" "$i" "$r" "$br" "$vn" "$bvn" "$ap" "$ev"
  done
echo "# rows: $out/rows.json; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
