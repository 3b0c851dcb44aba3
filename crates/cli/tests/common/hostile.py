#!/usr/bin/env python3
"""Hostile peers for crates/cli/tests/hostile.rs, run with scapy inside the test's client namespace.

Every mode sends Ethernet frames on IFACE to the corestack server (DST_MAC, DST_IP) and exits 0
when what it checks held, non-zero with one line on stderr otherwise. Every loop is bounded in
count and time. Randomness is seeded (--seed) so a failure can be replayed.

  synflood   --count N --rate R --subnet 10.N.1          SYNs from random sources in the subnet
  blind      --port P                                    an established kernel connection echoes
                                                         1 MiB while random (blind) and near-window
                                                         RST/SYN/data aimed at its 4-tuple arrive
  malformed  --kind K --copies C [--port P]              C copies of one malformed frame
  window     --kind zero|huge|wscale255 --port P --fake-ip A
                                                         a scapy TCP client (source A, answering
                                                         ARP itself) with odd windows; checks echo
  ipv6       --kind K --copies C                         C malformed or hostile IPv6 packets of one
                                                         kind (extension chains, RH0, fragments,
                                                         ND hop limit, garbage); DST_IP is IPv6
  ptb        --sport S                                   an established kernel connection over IPv6
                                                         echoes 1 MiB after forged Packet Too Big
                                                         messages quoting out-of-window segments
"""

import argparse
import random
import socket
import struct
import sys
import threading
import time

from scapy.all import ARP, Ether, ICMP, IP, TCP, UDP, Raw, AsyncSniffer, conf, get_if_hwaddr, raw
from scapy.layers.inet6 import (ICMPv6EchoRequest, ICMPv6ND_NS, ICMPv6NDOptSrcLLAddr,
                                ICMPv6PacketTooBig, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                                IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, HBHOptUnknown)

conf.verb = 0


def fail(msg):
    print(f"hostile.py: {msg}", file=sys.stderr)
    sys.exit(1)


def l2(args):
    return conf.L2socket(iface=args.iface)


def eth(args):
    return Ether(src=get_if_hwaddr(args.iface), dst=args.dst_mac)


# --- SYN flood -------------------------------------------------------------------------------


def synflood(args):
    rng = random.Random(args.seed)
    src_mac = get_if_hwaddr(args.iface)
    frames = []
    for _ in range(args.count):
        host = rng.randint(10, 250)  # never .1 (Linux) or .2 (corestack)
        pkt = (
            Ether(src=src_mac, dst=args.dst_mac)
            / IP(src=f"{args.subnet}.{host}", dst=args.dst_ip, id=rng.randint(0, 65535))
            / TCP(sport=rng.randint(1024, 65535), dport=args.port, flags="S", seq=rng.getrandbits(32),
                  window=64240, options=[("MSS", 1460)])
        )
        frames.append(raw(pkt))
    s = l2(args)
    start = time.monotonic()
    for i, f in enumerate(frames):
        # Pace to --rate frames/s.
        due = start + i / args.rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        s.send(f)
        if time.monotonic() - start > args.max_seconds:
            fail(f"sent only {i} SYNs within {args.max_seconds} s")
    took = time.monotonic() - start
    print(f"sent {len(frames)} SYNs in {took:.1f} s")


# --- blind attacks on an established connection ------------------------------------------------


def echo_exact(sock, rng, nbytes, what):
    """Sends nbytes of random data, reads the echo back, compares."""
    data = rng.randbytes(nbytes)
    got = bytearray()
    off = 0
    deadline = time.monotonic() + 30
    sock.setblocking(False)
    while len(got) < nbytes:
        if time.monotonic() > deadline:
            fail(f"{what}: echo stalled after {len(got)} of {nbytes} bytes")
        if off < nbytes:
            try:
                off += sock.send(data[off:off + 65536])
            except BlockingIOError:
                pass
        try:
            chunk = sock.recv(65536)
            if not chunk:
                fail(f"{what}: the server closed the connection after {len(got)} bytes")
            got.extend(chunk)
        except BlockingIOError:
            time.sleep(0.0002)
        except ConnectionResetError:
            fail(f"{what}: the connection was reset after {len(got)} bytes")
    if bytes(got) != data:
        fail(f"{what}: the echo differs from what was sent")


