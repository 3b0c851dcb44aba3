//! What the two-engine `mem` wire tests share: two engines on a wire with a
//! manual clock, one connected to the other's listener ([`Wire`]); an
//! application's end of a connection that behaves as the client library's
//! `TcpStream` does (when it tells the engine, how it grows its TX ring);
//! skipping idle virtual time; a dump of both ends' control blocks for
//! failure messages; the commands of a local listener and connection; and
//! one engine opposite a raw peer that writes frames by hand ([`RawWire`]).

#![allow(dead_code)]

pub mod echo;
pub mod memory;

use appif::bytes;
use appif::command::{Command, Owner};
use appif::notify::Notify;
use appif::seg::{AcceptQueue, Accepted};
use appif::socket::{SockState, StatusHandle};
use appif::spsc;
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::impair::Impairments;
use nic::mem::{self, MemClock, MemPort};
use nic::{Port, TxQueue};
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Virtual time per busy iteration, ns.
pub const STEP_NS: u64 = 20_000;

/// The byte at stream offset `i` of a test stream.
pub fn pattern(i: usize) -> u8 {
    let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 29) as u8
}

pub fn push(cmds: &mut spsc::Sender<Command>, c: Command) {
    assert!(cmds.push(c).is_ok(), "command ring full");
}

/// `Command::Connect` of the local application's socket `id` (status block `shared`) from an
/// ephemeral port to `remote`, over the engine's ends `(tx, rx)` of its rings, TCP_NODELAY
/// as `nodelay`.
pub fn connect(
    id: u64,
    shared: &Arc<StatusHandle>,
    remote: impl Into<core::net::SocketAddr>,
    (tx, rx): (bytes::Reader, bytes::Writer),
    nodelay: bool,
) -> Command {
    Command::Connect {
        id,
        owner: Owner::LOCAL,
        shared: shared.clone(),
        local_port: 0,
        remote: remote.into(),
        tx,
        rx,
        nodelay,
    }
}

/// `Command::Listen` of the local application's listener `id` (status block `shared`) on
/// `local`, IPV6_V6ONLY as `v6only`, its connections handed to `accept`; not in a
/// SO_REUSEPORT group.
pub fn listen(
    id: u64,
    shared: Arc<StatusHandle>,
    local: impl Into<core::net::SocketAddr>,
    v6only: bool,
    accept: spsc::Sender<Accepted>,
) -> Command {
    Command::Listen {
        id,
        owner: Owner::LOCAL,
        shared,
        local: local.into(),
        v6only,
        accept: AcceptQueue::Local(accept),
        reuseport: None,
    }
}

/// An engine on `port` with `cfg` (its address set to `ip`), and the
/// sending end of its command ring.
pub fn engine(
    port: MemPort,
    ip: Ipv4Addr,
    mut cfg: EngineConfig,
    now: Instant,
) -> (Engine<MemPort>, spsc::Sender<Command>) {
    let (tx, rx) = spsc::channel(1024);
    cfg.ip = ip;
    cfg.prefix_len = 24;
    (
        Engine::new(port, cfg, rx, Arc::new(Notify::default()), now),
        tx,
    )
}

/// An engine at end B of a clean `mem` wire, and end A for the test to
/// send and read raw frames on, both on a manual clock ([`raw_wire`]).
pub struct RawWire {
    /// End A of the wire: the raw peer.
    pub peer: MemPort,
    pub engine: Engine<MemPort>,
    /// The sending end of the engine's command ring (64 commands).
    pub cmds: spsc::Sender<Command>,
    /// The manual clock, ns.
    pub ns: Arc<AtomicU64>,
    /// Virtual time now, ns (1 s at the start).
    pub t: u64,
}

/// A [`RawWire`] of `frames` frames each way, seeded with `seed`, its
/// engine configured by `cfg` as it is.
pub fn raw_wire(seed: u64, frames: usize, cfg: EngineConfig) -> RawWire {
    let none = Impairments::none();
    let (mut peer, port) = mem::pair_with_capacity(none, none, seed, frames);
    let (clock, ns) = MemClock::manual();
    peer.set_clock(clock);
    let t = 1_000_000_000;
    ns.store(t, Ordering::Release);
    let (cmds, rx) = spsc::channel(64);
    let engine = Engine::new(port, cfg, rx, Arc::new(Notify::default()), Instant(t));
    RawWire {
        peer,
        engine,
        cmds,
        ns,
        t,
    }
}

