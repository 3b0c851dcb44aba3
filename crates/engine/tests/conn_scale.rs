//! Engine work follows the live load, not the number of connections or the
//! socket table's capacity: two engines on the `mem` wire, A opens N
//! connections to B's echo listener and keeps one 64-byte message in flight
//! on each, round after round; the engine work per round trip at 20 000
//! connections must stay within 1.5× of the work at 100, and a table
//! configured for 1 000 000 sockets must cost what one for 25 000 costs.
//!
//! Work is counted, not timed: frames in and out, timer wheel entries
//! looked at, socket slots visited by housekeeping and by the publication
//! of the connection table (every pass over engine state that can grow with
//! the number of sockets counts what it visits). The engines run wrapped in
//! [`Published`], as every real engine loop runs them, so the periodic
//! publication for `corestack stat`/`ss` is part of the work.
//!
//! A manual clock moves 20 µs per busy iteration, so delayed ACKs,
//! housekeeping (every 100 ms) and publication (every 10 ms) all run during
//! the measured rounds.

mod common;

use appif::command::Command;
use appif::seg::Accepted;
use appif::socket::{SockState, StatusHandle};
use appif::{bytes, spsc};
use common::{listening_pair, End, ListeningPair, B_IP, STEP_NS};
use engine::publish::Published;
use engine::stats::Stats;
use engine::time::Instant;
use engine::EngineConfig;
use nic::mem::MemPort;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const PORT: u16 = 7;
const MSG: usize = 64;
/// Ring size of every connection, bytes (fixed: no growth).
const RING: usize = 4096;

/// Two engines, N connections between them, and the application ends.
struct Echo {
    a: Published<MemPort>,
    b: Published<MemPort>,
    ca: spsc::Sender<Command>,
    cb: spsc::Sender<Command>,
    accepted: spsc::Receiver<Accepted>,
    clock: Arc<AtomicU64>,
    t: u64,
    ends_a: Vec<End>,
    ends_b: Vec<End>,
}

impl Echo {
    /// Engines whose tables hold `max_sockets`, with `n` connections open
    /// and accepted.
    fn open(n: usize, max_sockets: usize) -> Echo {
        let cfg = EngineConfig {
            max_sockets,
            ring_bytes: RING,
            ring_max_bytes: RING,
            ..EngineConfig::default()
        };
        let ListeningPair {
            a,
            ca,
            b,
            cb,
            accepted,
            clock: ns,
            t: start,
        } = listening_pair(cfg, 4 * n.max(1024), PORT, n.max(16));
        let mut e = Echo {
            a: Published::new(a),
            b: Published::new(b),
            ca,
            cb,
            accepted,
            clock: ns,
            t: start,
            ends_a: Vec::with_capacity(n),
            ends_b: Vec::with_capacity(n),
        };
        e.settle();
        for i in 0..n {
            let shared = StatusHandle::local();
            let (a_tx, eng_tx) = bytes::growable_ring(RING, RING);
            let (eng_rx, a_rx) = bytes::growable_ring(RING, RING);
            let cmd = Command::Connect {
                id: 1 + i as u64,
                shared: shared.clone(),
                local_port: 0,
                remote: SocketAddrV4::new(B_IP, PORT).into(),
                tx: eng_tx,
                rx: eng_rx,
                nodelay: true,
            };
            // The command ring holds 1024: let the engine take them.
            let mut cmd = Some(cmd);
            while let Some(c) = cmd.take() {
                if let Err(c) = e.ca.push(c) {
                    cmd = Some(c);
                    e.step();
                }
            }
            e.ends_a.push(End {
                id: 1 + i as u64,
                shared,
                tx: a_tx,
                rx: a_rx,
            });
            e.take_accepted();
        }
        // Until every connection is open at A and accepted at B.
        for _ in 0..100_000 {
            e.settle();
            e.take_accepted();
            if e.ends_b.len() == n && e.ends_a.iter().all(|x| x.shared.state() == SockState::Open) {
                return e;
            }
            e.t += 10 * STEP_NS;
        }
        panic!(
            "{} of {n} connections accepted, {} open at A",
            e.ends_b.len(),
            e.ends_a
                .iter()
                .filter(|x| x.shared.state() == SockState::Open)
                .count()
        );
    }

