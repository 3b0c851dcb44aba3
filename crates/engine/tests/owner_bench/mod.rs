//! What `steering_owner.rs` and `steering_owner_tcp.rs` share: four
//! engines behind one four-queue `mem` NIC (spread by a [`Steer`] policy),
//! each with a listener on [`PORT`], against a raw peer on the other end
//! that writes frames by hand and reads what the engines send.

#![allow(dead_code)]

use appif::command::{Command, Owner};
use appif::notify::Notify;
use appif::seg::{AcceptQueue, Accepted};
use appif::socket::{with_engine, SockState, StatusHandle};
use appif::spsc;
use engine::stats::Stats;
use engine::steer::{handoff_mesh, HANDOFF_RING_BYTES};
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::impair::Impairments;
use nic::mem::{self, MemClock, MemPort, Steer};
use nic::rss::Steering;
use nic::{Port, TxQueue};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wire::arp::ArpRepr;
use wire::ethernet::{EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use wire::ipv4::{self, Ipv4Packet, Ipv4Repr, PROTO_TCP};
use wire::tcp::{TcpFlags, TcpRepr};
use wire::{MacAddr, SeqNum};

pub const ENGINES: usize = 4;
/// The raw peer (end A of the wire, one queue).
pub const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The four engines' address (end B, four queues).
pub const HOST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The listener every engine has.
pub const PORT: u16 = 80;
/// Virtual time per iteration, ns.
const STEP_NS: u64 = 10_000;

/// Runs `scenario(steer, policy)` under each spread that lands a flow's
/// frames on engines other than its owner, `policy` naming it for
/// assertion messages: every frame on queue 0 (engine 0 hands them over),
/// then each frame on a queue at random.
pub fn under_foreign_spreads(scenario: fn(Steer, &str)) {
    let spreads = [
        (Steer::AllToZero, "all to queue 0"),
        (Steer::RandomPerFrame, "random per frame"),
    ];
    for (steer, policy) in spreads {
        scenario(steer, policy);
    }
}

/// The raw peer, the four engines and their listeners on [`PORT`].
pub struct Bench {
    pub peer: MemPort,
    pub engines: Vec<Engine<MemPort>>,
    pub cmds: Vec<spsc::Sender<Command>>,
    /// Each engine's listener's accept queue.
    pub accepted: Vec<spsc::Receiver<Accepted>>,
    /// The table every engine shares (and [`Steer::Hash`] uses).
    pub steering: Steering,
    ns: Arc<AtomicU64>,
    pub t: u64,
    next_id: u64,
}

impl Bench {
    /// Four engines whose NIC spreads frames by `steer`, each listening on
    /// [`PORT`] with a backlog of `backlog`; the peer already introduced
    /// to every engine by ARP.
    pub fn new(steer: Steer, backlog: usize) -> Bench {
        let none = Impairments::none();
        let (mut qa, qb) = mem::multi_pair(none, none, 11, 1, ENGINES, Steer::AllToZero, steer);
        let mut peer = qa.remove(0);
        let (clock, ns) = MemClock::manual();
        peer.set_clock(clock);
        let t = 1_000_000_000u64;
        ns.store(t, Ordering::Release);
        let mesh = handoff_mesh(Arc::new(Steering::new(ENGINES)), HANDOFF_RING_BYTES);
        let (mut engines, mut cmds, mut accepted) = (vec![], vec![], vec![]);
        for (e, (port, handoff)) in qb.into_iter().zip(mesh).enumerate() {
            let cfg = EngineConfig {
                ip: HOST,
                prefix_len: 24,
                syn_cookies: true,
                ..EngineConfig::default()
            };
            let (mut c, rx) = spsc::channel(64);
            let mut eng = Engine::new(port, cfg, rx, Arc::new(Notify::default()), Instant(t));
            eng.join(handoff);
            assert_eq!(eng.index(), e);
            let (acc, acc_rx) = spsc::channel(backlog);
            push(
                &mut c,
                Command::Listen {
                    id: with_engine(1, e),
                    owner: Owner::LOCAL,
                    shared: StatusHandle::local(),
                    local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT).into(),
                    accept: AcceptQueue::Local(acc),
                    v6only: false,
                    reuseport: None,
                },
            );
            engines.push(eng);
            cmds.push(c);
            accepted.push(acc_rx);
        }
        let mut b = Bench {
            peer,
            engines,
            cmds,
            accepted,
            steering: Steering::new(ENGINES),
            ns,
            t,
            next_id: 100,
        };
        b.run(2);
        // Who-has from the peer: the engine it lands on answers, and a
        // copy teaches every other engine the peer's MAC.
        let mut arp = vec![0u8; 42];
        EthernetRepr {
            dst: MacAddr::BROADCAST,
            src: MacAddr(mem::MAC_A),
            ethertype: ETHERTYPE_ARP,
        }
        .emit(&mut arp);
        ArpRepr::request(MacAddr(mem::MAC_A), PEER, HOST).emit(&mut arp[14..]);
        b.send(&arp);
        b.run(4);
        let replies: u64 = b.stats().iter().map(|s| s.arp_replies_tx).sum();
        assert_eq!(replies, 1, "one engine answers the ARP request");
        b.received();
        b
    }

    /// `rounds` iterations of every engine, in index order, 10 µs apart.
    pub fn run(&mut self, rounds: usize) {
        for _ in 0..rounds {
            self.ns.store(self.t, Ordering::Release);
            for e in &mut self.engines {
                e.poll(Instant(self.t));
            }
            self.t += STEP_NS;
        }
    }

    /// Moves virtual time on by `ms`, 100 ms at a time (the housekeeping
    /// period), with a few iterations at each.
    pub fn run_ms(&mut self, ms: u64) {
        for _ in 0..ms / 100 {
            self.t += 100_000_000;
            self.run(2);
        }
    }

    /// Sends one Ethernet frame from the peer.
    pub fn send(&mut self, frame: &[u8]) {
        let tx = self.peer.tx();
        assert!(tx.transmit(frame.len(), |b| {
            b[..frame.len()].copy_from_slice(frame);
            frame.len()
        }));
        tx.flush();
    }

    /// Every frame the engines sent the peer since the last call.
    pub fn received(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while self.peer.rx_burst(256, |f, _| out.push(f.to_vec())) > 0 {}
        out
    }

    /// Every TCP segment the engines sent since the last call, with the
    /// IPv4 packet that carried it.
    pub fn received_tcp(&mut self) -> Vec<(TcpRepr, Vec<u8>)> {
        let mut out = Vec::new();
        for f in self.received() {
            let Ok((eth, payload)) = EthernetRepr::parse(&f) else {
                continue;
            };
            if eth.ethertype != ETHERTYPE_IPV4 {
                continue;
            }
            let ip = Ipv4Packet::new_checked(payload).unwrap();
            if ip.protocol() == PROTO_TCP {
                let seg = TcpRepr::parse(ip.payload(), ip.src(), ip.dst(), true)
                    .unwrap()
                    .0;
                out.push((seg, payload[..ip.total_len()].to_vec()));
            }
        }
        out
    }

    /// The headers of the TCP segments the engines sent to the peer's port
    /// `port` since the last call (those to other ports are dropped).
    pub fn received_tcp_to(&mut self, port: u16) -> Vec<TcpRepr> {
        let all = self.received_tcp().into_iter().map(|(s, _)| s);
        all.filter(|s| s.dst_port == port).collect()
    }

    /// Every engine's counters.
    pub fn stats(&self) -> Vec<Stats> {
        self.engines.iter().map(|e| e.stats()).collect()
    }

    /// How much the engines' counters grew since `before` (a
    /// [`Bench::stats`] snapshot): `d(e, f)` of the returned `d` is the
    /// growth of counter `f` on engine `e`.
    pub fn since<'a>(&self, before: &'a [Stats]) -> impl Fn(usize, fn(&Stats) -> u64) -> u64 + 'a {
        let after = self.stats();
        move |e, f| f(&after[e]) - f(&before[e])
    }

    /// A fresh socket id on engine `e`.
    pub fn id(&mut self, e: usize) -> u64 {
        self.next_id += 1;
        with_engine(self.next_id, e)
    }

    /// The first peer port from `from` on whose flow to `dport` engine
    /// `owner` owns.
    pub fn port_owned_by(&self, owner: usize, dport: u16, from: u16) -> u16 {
        (from..)
            .find(|&p| self.steering.owner_v4(PEER, HOST, p, dport) == owner)
            .unwrap()
    }

    /// Sends a TCP segment from the peer to the engines.
    pub fn send_tcp(&mut self, seg: &TcpRepr, payload: &[u8]) {
        let hl = seg.header_len();
        let mut l4 = vec![0u8; hl + payload.len()];
        seg.emit_header(&mut l4[..hl]);
        l4[hl..].copy_from_slice(payload);
        wire::tcp::fill_checksum(&mut l4, PEER, HOST);
        let f = ip_frame(PROTO_TCP, 1, 0, &l4);
        self.send(&f);
    }

    /// A handshake from the peer's `sport` to [`PORT`] (MSS 1460 offered,
    /// timestamps when `ts`): the connection as the peer sees it, and the
    /// owner's accepted end. Panics unless exactly engine `owner` accepts.
    pub fn open(&mut self, sport: u16, owner: usize, ts: bool) -> RawConn {
        let isn = u32::from(sport) * 10_000;
        let mut s = syn(sport, isn);
        if ts {
            s.options.timestamps = Some((1000, 0));
        }
        self.send_tcp(&s, &[]);
        self.run(3);
        let synack = self
            .received_tcp_to(sport)
            .into_iter()
            .find(|s| s.flags.syn() && s.flags.ack())
            .expect("SYN-ACK");
        let mut c = RawConn {
            sport,
            snd_nxt: isn + 1,
            rcv_nxt: synack.seq + 1usize,
            ts_val: 1001,
            ts_ecr: synack.options.timestamps.map(|(v, _)| v),
            accepted: None,
        };
        let ack = c.segment(TcpFlags::ACK, 0);
        self.send_tcp(&ack, &[]);
        self.run(3);
        for (e, q) in self.accepted.iter_mut().enumerate() {
            if e == owner {
                let a = q.pop().expect("the owner accepts the connection");
                assert_eq!(a.shared.state(), SockState::Open);
                assert_eq!(a.shared.remote(), SocketAddrV4::new(PEER, sport).into());
                c.accepted = Some(a);
            } else {
                assert!(q.pop().is_none(), "engine {e} accepted a flow of {owner}");
            }
        }
        c
    }

    /// Engine `e`'s connection to the peer's `sport`: its state and MSS.
    pub fn tcb(&self, e: usize, sport: u16) -> Option<(engine::tcp::State, usize)> {
        let mut found = None;
        self.engines[e].for_each_tcb(|t| {
            if t.remote() == SocketAddrV4::new(PEER, sport).into() {
                found = Some((t.state(), t.mss()));
            }
        });
        found
    }
}

