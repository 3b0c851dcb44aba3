#!/usr/bin/env python3
"""The Linux (kernel) peer of v6_header.py: prints what arrived from corestack.

  udp CLASS HOPS           per UDP datagram (IPV6_RECVTCLASS, IPV6_RECVHOPLIMIT)

TCP's Traffic Class and Hop Limit are read from tcpdump by the test. It accepts on TPORT,
connects to [CORE6]:LPORT once the shim side said "ready" (retrying for 10 s), and reads
both connections to their end. Every wait is bounded.

usage: v6_header_peer.py CORE6 UPORT TPORT LPORT
"""
import select
import socket as S
import struct
import sys
import time

V6 = S.IPPROTO_IPV6
core6, uport, tport, lport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

u = S.socket(S.AF_INET6, S.SOCK_DGRAM)
u.setsockopt(V6, S.IPV6_RECVTCLASS, 1)
u.setsockopt(V6, S.IPV6_RECVHOPLIMIT, 1)
u.bind(("::", uport))
t = S.socket(S.AF_INET6, S.SOCK_STREAM)
t.setsockopt(S.SOL_SOCKET, S.SO_REUSEADDR, 1)
t.bind(("::", tport))
t.listen(4)
print("peer listening", flush=True)

deadline = time.monotonic() + 30
conns = []
udp_seen = 0
dialed = None
while time.monotonic() < deadline and (udp_seen < 5 or len(conns) < 2 or any(conns)):
    if dialed is None and udp_seen > 0:
        try:
            dialed = S.create_connection((core6, lport), timeout=10)
            conns.append(dialed)
        except OSError:
            time.sleep(0.1)
    r, _, _ = select.select([u, t] + [c for c in conns if c], [], [], 0.2)
    for s in r:
        if s is u:
            _, anc, _, _ = u.recvmsg(2048, S.CMSG_SPACE(4) * 2)
            vals = {ty: struct.unpack("i", data[:4])[0] for lvl, ty, data in anc if lvl == V6}
            print("udp", vals.get(S.IPV6_TCLASS), vals.get(S.IPV6_HOPLIMIT), flush=True)
            udp_seen += 1
        elif s is t:
            c, _ = t.accept()
            conns.append(c)
        else:
            if not s.recv(65536):
                conns[conns.index(s)] = None
print("peer done", udp_seen, flush=True)
