//! Four engines behind one `mem` NIC of four queues, under each way the
//! NIC may spread frames (hash with the engines' table, random per flow,
//! random per frame, all to queue 0), against one engine on the other
//! end (the peer). Every flow's TCP input must run on its owner only
//! (`owner_violations` stays 0), handoffs balance, and 1 000 passive and
//! 1 000 active connections carry their bytes exactly, both ways.

mod common;
mod owner_bench;
use owner_bench::check_clean;

use appif::command::Command;
use appif::seg::Accepted;
use appif::socket::{engine_of, with_engine, SockState, StatusHandle};
use appif::spsc;
use common::{engine, push, End, A_IP, B_IP, STEP_NS};
use engine::stats::Stats;
use engine::steer::{handoff_mesh, HANDOFF_RING_BYTES};
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::impair::Impairments;
use nic::mem::{self, MemClock, MemPort, Steer};
use nic::rss::Steering;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const ENGINES: usize = 4;
/// The peer's listener (B's engines connect to it).
const PEER_PORT: u16 = 8080;
/// B's listener, on every engine.
const B_PORT: u16 = 80;

/// One connection's application end and its progress: it sends `total`
/// bytes of the test stream and reads `total` back, checked.
struct Flow {
    end: End,
    /// The engine that owns it (B side; 0 on the peer).
    engine: usize,
    sent: usize,
    received: usize,
    total: usize,
    closed: bool,
}

impl Flow {
    fn new(end: End, engine: usize, total: usize) -> Flow {
        Flow {
            end,
            engine,
            sent: 0,
            received: 0,
            total,
            closed: false,
        }
    }

    /// Sends and reads what it can; closes once both ways are done.
    /// Returns whether anything moved; panics on a wrong byte.
    fn step(&mut self, cmds: &mut spsc::Sender<Command>) -> bool {
        if self.closed || self.end.shared.state() != SockState::Open {
            return false;
        }
        let mut moved = self.end.send_stream(&mut self.sent, self.total, cmds) > 0;
        match self.end.recv_stream(&mut self.received, cmds) {
            Ok(n) => moved |= n > 0,
            Err(at) => panic!("byte {at} of a flow on engine {} is wrong", self.engine),
        }
        if self.sent == self.total && self.received >= self.total {
            assert_eq!(self.received, self.total, "more bytes than were sent");
            push(cmds, Command::Close { id: self.end.id });
            self.closed = true;
        }
        moved
    }
}

fn end_of(a: Accepted) -> End {
    End {
        id: a.id,
        shared: a.shared,
        tx: a.tx,
        rx: a.rx,
    }
}

/// The peer (one engine, one queue) and B (four engines on four queues
/// spread by `steer`), on a clean wire with a manual clock.
struct Net {
    clock: Arc<AtomicU64>,
    t: u64,
    peer: Engine<MemPort>,
    cpeer: spsc::Sender<Command>,
    peer_accepted: spsc::Receiver<Accepted>,
    engines: Vec<Engine<MemPort>>,
    cmds: Vec<spsc::Sender<Command>>,
    accepted: Vec<spsc::Receiver<Accepted>>,
}

impl Net {
    fn new(steer: Steer, seed: u64) -> Net {
        let none = Impairments::none();
        let (mut qa, qb) = mem::multi_pair(none, none, seed, 1, ENGINES, Steer::AllToZero, steer);
        let (clock, ns) = MemClock::manual();
        qa[0].set_clock(clock);
        let t = 1_000_000_000u64;
        ns.store(t, Ordering::Release);
        let cfg = EngineConfig {
            ring_bytes: 16 * 1024,
            ..EngineConfig::default()
        };
        let (peer, mut cpeer) = engine(qa.remove(0), A_IP, cfg.clone(), Instant(t));
        let (acc, peer_accepted) = spsc::channel(4096);
        push(&mut cpeer, listen(1, PEER_PORT, acc));
        let mesh = handoff_mesh(Arc::new(Steering::new(ENGINES)), HANDOFF_RING_BYTES);
        let (mut engines, mut cmds, mut accepted) = (vec![], vec![], vec![]);
        for (e, (port, handoff)) in qb.into_iter().zip(mesh).enumerate() {
            let (mut eng, mut c) = engine(port, B_IP, cfg.clone(), Instant(t));
            eng.join(handoff);
            assert_eq!(eng.index(), e);
            // The listener exists on every engine, each with its own queue.
            let (acc, rx) = spsc::channel(4096);
            push(&mut c, listen(with_engine(1, e), B_PORT, acc));
            engines.push(eng);
            cmds.push(c);
            accepted.push(rx);
        }
        Net {
            clock: ns,
            t,
            peer,
            cpeer,
            peer_accepted,
            engines,
            cmds,
            accepted,
        }
    }