/// Checks what holds whatever was tested: no TCP input off its owner,
/// every handoff taken, nothing lost.
pub fn check_clean(stats: &[Stats], policy: &str) {
    let sum = |f: fn(&Stats) -> u64| stats.iter().map(f).sum::<u64>();
    assert_eq!(sum(|s| s.owner_violations), 0, "{policy}: owner violations");
    assert_eq!(sum(|s| s.handoff_dropped), 0, "{policy}: handoffs dropped");
    assert_eq!(
        sum(|s| s.handoff_tx),
        sum(|s| s.handoff_rx),
        "{policy}: handoffs sent and taken"
    );
}

/// A connection as the raw peer keeps it.
pub struct RawConn {
    pub sport: u16,
    /// The peer's next sequence number, and the next it expects.
    pub snd_nxt: u32,
    pub rcv_nxt: SeqNum,
    /// The peer's next TSval and the TSecr it echoes (None: no timestamps).
    pub ts_val: u32,
    pub ts_ecr: Option<u32>,
    /// The owner's end of it.
    pub accepted: Option<Accepted>,
}

impl RawConn {
    /// The peer's next segment with `flags` and `payload_len` bytes.
    pub fn segment(&mut self, flags: u8, payload_len: usize) -> TcpRepr {
        let mut s = segment(self.sport, self.snd_nxt, self.rcv_nxt, flags, payload_len);
        if let Some(ecr) = self.ts_ecr {
            s.options.timestamps = Some((self.ts_val, ecr));
            self.ts_val += 1;
        }
        s
    }
}

