//! A whole engine on a `mem` port, fed the fuzz input as raw Ethernet
//! frames; it must never panic.
//!
//! Before the input, the harness sets up state worth attacking: the peer
//! (10.0.0.1, MAC_A) is introduced by ARP; a listener on port 80 accepts a
//! connection from peer port 4000 (handshake done by the harness: SYN with
//! ISN 1000, the engine's SYN-ACK, ACK), the application queues 3000 bytes
//! on it; a connect from local port 6000 to peer port 5555 sits in SYN-SENT;
//! a UDP socket is bound on port 7000. IPv6 is on (2001:db8::2/64 and the
//! link-local address from MAC_B), so IPv6, ICMPv6, Neighbor Discovery and
//! IPv6 reassembly frames reach the engine too; the peer (2001:db8::1,
//! MAC_A) is introduced by a Neighbor Solicitation.
//!
//! Input: byte 0 bit 0 turns checksum verification on (off, the fuzzer
//! reaches TCP states without computing checksums). Then records
//! `[ctl, len_hi, len_lo, frame...]`:
//! - `len > 0`: the peer sends the frame (cut to the mem port's largest
//!   frame), then time advances by `ctl` (bits 6..7 pick µs, ms, 100 ms or
//!   s; bits 0..5 count them) and the engine runs one iteration;
//! - `len == 0`: an application action chosen by `ctl % 8` (write, read,
//!   shutdown, close, UDP send, ...).
//!
//! The engine's initial sequence numbers are random (RFC 6528), so the
//! acknowledgment number of a TCP frame on one of the two connections
//! (4000→80, 5555→6000) counts from the engine's ISS: the harness adds the
//! ISS before sending (and re-fills the checksum when verification is on).
//! Every other frame is sent as given.
#![no_main]