    /// One iteration of every engine; true if any did work.
    fn poll(&mut self) -> bool {
        self.clock.store(self.t, Ordering::Release);
        let now = Instant(self.t);
        let mut busy = self.peer.poll(now);
        for e in &mut self.engines {
            busy |= e.poll(now);
        }
        busy
    }

    /// A step when anything happened, else on to the next frame or timer.
    fn advance(&mut self, busy: bool) {
        if busy {
            self.t += STEP_NS;
            return;
        }
        let mut next = self.peer.next_deadline().0;
        next = next.min(self.peer.port().next_rx_due_ns().unwrap_or(u64::MAX));
        for e in &self.engines {
            next = next.min(e.next_deadline().0);
            next = next.min(e.port().next_rx_due_ns().unwrap_or(u64::MAX));
        }
        self.t = next.max(self.t + STEP_NS);
    }

    fn stats(&self) -> Vec<Stats> {
        self.engines.iter().map(|e| e.stats()).collect()
    }
}

fn listen(id: u64, port: u16, accept: spsc::Sender<Accepted>) -> Command {
    let local = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
    common::listen(id, StatusHandle::local(), local, false, accept)
}

/// A connection from `cmds`' engine to `remote`: the command and the
/// application's end.
fn connect(id: u64, remote: SocketAddrV4, ring: usize) -> (Command, End) {
    let shared = StatusHandle::local();
    let (app_tx, eng_tx) = appif::bytes::ring(ring);
    let (eng_rx, app_rx) = appif::bytes::ring(ring);
    let cmd = common::connect(id, &shared, remote, (eng_tx, eng_rx), true);
    (
        cmd,
        End {
            id,
            shared,
            tx: app_tx,
            rx: app_rx,
        },
    )
}

/// Bytes each way of connection `i`: 1 000 to 4 000, so that flows end at
/// different times.
fn size(i: usize) -> usize {
    1000 + (i * 7919) % 3000
}