pub fn push(cmds: &mut spsc::Sender<Command>, c: Command) {
    assert!(cmds.push(c).is_ok(), "command ring full");
}

/// A segment from the peer to [`PORT`] with a 65535-byte window, no options.
pub fn segment(src_port: u16, seq: u32, ack: SeqNum, flags: u8, payload_len: usize) -> TcpRepr {
    TcpRepr {
        src_port,
        dst_port: PORT,
        seq: SeqNum(seq),
        ack,
        flags: TcpFlags(flags),
        window: 65535,
        payload_len,
        ..TcpRepr::default()
    }
}

/// A SYN from the peer to [`PORT`] offering MSS 1460.
pub fn syn(src_port: u16, seq: u32) -> TcpRepr {
    let mut s = segment(src_port, seq, SeqNum(0), TcpFlags::SYN, 0);
    s.options.mss = Some(1460);
    s
}

/// An Ethernet frame from the peer to the engines carrying an IPv4 packet
/// of `proto` with `payload`; `frag` is the flags-and-offset field.
pub fn ip_frame(proto: u8, ident: u16, frag: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 34 + payload.len()];
    EthernetRepr {
        dst: MacAddr(mem::MAC_B),
        src: MacAddr(mem::MAC_A),
        ethertype: ETHERTYPE_IPV4,
    }
    .emit(&mut f);
    Ipv4Repr {
        src: PEER,
        dst: HOST,
        protocol: proto,
        ttl: 64,
        ident,
        dont_frag: false,
        payload_len: payload.len(),
    }
    .emit(&mut f[14..]);
    f[20..22].copy_from_slice(&frag.to_be_bytes());
    ipv4::fill_header_checksum(&mut f[14..34]);
    f[34..].copy_from_slice(payload);
    f
}

/// An ICMP destination unreachable of `code` (next-hop MTU `mtu`) from the
/// peer, quoting the first 28 bytes of `quoted` (an IPv4 packet the
/// engines sent).
pub fn unreachable(code: u8, mtu: u16, quoted: &[u8]) -> Vec<u8> {
    let msg = wire::icmp::Icmpv4Repr::DstUnreachable {
        code,
        next_hop_mtu: mtu,
        data: &quoted[..28],
    };
    let mut m = vec![0u8; msg.buffer_len()];
    msg.emit(&mut m);
    ip_frame(wire::ipv4::PROTO_ICMP, 2, 0, &m)
}
