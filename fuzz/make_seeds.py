#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/seed-*).

Wire targets get frames (or the layer's bytes) captured from Linux in
crates/wire/tests/vectors/linux.pcap; the IPv6 targets (ipv6, icmpv6,
ndisc) get packets built here from RFC 8200, 4443 and 4861; engine_frames
gets crafted inputs in the record format of fuzz_targets/engine_frames.rs. Deterministic: running
it again rewrites the same files. Crash inputs kept in the corpus are named
crash-* and are not touched.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
PCAP = os.path.join(HERE, "..", "crates", "wire", "tests", "vectors", "linux.pcap")

MAC_A = bytes([2, 0, 0, 0, 0, 1])
MAC_B = bytes([2, 0, 0, 0, 0, 2])
PEER = bytes([10, 0, 0, 1])
ENGINE = bytes([10, 0, 0, 2])


def frames(path):
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    e = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    out, at = [], 24
    while at < len(data):
        caplen = struct.unpack(e + "I", data[at + 8 : at + 12])[0]
        out.append(data[at + 16 : at + 16 + caplen])
        at += 16 + caplen
    return out


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ipv4(proto, payload, src=PEER, dst=ENGINE, ident=0, frag=0x4000):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, frag, 64, proto, 0, src, dst)
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + payload


def l4_csum(proto, seg, off, src=PEER, dst=ENGINE):
    pseudo = src + dst + struct.pack("!BBH", 0, proto, len(seg))
    c = csum(pseudo + seg)
    if proto == 17 and c == 0:
        c = 0xFFFF
    return seg[:off] + struct.pack("!H", c) + seg[off + 2 :]