def connect_echo(args, rng, what):
    """A kernel TCP connection from SRC_IP:SPORT to the server, after a 64 KiB echo on it."""
    sock = socket.create_connection((args.dst_ip, args.port), timeout=10,
                                    source_address=(args.src_ip, args.sport))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    echo_exact(sock, rng, 64 * 1024, what)
    return sock


def learn_seq(args, sock, sport, rng, ip_layer):
    """(rcv_nxt, snd_nxt) of corestack's end of the connection on SPORT, from one more echo
    watched on the interface."""
    seen = {}

    def note(p):
        if TCP in p and ip_layer in p:
            t, ip = p[TCP], p[ip_layer]
            if ip.src == args.src_ip and t.sport == sport:
                seen["to_core"] = (t.seq + len(t.payload), t.ack)
            elif ip.src == args.dst_ip and t.dport == sport:
                seen["from_core"] = (t.seq + len(t.payload), t.ack)

    sniffer = AsyncSniffer(iface=args.iface, prn=note, store=False,
                           lfilter=lambda p: TCP in p and sport in (p[TCP].sport, p[TCP].dport))
    sniffer.start()
    time.sleep(0.3)
    echo_exact(sock, rng, 4096, "while learning the sequence numbers")
    time.sleep(0.3)
    sniffer.stop()
    if "to_core" not in seen or "from_core" not in seen:
        fail(f"did not see the connection's segments on {args.iface}: {seen}")
    # What corestack expects next, and what it sends next.
    return seen["to_core"][0], seen["from_core"][0]


def blind(args):
    rng = random.Random(args.seed)
    sport = args.sport
    sock = connect_echo(args, rng, "before the attack")

    rcv_nxt, snd_nxt = learn_seq(args, sock, sport, rng, IP)
    s = l2(args)
    base = eth(args) / IP(src=args.src_ip, dst=args.dst_ip)
    sent = 0

    def send(tcp, payload=b""):
        nonlocal sent
        s.send(raw(base / tcp / Raw(payload)) if payload else raw(base / tcp))
        sent += 1

    # Blind: sequence (and acknowledgement) numbers guessed at random.
    for _ in range(args.count):
        send(TCP(sport=sport, dport=args.port, flags="R", seq=rng.getrandbits(32)))
        send(TCP(sport=sport, dport=args.port, flags="S", seq=rng.getrandbits(32)))
        send(TCP(sport=sport, dport=args.port, flags="PA", seq=rng.getrandbits(32),
                 ack=rng.getrandbits(32), window=65535), b"EVIL" * 64)
    # Near misses (RFC 5961): in-window RSTs that are not exact, a SYN at rcv_nxt, data at
    # rcv_nxt whose ACK acknowledges bytes never sent or far in the past.
    for off in (1, 100, 1000, 20000):
        send(TCP(sport=sport, dport=args.port, flags="R", seq=(rcv_nxt + off) % 2**32))
        send(TCP(sport=sport, dport=args.port, flags="RA", seq=(rcv_nxt + off) % 2**32,
                 ack=snd_nxt))
    send(TCP(sport=sport, dport=args.port, flags="S", seq=rcv_nxt))
    send(TCP(sport=sport, dport=args.port, flags="PA", seq=rcv_nxt, ack=(snd_nxt + 2**30) % 2**32,
             window=65535), b"EVIL" * 64)
    send(TCP(sport=sport, dport=args.port, flags="PA", seq=rcv_nxt, ack=(snd_nxt - 2**30) % 2**32,
             window=65535), b"EVIL" * 64)
    time.sleep(0.3)

    echo_exact(sock, rng, 1 << 20, "after the attack")
    sock.shutdown(socket.SHUT_WR)
    sock.settimeout(10)
    try:
        rest = sock.recv(1)
    except socket.timeout:
        fail("no FIN from the server after ours")
    if rest:
        fail("unexpected bytes after the echo")
    sock.close()
    print(f"sent {sent} blind frames at {args.src_ip}:{sport} -> {args.dst_ip}:{args.port} "
          f"(rcv_nxt {rcv_nxt}, snd_nxt {snd_nxt}); the connection echoed 1 MiB after them")


