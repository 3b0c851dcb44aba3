#!/usr/bin/env bash
# Capture reference frames from the Linux stack for the wire crate's tests.
#
# Creates two network namespaces joined by a veth pair (10.99.0.1/24 and
# 10.99.0.2/24), turns checksum/segmentation offloads off so frames look as a
# real NIC presents them, records one end with tcpdump, and makes Linux send:
# ARP request + reply, ICMP echo request + reply, a UDP datagram, a UDP
# datagram to a closed port (ICMP port unreachable), a TCP connection with
# data (SYN options MSS/SACK_PERM/TS/WS, data with timestamps, FINs) and a RST
# from a closed port. Everything is removed by the EXIT trap.
#
# Usage (root): capture.sh [OUT.pcap]   default: linux.pcap next to this script
set -euo pipefail

[ "$(id -u)" -eq 0 ] || { echo "capture.sh: must run as root" >&2; exit 1; }
dir="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$dir/linux.pcap}"

ns_a="wa$$"; ns_b="wb$$"; if_a="wva$$"; if_b="wvb$$"
pids=()

cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    ip netns del "$ns_a" 2>/dev/null || true
    ip netns del "$ns_b" 2>/dev/null || true
}
trap cleanup EXIT

in_a() { ip netns exec "$ns_a" "$@"; }
in_b() { ip netns exec "$ns_b" "$@"; }

ip netns add "$ns_a"
ip netns add "$ns_b"
ip link add "$if_a" netns "$ns_a" type veth peer name "$if_b" netns "$ns_b"
# Fixed MAC addresses so the vectors do not depend on the run.
ip -n "$ns_a" link set "$if_a" address 02:00:00:99:00:01
ip -n "$ns_b" link set "$if_b" address 02:00:00:99:00:02
ip -n "$ns_a" addr add 10.99.0.1/24 dev "$if_a"
ip -n "$ns_b" addr add 10.99.0.2/24 dev "$if_b"
for ns in "$ns_a" "$ns_b"; do
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_timestamps=1 net.ipv4.tcp_sack=1 \
        net.ipv4.tcp_window_scaling=1 net.ipv6.conf.all.disable_ipv6=1
done
in_a ethtool -K "$if_a" tx off tso off gso off gro off >/dev/null
in_b ethtool -K "$if_b" tx off tso off gso off gro off >/dev/null
ip -n "$ns_a" link set "$if_a" up
ip -n "$ns_b" link set "$if_b" up
sleep 0.5

tmp="$out.tmp"
# Started without a shell function so that $! is tcpdump itself (after
# ip-netns-exec execs it); stopped with SIGTERM, which flushes the file
# (background jobs of a script ignore SIGINT).
ip netns exec "$ns_a" tcpdump -i "$if_a" -n -U -s 0 -w "$tmp" 2>/dev/null &
pids+=($!)
# Wait (bounded) until tcpdump has written the pcap file header.
for _ in $(seq 50); do [ -s "$tmp" ] && break; sleep 0.1; done
sleep 0.5

# ARP request + reply, ICMP echo request + reply.
in_a ping -c1 -W2 10.99.0.2 >/dev/null

# UDP datagram to a listener, then one to a closed port (ICMP port unreachable).
in_b timeout 5 nc -u -l 10.99.0.2 5000 >/dev/null &
pids+=($!)
sleep 0.3
printf 'hello udp\n' | in_a timeout 5 nc -u -w1 -p 4000 10.99.0.2 5000 || true
printf 'closed udp\n' | in_a timeout 5 nc -u -w1 -p 4001 10.99.0.2 5001 || true

# TCP: handshake with options, data segments with timestamps, FIN both ways.
in_b timeout 10 nc -l 10.99.0.2 6000 >/dev/null &
pids+=($!)
sleep 0.3
head -c 3000 /dev/zero | tr '\0' 'x' | in_a timeout 10 nc -N -w2 -p 40000 10.99.0.2 6000 || true
sleep 0.5

# RST from a closed port.
in_a timeout 5 nc -z -w1 -p 40001 10.99.0.2 6001 || true
sleep 0.5

kill -TERM "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
mv "$tmp" "$out"
echo "wrote $out"
