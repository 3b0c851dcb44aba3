//! Frames captured from the Linux stack (tests/vectors/capture.sh writes
//! tests/vectors/linux.pcap): every frame parses through every layer with
//! checksum verification, known fields match what Linux sent, and headers
//! re-emitted from the reprs equal the captured bytes.
//!
//! TCP headers, options included, compare byte for byte: `TcpRepr` emits
//! options in the order Linux uses. The only field a repr cannot carry is the
//! IPv4 TOS byte (Linux sends ICMP errors with TOS 0xc0); for that frame the
//! TOS is copied into the emitted header and its checksum recomputed before
//! comparing.

use std::net::Ipv4Addr;

use wire::arp::{ArpOp, ArpRepr};
use wire::ethernet::{self, EthernetRepr};
use wire::icmp::{self, Echo, Icmpv4Repr};
use wire::ipv4::{self, Ipv4Packet};
use wire::tcp::{self, TcpFlags, TcpRepr};
use wire::udp::{self, UdpRepr};
use wire::MacAddr;

const PCAP: &[u8] = include_bytes!("vectors/linux.pcap");

const MAC_A: MacAddr = MacAddr([0x02, 0, 0, 0x99, 0, 0x01]);
const MAC_B: MacAddr = MacAddr([0x02, 0, 0, 0x99, 0, 0x02]);
const IP_A: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);

/// The frames of a classic pcap file (microsecond or nanosecond, either byte
/// order, link type Ethernet), parsed by hand.
fn frames(pcap: &[u8]) -> Vec<&[u8]> {
    assert!(pcap.len() >= 24, "pcap header");
    let magic = u32::from_le_bytes(pcap[0..4].try_into().unwrap());
    let little = match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => false,
        other => panic!("not a pcap file: magic {other:#x}"),
    };
    let u32_at = |at: usize| {
        let b: [u8; 4] = pcap[at..at + 4].try_into().unwrap();
        if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    assert_eq!(u32_at(20), 1, "link type must be Ethernet");
    let mut out = Vec::new();
    let mut at = 24;
    while at < pcap.len() {
        let caplen = u32_at(at + 8) as usize;
        let origlen = u32_at(at + 12) as usize;
        assert_eq!(
            caplen,
            origlen,
            "frame {} was cut by the snap length",
            out.len()
        );
        out.push(&pcap[at + 16..at + 16 + caplen]);
        at += 16 + caplen;
    }
    out
}

#[derive(Default, Debug)]
struct Seen {
    arp_request: usize,
    arp_reply: usize,
    echo_request: usize,
    echo_reply: usize,
    port_unreachable: usize,
    udp: usize,
    syn: usize,
    syn_ack: usize,
    data: usize,
    fin: usize,
    rst: usize,
}

#[test]
fn linux_capture_every_frame_parses_and_reemits_identically() {
    let frames = frames(PCAP);
    assert_eq!(frames.len(), 21);
    let mut seen = Seen::default();
    for (i, frame) in frames.iter().enumerate() {
        check_frame(frame, &mut seen).unwrap_or_else(|e| panic!("frame {i}: {e}"));
    }
    assert_eq!(seen.arp_request, 1, "{seen:?}");
    assert_eq!(seen.arp_reply, 1, "{seen:?}");
    assert_eq!(seen.echo_request, 1, "{seen:?}");
    assert_eq!(seen.echo_reply, 1, "{seen:?}");
    assert_eq!(seen.port_unreachable, 1, "{seen:?}");
    assert_eq!(seen.udp, 2, "{seen:?}");
    assert_eq!(seen.syn, 2, "{seen:?}");
    assert_eq!(seen.syn_ack, 1, "{seen:?}");
    assert_eq!(seen.data, 3, "{seen:?}");
    assert_eq!(seen.fin, 2, "{seen:?}");
    assert_eq!(seen.rst, 1, "{seen:?}");
}