use appif::bytes;
use appif::command::{Command, Owner};
use appif::notify::Notify;
use appif::seg::{AcceptQueue, Accepted};
use appif::socket::{StatusHandle, UdpHeader};
use appif::spsc;
use engine::time::Instant;
use engine::{Engine, EngineConfig, Ipv6Config};
use libfuzzer_sys::fuzz_target;
use nic::impair::Impairments;
use nic::mem::{self, MemClock, MemPort, MEM_MAX_FRAME};
use nic::{Port, TxQueue};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wire::arp::ArpRepr;
use wire::ethernet::{EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use wire::ipv4::{Ipv4Packet, Ipv4Repr, PROTO_TCP};
use wire::ipv6::Ipv6Repr;
use wire::ndisc::{self, NdiscOption, NdiscRepr};
use wire::tcp::{TcpFlags, TcpRepr};
use wire::{MacAddr, SeqNum};

const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const ENGINE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PEER_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const ENGINE_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
/// Listener port and the peer port of the accepted connection.
const LISTEN_PORT: u16 = 80;
const PEER_PORT: u16 = 4000;
/// Local and peer port of the active open.
const ACTIVE_PORT: u16 = 6000;
const ACTIVE_PEER_PORT: u16 = 5555;
const UDP_PORT: u16 = 7000;
/// The peer's ISN on the accepted connection.
const PEER_ISN: u32 = 1000;

struct Harness {
    engine: Engine<MemPort>,
    peer: MemPort,
    cmds: spsc::Sender<Command>,
    ns: Arc<AtomicU64>,
    t: u64,
    verify: bool,
    /// Engine ISS on the accepted and the active connection.
    iss_passive: u32,
    iss_active: u32,
    accepted: Option<Accepted>,
    active_tx: bytes::Writer,
    active_rx: bytes::Reader,
    udp_tx: bytes::Writer,
    _udp_rx: bytes::Reader,
    _accept: spsc::Receiver<Accepted>,
}

impl Harness {
    fn new(verify: bool) -> Harness {
        let (mut peer, port) = mem::pair(Impairments::none(), Impairments::none(), 1);
        let (clock, ns) = MemClock::manual();
        peer.set_clock(clock);
        let t = 1_000_000_000;
        ns.store(t, Ordering::Release);
        let (mut cmds, rx) = spsc::channel(256);
        let cfg = EngineConfig {
            ip: ENGINE_IP,
            max_sockets: 32,
            ring_bytes: 16 * 1024,
            verify_checksums: verify,
            ipv6: Some(Ipv6Config {
                global: Some((ENGINE_IP6, 64)),
                ..Ipv6Config::default()
            }),
            ..EngineConfig::default()
        };
        let engine = Engine::new(port, cfg, rx, Arc::new(Notify::default()), Instant(t));

        let (accept_tx, accept) = spsc::channel(8);
        let _ = cmds.push(Command::Listen {
            id: 1,
            owner: Owner::LOCAL,
            shared: StatusHandle::local(),
            local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, LISTEN_PORT).into(),
            accept: AcceptQueue::Local(accept_tx),
            v6only: false,
            reuseport: None,
        });
        let (udp_tx, eng_udp_tx) = bytes::ring(4096);
        let (eng_udp_rx, udp_rx) = bytes::ring(4096);
        let _ = cmds.push(Command::UdpBind {
            id: 2,
            owner: Owner::LOCAL,
            shared: StatusHandle::local(),
            local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, UDP_PORT).into(),
            tx: eng_udp_tx,
            rx: eng_udp_rx,
            v6only: false,
        });
        let (active_tx, eng_tx) = bytes::ring(16 * 1024);
        let (eng_rx, active_rx) = bytes::ring(16 * 1024);
        let mut h = Harness {
            engine,
            peer,
            cmds,
            ns,
            t,
            verify,
            iss_passive: 0,
            iss_active: 0,
            accepted: None,
            active_tx,
            active_rx,
            udp_tx,
            _udp_rx: udp_rx,
            _accept: accept,
        };
        h.step(1000);
        h.setup(eng_tx, eng_rx);
        h
    }

    /// ARP, the accepted connection and the active open.
    fn setup(&mut self, eng_tx: bytes::Reader, eng_rx: bytes::Writer) {
        let mut arp = [0u8; wire::arp::PACKET_LEN];
        ArpRepr::request(MacAddr(mem::MAC_A), PEER_IP, ENGINE_IP).emit(&mut arp);
        self.send_eth(ETHERTYPE_ARP, &arp);
        self.step(1000);
        self.drain();
        self.introduce_ipv6();
        self.step(1000);
        self.drain();

        let syn = TcpRepr {
            src_port: PEER_PORT,
            dst_port: LISTEN_PORT,
            seq: SeqNum(PEER_ISN),
            flags: TcpFlags(TcpFlags::SYN),
            window: 65535,
            options: wire::tcp::TcpOptions {
                mss: Some(1460),
                window_scale: Some(7),
                sack_permitted: true,
                timestamps: Some((1, 0)),
                ..Default::default()
            },
            ..Default::default()
        };
        self.send_tcp(&syn, &[]);
        self.step(1000);
        self.iss_passive = self
            .engine_segment(LISTEN_PORT)
            .expect("the engine answers the SYN")
            .seq
            .0;
        let ack = TcpRepr {
            src_port: PEER_PORT,
            dst_port: LISTEN_PORT,
            seq: SeqNum(PEER_ISN + 1),
            ack: SeqNum(self.iss_passive.wrapping_add(1)),
            flags: TcpFlags(TcpFlags::ACK),
            window: 512,
            options: wire::tcp::TcpOptions {
                timestamps: Some((2, 1)),
                ..Default::default()
            },
            ..Default::default()
        };
        self.send_tcp(&ack, &[]);
        self.step(1000);
        self.accepted = self._accept.pop();
        if let Some(a) = self.accepted.as_mut() {
            a.tx.write(&[0x5a; 3000]);
            let id = a.id;
            let _ = self.cmds.push(Command::Send { id });
        }

        let _ = self.cmds.push(Command::Connect {
            id: 3,
            owner: Owner::LOCAL,
            shared: StatusHandle::local(),
            local_port: ACTIVE_PORT,
            remote: SocketAddrV4::new(PEER_IP, ACTIVE_PEER_PORT).into(),
            tx: eng_tx,
            rx: eng_rx,
            nodelay: true,
        });
        self.step(1000);
        self.iss_active = self.engine_segment(ACTIVE_PORT).map_or(0, |s| s.seq.0);
    }

    /// A Neighbor Solicitation from the peer for our IPv6 address.
    fn introduce_ipv6(&mut self) {
        let mut opt = [0u8; 8];
        NdiscOption::SourceLinkLayerAddr(MacAddr(mem::MAC_A)).emit(&mut opt);
        let group = ndisc::solicited_node(ENGINE_IP6);
        let ns = NdiscRepr::NeighborSolicit {
            target: ENGINE_IP6,
            options: &opt,
        };
        let mut p = vec![0u8; 40 + ns.buffer_len()];
        Ipv6Repr {
            src: PEER_IP6,
            dst: group,
            next_header: wire::ipv6::NEXT_ICMPV6,
            hop_limit: 255,
            traffic_class: 0,
            flow_label: 0,
            payload_len: ns.buffer_len(),
        }
        .emit(&mut p);
        ns.emit(PEER_IP6, group, &mut p[40..]);
        self.send_eth(ETHERTYPE_IPV6, &p);
    }

    fn step(&mut self, ns: u64) {
        self.t = self.t.saturating_add(ns);
        self.ns.store(self.t, Ordering::Release);
        self.engine.poll(Instant(self.t));
    }

    /// Takes the frames the engine sent; returns its last TCP segment from
    /// local port `from`.
    fn engine_segment(&mut self, from: u16) -> Option<TcpRepr> {
        let mut found = None;
        self.peer.rx_burst(256, |f, _| {
            let Ok((_, ip)) = EthernetRepr::parse(f) else {
                return;
            };
            let Ok(ip) = Ipv4Packet::new_checked(ip) else {
                return;
            };
            if ip.protocol() != PROTO_TCP {
                return;
            }
            if let Ok((seg, _)) = TcpRepr::parse(ip.payload(), ip.src(), ip.dst(), false) {
                if seg.src_port == from {
                    found = Some(seg);
                }
            }
        });
        found
    }

    /// Discards what the engine sent.
    fn drain(&mut self) {
        self.peer.rx_burst(1024, |_, _| {});
    }

    fn send_frame(&mut self, frame: &[u8]) {
        let tx = self.peer.tx();
        tx.transmit(frame.len(), |buf| {
            let n = frame.len().min(buf.len());
            buf[..n].copy_from_slice(&frame[..n]);
            n
        });
        tx.flush();
    }

    fn send_eth(&mut self, ethertype: u16, payload: &[u8]) {
        let mut f = vec![0u8; 14 + payload.len()];
        EthernetRepr {
            dst: MacAddr(mem::MAC_B),
            src: MacAddr(mem::MAC_A),
            ethertype,
        }
        .emit(&mut f);
        f[14..].copy_from_slice(payload);
        self.send_frame(&f);
    }

    fn send_tcp(&mut self, seg: &TcpRepr, payload: &[u8]) {
        let hl = seg.header_len();
        let mut p = vec![0u8; 20 + hl + payload.len()];
        Ipv4Repr {
            src: PEER_IP,
            dst: ENGINE_IP,
            protocol: PROTO_TCP,
            ttl: 64,
            ident: 0,
            dont_frag: true,
            payload_len: hl + payload.len(),
        }
        .emit(&mut p);
        seg.emit_header(&mut p[20..]);
        p[20 + hl..].copy_from_slice(payload);
        wire::tcp::fill_checksum(&mut p[20..], PEER_IP, ENGINE_IP);
        self.send_eth(ETHERTYPE_IPV4, &p);
    }

    /// Sends a fuzzed frame, acknowledgment numbers of the two connections
    /// made relative to the engine's ISS.
    fn send_fuzzed(&mut self, frame: &[u8]) {
        let mut buf = [0u8; MEM_MAX_FRAME];
        let n = frame.len().min(MEM_MAX_FRAME);
        buf[..n].copy_from_slice(&frame[..n]);
        self.fix_ack(&mut buf[..n]);
        self.send_frame(&buf[..n]);
    }

    fn fix_ack(&self, f: &mut [u8]) {
        if f.len() < 14 || u16::from_be_bytes([f[12], f[13]]) != ETHERTYPE_IPV4 {
            return;
        }
        let (hl, total, proto, src, dst) = match Ipv4Packet::new_checked(&f[14..]) {
            Ok(ip) if !ip.is_fragment() => (
                ip.header_len(),
                ip.total_len(),
                ip.protocol(),
                ip.src(),
                ip.dst(),
            ),
            _ => return,
        };
        let seg = &mut f[14 + hl..14 + total];
        if proto != PROTO_TCP || seg.len() < 20 {
            return;
        }
        let ports = (
            u16::from_be_bytes([seg[0], seg[1]]),
            u16::from_be_bytes([seg[2], seg[3]]),
        );
        let iss = match ports {
            (PEER_PORT, LISTEN_PORT) => self.iss_passive,
            (ACTIVE_PEER_PORT, ACTIVE_PORT) => self.iss_active,
            _ => return,
        };
        let ack = u32::from_be_bytes([seg[8], seg[9], seg[10], seg[11]]).wrapping_add(iss);
        seg[8..12].copy_from_slice(&ack.to_be_bytes());
        if self.verify {
            wire::tcp::fill_checksum(seg, src, dst);
        }
    }

    /// An application action.
    fn act(&mut self, what: u8) {
        let acc = self.accepted.as_mut();
        let cmd = match (what % 8, acc) {
            (0, Some(a)) => {
                a.tx.write(&[0xa5; 1000]);
                Some(Command::Send { id: a.id })
            }
            (1, Some(a)) => {
                let mut sink = [0u8; 4096];
                while a.rx.read(&mut sink) > 0 {}
                Some(Command::Recvd { id: a.id })
            }
            (2, Some(a)) => Some(Command::Shutdown { id: a.id }),
            (3, Some(a)) => Some(Command::Close { id: a.id }),
            (4, _) => {
                let h = UdpHeader {
                    addr: SocketAddrV4::new(PEER_IP, 9999).into(),
                    len: 100,
                };
                if self.udp_tx.free() >= UdpHeader::LEN + 100 {
                    self.udp_tx.write(&h.encode());
                    self.udp_tx.write(&[7; 100]);
                }
                Some(Command::Send { id: 2 })
            }
            (5, _) => {
                self.active_tx.write(&[0x33; 700]);
                let mut sink = [0u8; 4096];
                while self.active_rx.read(&mut sink) > 0 {}
                Some(Command::Send { id: 3 })
            }
            (6, _) => Some(Command::Close { id: 3 }),
            (7, _) => Some(Command::Close { id: 1 }),
            _ => None,
        };
        if let Some(c) = cmd {
            let _ = self.cmds.push(c);
        }
    }
}

