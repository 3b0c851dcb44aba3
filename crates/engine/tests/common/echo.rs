//! Two engines on the `mem` wire with N connections between them, each
//! with one 64-byte message in flight per round: A writes, B's
//! application echoes, A reads back ([`Echo`]).

use super::{listening_pair, End, ListeningPair, B_IP, STEP_NS};
use appif::command::Command;
use appif::seg::Accepted;
use appif::socket::{SockState, StatusHandle};
use appif::{bytes, spsc};
use engine::publish::Published;
use engine::time::Instant;
use engine::EngineConfig;
use nic::mem::MemPort;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub const PORT: u16 = 7;
pub const MSG: usize = 64;
/// Ring size of every connection, bytes (fixed: no growth).
pub const RING: usize = 4096;

/// Two engines, N connections between them, and the application ends.
pub struct Echo {
    pub a: Published<MemPort>,
    pub b: Published<MemPort>,
    pub ca: spsc::Sender<Command>,
    pub cb: spsc::Sender<Command>,
    pub accepted: spsc::Receiver<Accepted>,
    pub clock: Arc<AtomicU64>,
    pub t: u64,
    pub ends_a: Vec<End>,
    pub ends_b: Vec<End>,
}

impl Echo {
    /// Engines whose tables hold `max_sockets`, with `n` connections open
    /// and accepted.
    pub fn open(n: usize, max_sockets: usize) -> Echo {
        let mut e = Echo::new(n, max_sockets);
        e.connect(n);
        e
    }

    /// Engines whose tables hold `max_sockets`, made for up to `n`
    /// connections (the wire's frames, the accept queue), none open yet.
    pub fn new(n: usize, max_sockets: usize) -> Echo {
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
        e
    }

    /// Opens `n` more connections from A to B and waits until all are
    /// open at A and accepted at B (the engines were made for them all).
    pub fn connect(&mut self, n: usize) {
        let e = self;
        let n = e.ends_a.len() + n;
        for i in e.ends_a.len()..n {
            let shared = StatusHandle::local();
            let (a_tx, eng_tx) = bytes::growable_ring(RING, RING);
            let (eng_rx, a_rx) = bytes::growable_ring(RING, RING);
            let cmd = super::connect(
                1 + i as u64,
                &shared,
                SocketAddrV4::new(B_IP, PORT),
                (eng_tx, eng_rx),
                true,
            );
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
                return;
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

    pub fn take_accepted(&mut self) {
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
    pub fn step(&mut self) -> bool {
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
    pub fn settle(&mut self) {
        for _ in 0..1_000_000 {
            if !self.step() {
                return;
            }
        }
        panic!("the engines never went idle");
    }

    /// One round: a message out on every connection, echoed by B, read
    /// back by A. Returns the round trips completed.
    pub fn round(&mut self) -> usize {
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