fn check_frame(frame: &[u8], seen: &mut Seen) -> Result<(), String> {
    let (eth, payload) = EthernetRepr::parse(frame).map_err(|e| format!("ethernet: {e}"))?;
    let mut buf = [0u8; ethernet::HEADER_LEN];
    eth.emit(&mut buf);
    assert_eq!(buf, frame[..ethernet::HEADER_LEN]);
    assert!(eth.src == MAC_A || eth.src == MAC_B);
    match eth.ethertype {
        ethernet::ETHERTYPE_ARP => check_arp(&eth, payload, seen),
        ethernet::ETHERTYPE_IPV4 => check_ipv4(payload, seen),
        other => Err(format!("unexpected ethertype {other:#06x}")),
    }
}

fn check_arp(eth: &EthernetRepr, packet: &[u8], seen: &mut Seen) -> Result<(), String> {
    let arp = ArpRepr::parse(packet).map_err(|e| format!("arp: {e}"))?;
    match arp.op {
        ArpOp::Request => {
            seen.arp_request += 1;
            assert_eq!(eth.dst, MacAddr::BROADCAST);
            assert_eq!((arp.sender_mac, arp.sender_ip), (MAC_A, IP_A));
            assert_eq!((arp.target_mac, arp.target_ip), (MacAddr::ZERO, IP_B));
        }
        ArpOp::Reply => {
            seen.arp_reply += 1;
            assert_eq!((arp.sender_mac, arp.sender_ip), (MAC_B, IP_B));
            assert_eq!((arp.target_mac, arp.target_ip), (MAC_A, IP_A));
        }
    }
    let mut buf = [0u8; wire::arp::PACKET_LEN];
    arp.emit(&mut buf);
    assert_eq!(buf, packet[..wire::arp::PACKET_LEN]);
    Ok(())
}

fn check_ipv4(packet: &[u8], seen: &mut Seen) -> Result<(), String> {
    let ip = Ipv4Packet::new_checked(packet).map_err(|e| format!("ipv4: {e}"))?;
    assert!(ip.checksum_valid());
    assert_eq!(
        ip.header_len(),
        ipv4::HEADER_LEN,
        "Linux sent no IP options"
    );
    assert!(!ip.is_fragment());
    assert_eq!(ip.ttl(), 64);
    assert!((ip.src(), ip.dst()) == (IP_A, IP_B) || (ip.src(), ip.dst()) == (IP_B, IP_A));

    let mut hdr = [0u8; ipv4::HEADER_LEN];
    ip.repr().emit(&mut hdr);
    if ip.tos() != 0 {
        // Linux sends ICMP errors with TOS 0xc0 (internetwork control).
        assert_eq!(ip.protocol(), ipv4::PROTO_ICMP);
        hdr[1] = ip.tos();
        ipv4::fill_header_checksum(&mut hdr);
    }
    assert_eq!(hdr, ip.header());

    let (src, dst, payload) = (ip.src(), ip.dst(), ip.payload());
    match ip.protocol() {
        ipv4::PROTO_ICMP => check_icmp(payload, seen),
        ipv4::PROTO_UDP => check_udp(src, dst, payload, seen),
        ipv4::PROTO_TCP => check_tcp(src, dst, payload, seen),
        other => Err(format!("unexpected protocol {other}")),
    }
}

fn check_icmp(message: &[u8], seen: &mut Seen) -> Result<(), String> {
    let repr = Icmpv4Repr::parse(message, true).map_err(|e| format!("icmp: {e}"))?;
    match repr {
        Icmpv4Repr::EchoRequest(Echo { seq_no, data, .. }) => {
            seen.echo_request += 1;
            assert_eq!(seq_no, 1);
            assert_eq!(data.len(), 56); // ping's default payload
        }
        Icmpv4Repr::EchoReply(Echo { seq_no, data, .. }) => {
            seen.echo_reply += 1;
            assert_eq!(seq_no, 1);
            assert_eq!(data.len(), 56);
        }
        Icmpv4Repr::DstUnreachable { code, data, .. } => {
            seen.port_unreachable += 1;
            assert_eq!(code, icmp::DST_UNREACH_PORT);
            // The quoted datagram: the UDP packet to the closed port 5001.
            let quoted = Ipv4Packet::new_checked(data).map_err(|e| format!("quoted: {e}"))?;
            assert_eq!(quoted.protocol(), ipv4::PROTO_UDP);
            let (udp, _) = UdpRepr::parse(quoted.payload(), quoted.src(), quoted.dst(), true)
                .map_err(|e| format!("quoted udp: {e}"))?;
            assert_eq!(udp.dst_port, 5001);
        }
        Icmpv4Repr::Other { msg_type, code } => {
            return Err(format!("unexpected icmp type {msg_type} code {code}"))
        }
    }
    let mut buf = vec![0u8; repr.buffer_len()];
    assert_eq!(repr.emit(&mut buf), message.len());
    assert_eq!(buf, message);
    Ok(())
}

