# AF_INET6 under the shim (corestack with an IPv4 and an IPv6 address), against v6_peer.py
# on Linux in the other namespace: IPV6_V6ONLY as Linux has it, v4-mapped peers of a
# dual-stack [::] socket, IPV6_RECVPKTINFO / IPV6_PKTINFO, the IPv6 options, connect to a
# v4-mapped address. Prints "PASS name" per check and "ALL OK" at the end; the first failed
# check prints "FAIL name: detail" and exits 1. Every wait is bounded (socket timeouts).
#
# argv: CORE_IP4 CORE_IP6 LINUX_IP4 LINUX_IP6 PEER_PORT IFACE LINUX_LINK_LOCAL
import errno
import select
import socket
import struct
import sys

C4, C6, L4, L6, PP, IFACE, LLL = sys.argv[1:8]
PP = int(PP)
IFINDEX = socket.if_nametoindex(IFACE)
S = socket
V6 = (S.IPPROTO_IPV6,)


def check(name, cond, detail=""):
    if not cond:
        print("FAIL %s: %s" % (name, detail), flush=True)
        sys.exit(1)
    print("PASS " + name, flush=True)


def errno_of(f):
    try:
        f()
        return 0
    except OSError as e:
        return e.errno


def mapped(ip4):
    return "::ffff:" + ip4


# The control connection: AF_INET6 TCP to a real IPv6 address.
ctl = S.create_connection((L6, PP), timeout=10)
check("connect to an IPv6 peer", ctl.family == S.AF_INET6 and ctl.getpeername()[0] == L6,
      repr(ctl.getpeername()))
check("getsockname of an IPv6 connection", ctl.getsockname()[0] == C6, repr(ctl.getsockname()))
f = ctl.makefile("rw")


def say(line):
    f.write(line + "\n")
    f.flush()


def answer():
    return f.readline().strip()


def listener6(port, v6only):
    """A TCP listener on [::]:port with IPV6_V6ONLY v6only (set before bind)."""
    s = S.socket(S.AF_INET6, S.SOCK_STREAM)
    s.setsockopt(*V6, S.IPV6_V6ONLY, v6only)
    s.bind(("::", port))
    s.listen(8)
    return s


def served(listener, host, port, reply):
    """The peer connects to host:port; accept on `listener`, answer `reply`. Returns
    (peer address, local address, what the peer got)."""
    say("tcp %s %d" % (host, port))
    listener.settimeout(5)
    c, peer = listener.accept()
    c.settimeout(5)
    got = c.recv(16)
    local = c.getsockname()
    c.sendall(reply)
    c.close()
    return peer[0], local, got, answer()


# 1. The default and IPV6_V6ONLY=1: an AF_INET socket shares the port.
s = S.socket(S.AF_INET6, S.SOCK_STREAM)
default = int(open("/proc/sys/net/ipv6/bindv6only").read())
check("IPV6_V6ONLY starts as bindv6only", s.getsockopt(*V6, S.IPV6_V6ONLY) == default)
s.close()
P1 = 7101
a6 = listener6(P1, 1)
check("IPV6_V6ONLY after bind is EINVAL",
      errno_of(lambda: a6.setsockopt(*V6, S.IPV6_V6ONLY, 0)) == errno.EINVAL)
check("IPV6_V6ONLY reads back 1", a6.getsockopt(*V6, S.IPV6_V6ONLY) == 1)
a4 = S.socket(S.AF_INET, S.SOCK_STREAM)
a4.bind(("0.0.0.0", P1))
a4.listen(8)
check("AF_INET binds the port of a V6ONLY [::] listener", True)
peer, local, got, ans = served(a6, C6, P1, b"six")
check("V6ONLY [::] accepts IPv6", peer == L6 and local[0] == C6 and got == b"hi"
      and ans == "ok six", repr((peer, local, got, ans)))
peer, local, got, ans = served(a4, C4, P1, b"four")
check("IPv4 to that port reaches the AF_INET listener", peer == L4 and ans == "ok four",
      repr((peer, ans)))
a6.setblocking(False)
check("and not the V6ONLY one", errno_of(a6.accept) == errno.EAGAIN)
a6.close()
a4.close()

# 2. A dual-stack [::] (IPV6_V6ONLY=0): IPv4 peers as ::ffff:a.b.c.d, the port taken for both.
P2 = 7102
d = listener6(P2, 0)
check("getsockname of [::]", d.getsockname()[:2] == ("::", P2), repr(d.getsockname()))
x = S.socket(S.AF_INET, S.SOCK_STREAM)
check("AF_INET 0.0.0.0 on a dual-stack port is EADDRINUSE",
      errno_of(lambda: x.bind(("0.0.0.0", P2))) == errno.EADDRINUSE)