impl RawWire {
    /// Advances the clock by `ns` and runs one engine iteration.
    pub fn step(&mut self, ns: u64) {
        self.t += ns;
        self.ns.store(self.t, Ordering::Release);
        self.engine.poll(Instant(self.t));
    }

    /// Sends `payload` from the peer in one Ethernet frame with the header
    /// `eth`.
    pub fn send_frame(&mut self, eth: &wire::ethernet::EthernetRepr, payload: &[u8]) {
        let len = wire::ethernet::HEADER_LEN + payload.len();
        let tx = self.peer.tx();
        assert!(tx.transmit(len, |buf| {
            eth.emit(buf);
            buf[wire::ethernet::HEADER_LEN..len].copy_from_slice(payload);
            len
        }));
        tx.flush();
    }
}

/// An application's end of one connection.
pub struct End {
    pub id: u64,
    pub shared: Arc<StatusHandle>,
    pub tx: bytes::Writer,
    pub rx: bytes::Reader,
}

impl End {
    /// Reads up to `dst.len()` bytes and tells the engine when the read
    /// opened the window past half the ring, as the client library does.
    pub fn read(&mut self, dst: &mut [u8], cmds: &mut spsc::Sender<Command>) -> usize {
        let cap = self.rx.capacity();
        let before = self.rx.len();
        let n = self.rx.read(dst);
        if n > 0
            && cap.saturating_sub(before) < cap / 2
            && cap.saturating_sub(before - n) >= cap / 2
        {
            push(cmds, Command::Recvd { id: self.id });
        }
        n
    }

    /// Writes what fits, first growing the TX ring to what the engine
    /// offers, and tells the engine when the ring was empty, as the client
    /// library does.
    pub fn write(&mut self, src: &[u8], cmds: &mut spsc::Sender<Command>) -> usize {
        let grant = self.shared.tx_grant();
        if grant > self.tx.wanted() {
            self.tx.grow(grant);
        }
        let was_empty = self.tx.is_empty();
        let n = self.tx.write(src);
        if n > 0 && was_empty {
            push(cmds, Command::Send { id: self.id });
        }
        n
    }
}

impl End {
    /// Writes the test stream from offset `*sent` up to `total` bytes as
    /// far as the TX ring takes it; returns the bytes written.
    pub fn send_stream(
        &mut self,
        sent: &mut usize,
        total: usize,
        cmds: &mut spsc::Sender<Command>,
    ) -> usize {
        let mut chunk = [0u8; 8192];
        let mut wrote = 0;
        while *sent < total {
            let n = chunk.len().min(total - *sent);
            for (k, c) in chunk[..n].iter_mut().enumerate() {
                *c = pattern(*sent + k);
            }
            let w = self.write(&chunk[..n], cmds);
            *sent += w;
            wrote += w;
            if w < n {
                break;
            }
        }
        wrote
    }

    /// Reads everything readable, checking it is the test stream from
    /// offset `*received` on; returns the bytes read, or Err with the
    /// stream offset of the first byte that differs.
    pub fn recv_stream(
        &mut self,
        received: &mut usize,
        cmds: &mut spsc::Sender<Command>,
    ) -> Result<usize, usize> {
        let mut chunk = [0u8; 8192];
        let mut got = 0;
        loop {
            let n = self.read(&mut chunk, cmds);
            if n == 0 {
                return Ok(got);
            }
            if let Some(k) = (0..n).find(|&k| chunk[k] != pattern(*received + k)) {
                return Err(*received + k);
            }
            *received += n;
            got += n;
        }
    }
}

/// The next virtual time (ns) after `t` at which anything happens on the
/// wire of `a` and `b`: a frame falls due or a timer fires.
pub fn next_event(a: &Engine<MemPort>, b: &Engine<MemPort>, t: u64) -> u64 {
    [
        Some(a.next_deadline().0),
        Some(b.next_deadline().0),
        a.port().next_rx_due_ns(),
        b.port().next_rx_due_ns(),
    ]
    .into_iter()
    .flatten()
    .min()
    .map_or(t + STEP_NS, |next| next.max(t + STEP_NS))
}