# --- malformed frames ----------------------------------------------------------------------


def malformed_frame(args, kind):
    e = eth(args)
    ip = IP(src=args.src_ip, dst=args.dst_ip)
    sport = 40000 + random.Random(args.seed).randint(0, 1000)
    if kind == "ip_checksum":
        return raw(e / IP(src=args.src_ip, dst=args.dst_ip, chksum=0x1234) / ICMP() / Raw(b"x" * 32))
    if kind == "tcp_checksum":
        return raw(e / ip / TCP(sport=sport, dport=args.port, flags="S", chksum=0x1234))
    if kind == "udp_checksum":
        return raw(e / ip / UDP(sport=sport, dport=args.port, chksum=0x1234) / Raw(b"hello"))
    if kind == "ip_total_length":
        return raw(e / IP(src=args.src_ip, dst=args.dst_ip, len=1000) / ICMP() / Raw(b"x" * 32))
    if kind == "ip_ihl":
        b = bytearray(raw(e / ip / ICMP() / Raw(b"x" * 32)))
        b[14] = 0x44  # version 4, IHL 4 (16 bytes): below the minimum of 5
        fix_ip_checksum(b, 16)
        return bytes(b)
    if kind == "tcp_offset_short":
        return raw(e / ip / TCP(sport=sport, dport=args.port, flags="S", dataofs=4))
    if kind == "tcp_offset_long":
        return raw(e / ip / TCP(sport=sport, dport=args.port, flags="S", dataofs=15))
    if kind == "tcp_options":
        # 4 bytes of options (data offset 6); the MSS option says it is 8 bytes long.
        return raw(e / ip / TCP(sport=sport, dport=args.port, flags="S", dataofs=6,
                                options=[]) / Raw(b"\x02\x08\x05\xb4"))
    if kind == "eth_only":
        return raw(e)[:12] + b"\x08\x00"
    if kind == "ip_half":
        return raw(e / ip / TCP(sport=sport, dport=args.port))[:14 + 10]
    if kind == "arp_half":
        return raw(e / ARP(psrc=args.src_ip, pdst=args.dst_ip))[:14 + 14]
    fail(f"unknown kind {kind}")


def fix_ip_checksum(b, hlen):
    b[24:26] = b"\x00\x00"
    total = 0
    for i in range(14, 14 + hlen, 2):
        total += (b[i] << 8) | b[i + 1]
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    b[24:26] = struct.pack("!H", (~total) & 0xFFFF)


def malformed(args):
    frame = malformed_frame(args, args.kind)
    s = l2(args)
    for _ in range(args.copies):
        s.send(frame)
        time.sleep(0.01)
    print(f"sent {args.copies} frames of kind {args.kind} ({len(frame)} bytes)")


# --- a scapy TCP client with odd windows ------------------------------------------------------


