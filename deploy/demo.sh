#!/usr/bin/env bash
# The main job of `make run`: the posture line, one demonstration run per egress policy, each
# followed by its record, then the worker in the foreground. The demo commands only look at their own network; none of them
# sends a packet anywhere.
set -uo pipefail
codespace=${1:?usage: demo.sh CODESPACE_BINARY STATE_DIR}
state_dir=${2:?usage: demo.sh CODESPACE_BINARY STATE_DIR}
export CODESPACE_STATE_DIR="$state_dir"
workspace="$(dirname "$state_dir")/workspace"
mkdir -p "$workspace"

"$codespace" posture
demo() {
  local title=$1; shift
  printf '\n=== %s\n$ codespace run %s\n' "$title" "$*"
  "$codespace" run --workspace "$workspace" "$@"
  printf -- '--- exit status %s; record:\n' "$?"
  "$codespace" show latest
}
demo "egress none: severed, loopback only" \
  --egress none -- sh -c 'echo "interfaces:"; ip -o link | cut -d: -f2'
demo "egress allowlist: filtered where this host can filter, else severed" \
  --egress allowlist --allow api.anthropic.com:443 --allow 203.0.113.0/24 -- \
  sh -c 'echo "interfaces:"; ip -o link | cut -d: -f2'
demo "egress open: the worker's own network" \
  --egress open -- sh -c 'echo "interface count: $(ip -o link | wc -l)"'
printf '\n=== all runs\n'
"$codespace" runs --limit 10
printf '\n=== the worker, in the foreground (Ctrl-C stops it; runs in flight go on)\n'
printf 'From a second terminal:\n  export CODESPACE_STATE_DIR=%s\n  id=$(%s submit -- sh -c "echo hello; sleep 2; echo bye")\n  %s logs --follow $id\n  %s show $id\n\n' \
  "$state_dir" "$codespace" "$codespace" "$codespace"
exec "$codespace" worker