/// Both engines' connections, for a failure message.
pub fn dump(ea: &Engine<MemPort>, eb: &Engine<MemPort>) -> String {
    let mut s = String::new();
    for (name, e) in [("A", ea), ("B", eb)] {
        e.for_each_tcb(|t| {
            let _ = writeln!(
                s,
                "{name}: {:?} snd_una {:?} snd_nxt {:?} snd_wnd {} rcv_nxt {:?} rcv_wnd {} \
                 cwnd {} ssthresh {} in_flight {} rto {:?} retries {} recovery {} sacked {} \
                 ooo {}\n   {:?}",
                t.state(),
                t.snd_una(),
                t.snd_nxt(),
                t.snd_wnd(),
                t.rcv_nxt(),
                t.rcv_wnd(),
                t.cwnd(),
                t.ssthresh(),
                t.bytes_in_flight(),
                t.rto(),
                t.retries(),
                t.in_recovery(),
                t.sacked_bytes(),
                t.ooo_intervals(),
                t.stats()
            );
        });
    }
    s
}

/// Two engines on a clean `mem` wire, B listening (see [`listening_pair`]).
pub struct ListeningPair {
    pub a: Engine<MemPort>,
    pub ca: spsc::Sender<Command>,
    pub b: Engine<MemPort>,
    pub cb: spsc::Sender<Command>,
    /// B's accept queue.
    pub accepted: spsc::Receiver<Accepted>,
    /// The wire's clock, ns.
    pub clock: Arc<AtomicU64>,
    /// Virtual time now, ns (1 s).
    pub t: u64,
}

/// Two engines with `cfg` on a clean `mem` wire of `frames` frames each way
/// with a manual clock at 1 s, B listening on `port` with an accept queue of
/// `backlog`.
pub fn listening_pair(
    cfg: EngineConfig,
    frames: usize,
    port: u16,
    backlog: usize,
) -> ListeningPair {
    let listen = (SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port).into(), false);
    let cfgs = (cfg.clone(), cfg);
    listening_pair_on(
        Impairments::default(),
        1,
        frames,
        cfgs,
        listen,
        backlog,
        |_| {},
    )
}

/// [`listening_pair`] on a wire with `imp` each way seeded with `seed`, A
/// and B configured by `cfgs` (their IPv4 addresses set here), B listening
/// on `listen` (with IPV6_V6ONLY), and `ports` applied to both mem ports
/// before the engines start.
fn listening_pair_on(
    imp: Impairments,
    seed: u64,
    frames: usize,
    (cfg_a, cfg_b): (EngineConfig, EngineConfig),
    listen: (std::net::SocketAddr, bool),
    backlog: usize,
    ports: impl Fn(&mut MemPort),
) -> ListeningPair {
    let (mut pa, mut pb) = mem::pair_with_capacity(imp, imp, seed, frames);
    ports(&mut pa);
    ports(&mut pb);
    let (clock, ns) = MemClock::manual();
    pa.set_clock(clock.clone());
    pb.set_clock(clock);
    let start = 1_000_000_000u64;
    ns.store(start, Ordering::Release);
    let (a, ca) = engine(pa, A_IP, cfg_a, Instant(start));
    let (b, mut cb) = engine(pb, B_IP, cfg_b, Instant(start));
    let (acc_tx, accepted) = spsc::channel::<Accepted>(backlog);
    push(
        &mut cb,
        self::listen(1, StatusHandle::local(), listen.0, listen.1, acc_tx),
    );
    ListeningPair {
        a,
        ca,
        b,
        cb,
        accepted,
        clock: ns,
        t: start,
    }
}

/// Two engines on one `mem` wire with a manual clock: A has opened a
/// connection to B's listener (the handshake runs with the first polls).
pub struct Wire {
    pub a: Engine<MemPort>,
    pub b: Engine<MemPort>,
    /// Command rings of A and B.
    pub ca: spsc::Sender<Command>,
    pub cb: spsc::Sender<Command>,
    /// A's end of the connection.
    pub end_a: End,
    /// B's end of the connection once [`Wire::stream_one_way`] took it.
    pub end_b: Option<End>,
    /// Where B's accepted connection arrives.
    pub accepted: spsc::Receiver<Accepted>,
    /// The wire's clock, ns.
    pub clock: Arc<AtomicU64>,
    /// Virtual time now, and when the wire was set up, ns.
    pub t: u64,
    pub start: u64,
    /// Virtual time (ns) of the first [`Wire::stream_one_way`] step that
    /// found A's connection open.
    pub opened: Option<u64>,
}