class RawClient:
    """A minimal TCP client speaking from FAKE_IP: it answers ARP for that address itself (the
    kernel does not own it, so it sends no RST), and collects what corestack sends it."""

    def __init__(self, args):
        self.args = args
        self.mac = "02:00:00:00:00:50"
        self.sock = l2(args)
        self.rx = []
        self.lock = threading.Lock()
        self.sport = 41000 + random.Random(args.seed).randint(0, 1000)
        self.sniffer = AsyncSniffer(iface=args.iface, prn=self.on_frame, store=False)
        self.sniffer.start()
        time.sleep(0.3)
        # Announce ourselves: an ARP request for the server from the fake address.
        self.send(Ether(src=self.mac, dst="ff:ff:ff:ff:ff:ff")
                  / ARP(op=1, hwsrc=self.mac, psrc=args.fake_ip, pdst=args.dst_ip))

    def send(self, pkt):
        self.sock.send(raw(pkt))

    def on_frame(self, p):
        if ARP in p and p[ARP].op == 1 and p[ARP].pdst == self.args.fake_ip:
            self.send(Ether(src=self.mac, dst=p[ARP].hwsrc)
                      / ARP(op=2, hwsrc=self.mac, psrc=self.args.fake_ip, hwdst=p[ARP].hwsrc,
                            pdst=p[ARP].psrc))
        elif TCP in p and IP in p and p[IP].dst == self.args.fake_ip and p[TCP].dport == self.sport:
            with self.lock:
                self.rx.append((time.monotonic(), p[TCP].copy()))

    def tcp(self, **kw):
        a = self.args
        return (Ether(src=self.mac, dst=a.dst_mac) / IP(src=a.fake_ip, dst=a.dst_ip)
                / TCP(sport=self.sport, dport=a.port, **kw))

    def wait(self, pred, timeout, what, required=True):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for _, t in self.rx:
                    if pred(t):
                        return t
            time.sleep(0.01)
        if required:
            fail(f"{what}: nothing within {timeout} s (got {len(self.rx)} segments)")
        return None

    def segments(self):
        with self.lock:
            return [t for _, t in self.rx]


def window(args):
    c = RawClient(args)
    iss = random.Random(args.seed).getrandbits(32)
    if args.kind == "zero":
        syn_opts, syn_win = [("MSS", 1460)], 65535
    elif args.kind == "huge":
        syn_opts, syn_win = [("MSS", 1460), ("WScale", 14)], 65535
    else:
        syn_opts, syn_win = [("MSS", 1460), ("WScale", 255)], 65535
    synack = None
    for _ in range(3):
        c.send(c.tcp(flags="S", seq=iss, window=syn_win, options=syn_opts))
        synack = c.wait(lambda t: t.flags.S and t.flags.A, 1.0, "SYN-ACK", required=False)
        if synack is not None:
            break
    if synack is None:
        fail("no SYN-ACK after 3 SYNs")
    if synack.ack != (iss + 1) % 2**32:
        fail(f"SYN-ACK acknowledges {synack.ack}, expected {iss + 1}")
    rcv = (synack.seq + 1) % 2**32
    snd = (iss + 1) % 2**32
    msg = b"window test " * 100  # 1200 bytes
    # Zero window: the data is accepted, but corestack may not echo more than a probe's worth.
    first_win = 0 if args.kind == "zero" else 65535
    c.send(c.tcp(flags="A", seq=snd, ack=rcv, window=first_win))
    c.send(c.tcp(flags="PA", seq=snd, ack=rcv, window=first_win) / Raw(msg))
    snd = (snd + len(msg)) % 2**32
    c.wait(lambda t: t.flags.A and t.ack == snd, 2.0, "ACK of our data")
    if args.kind == "zero":
        time.sleep(1.0)
        data_segs = [t for t in c.segments() if not t.flags.S and len(t.payload)]
        desc = [((t.seq - rcv) % 2**32, len(t.payload)) for t in data_segs]
        # Window probes (RFC 9293 §3.8.6.1) repeat the first bytes; nothing past them may go.
        if any(off != 0 or n >= len(msg) for off, n in desc):
            fail(f"corestack sent data into a zero window beyond a probe: (offset, length) {desc}")
        print(f"zero window: probes (offset, length) {desc} in 1 s")
        c.send(c.tcp(flags="A", seq=snd, ack=rcv, window=65535))
    # The echo must arrive whole (ack it as it comes so nothing waits for us).
    got = {}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for t in c.segments():
            off = (t.seq - rcv) % 2**32
            if len(t.payload) and off < len(msg):
                got[off] = bytes(t.payload)
        data = bytearray()
        while len(data) in got:
            data.extend(got[len(data)])
        if len(data) >= len(msg):
            break
        c.send(c.tcp(flags="A", seq=snd, ack=(rcv + len(data)) % 2**32, window=65535))
        time.sleep(0.05)
    else:
        fail(f"the echo did not come back whole ({sorted(got)})")
    if bytes(data[:len(msg)]) != msg:
        fail("the echo differs from what was sent")
    c.send(c.tcp(flags="R", seq=snd))
    c.sniffer.stop()
    print(f"{args.kind} window: echo of {len(msg)} bytes came back whole")


