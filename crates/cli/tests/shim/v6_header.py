#!/usr/bin/env python3
"""Under the shim (crates/cli/tests/preload6.rs): IPv6 sockets with IPV6_TCLASS and
IPV6_UNICAST_HOPS set send to the Linux peer (v6_header_peer.py), which reads what arrived:

  UDP to LINUX6:UPORT      class 0xb8, hop limit 9 (set after the socket exists)
  TCP to LINUX6:TPORT      class 0x28, hop limit 17 (set before connect)
  TCP accepted on :LPORT   class 0x48, hop limit 33 (set on the listener, inherited)

usage: v6_header.py LINUX6 UPORT TPORT LPORT
"""
import socket as S
import sys
import time

V6 = S.IPPROTO_IPV6
linux6, uport, tport, lport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

l = S.socket(S.AF_INET6, S.SOCK_STREAM)
l.setsockopt(V6, S.IPV6_TCLASS, 0x48)
l.setsockopt(V6, S.IPV6_UNICAST_HOPS, 33)
l.bind(("::", lport))
l.listen(4)
l.settimeout(20)

u = S.socket(S.AF_INET6, S.SOCK_DGRAM)
u.bind(("::", 0))
u.setsockopt(V6, S.IPV6_TCLASS, 0xb8)
u.setsockopt(V6, S.IPV6_UNICAST_HOPS, 9)

c = S.socket(S.AF_INET6, S.SOCK_STREAM)
c.setsockopt(V6, S.IPV6_TCLASS, 0x28)
c.setsockopt(V6, S.IPV6_UNICAST_HOPS, 17)
c.settimeout(20)
c.connect((linux6, tport))
print("ready", flush=True)

for i in range(5):
    u.sendto(b"udp %d" % i, (linux6, uport))
    time.sleep(0.05)
for _ in range(3):
    c.sendall(b"a" * 300)
    time.sleep(0.05)
a, _ = l.accept()
for _ in range(3):
    a.sendall(b"b" * 300)
    time.sleep(0.05)
time.sleep(0.5)
c.close()
a.close()
print("done", flush=True)