x.close()
x = S.socket(S.AF_INET, S.SOCK_STREAM)
x.bind((C4, P2))
check("AF_INET on corestack's address and a dual-stack port: listen is EADDRINUSE",
      errno_of(lambda: x.listen(8)) == errno.EADDRINUSE)
x.close()
ep = select.epoll()
ep.register(d.fileno(), select.EPOLLIN)
say("tcp %s %d" % (C4, P2))
ready = ep.poll(5)
check("epoll reports the dual-stack listener readable", ready == [(d.fileno(), select.EPOLLIN)],
      repr(ready))
d.settimeout(5)
c, peer = d.accept()
c.settimeout(5)
check("an IPv4 peer of [::] is v4-mapped", peer[0] == mapped(L4) and peer[2:] == (0, 0),
      repr(peer))
check("the local address too", c.getsockname()[:2] == (mapped(C4), P2), repr(c.getsockname()))
check("getpeername agrees", c.getpeername()[0] == mapped(L4), repr(c.getpeername()))
c.recv(16)
c.sendall(b"mapped")
c.close()
check("the IPv4 peer got the answer", answer() == "ok mapped")
peer, local, got, ans = served(d, C6, P2, b"native")
check("an IPv6 peer of [::]", peer == L6 and local[:2] == (C6, P2) and ans == "ok native",
      repr((peer, local, ans)))
ep.close()
d.close()

# 3. UDP on [::] with IPV6_RECVPKTINFO; replies with IPV6_PKTINFO.
P3 = 7103
u = S.socket(S.AF_INET6, S.SOCK_DGRAM)
u.setsockopt(*V6, S.IPV6_RECVPKTINFO, 1)
check("IPV6_RECVPKTINFO reads back", u.getsockopt(*V6, S.IPV6_RECVPKTINFO) == 1)
u.bind(("::", P3))
u.settimeout(5)


def pktinfo(anc):
    for level, kind, data in anc:
        if level == S.IPPROTO_IPV6 and kind == S.IPV6_PKTINFO and len(data) >= 20:
            return S.inet_ntop(S.AF_INET6, data[:16]), struct.unpack("I", data[16:20])[0]
    return None


def pkt(ip, index=0):
    return [(S.IPPROTO_IPV6, S.IPV6_PKTINFO, S.inet_pton(S.AF_INET6, ip) + struct.pack("I", index))]


say("udp %s %d" % (C6, P3))
data, anc, flags, frm = u.recvmsg(4096, S.CMSG_SPACE(20))
check("recvmsg from an IPv6 peer", data == b"ping" and frm[0] == L6, repr((data, frm)))
check("IPV6_PKTINFO: our IPv6 address and the interface", pktinfo(anc) == (C6, IFINDEX),
      repr((anc, IFINDEX)))
check("a foreign IPV6_PKTINFO source is EINVAL",
      errno_of(lambda: u.sendmsg([b"x"], pkt(C6[:-1] + "99"), 0, frm)) == errno.EINVAL)
u.sendmsg([b"pong6"], pkt(C6, IFINDEX), 0, frm)
check("sendmsg with IPV6_PKTINFO reaches the peer from our address",
      answer() == "ok pong6 " + C6)
say("udp %s %d" % (C4, P3))
data, anc, flags, frm = u.recvmsg(4096, S.CMSG_SPACE(20))
check("an IPv4 datagram on [::] comes from ::ffff:a.b.c.d", frm[0] == mapped(L4), repr(frm))
check("its IPV6_PKTINFO is our v4-mapped address", pktinfo(anc) == (mapped(C4), IFINDEX),
      repr(anc))
u.sendmsg([b"pong4"], pkt("::"), 0, frm)
check("a reply to a v4-mapped peer goes over IPv4", answer() == "ok pong4 " + C4)
u.setsockopt(*V6, S.IPV6_RECVPKTINFO, 0)
say("udp %s %d" % (C6, P3))
data, anc, flags, frm = u.recvmsg(4096, S.CMSG_SPACE(20))
check("no IPV6_PKTINFO once cleared", anc == [], repr(anc))
u.sendto(b"plain", frm)
check("sendto an IPv6 peer", answer() == "ok plain " + C6)
u.close()

# 4. Options on a socket corestack alone serves (bound to our IPv6 address).
o = S.socket(S.AF_INET6, S.SOCK_DGRAM)
o.bind((C6, 0))
check("IPV6_UNICAST_HOPS defaults to 64", o.getsockopt(*V6, S.IPV6_UNICAST_HOPS) == 64)
o.setsockopt(*V6, S.IPV6_UNICAST_HOPS, 17)
check("IPV6_UNICAST_HOPS reads back", o.getsockopt(*V6, S.IPV6_UNICAST_HOPS) == 17)
o.setsockopt(*V6, S.IPV6_UNICAST_HOPS, -1)
check("IPV6_UNICAST_HOPS -1 is the default", o.getsockopt(*V6, S.IPV6_UNICAST_HOPS) == 64)
check("IPV6_UNICAST_HOPS 256 is EINVAL",
      errno_of(lambda: o.setsockopt(*V6, S.IPV6_UNICAST_HOPS, 256)) == errno.EINVAL)