# --- hostile IPv6 -----------------------------------------------------------------------------


def ipv6_frames(args, kind, copy, rng):
    """The frames of one copy of KIND: one packet, or the fragments of one datagram."""
    e = eth(args)
    ip = IPv6(src=args.src_ip, dst=args.dst_ip)
    echo = ICMPv6EchoRequest(id=0x4242, seq=copy, data=b"corestack" * 8)
    if kind == "rh0":
        # RFC 5095: a Type 0 Routing header with Segments Left > 0.
        return [raw(e / ip / IPv6ExtHdrRouting(type=0, segleft=1, addresses=["fd00::99"]) / echo)]
    if kind == "hbh_not_first":
        # RFC 8200 §4.3: Hop-by-Hop only right after the IPv6 header.
        return [raw(e / ip / IPv6ExtHdrDestOpt() / IPv6ExtHdrHopByHop() / echo)]
    if kind == "chain_truncated":
        # A Destination Options header claiming 2 KiB past the end of the packet.
        b = bytearray(raw(e / ip / IPv6ExtHdrDestOpt() / echo))
        b[14 + 40 + 1] = 255
        return [bytes(b)]
    if kind == "chain_long":
        pkt = ip
        for _ in range(10):
            pkt = pkt / IPv6ExtHdrDestOpt()
        return [raw(e / pkt / echo)]
    if kind == "option_discard":
        # Option type 0x5e: top bits 01, "discard the packet" (RFC 8200 §4.2).
        return [raw(e / ip / IPv6ExtHdrDestOpt(options=[HBHOptUnknown(otype=0x5E, optdata=b"ab")])
                    / echo)]
    if kind in ("frag_overlap", "frag_tiny"):
        ident = 0x10000 + copy
        if kind == "frag_overlap":
            # 64 bytes of ICMPv6 in two fragments: [0, 40) and [32, 64) overlap (RFC 5722).
            body = raw(IPv6(src=args.src_ip, dst=args.dst_ip) / echo)[40:]
            first = body[:40]
            second = body[32:]
            return [
                raw(e / ip / IPv6ExtHdrFragment(nh=58, offset=0, m=1, id=ident) / Raw(first)),
                raw(e / ip / IPv6ExtHdrFragment(nh=58, offset=4, m=0, id=ident) / Raw(second)),
            ]
        # RFC 7112: a first fragment holding only a Destination Options header; the ICMPv6 header
        # is in the second fragment.
        body = raw(IPv6(src=args.src_ip, dst=args.dst_ip) / IPv6ExtHdrDestOpt(nh=58) / echo)[40:]
        return [
            raw(e / ip / IPv6ExtHdrFragment(nh=60, offset=0, m=1, id=ident) / Raw(body[:8])),
            raw(e / ip / IPv6ExtHdrFragment(nh=60, offset=1, m=0, id=ident) / Raw(body[8:])),
        ]
    if kind == "nd_hop_limit":
        # A Neighbor Solicitation for our address sent with hop limit 64 (RFC 4861 §7.1.1).
        mac = get_if_hwaddr(args.iface)
        return [raw(e / IPv6(src=args.src_ip, dst=args.dst_ip, hlim=64)
                    / ICMPv6ND_NS(tgt=args.dst_ip) / ICMPv6NDOptSrcLLAddr(lladdr=mac))]
    if kind == "garbage":
        # Random bytes for everything but the destination address (which the steering program
        # matches), 40 to 300 bytes long.
        n = rng.randint(40, 300)
        b = bytearray(rng.randbytes(n))
        if copy % 2:
            # Every other one has a valid fixed header, so that the garbage reaches the
            # extension-header, fragment, ICMPv6, TCP and UDP parsers.
            b[0] = 0x60 | (b[0] & 0x0F)
            b[4:6] = struct.pack("!H", n - 40)
            b[6] = rng.choice([0, 43, 44, 60, 58, 6, 17, rng.randint(0, 255)])
        b[24:40] = socket.inet_pton(socket.AF_INET6, args.dst_ip)
        return [raw(e)[:12] + b"\x86\xdd" + bytes(b)]
    fail(f"unknown IPv6 kind {kind}")