/// Time to advance after a frame, from its control byte, in ns.
fn advance_ns(ctl: u8) -> u64 {
    let unit = match ctl >> 6 {
        0 => 1_000,
        1 => 1_000_000,
        2 => 100_000_000,
        _ => 1_000_000_000,
    };
    u64::from(ctl & 63) * unit
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let mut h = Harness::new(flags & 1 != 0);
    // Bounded: every record consumes at least 3 bytes.
    while rest.len() >= 3 {
        let ctl = rest[0];
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]]));
        rest = &rest[3..];
        if len == 0 {
            h.act(ctl);
            h.step(1000);
        } else {
            let n = len.min(rest.len());
            let (frame, tail) = rest.split_at(n);
            rest = tail;
            h.send_fuzzed(frame);
            h.step(advance_ns(ctl).max(1));
        }
        h.drain();
    }
    // Let the timers run: retransmissions, TIME-WAIT, reassembly timeout.
    for _ in 0..8 {
        h.step(15_000_000_000);
        h.drain();
    }
    if debug() {
        eprintln!(
            "accepted {} iss {:#x}/{:#x}\n{}",
            h.accepted.is_some(),
            h.iss_passive,
            h.iss_active,
            h.engine.stats()
        );
    }
});

/// CORESTACK_FUZZ_DEBUG=1 prints the engine's counters after each input.
fn debug() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("CORESTACK_FUZZ_DEBUG").is_some())
}