def tcp(sport, dport, seq, ack, flags, payload=b"", opts=b"", window=512):
    opts += b"\0" * (-len(opts) % 4)
    hl = 20 + len(opts)
    seg = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, (hl // 4) << 4, flags, window, 0, 0) + opts + payload
    return ipv4(6, l4_csum(6, seg, 16))


def udp(sport, dport, payload):
    seg = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    return l4_csum(17, seg, 6)


def icmp_echo(ident, seq, data):
    m = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + data
    return m[:2] + struct.pack("!H", csum(m)) + m[4:]


def eth(payload, ethertype=0x0800):
    return MAC_B + MAC_A + struct.pack("!H", ethertype) + payload


def ts(val, ecr):
    return b"\x01\x01\x08\x0a" + struct.pack("!II", val, ecr)


def sack(*blocks):
    b = b"\x01\x01\x05" + bytes([2 + 8 * len(blocks)])
    for l, r in blocks:
        b += struct.pack("!II", l, r)
    return b


def rec(frame, ctl=1):
    """A frame record; ctl 1 = 1 µs later."""
    return bytes([ctl]) + struct.pack("!H", len(frame)) + frame


def act(what):
    return bytes([what, 0, 0])


ACK, PSH, FIN, SYN, RST = 0x10, 0x08, 0x01, 0x02, 0x04
MS = 0x40  # ctl: milliseconds


def engine_seeds():
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, MAC_A, PEER, b"\0" * 6, ENGINE)
    seeds = {}
    # The accepted connection (acks count from the engine's ISS).
    seeds["passive-data"] = b"\0" + b"".join(
        [
            rec(eth(tcp(4000, 80, 1001, 1, ACK | PSH, b"hello world\n", ts(3, 1)))),
            rec(eth(tcp(4000, 80, 1013, 1449, ACK, b"", ts(4, 1))), MS | 1),
            rec(eth(tcp(4000, 80, 1013, 3001, ACK, b"", ts(5, 1))), MS | 1),
            act(1),
            rec(eth(tcp(4000, 80, 1013, 3001, ACK | FIN, b"", ts(6, 1))), MS | 2),
            act(3),
        ]
    )
    seeds["passive-sack-dupacks"] = b"\0" + b"".join(
        [rec(eth(tcp(4000, 80, 1001, 1, ACK, b"", ts(3, 1) + sack((1449 + 0, 2897))))) for _ in range(4)]
        + [act(0), rec(eth(tcp(4000, 80, 1001, 3001, ACK, b"", ts(9, 1))), MS | 5)]
    )
    seeds["passive-out-of-order"] = b"\0" + b"".join(
        [
            rec(eth(tcp(4000, 80, 1101, 1, ACK, b"B" * 100, ts(3, 1)))),
            rec(eth(tcp(4000, 80, 1001, 1, ACK, b"A" * 100, ts(3, 1)))),
            rec(eth(tcp(4000, 80, 1201, 1, ACK | FIN, b"C" * 10, ts(3, 1)))),
            act(2),
            rec(eth(tcp(4000, 80, 1212, 3002, ACK, b"", ts(4, 1))), 0xC0 | 61),
        ]
    )
    seeds["passive-rst"] = b"\0" + rec(eth(tcp(4000, 80, 1001, 0, RST)))
    seeds["passive-close-retransmit"] = b"\0" + act(3) + rec(eth(tcp(4000, 80, 1001, 1, ACK, b"", ts(3, 1))), 0x80 | 30)
    # The active open in SYN-SENT.
    seeds["active-synack"] = b"\0" + b"".join(
        [
            rec(
                eth(
                    tcp(5555, 6000, 7000, 1, SYN | ACK, b"",
                        b"\x02\x04\x05\xb4\x04\x02" + b"\x08\x0a" + struct.pack("!II", 1, 0) + b"\x01\x03\x03\x07",
                        window=65535)
                )
            ),
            act(5),
            rec(eth(tcp(5555, 6000, 7001, 701, ACK | PSH, b"reply", ts(2, 1))), MS | 1),
            act(6),
            rec(eth(tcp(5555, 6000, 7006, 702, ACK | FIN, b"", ts(3, 1))), MS | 1),
        ]
    )
    seeds["active-simultaneous-open"] = b"\0" + rec(eth(tcp(5555, 6000, 7000, 0, SYN, b"", b"\x02\x04\x05\xb4")))
    # New connections, closed ports, UDP, ICMP, ARP, fragments.
    seeds["listener-syns"] = b"\x01" + b"".join(
        [rec(eth(tcp(4100 + k, 80, 50000, 0, SYN, b"", b"\x02\x04\x05\xb4\x01\x03\x03\x07"))) for k in range(10)]
        + [rec(eth(tcp(4100, 80, 50001, 1, ACK))), rec(eth(tcp(4200, 81, 1, 0, SYN)))]
    )
    seeds["udp-icmp-arp"] = b"\x01" + b"".join(
        [
            rec(eth(ipv4(17, udp(9999, 7000, b"datagram")))),
            rec(eth(ipv4(17, udp(9999, 7001, b"no socket")))),
            rec(eth(ipv4(1, icmp_echo(1, 1, b"ping" * 8)))),
            rec(eth(arp, 0x0806)),
            act(4),
        ]
    )
    big = udp(9999, 7000, bytes(range(256)) * 8)
    seeds["udp-fragments"] = b"\x01" + b"".join(
        [
            rec(eth(ipv4(17, big[1480:], ident=77, frag=1480 // 8))),
            rec(eth(ipv4(17, big[:1480], ident=77, frag=0x2000))),
            rec(eth(ipv4(17, big[:1480], ident=78, frag=0x2000)), 0xC0 | 40),
        ]
    )
    return seeds


LL_A = bytes.fromhex("fe80000000000000000000fffe000001")  # fe80::ff:fe00:1
LL_B = bytes.fromhex("fe80000000000000000000fffe000002")  # fe80::ff:fe00:2
SOLICITED_B = bytes.fromhex("ff0200000000000000000001ff000002")  # ff02::1:ff00:2
ALL_NODES = bytes.fromhex("ff020000000000000000000000000001")
UNSPECIFIED = bytes(16)


def icmp6(msg, src=LL_A, dst=LL_B):
    """An ICMPv6 message with its checksum over the RFC 8200 §8.1 pseudo-header."""
    pseudo = src + dst + struct.pack("!I", len(msg)) + b"\0\0\0" + bytes([58])
    return msg[:2] + struct.pack("!H", csum(pseudo + msg[:2] + b"\0\0" + msg[4:])) + msg[4:]


def ipv6(next_header, payload, src=LL_A, dst=LL_B, hop_limit=64):
    return struct.pack("!IHBB", 6 << 28, len(payload), next_header, hop_limit) + src + dst + payload


def ext(next_header, body):
    """A generic extension header: body padded with zeros (Pad1s) to 8n - 2 bytes."""
    body += b"\0" * (-(len(body) + 2) % 8)
    return bytes([next_header, (len(body) + 2) // 8 - 1]) + body


def ipv6_seeds():
    udp6 = struct.pack("!HHHH", 4000, 5000, 12, 0) + b"ping"
    echo = icmp6(struct.pack("!BBHHH", 128, 0, 0, 1, 1) + b"ping")
    return {
        "udp": ipv6(17, udp6),
        "icmpv6-echo": ipv6(58, echo),
        "hbh-dstopts-udp": ipv6(0, ext(60, b"\x05\x02\x00\x00\x01\x00") + ext(17, b"\x1e\x01\xaa") + udp6),
        "unknown-option-discard": ipv6(60, ext(17, b"\xc2\x04\x00\x00\x00\x00") + udp6),
        "hbh-not-first": ipv6(60, ext(0, b"") + ext(17, b"") + udp6),
        "rh0-segments-left": ipv6(43, bytes([17, 2, 0, 1]) + bytes(4) + LL_B + udp6),
        "fragment-first": ipv6(0, ext(44, b"") + struct.pack("!BBHI", 17, 0, 1, 0x1234) + udp6),
        "fragment-atomic": ipv6(44, struct.pack("!BBHI", 58, 0, 0, 7) + echo),
        "ah-udp": ipv6(51, bytes([17, 1]) + bytes(10) + udp6),
        "no-next-header": ipv6(59, b"trailing"),
    }


def icmpv6_seeds():
    quoted = ipv6(17, struct.pack("!HHHH", 4000, 5000, 8, 0))
    return {
        "echo-request": icmp6(struct.pack("!BBHHH", 128, 0, 0, 0x1234, 1) + b"abcdefgh"),
        "echo-reply": icmp6(struct.pack("!BBHHH", 129, 0, 0, 0x1234, 1) + b"abcdefgh"),
        "port-unreachable": icmp6(struct.pack("!BBHI", 1, 4, 0, 0) + quoted),
        "packet-too-big": icmp6(struct.pack("!BBHI", 2, 0, 0, 1280) + quoted),
        "time-exceeded": icmp6(struct.pack("!BBHI", 3, 0, 0, 0) + quoted),
        "param-problem": icmp6(struct.pack("!BBHI", 4, 1, 0, 6) + quoted),
    }


def ndisc_seeds():
    """A pick byte (bit 0: source unspecified; bits 1-2: destination peer,
    all-nodes, all-routers, solicited-node of the peer), then the message."""
    sllao = bytes([1, 1, 2, 0, 0, 0, 0, 1])
    tllao = bytes([2, 1, 2, 0, 0, 0, 0, 2])
    mtu = bytes([5, 1, 0, 0]) + struct.pack("!I", 1500)
    prefix = bytes([3, 4, 64, 0xC0]) + struct.pack("!II", 2592000, 604800) + bytes(4)
    prefix += bytes.fromhex("20010db8000100000000000000000000")
    quoted = ipv6(17, struct.pack("!HHHH", 1, 2, 8, 0))
    redirected = bytes([4, 1 + len(quoted) // 8]) + bytes(6) + quoted
    ns = struct.pack("!BBHI", 135, 0, 0, 0) + LL_B
    return {
        "ns": bytes([6]) + icmp6(ns + sllao, LL_A, SOLICITED_B),
        "ns-dad": bytes([7]) + icmp6(ns, UNSPECIFIED, SOLICITED_B),
        "na-solicited": bytes([0]) + icmp6(struct.pack("!BBHI", 136, 0, 0, 0x60 << 24) + LL_B + tllao, LL_A, LL_B),
        "na-unsolicited": bytes([2]) + icmp6(struct.pack("!BBHI", 136, 0, 0, 0xA0 << 24) + LL_B + tllao, LL_A, ALL_NODES),
        "rs": bytes([4]) + icmp6(struct.pack("!BBHI", 133, 0, 0, 0) + sllao, LL_A, bytes.fromhex("ff020000000000000000000000000002")),
        "ra": bytes([2]) + icmp6(struct.pack("!BBHBBHII", 134, 0, 0, 64, 0xC0, 1800, 30000, 1000) + sllao + mtu + prefix, LL_A, ALL_NODES),
        "redirect": bytes([0]) + icmp6(struct.pack("!BBHI", 137, 0, 0, 0) + LL_B + bytes.fromhex("20010db8000000000000000000000009") + tllao + redirected, LL_A, LL_B),
        "zero-length-option": bytes([6]) + icmp6(ns + bytes([1, 0, 2, 0, 0, 0, 0, 1]), LL_A, SOLICITED_B),
    }


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def main():
    fs = frames(PCAP)
    picks = {0: "arp-request", 1: "arp-reply", 2: "icmp-echo", 4: "udp", 5: "udp-closed", 6: "icmp-unreach",
             7: "tcp-syn", 8: "tcp-synack", 10: "tcp-data", 12: "tcp-psh", 16: "tcp-fin", 20: "tcp-rst"}
    for i, name in picks.items():
        f = fs[i]
        write("ethernet", name, f)
        if f[12:14] == b"\x08\x06":
            write("arp", name, f[14:])
            continue
        ip = f[14:]
        write("ipv4", name, ip)
        hl = (ip[0] & 15) * 4
        total = struct.unpack("!H", ip[2:4])[0]
        l4 = ip[hl:total]
        target = {1: "icmp", 6: "tcp", 17: "udp"}[ip[9]]
        write(target, name, l4)
    write("ipv4", "fragment", ipv4(17, b"x" * 16, ident=5, frag=0x2001))
    h = struct.pack("!BBHHHBBH4s4s", 0x46, 0, 32, 1, 0, 64, 17, 0, PEER, ENGINE) + b"\x01\x01\x01\x00"
    write("ipv4", "options", h[:10] + struct.pack("!H", csum(h)) + h[12:] + b"y" * 8)
    for target, seeds in (("ipv6", ipv6_seeds()), ("icmpv6", icmpv6_seeds()), ("ndisc", ndisc_seeds())):
        for name, data in seeds.items():
            write(target, name, data)
    for name, data in engine_seeds().items():
        write("engine_frames", name, data)


if __name__ == "__main__":
    main()