def ipv6(args):
    rng = random.Random(args.seed)
    s = l2(args)
    sent = 0
    # Frames whose fixed header cannot be parsed: not version 6, or a payload length past the
    # frame (RFC 8200 §3).
    malformed = 0
    for copy in range(args.copies):
        for f in ipv6_frames(args, args.kind, copy, rng):
            ip = f[14:]
            malformed += (ip[0] >> 4) != 6 or 40 + struct.unpack("!H", ip[4:6])[0] > len(ip)
            s.send(f)
            sent += 1
        time.sleep(0.01)
    print(f"sent {args.copies} IPv6 packets of kind {args.kind} ({sent} frames)")
    print(f"malformed {malformed}")


def ptb(args):
    """Forged Packet Too Big messages quoting segments of a live connection that are not in
    flight (RFC 5927 §5.2): corestack must ignore them and keep its MSS."""
    rng = random.Random(args.seed)
    sport = args.sport
    sock = connect_echo(args, rng, "before the forged messages")
    rcv_nxt, snd_nxt = learn_seq(args, sock, sport, rng, IPv6)
    s = l2(args)
    sent = 0
    for mtu, seq in ((1280, snd_nxt + 2**30), (1280, snd_nxt - 2**30), (1300, snd_nxt + 70000),
                     (600, snd_nxt + 2**31), (1280, rng.getrandbits(32))):
        quoted = (IPv6(src=args.dst_ip, dst=args.src_ip, plen=1400)
                  / TCP(sport=args.port, dport=sport, flags="PA", seq=seq % 2**32, ack=rcv_nxt)
                  / Raw(b"q" * 64))
        s.send(raw(eth(args) / IPv6(src=args.src_ip, dst=args.dst_ip)
                   / ICMPv6PacketTooBig(mtu=mtu) / raw(quoted)))
        sent += 1
    time.sleep(0.3)
    echo_exact(sock, rng, 1 << 20, "after the forged messages")
    sock.close()
    print(f"sent {sent} forged Packet Too Big messages (snd_nxt {snd_nxt}); the connection "
          f"echoed 1 MiB after them")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["synflood", "blind", "malformed", "window", "ipv6", "ptb"])
    p.add_argument("--iface", required=True)
    p.add_argument("--dst-mac", required=True)
    p.add_argument("--dst-ip", required=True)
    p.add_argument("--src-ip")
    p.add_argument("--fake-ip")
    p.add_argument("--port", type=int, default=7)
    p.add_argument("--sport", type=int, default=45678)
    p.add_argument("--subnet")
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--rate", type=float, default=2500.0)
    p.add_argument("--max-seconds", type=float, default=20.0)
    p.add_argument("--kind")
    p.add_argument("--copies", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    {"synflood": synflood, "blind": blind, "malformed": malformed, "window": window,
     "ipv6": ipv6, "ptb": ptb}[args.mode](args)


if __name__ == "__main__":
    main()
