//! IPv4 reassembly through a whole engine: fragmented UDP datagrams and
//! ICMP echo requests sent over a `mem` wire reach the socket or are
//! answered; an incomplete datagram times out.

mod common;

use appif::bytes;
use appif::command::{Command, Owner};
use appif::socket::{SockState, StatusHandle, UdpHeader};
use appif::spsc;
use common::RawWire;
use engine::EngineConfig;
use nic::mem::{self};
use nic::Port;
use std::net::{Ipv4Addr, SocketAddrV4};
use wire::arp::ArpRepr;
use wire::ethernet::{EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use wire::icmp::{Echo, Icmpv4Repr};
use wire::ipv4::{self, Ipv4Packet, Ipv4Repr, PROTO_ICMP, PROTO_UDP};
use wire::udp::UdpRepr;
use wire::MacAddr;

/// The peer, which sends the fragments (end A of the wire).
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The engine under test (end B).
const ENGINE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const UDP_PORT: u16 = 7000;

/// The engine under test at end B, the peer sending raw frames at end A.
type Bench = RawWire;

impl Bench {
    fn new() -> Bench {
        let cfg = EngineConfig {
            ip: ENGINE_IP,
            ..EngineConfig::default()
        };
        common::raw_wire(1, mem::MEM_WIRE_FRAMES, cfg)
    }

    /// Sends one Ethernet frame from the peer: `payload` after a header.
    fn send(&mut self, ethertype: u16, payload: &[u8]) {
        let eth = EthernetRepr {
            dst: MacAddr(mem::MAC_B),
            src: MacAddr(mem::MAC_A),
            ethertype,
        };
        self.send_frame(&eth, payload);
    }

    /// Frames the engine sent to the peer so far.
    fn received(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.peer.rx_burst(64, |f, _| out.push(f.to_vec()));
        out
    }

    /// Introduces the peer by ARP, so the engine can answer it.
    fn introduce(&mut self) {
        let mut arp = [0u8; wire::arp::PACKET_LEN];
        ArpRepr::request(MacAddr(mem::MAC_A), PEER_IP, ENGINE_IP).emit(&mut arp);
        self.send(ETHERTYPE_ARP, &arp);
        self.step(1000);
        assert_eq!(self.engine.stats().arp_replies_tx, 1);
        self.received();
    }
}

/// Splits the IP payload `data` of protocol `proto` into fragments of at
/// most `size` bytes (a multiple of 8), each a whole IPv4 packet.
fn fragments(proto: u8, ident: u16, data: &[u8], size: usize) -> Vec<Vec<u8>> {
    data.chunks(size)
        .enumerate()
        .map(|(k, chunk)| {
            let mut p = vec![0u8; 20 + chunk.len()];
            Ipv4Repr {
                src: PEER_IP,
                dst: ENGINE_IP,
                protocol: proto,
                ttl: 64,
                ident,
                dont_frag: false,
                payload_len: chunk.len(),
            }
            .emit(&mut p);
            let more = (k + 1) * size < data.len();
            let field = (k * size / 8) as u16 | if more { 0x2000 } else { 0 };
            p[6..8].copy_from_slice(&field.to_be_bytes());
            ipv4::fill_header_checksum(&mut p[..20]);
            p[20..].copy_from_slice(chunk);
            p
        })
        .collect()
}

fn udp_datagram(payload: &[u8]) -> Vec<u8> {
    let mut d = vec![0u8; 8 + payload.len()];
    UdpRepr {
        src_port: 9999,
        dst_port: UDP_PORT,
        payload_len: payload.len(),
    }
    .emit_header(&mut d);
    d[8..].copy_from_slice(payload);
    wire::udp::fill_checksum(&mut d, PEER_IP, ENGINE_IP);
    d
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[test]
fn bound_udp_socket_fragmented_datagram_out_of_order_is_delivered_whole() {
    let mut b = Bench::new();
    let shared = StatusHandle::local();
    let (_app_tx, eng_tx) = bytes::ring(4096);
    let (eng_rx, mut app_rx) = bytes::ring(16 * 1024);
    assert!(b
        .cmds
        .push(Command::UdpBind {
            id: 1,
            owner: Owner::LOCAL,
            shared: shared.clone(),
            local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, UDP_PORT).into(),
            v6only: false,
            tx: eng_tx,
            rx: eng_rx,
        })
        .is_ok());
    b.step(1000);
    assert_eq!(shared.state(), SockState::Open);

    let payload = pattern(4000);
    let frags = fragments(PROTO_UDP, 0x4242, &udp_datagram(&payload), 1480);
    assert_eq!(frags.len(), 3);
    for k in [2, 0, 1] {
        b.send(ETHERTYPE_IPV4, &frags[k]);
        b.step(1000);
    }
    let s = b.engine.stats();
    assert_eq!((s.frag_rx, s.frag_reassembled, s.udp_rx), (3, 1, 1), "{s}");

    let mut hb = [0u8; UdpHeader::LEN];
    assert_eq!(app_rx.read(&mut hb), UdpHeader::LEN);
    let h = UdpHeader::decode(&hb);
    assert_eq!(h.addr, SocketAddrV4::new(PEER_IP, 9999).into());
    assert_eq!(usize::from(h.len), payload.len());
    let mut got = vec![0u8; payload.len()];
    assert_eq!(app_rx.read(&mut got), payload.len());
    assert_eq!(got, payload);
    assert!(app_rx.is_empty());
}

#[test]
fn any_fragmented_echo_request_is_answered_with_whole_reply() {
    let mut b = Bench::new();
    b.introduce();
    let data = pattern(1400);
    let mut msg = vec![0u8; 8 + data.len()];
    Icmpv4Repr::EchoRequest(Echo {
        ident: 77,
        seq_no: 3,
        data: &data,
    })
    .emit(&mut msg);
    let frags = fragments(PROTO_ICMP, 0x0101, &msg, 800);
    assert_eq!(frags.len(), 2);
    b.send(ETHERTYPE_IPV4, &frags[1]);
    b.step(1000);
    assert!(b.received().is_empty(), "no reply to half a request");
    b.send(ETHERTYPE_IPV4, &frags[0]);
    b.step(1000);
    let s = b.engine.stats();
    assert_eq!((s.frag_reassembled, s.icmp_echo_replies_tx), (1, 1), "{s}");

    let frames = b.received();
    assert_eq!(frames.len(), 1);
    let (eth, ip) = EthernetRepr::parse(&frames[0]).unwrap();
    assert_eq!(eth.ethertype, ETHERTYPE_IPV4);
    let ip = Ipv4Packet::new_checked(ip).unwrap();
    assert_eq!((ip.src(), ip.dst()), (ENGINE_IP, PEER_IP));
    match Icmpv4Repr::parse(ip.payload(), true).unwrap() {
        Icmpv4Repr::EchoReply(Echo {
            ident,
            seq_no,
            data: d,
        }) => assert_eq!((ident, seq_no, d), (77, 3, &data[..])),
        other => panic!("not an echo reply: {other:?}"),
    }
}

#[test]
fn any_fragment_missing_datagram_times_out_after_30s() {
    let mut b = Bench::new();
    let frags = fragments(PROTO_UDP, 9, &udp_datagram(&pattern(3000)), 1480);
    b.send(ETHERTYPE_IPV4, &frags[0]);
    b.send(ETHERTYPE_IPV4, &frags[2]);
    b.step(1000);
    // Housekeeping runs every 100 ms; step 29 s, then past 30 s.
    for _ in 0..290 {
        b.step(100_000_000);
    }
    assert_eq!(b.engine.stats().drop_frag_timeout, 0);
    for _ in 0..20 {
        b.step(100_000_000);
    }
    let s = b.engine.stats();
    assert_eq!((s.drop_frag_timeout, s.frag_reassembled), (1, 0), "{s}");
}

/// An IPv4 packet from the peer to the engine with `payload`.
fn ip_packet(proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = fragments(proto, 1, payload, 65_528).remove(0);
    p[6..8].copy_from_slice(&[0, 0]);
    ipv4::fill_header_checksum(&mut p[..20]);
    p
}

/// ICMP port unreachable quoting a TCP segment from the engine's
/// `local_port` to the peer's `remote_port`.
fn unreachable_quoting_tcp(local_port: u16, remote_port: u16) -> Vec<u8> {
    let mut quote = vec![0u8; 28];
    Ipv4Repr {
        src: ENGINE_IP,
        dst: PEER_IP,
        protocol: wire::ipv4::PROTO_TCP,
        ttl: 64,
        ident: 0,
        dont_frag: true,
        payload_len: 40,
    }
    .emit(&mut quote);
    quote[20..22].copy_from_slice(&local_port.to_be_bytes());
    quote[22..24].copy_from_slice(&remote_port.to_be_bytes());
    let msg = Icmpv4Repr::DstUnreachable {
        code: wire::icmp::DST_UNREACH_PORT,
        next_hop_mtu: 0,
        data: &quote,
    };
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.emit(&mut buf);
    buf
}

#[test]
fn syn_received_icmp_error_quoting_connection_is_counted_only() {
    let mut b = Bench::new();
    b.introduce();
    let (accept, _acc_rx) = spsc::channel(4);
    let lshared = StatusHandle::local();
    let local = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80);
    let listen = common::listen(1, lshared.clone(), local, false, accept);
    common::push(&mut b.cmds, listen);
    b.step(1000);
    let syn = wire::tcp::TcpRepr {
        src_port: 4000,
        dst_port: 80,
        seq: wire::SeqNum(1000),
        flags: wire::tcp::TcpFlags(wire::tcp::TcpFlags::SYN),
        window: 65535,
        ..Default::default()
    };
    let mut seg = vec![0u8; syn.header_len()];
    syn.emit_header(&mut seg);
    wire::tcp::fill_checksum(&mut seg, PEER_IP, ENGINE_IP);
    b.send(ETHERTYPE_IPV4, &ip_packet(wire::ipv4::PROTO_TCP, &seg));
    b.step(1000);
    assert_eq!(b.engine.stats().tcp_passive_opens, 1);

    b.send(
        ETHERTYPE_IPV4,
        &ip_packet(PROTO_ICMP, &unreachable_quoting_tcp(80, 4000)),
    );
    b.send(
        ETHERTYPE_IPV4,
        &ip_packet(PROTO_ICMP, &unreachable_quoting_tcp(80, 4001)),
    );
    b.step(1000);
    let s = b.engine.stats();
    assert_eq!((s.icmp_other_rx, s.icmp_tcp_errors_rx), (2, 1), "{s}");
    assert_eq!(s.tcp_resets, 0, "a soft error does not abort");
}
