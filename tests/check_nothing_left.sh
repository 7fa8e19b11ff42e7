#!/usr/bin/env bash
# Runs after the whole suite (a CTest fixture cleanup): nothing the tests or the runs they made
# may be left on the machine — namespaces, veths, nftables tables, run dirs, temp dirs, probes.
set -u
left=()
ns=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^(cs-|cst)' || true)
[ -n "$ns" ] && left+=("network namespaces: $(echo $ns)")
links=$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^cs[0-9a-f]{12}h$' || true)
[ -n "$links" ] && left+=("veths: $(echo $links)")
tables=$(nft list tables 2>/dev/null | grep -E 'codespace|escape_probe' || true)
[ -n "$tables" ] && left+=("nftables tables: $(echo $tables)")
rundirs=$(ls -d /run/codespace/cs-* 2>/dev/null || true)
[ -n "$rundirs" ] && left+=("run dirs: $(echo $rundirs)")
tmps=$(ls -d /tmp/codespace-lane.* /tmp/codespace-test.* /tmp/cst-* 2>/dev/null || true)
[ -n "$tmps" ] && left+=("temp dirs: $(echo $tmps)")
procs=$(pgrep -a -f 'escape_probe|codespace-init' 2>/dev/null | grep -v check_nothing_left || true)
[ -n "$procs" ] && left+=("processes: $procs")
if [ ${#left[@]} -gt 0 ]; then
  printf 'left on the machine after the suite:\n'
  printf '  %s\n' "${left[@]}"
  exit 1
fi
echo "nothing of the suite is left on the machine (namespaces, veths, tables, dirs, processes)"