fn check_udp(src: Ipv4Addr, dst: Ipv4Addr, segment: &[u8], seen: &mut Seen) -> Result<(), String> {
    let (repr, payload) =
        UdpRepr::parse(segment, src, dst, true).map_err(|e| format!("udp: {e}"))?;
    seen.udp += 1;
    match repr.dst_port {
        5000 => assert_eq!((repr.src_port, payload), (4000, &b"hello udp\n"[..])),
        5001 => assert_eq!((repr.src_port, payload), (4001, &b"closed udp\n"[..])),
        other => return Err(format!("unexpected udp port {other}")),
    }
    let mut buf = vec![0u8; udp::HEADER_LEN + payload.len()];
    repr.emit_header(&mut buf);
    buf[udp::HEADER_LEN..].copy_from_slice(payload);
    udp::fill_checksum(&mut buf, src, dst);
    assert_eq!(buf, segment);
    Ok(())
}

fn check_tcp(src: Ipv4Addr, dst: Ipv4Addr, segment: &[u8], seen: &mut Seen) -> Result<(), String> {
    let (repr, payload) =
        TcpRepr::parse(segment, src, dst, true).map_err(|e| format!("tcp: {e}"))?;
    let f = repr.flags;
    let o = &repr.options;
    if f.syn() {
        if f.ack() {
            seen.syn_ack += 1;
        } else {
            seen.syn += 1;
        }
        assert_eq!(o.mss, Some(1460));
        assert!(o.sack_permitted);
        assert_eq!(o.window_scale, Some(10));
        let (tsval, tsecr) = o.timestamps.ok_or("SYN without timestamps")?;
        assert_ne!(tsval, 0);
        assert_eq!(tsecr == 0, !f.ack(), "TSecr is 0 exactly on the first SYN");
        assert_eq!(repr.header_len(), 40);
        assert_eq!(repr.segment_len(), 1);
    } else if f.rst() {
        seen.rst += 1;
        assert_eq!(f.0, TcpFlags::RST | TcpFlags::ACK);
        assert_eq!((repr.seq.0, repr.window), (0, 0));
        assert_eq!(repr.src_port, 6001);
        assert_eq!(*o, Default::default());
        assert_eq!(repr.header_len(), tcp::HEADER_LEN);
    } else {
        // Established: ACK set, timestamps on every segment, nothing else.
        assert!(f.ack());
        assert!(o.timestamps.is_some());
        assert_eq!(
            (o.mss, o.window_scale, o.sack_permitted, o.sack_len),
            (None, None, false, 0)
        );
        assert_eq!(repr.header_len(), 32);
        if f.fin() {
            seen.fin += 1;
            assert_eq!(repr.segment_len(), 1);
        }
        if repr.payload_len > 0 {
            seen.data += 1;
            assert!(payload.iter().all(|&b| b == b'x'));
            assert!(
                repr.payload_len <= 1448,
                "mss 1460 minus 12 bytes of timestamps"
            );
        }
    }
    assert_eq!(payload.len(), repr.payload_len);
    // Re-emit: Linux's option layout is ours, so the bytes must be equal.
    let mut buf = vec![0u8; repr.header_len() + payload.len()];
    let hl = repr.emit_header(&mut buf);
    buf[hl..].copy_from_slice(payload);
    tcp::fill_checksum(&mut buf, src, dst);
    assert_eq!(buf, segment);
    Ok(())
}
