//! TIME-WAIT as Linux handles it (RFC 6191): a 4-tuple in TIME-WAIT can
//! carry a new connection when timestamps tell the incarnations apart.
//! - The active closer (the client) may connect from the same port again
//!   a second after its close (Linux's `tcp_tw_reuse = 1`), not before.
//! - The passive opener that closed first (the server) accepts a new SYN
//!   for the 4-tuple whose TSval is newer than the last it saw.
//!
//! Two engines on the `mem` wire with a manual clock.

mod common;

use appif::bytes;
use appif::command::{Command, Owner};
use appif::seg::Accepted;
use appif::socket::{SockState, StatusHandle};
use appif::spsc;
use common::{listening_pair, push, End, ListeningPair, B_IP, STEP_NS};
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::mem::{self, MemPort};
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const PORT: u16 = 80;
const CLIENT_PORT: u16 = 40_000;
const RING: usize = 4096;

struct Pair {
    a: Engine<MemPort>,
    b: Engine<MemPort>,
    ca: spsc::Sender<Command>,
    cb: spsc::Sender<Command>,
    accepted: spsc::Receiver<Accepted>,
    clock: Arc<AtomicU64>,
    t: u64,
    next_id: u64,
}

impl Pair {
    fn new() -> Pair {
        let ListeningPair {
            a,
            ca,
            b,
            cb,
            accepted,
            clock,
            t,
        } = listening_pair(EngineConfig::default(), mem::MEM_WIRE_FRAMES, PORT, 16);
        Pair {
            a,
            b,
            ca,
            cb,
            accepted,
            clock,
            t,
            next_id: 10,
        }
    }

    /// Both engines until idle (at most `ms` of virtual time).
    fn run_ms(&mut self, ms: u64) {
        let end = self.t + ms * 1_000_000;
        while self.t < end {
            self.clock.store(self.t, Ordering::Release);
            let a = self.a.poll(Instant(self.t));
            let b = self.b.poll(Instant(self.t));
            self.t += if a || b { STEP_NS } else { 1_000_000 };
        }
    }

    /// A connects from `CLIENT_PORT`; returns its end after `ms` of running.
    fn connect(&mut self) -> End {
        let id = self.next_id;
        self.next_id += 1;
        let shared = StatusHandle::local();
        let (a_tx, eng_tx) = bytes::growable_ring(RING, RING);
        let (eng_rx, a_rx) = bytes::growable_ring(RING, RING);
        push(
            &mut self.ca,
            Command::Connect {
                id,
                owner: Owner::LOCAL,
                shared: shared.clone(),
                local_port: CLIENT_PORT,
                remote: SocketAddrV4::new(B_IP, PORT).into(),
                tx: eng_tx,
                rx: eng_rx,
                nodelay: true,
            },
        );
        self.run_ms(50);
        End {
            id,
            shared,
            tx: a_tx,
            rx: a_rx,
        }
    }

    fn accept(&mut self) -> Option<End> {
        self.accepted.pop().map(|acc| End {
            id: acc.id,
            shared: acc.shared,
            tx: acc.tx,
            rx: acc.rx,
        })
    }

    /// A connects and B accepts; `closer` closes first, the other side
    /// 10 ms later. Checks that the closer's side ends in TIME-WAIT as a
    /// compact record, with no connection left on its engine.
    fn close_into_time_wait(&mut self, closer: Closer) {
        let c = self.connect();
        assert_eq!(c.shared.state(), SockState::Open);
        let s = self.accept().expect("accepted");
        let close = |end: &End, cmds: &mut spsc::Sender<Command>| {
            push(cmds, Command::Close { id: end.id });
        };
        // The closer's side first, then the other.
        for client in [closer == Closer::Client, closer == Closer::Server] {
            if client {
                close(&c, &mut self.ca);
            } else {
                close(&s, &mut self.cb);
            }
            self.run_ms(10);
        }
        let e = match closer {
            Closer::Client => &self.a,
            Closer::Server => &self.b,
        };
        let mut states = Vec::new();
        e.for_each_tcb(|t| states.push(t.state()));
        assert_eq!(states, vec![], "{closer:?}: no connection is left");
        assert_eq!(e.time_wait_records() as u64, 1, "{closer:?}");
    }
}

/// Which side of [`Pair`]'s connection closes first (and so ends in
/// TIME-WAIT).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Closer {
    /// A, the active opener.
    Client,
    /// B, the passive opener.
    Server,
}

#[test]
fn active_closer_takes_its_time_wait_port_again_after_a_second() {
    let mut p = Pair::new();
    p.close_into_time_wait(Closer::Client);
    // Within the second: the 4-tuple is still taken.
    let early = p.connect();
    assert_eq!(early.shared.state(), SockState::Closed);
    assert_eq!(early.shared.error(), appif::errno::EADDRINUSE);
    p.run_ms(1_000);
    let again = p.connect();
    assert_eq!(again.shared.state(), SockState::Open, "port taken again");
    assert!(p.accept().is_some());
    assert_eq!(p.a.stats().tcp_time_wait_recycled, 1);
    assert_eq!(p.b.stats().tcp_rst_tx, 0);
}

#[test]
fn passive_closer_in_time_wait_accepts_a_newer_syn() {
    let mut p = Pair::new();
    p.close_into_time_wait(Closer::Server);
    // The client's side is closed: it connects from the same port, with
    // a newer timestamp, and the server takes the SYN.
    p.run_ms(5);
    let again = p.connect();
    assert_eq!(again.shared.state(), SockState::Open, "new incarnation");
    assert!(p.accept().is_some());
    assert_eq!(p.b.stats().tcp_time_wait_recycled, 1);
}
