#!/usr/bin/env bash
# scripts/bench-ring-order.sh — the world ring in rank order against host
# order (RINGTAIL_RING_ORDER) when a launcher places ranks round robin
# (Slurm's --distribution=cyclic, hand-written host lists): 4 ranks on 2
# test-bed hosts, rank r on host r%2, each host's link shaped to RATE.
#
#   scripts/bench-ring-order.sh [RATE]      # default 400mbit; needs root
#
# In rank order every hop of the ring crosses hosts, so each host's link
# carries two ring flows each way; in host order it carries one.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
rate="${1:-400mbit}"
cd "$repo"
export PATH="/usr/local/go/bin:$PATH"
mkdir -p bin && go build -o bin/ringtail ./cmd/ringtail
inner="$(mktemp "${TMPDIR:-/tmp}/ring-order.XXXXXX.sh")"
trap 'rm -f "$inner"' EXIT
cat > "$inner" <<'INNER'
#!/usr/bin/env bash
set -euo pipefail
read -r -a hosts <<< "$TB_HOSTS"
read -r -a addrs <<< "$TB_ADDRS"
out="$(mktemp -d)"
for order in ranks hosts ranks hosts; do
  pids=()
  for r in 0 1 2 3; do
    h=$((r % 2))
    ip netns exec "${hosts[$h]}" env RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r / 2)) LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR="${addrs[0]}" MASTER_PORT=29555 RINGTAIL_SECRET=bench-ring-order \
      RINGTAIL_RING_ORDER=$order RINGTAIL_LISTEN_IP="${addrs[$h]}" \
      bin/ringtail bench allreduce -b 4M -e 32M -f 2 -iters 6 -warmup 2 > "$out/$order.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$out"/*; exit 1; }; done
  echo "== RINGTAIL_RING_ORDER=$order"
  cat "$out/$order.0"
done
rm -rf "$out"
INNER
chmod +x "$inner"
scripts/testbed.sh --hosts 2 --links "link=0:rate=$rate;link=1:rate=$rate" -- "$inner"