impl Wire {
    /// Engines with `cfg` (addresses set here) on a wire with `imp` each
    /// way, seeded with `seed`, holding `frames` frames per direction, with
    /// `ports` applied to both mem ports before the engines start
    /// (offloads; `|_| {}` for none); A's rings start at `cfg.ring_bytes`
    /// and may grow to `cfg.ring_max_bytes`; B listens on `port`
    /// (SO_RCVBUF/SO_SNDBUF `bufs` on the listener unless (0, 0)) and A
    /// connects to it.
    pub fn connect(
        imp: Impairments,
        seed: u64,
        frames: usize,
        cfg: EngineConfig,
        port: u16,
        bufs: (usize, usize),
        ports: impl Fn(&mut MemPort),
    ) -> Wire {
        let listen = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port).into();
        let to = SocketAddrV4::new(B_IP, port).into();
        let cfgs = (cfg.clone(), cfg);
        Wire::connect_to(imp, seed, frames, cfgs, (listen, false), to, bufs, ports)
    }

    /// [`Wire::connect`] with A and B configured by `cfgs` (their IPv4
    /// addresses set here), B listening on `listen` (with IPV6_V6ONLY)
    /// and A connecting to `to`.
    #[allow(clippy::too_many_arguments)]
    pub fn connect_to(
        imp: Impairments,
        seed: u64,
        frames: usize,
        cfgs: (EngineConfig, EngineConfig),
        listen: (std::net::SocketAddr, bool),
        to: std::net::SocketAddr,
        bufs: (usize, usize),
        ports: impl Fn(&mut MemPort),
    ) -> Wire {
        let ring = (cfgs.0.ring_bytes, cfgs.0.ring_max_bytes);
        let ListeningPair {
            a,
            mut ca,
            b,
            mut cb,
            accepted,
            clock,
            t: start,
        } = listening_pair_on(imp, seed, frames, cfgs, listen, 16, ports);
        if bufs != (0, 0) {
            push(
                &mut cb,
                Command::SetBuffers {
                    id: 1,
                    rcv: bufs.0,
                    snd: bufs.1,
                },
            );
        }
        let shared = StatusHandle::local();
        let (a_tx, eng_tx) = bytes::growable_ring(ring.0, ring.1);
        let (eng_rx, a_rx) = bytes::growable_ring(ring.0, ring.1);
        push(&mut ca, connect(1, &shared, to, (eng_tx, eng_rx), false));
        Wire {
            a,
            b,
            ca,
            cb,
            end_a: End {
                id: 1,
                shared,
                tx: a_tx,
                rx: a_rx,
            },
            accepted,
            clock,
            t: start,
            start,
            end_b: None,
            opened: None,
        }
    }

    /// One iteration of both engines at the current time; true if either
    /// did work.
    pub fn poll(&mut self) -> bool {
        self.clock.store(self.t, Ordering::Release);
        let a = self.a.poll(Instant(self.t));
        let b = self.b.poll(Instant(self.t));
        a || b
    }

    /// B's end of the connection, once accepted.
    pub fn accept(&mut self) -> Option<End> {
        self.accepted.pop().map(|acc| End {
            id: acc.id,
            shared: acc.shared,
            tx: acc.tx,
            rx: acc.rx,
        })
    }

    /// Moves time on: a step when anything happened (`busy`), else to the
    /// next frame or timer.
    pub fn advance(&mut self, busy: bool) {
        self.t = if busy {
            self.t + STEP_NS
        } else {
            next_event(&self.a, &self.b, self.t)
        };
    }

    /// Virtual time since the set-up, ns.
    pub fn elapsed_ns(&self) -> u64 {
        self.t - self.start
    }

    /// One step of a one-way transfer of the test stream ([`pattern`]) of
    /// `total` bytes: A writes from offset `*sent` as far as its TX ring
    /// takes once the connection is open; B's end is taken into `end_b`
    /// once accepted and reads (and checks) everything readable from offset
    /// `*received`. Returns whether any byte moved, or Err with the stream
    /// offset of the first byte B read wrong.
    pub fn stream_one_way(
        &mut self,
        sent: &mut usize,
        received: &mut usize,
        total: usize,
    ) -> Result<bool, usize> {
        let mut moved = false;
        if self.end_a.shared.state() == SockState::Open {
            self.opened.get_or_insert(self.t);
            moved |= self.end_a.send_stream(sent, total, &mut self.ca) > 0;
        }
        if self.end_b.is_none() {
            self.end_b = self.accept();
        }
        if let Some(b) = self.end_b.as_mut() {
            moved |= b.recv_stream(received, &mut self.cb)? > 0;
        }
        Ok(moved)
    }
}
