#!/usr/bin/env bash
# The suite's bookends (CTest fixture setup and cleanup):
#   check_nothing_left.sh baseline FILE   before any test: what of ours is already on the machine
#   check_nothing_left.sh check FILE      after every test: nothing new may be left behind —
#                                         namespaces, veths, nftables tables, run dirs, temp
#                                         dirs, probe or supervisor processes
set -u
mode=${1:?baseline|check}
file=${2:?file}
inventory() {
  ip netns list 2>/dev/null | awk '{print "netns " $1}' | grep -E ' (cs-|cst)' || true
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^cs[0-9a-f]{12}h$' | sed 's/^/veth /' || true
  nft list tables 2>/dev/null | grep -E 'codespace|escape_probe' | sed 's/^/nft /' || true
  ls -d /run/codespace/cs-* 2>/dev/null | sed 's/^/rundir /' || true
  ls -d /tmp/codespace-lane.* /tmp/codespace-test.* /tmp/cst-* 2>/dev/null | sed 's/^/tempdir /' || true
  { pgrep -f 'escape_probe|codespace-init|codespace __supervise'; pgrep -x cs-supervisor; pgrep -x cs-spawner; } 2>/dev/null | sort -u | while read -r p; do
    [ "$p" = "$$" ] && continue
    # A zombie is not running: an orphan waits there for pid 1 (slow to reap on some hosts).
    [ "$(awk '{print $3}' /proc/"$p"/stat 2>/dev/null)" = "Z" ] && continue
    # Gone meanwhile (no /proc entry, or exiting: its command line already empty).
    cmd=$(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null) || continue
    [ -n "$cmd" ] || continue
    printf 'process %s %s\n' "$p" "${cmd:0:120}"
  done
}
case "$mode" in
  baseline)
    inventory | sort >"$file"
    echo "baseline: $(wc -l <"$file") item(s) of ours were already on the machine"
    ;;
  check)
    [ -f "$file" ] || : >"$file"
    new=$(comm -13 "$file" <(inventory | sort))
    # Something still on its way out as the last test ended (a supervisor finishing a teardown,
    # a process exiting) is not left behind: only what is still there a moment later counts.
    if [ -n "$new" ]; then
      sleep 2
      new=$(comm -12 <(printf '%s\n' "$new") <(comm -13 "$file" <(inventory | sort)))
    fi
    if [ -n "$new" ]; then
      printf 'left on the machine by the suite:\n'
      printf '  %s\n' "$new"
      # What a process was doing, and for which run, says which test left it; then it goes (the
      # machine is left clean even by a failed suite).
      printf '%s\n' "$new" | awk '$1 == "process" {print $2}' | while read -r p; do
        [ -r /proc/"$p"/stat ] || continue
        printf '  pid %s: state %s, parent %s, waiting in %s, %s\n' "$p" \
          "$(awk '{print $3}' /proc/"$p"/stat)" "$(awk '{print $4}' /proc/"$p"/stat)" \
          "$(cat /proc/"$p"/wchan 2>/dev/null)" \
          "$(tr '\0' '\n' </proc/"$p"/environ 2>/dev/null | grep -E '^CODESPACE_' | tr '\n' ' ')"
        printf '    %s\n' "$(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)"
        kill -KILL "$p" 2>/dev/null
      done
      exit 1
    fi
    # Runs' cgroups (codespace/<run id>) left empty: reported and removed, not yet a failure. Two
    # per suite have been seen under -j2 and not yet traced to their test (issue 15's note);
    # this keeps the machine clean meanwhile.
    left_cg=$(find /sys/fs/cgroup -mindepth 2 -maxdepth 6 -type d -path '*/codespace/*' 2>/dev/null)
    if [ -n "$left_cg" ]; then
      printf 'warning: run cgroups left by the suite (removed now):\n'
      printf '  %s\n' $left_cg
      printf '%s\n' $left_cg | sort -r | xargs -r rmdir 2>/dev/null
      find /sys/fs/cgroup -mindepth 1 -maxdepth 5 -type d -name codespace 2>/dev/null | xargs -r rmdir 2>/dev/null
    fi
    echo "nothing of the suite is left on the machine (namespaces, veths, tables, dirs, processes)"
    ;;
esac
