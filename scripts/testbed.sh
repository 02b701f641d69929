#!/usr/bin/env bash
# scripts/testbed.sh — run a command on a multi-host test bed of network
# namespaces (see docs/testbed.md), removing the bed afterwards even when
# the command or the bed tool is killed.
#
#   scripts/testbed.sh [--hosts N] [--subnet CIDR] [--links SPEC] -- CMD ARGS...
#   scripts/testbed.sh --sweep          # remove beds left by crashed runs
#
# Example: 4 hosts, host 3's link at 50 Mbit/s, an allreduce bench over
# ringtail run launched from the hub namespace:
#
#   scripts/testbed.sh --hosts 4 --links 'link=3:rate=50mbit' -- sh -c \
#     'ip netns exec $TB_HUB bin/ringtail run -H $TB_HOSTLIST --ssh "ip netns exec" \
#        --master-addr $TB_HUB_ADDR -- bin/ringtail bench allreduce -b 1M -e 64M -f 4'
#
# Needs root, iproute2 (ip, tc) and, with --links, nftables (nft); Go
# builds the bed tool (internal/testbed/cmd/testbed) on first use.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="/usr/local/go/bin:$PATH"
tool_dir="$(mktemp -d "${TMPDIR:-/tmp}/testbed-tool.XXXXXX")"
tool="$tool_dir/testbed"
child=""

cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  # Whatever the tool could not remove (it was killed), the sweeper does:
  # it removes the beds whose creating process is gone.
  if [ -x "$tool" ]; then "$tool" --sweep || true; fi
  rm -rf "$tool_dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

(cd "$repo" && go build -o "$tool" ./internal/testbed/cmd/testbed)
# In the background, so that a signal to this script runs the trap at once.
"$tool" "$@" &
child=$!
set +e
wait "$child"
rc=$?
child=""
set -e
exit "$rc"