    fn take_accepted(&mut self) {
        while let Some(acc) = self.accepted.pop() {
            self.ends_b.push(End {
                id: acc.id,
                shared: acc.shared,
                tx: acc.tx,
                rx: acc.rx,
            });
        }
    }

    /// One iteration of both engines (and their publication); the clock
    /// moves one step.
    fn step(&mut self) -> bool {
        self.clock.store(self.t, Ordering::Release);
        let now = Instant(self.t);
        let a = self.a.engine.poll(now);
        self.a.publish(now, false);
        let b = self.b.engine.poll(now);
        self.b.publish(now, false);
        self.t += STEP_NS;
        a || b
    }

    /// Iterations until neither engine has work.
    fn settle(&mut self) {
        for _ in 0..1_000_000 {
            if !self.step() {
                return;
            }
        }
        panic!("the engines never went idle");
    }

    /// One round: a message out on every connection, echoed by B, read
    /// back by A. Returns the round trips completed.
    fn round(&mut self) -> usize {
        let msg = [0x5au8; MSG];
        let mut buf = [0u8; RING];
        // Each write may queue a command: let the engine take them before
        // the ring of 1024 fills (it takes 64 a poll).
        for i in 0..self.ends_a.len() {
            assert_eq!(
                self.ends_a[i].write(&msg, &mut self.ca),
                MSG,
                "A's TX ring full"
            );
            if i % 64 == 63 {
                self.step();
            }
        }
        let mut echoed = 0;
        let mut done = 0;
        for _ in 0..10_000 {
            self.step();
            let mut queued = 0;
            for end in &mut self.ends_b {
                let n = end.read(&mut buf, &mut self.cb);
                if n > 0 {
                    assert_eq!(end.write(&buf[..n], &mut self.cb), n, "B's TX ring full");
                    echoed += n;
                    queued += 1;
                    if queued % 64 == 0 {
                        self.b.engine.poll(Instant(self.t));
                    }
                }
            }
            for end in &mut self.ends_a {
                done += end.read(&mut buf, &mut self.ca);
            }
            if done == MSG * self.ends_a.len() {
                assert_eq!(echoed, done);
                return self.ends_a.len();
            }
        }
        panic!(
            "round not done: {done} bytes back of {}",
            MSG * self.ends_a.len()
        );
    }
}

/// The work the counters count: frames through the port, timer entries
/// looked at, slots visited by housekeeping and by publication.
fn work(s: &Stats) -> u64 {
    s.rx_frames + s.tx_frames + s.timer_entries_scanned + s.housekeeping_slots + s.published_slots
}

/// Engine work per round trip (both engines) over `rounds` rounds with
/// `n` connections in a table of `max_sockets`, and the retransmissions.
fn work_per_round_trip(n: usize, max_sockets: usize, round_trips: usize) -> (f64, u64) {
    let mut e = Echo::open(n, max_sockets);
    let before = work(&e.a.engine.stats()) + work(&e.b.engine.stats());
    let mut done = 0;
    while done < round_trips {
        done += e.round();
    }
    let (sa, sb) = (e.a.engine.stats(), e.b.engine.stats());
    let spent = work(&sa) + work(&sb) - before;
    (
        spent as f64 / done as f64,
        sa.tcp_retransmits + sb.tcp_retransmits,
    )
}

#[test]
fn engine_work_per_round_trip_follows_the_live_load() {
    let trips = 60_000;
    let (small, r_small) = work_per_round_trip(100, 25_000, trips);
    let (large, r_large) = work_per_round_trip(20_000, 25_000, trips);
    let (roomy, r_roomy) = work_per_round_trip(100, 1_000_000, trips);
    eprintln!(
        "work per round trip: 100 connections {small:.2}, 20 000 connections {large:.2}, \
         100 connections in a 1 000 000-socket table {roomy:.2}"
    );
    assert_eq!(
        r_small + r_large + r_roomy,
        0,
        "retransmissions on a clean wire"
    );
    assert!(
        large <= 1.5 * small,
        "20 000 connections cost {large:.2} per round trip, 100 cost {small:.2}"
    );
    assert!(
        roomy <= 1.1 * small,
        "a 1 000 000-socket table costs {roomy:.2} per round trip, a 25 000 one {small:.2}"
    );
}