/// `passive` connections from the peer to B and `active` from B's engines
/// (in turn) to the peer, all carrying their bytes both ways; returns B's
/// counters per engine after the last connection closed.
fn run(steer: Steer, passive: usize, active: usize) -> Vec<Stats> {
    let mut net = Net::new(steer, 7);
    let steering = Steering::new(ENGINES);
    // Flows whose application end is on the peer, and on B.
    let mut peer_flows: Vec<Flow> = vec![];
    let mut b_flows: Vec<Flow> = vec![];
    let (mut opened_passive, mut opened_active) = (0, 0);
    let mut owned_passive = [0usize; ENGINES];
    let deadline = net.t + 300_000_000_000;
    let mut busy = true;
    loop {
        // Open connections a few at a time, as a server sees them come.
        for _ in 0..16 {
            if opened_passive < passive {
                let id = 1000 + opened_passive as u64;
                let (cmd, end) = connect(id, SocketAddrV4::new(B_IP, B_PORT), 8192);
                push(&mut net.cpeer, cmd);
                peer_flows.push(Flow::new(end, 0, size(opened_passive)));
                opened_passive += 1;
            }
            if opened_active < active {
                let e = opened_active % ENGINES;
                let id = with_engine(100_000 + opened_active as u64, e);
                let (cmd, end) = connect(id, SocketAddrV4::new(A_IP, PEER_PORT), 8192);
                push(&mut net.cmds[e], cmd);
                b_flows.push(Flow::new(end, e, size(passive + opened_active)));
                opened_active += 1;
            }
        }
        busy |= net.poll();
        for (e, q) in net.accepted.iter_mut().enumerate() {
            while let Some(a) = q.pop() {
                assert_eq!(engine_of(a.id), e, "a connection's id names its engine");
                // The accepting side sends as much as it is sent.
                let i = (a.shared.remote().port(), a.shared.local().port());
                let peer = peer_flows
                    .iter()
                    .find(|f| f.end.shared.local().port() == i.0)
                    .expect("an accepted connection the peer opened");
                b_flows.push(Flow::new(end_of(a), e, peer.total));
                owned_passive[e] += 1;
            }
        }
        while let Some(a) = net.peer_accepted.pop() {
            let port = a.shared.remote().port();
            let b = b_flows
                .iter()
                .find(|f| f.end.shared.local().port() == port)
                .expect("an accepted connection B opened");
            let total = b.total;
            peer_flows.push(Flow::new(end_of(a), 0, total));
        }
        for f in &mut peer_flows {
            busy |= f.step(&mut net.cpeer);
        }
        for f in &mut b_flows {
            let e = engine_of(f.end.id);
            assert_eq!(e, f.engine);
            busy |= f.step(&mut net.cmds[e]);
        }
        let done = opened_passive == passive
            && opened_active == active
            && peer_flows.len() == passive + active
            && b_flows.len() == passive + active
            && peer_flows.iter().chain(&b_flows).all(|f| f.closed);
        if done {
            break;
        }
        assert!(
            net.t < deadline,
            "stalled: {} of {} peer flows and {} of {} B flows done",
            peer_flows.iter().filter(|f| f.closed).count(),
            passive + active,
            b_flows.iter().filter(|f| f.closed).count(),
            passive + active
        );
        net.advance(busy);
        busy = false;
    }
    // Active opens chose local ports that hash to their own engine.
    for f in b_flows
        .iter()
        .filter(|f| f.end.id & appif::socket::ENGINE_ID_BIT == 0)
    {
        let (l, r) = (f.end.shared.local(), f.end.shared.remote());
        let (std::net::IpAddr::V4(li), std::net::IpAddr::V4(ri)) = (l.ip(), r.ip()) else {
            panic!("IPv4 flows only here");
        };
        assert_eq!(steering.owner_v4(li, ri, l.port(), r.port()), f.engine);
    }
    // Every engine accepted some of the passive connections.
    if passive >= 100 {
        assert!(owned_passive.iter().all(|&n| n > 0), "{owned_passive:?}");
    }
    // Let the last FINs and handoffs settle.
    for _ in 0..100 {
        net.poll();
        net.t += STEP_NS;
    }
    net.stats()
}

#[test]
fn hash_steering_puts_every_frame_on_its_owner() {
    let stats = run(Steer::Hash(Arc::new(Steering::new(ENGINES))), 1000, 1000);
    check_clean(&stats, "hash");
    // The NIC and the engines agree: no TCP frame needed a handoff.
    for (e, s) in stats.iter().enumerate() {
        assert_eq!(s.rx_foreign, 0, "engine {e}");
        assert!(s.rx_frames > 0, "engine {e} received nothing");
    }
}

#[test]
fn random_per_flow_steering_is_corrected_by_handoff() {
    let stats = run(Steer::RandomPerFlow, 1000, 1000);
    check_clean(&stats, "random per flow");
    let foreign: u64 = stats.iter().map(|s| s.rx_foreign).sum();
    assert!(foreign > 0, "random steering never missed the owner");
}

#[test]
fn random_per_frame_steering_is_corrected_by_handoff() {
    let stats = run(Steer::RandomPerFrame, 1000, 1000);
    check_clean(&stats, "random per frame");
    assert!(stats.iter().all(|s| s.rx_foreign > 0));
}

#[test]
fn one_queue_feeds_four_engines() {
    let stats = run(Steer::AllToZero, 1000, 1000);
    check_clean(&stats, "all to queue 0");
    for s in &stats[1..] {
        assert_eq!(s.rx_frames, 0);
        assert!(s.handoff_rx > 0);
    }
    assert!(stats[0].rx_foreign > 0);
}