check("IPV6_TCLASS defaults to 0", o.getsockopt(*V6, S.IPV6_TCLASS) == 0)
o.setsockopt(*V6, S.IPV6_TCLASS, 0xb8)
check("IPV6_TCLASS reads back", o.getsockopt(*V6, S.IPV6_TCLASS) == 0xb8)
check("IPV6_TCLASS 256 is EINVAL",
      errno_of(lambda: o.setsockopt(*V6, S.IPV6_TCLASS, 256)) == errno.EINVAL)
IPV6_MTU_DISCOVER = 23
check("an unsupported IPv6 option is ENOPROTOOPT",
      errno_of(lambda: o.setsockopt(*V6, IPV6_MTU_DISCOVER, 1)) == errno.ENOPROTOOPT)
check("and reading it too",
      errno_of(lambda: o.getsockopt(*V6, IPV6_MTU_DISCOVER)) == errno.ENOPROTOOPT)
o.close()
o4 = S.socket(S.AF_INET, S.SOCK_DGRAM)
o4.bind((C4, 0))
check("IPv6 options on an AF_INET socket are ENOPROTOOPT",
      errno_of(lambda: o4.setsockopt(*V6, S.IPV6_TCLASS, 1)) == errno.ENOPROTOOPT)
o4.close()

# 5. An AF_INET6 socket connecting to a v4-mapped address goes over IPv4.
m = S.socket(S.AF_INET6, S.SOCK_STREAM)
m.settimeout(10)
m.connect((mapped(L4), PP))
check("connect to ::ffff:a.b.c.d", m.getpeername()[0] == mapped(L4)
      and m.getsockname()[0] == mapped(C4), repr((m.getpeername(), m.getsockname())))
m.sendall(b"echo\n")
check("and it carries data", m.recv(16) == b"ok\n")
m.close()
v = S.socket(S.AF_INET6, S.SOCK_STREAM)
v.setsockopt(*V6, S.IPV6_V6ONLY, 1)
check("V6ONLY: bind to ::ffff:a.b.c.d is EINVAL",
      errno_of(lambda: v.bind((mapped(C4), 0))) == errno.EINVAL)
check("V6ONLY: connect to ::ffff:a.b.c.d is ENETUNREACH",
      errno_of(lambda: v.connect((mapped(L4), PP))) == errno.ENETUNREACH)
v.close()
v = S.socket(S.AF_INET6, S.SOCK_DGRAM)
v.setsockopt(*V6, S.IPV6_V6ONLY, 1)
check("V6ONLY: sendto ::ffff:a.b.c.d is ENETUNREACH",
      errno_of(lambda: v.sendto(b"x", (mapped(L4), PP))) == errno.ENETUNREACH)
v.close()

# 6. Link-local: corestack's fe80:: address (modified EUI-64 of the interface's MAC), scope
# ids as Linux reports them (the interface index).
mac = [int(b, 16) for b in open("/sys/class/net/%s/address" % IFACE).read().strip().split(":")]
eui = [mac[0] ^ 2, mac[1], mac[2], 0xFF, 0xFE, mac[3], mac[4], mac[5]]
CLL = S.inet_ntop(S.AF_INET6, bytes([0xFE, 0x80] + [0] * 6 + eui))
P6 = 7106
u = S.socket(S.AF_INET6, S.SOCK_DGRAM)
u.setsockopt(*V6, S.IPV6_RECVPKTINFO, 1)
u.bind(("::", P6))
u.settimeout(5)
say("udp %s%%vl %d" % (CLL, P6))
data, anc, flags, frm = u.recvmsg(4096, S.CMSG_SPACE(20))
check("a link-local source comes with the interface as scope id",
      frm[0].split("%")[0] == LLL and frm[3] == IFINDEX, repr(frm))
check("its IPV6_PKTINFO is our link-local address", pktinfo(anc) == (CLL, IFINDEX), repr(anc))
u.sendto(b"pongll", frm)
ans = answer()
check("a reply to a link-local peer leaves from our link-local address",
      ans.startswith("ok pongll " + CLL), ans)
u.close()
t = S.socket(S.AF_INET6, S.SOCK_STREAM)
t.settimeout(10)
t.connect((LLL, PP, 0, IFINDEX))
check("TCP to a link-local peer", t.getpeername()[0].split("%")[0] == LLL
      and t.getpeername()[3] == IFINDEX and t.getsockname()[0].split("%")[0] == CLL,
      repr((t.getpeername(), t.getsockname())))
t.sendall(b"echo\n")
check("and it carries data", t.recv(16) == b"ok\n")
t.close()
ctl.close()
print("ALL OK", flush=True)
