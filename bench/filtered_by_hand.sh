#!/usr/bin/env bash
# filtered_by_hand.sh NETNS INDEX ALLOW_V4 -- BWRAP ARGS...
#
# The baseline of `make bench` item 2: what a user scripts with `ip` and `nft` to give one
# bubblewrap sandbox an allowlisted network, step for step as codespace builds a filtered run's
# network (src/net/filtered_netns.cc): a named namespace, a veth pair, addresses (a /30), a
# default route, NAT on the worker side, an allowlist firewall inside the namespace; bubblewrap in
# it; then teardown (NAT table, veth, namespace). IPv4 only, as codespace on a worker without an
# IPv6 default route. Not done here: codespace's DNS gate, pool lock and run records.
#
# Run it in the worker host namespace the benchmark made: the veth's worker end, the NAT table and
# the forwarded traffic all stay there. INDEX (0..16383) picks the /30 in 10.202.0.0/16 and the
# veth's name. Everything made is removed on exit, also on failure or a signal.
set -euo pipefail
ns=$1
idx=$2
allow=$3
[ "$4" = "--" ] || { echo "usage: $0 NETNS INDEX ALLOW_V4 -- BWRAP ARGS..." >&2; exit 2; }
shift 4

veth="csbh${idx}"
table="csb_${idx}"
base=$((idx * 4))
host_ip="10.202.$((base / 256)).$((base % 256 + 1))"
run_ip="10.202.$((base / 256)).$((base % 256 + 2))"

teardown() {
  nft delete table inet "$table" 2>/dev/null || true
  ip link del "$veth" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
}
trap teardown EXIT
trap 'exit 130' INT TERM HUP

ip netns add "$ns"
ip link add "$veth" type veth peer name eth0 netns "$ns"
ip addr add "$host_ip/30" dev "$veth"
ip link set "$veth" up
ip -n "$ns" link set lo up
ip -n "$ns" addr add "$run_ip/30" dev eth0
ip -n "$ns" link set eth0 up
ip -n "$ns" route add default via "$host_ip"

# Worker side: masquerade the run out of any other interface, forward only its own flows.
nft -f - <<EOF
table inet $table {
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr $run_ip/30 oifname != "$veth" masquerade
  }
  chain forward {
    type filter hook forward priority filter; policy accept;
    iifname "$veth" accept
    oifname "$veth" ct state established,related accept
    oifname "$veth" drop
  }
}
EOF

# Inside the namespace: the allowlist (the same shape as codespace's `table inet codespace`).
workers=$(ip -o -4 addr show | awk '{print $4}' | cut -d/ -f1 | paste -sd, -)
nsenter --net="/run/netns/$ns" nft -f - <<EOF
table inet codespace {
  counter dropped { }
  set blocked4 { type ipv4_addr; flags interval; auto-merge; elements = { 169.254.169.254, 10.202.0.0/16, $workers } }
  chain output {
    type filter hook output priority filter; policy drop;
    oif "lo" accept
    ct state established,related accept
    ip daddr $allow meta l4proto { tcp, udp } accept
    ip daddr @blocked4 counter name dropped drop
    counter name dropped drop
  }
  chain input {
    type filter hook input priority filter; policy drop;
    iif "lo" accept
    ct state established,related accept
  }
}
EOF

# The sandbox, in the namespace (bwrap without --unshare-net keeps the one it starts in).
nsenter --net="/run/netns/$ns" "$@"
