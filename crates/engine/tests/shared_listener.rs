//! A shared listener (service mode, a pre-forking server): association 1
//! listens on a port, associations 2 and 3 join it (`Command::JoinListener`),
//! each with its accept queue in its own segment; engine A connects over
//! the `mem` wire. Checks which member each connection goes to (a member
//! with a waiter armed, then one that has accepted before, a member that
//! never accepted last), and that the port stays bound while any member
//! is left.

mod common;

use appif::command::{Command, Owner};
use appif::region::Region;
use appif::seg::AcceptQueue;
use appif::seg::{self, AppSegment, AppSegmentAccept, Layout};
use appif::socket::{SockState, StatusHandle};
use common::{engine, next_event, push, A_IP, B_IP, STEP_NS};
use engine::time::Instant;
use engine::EngineConfig;
use nic::impair::Impairments;
use nic::mem::{self, MemClock, MEM_WIRE_FRAMES};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const PORT: u16 = 80;

/// Each member's segment: 16 slots of 4 KiB rings.
const LAYOUT: Layout = Layout {
    nslots: 16,
    ring_bytes: 4096,
    ring_max_bytes: 4096,
    cmd_slots: 16,
    engines: 1,
};

/// Association `assoc`'s segment, its listener in slot 0.
fn member(assoc: u32) -> AppSegment {
    let mem = Region::anon(LAYOUT.total_len()).expect("anonymous memory");
    let s = AppSegment::init(Arc::new(mem), LAYOUT, assoc).expect("a valid layout");
    assert_eq!(s.claim_app_slot(0, |_| false), Some(0));
    s.reset_slot(0);
    s
}

fn accept_queue(s: &AppSegment, assoc: u32) -> AcceptQueue {
    AcceptQueue::AppSegment(AppSegmentAccept::new(s.clone(), assoc, 0, 8).expect("slot 0"))
}

/// The two engines, their clock, and the members' segments (index 0 is
/// association 1, the group's head).
struct Setup {
    a: engine::Engine<mem::MemPort>,
    b: engine::Engine<mem::MemPort>,
    ca: appif::spsc::Sender<Command>,
    cb: appif::spsc::Sender<Command>,
    clock: Arc<std::sync::atomic::AtomicU64>,
    t: u64,
    segs: Vec<AppSegment>,
    next_id: u64,
}

impl Setup {
    fn new() -> Setup {
        let (mut pa, mut pb) =
            mem::pair_with_capacity(Impairments::none(), Impairments::none(), 1, MEM_WIRE_FRAMES);
        let (clock, ns) = MemClock::manual();
        pa.set_clock(clock.clone());
        pb.set_clock(clock);
        let t = 1_000_000_000u64;
        ns.store(t, Ordering::Release);
        let cfg = EngineConfig::default();
        let (a, ca) = engine(pa, A_IP, cfg.clone(), Instant(t));
        let (b, mut cb) = engine(pb, B_IP, cfg, Instant(t));
        let segs: Vec<AppSegment> = (1..=3).map(member).collect();
        push(
            &mut cb,
            Command::Listen {
                id: seg::service_id(1, 0),
                owner: Owner::association(1),
                shared: segs[0].shared(0, true).expect("slot 0"),
                local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT).into(),
                v6only: false,
                accept: accept_queue(&segs[0], 1),
                reuseport: None,
            },
        );
        for assoc in [2, 3] {
            let s = &segs[assoc as usize - 1];
            push(
                &mut cb,
                Command::JoinListener {
                    id: seg::service_id(assoc, 0),
                    owner: Owner::association(assoc),
                    shared: s.shared(0, true).expect("slot 0"),
                    group: seg::service_id(1, 0),
                    accept: accept_queue(s, assoc),
                },
            );
        }
        let mut w = Setup {
            a,
            b,
            ca,
            cb,
            clock: ns,
            t,
            segs,
            next_id: 1,
        };
        w.run(|w| w.segs.iter().all(listening));
        w
    }

    /// Polls both engines until `done` holds (at most 2 s of virtual time).
    fn run(&mut self, done: impl Fn(&Setup) -> bool) {
        let end = self.t + 2_000_000_000;
        while !done(self) {
            assert!(self.t < end, "not done within 2 s of virtual time");
            self.clock.store(self.t, Ordering::Release);
            let busy = self.a.poll(Instant(self.t)) | self.b.poll(Instant(self.t));
            self.t = if busy {
                self.t + STEP_NS
            } else {
                next_event(&self.a, &self.b, self.t)
            };
        }
    }

    /// Connects from A and returns which member (1..=3) queued the
    /// connection, or None when A's connection was refused.
    fn connect(&mut self) -> Option<u32> {
        let before: Vec<usize> = self.segs.iter().map(queued).collect();
        let shared = StatusHandle::local();
        let (_app_tx, eng_tx) = appif::bytes::growable_ring(4096, 4096);
        let (eng_rx, _app_rx) = appif::bytes::growable_ring(4096, 4096);
        push(
            &mut self.ca,
            common::connect(
                self.next_id,
                &shared,
                SocketAddrV4::new(B_IP, PORT),
                (eng_tx, eng_rx),
                false,
            ),
        );
        self.next_id += 1;
        self.run(|w| {
            shared.state() == SockState::Closed
                || w.segs.iter().zip(&before).any(|(s, &b)| queued(s) > b)
        });
        let m = self
            .segs
            .iter()
            .zip(&before)
            .position(|(s, &b)| queued(s) > b);
        m.map(|i| i as u32 + 1)
    }

    /// Member `m` takes (accepts) everything queued to it.
    fn take_all(&self, m: u32) {
        let mut q = self.segs[m as usize - 1].rx_reader(0).expect("slot 0");
        let mut b = [0u8; 4];
        while q.read(&mut b) == 4 {}
    }

    /// Member `m` closes its listener.
    fn close(&mut self, m: u32) {
        push(
            &mut self.cb,
            Command::Close {
                id: seg::service_id(m, 0),
            },
        );
        let s = self.segs[m as usize - 1].clone();
        self.run(move |_| s.shared(0, false).expect("slot 0").state() == SockState::Closed);
    }
}

fn listening(s: &AppSegment) -> bool {
    s.shared(0, false).expect("slot 0").state() == SockState::Open
}

/// Connections queued on a member's listener and not yet taken.
fn queued(s: &AppSegment) -> usize {
    s.rx_reader(0).expect("slot 0").len() / 4
}

#[test]
fn connections_go_to_a_waiting_member_then_to_those_that_accept_and_the_port_outlives_the_head() {
    let mut w = Setup::new();
    // A member with a readiness waiter armed (asleep in epoll) is preferred,
    // whoever it is; once woken it is no longer waiting.
    let efd = appif::ctl::eventfd().expect("an eventfd");
    {
        let seg3 = w.segs[2].clone();
        let _armed = seg3.app_wake().arm(efd.as_raw_fd()).expect("armed");
        assert_eq!(w.connect(), Some(3), "member 3 waits in epoll");
    }
    // Nobody waits: member 3 is the only one that has accepted before.
    w.take_all(3);
    for _ in 0..3 {
        assert_eq!(w.connect(), Some(3), "the member that accepts");
    }
    // Member 2 waits (a thread blocked in accept on its listener).
    w.take_all(3);
    let l2 = w.segs[1].shared(0, false).expect("slot 0");
    let seen = l2.notify.seq();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            l2.notify
                .wait(seen, Some(std::time::Duration::from_secs(5)))
        });
        while !l2.notify.has_sleepers() {
            std::thread::yield_now();
        }
        assert_eq!(w.connect(), Some(2), "member 2 is blocked in accept");
        waiter.join().expect("the waiter");
    });
    // Two members that accept share the rest by queue length; the head,
    // which never accepted, gets none while they have room.
    w.take_all(2);
    let mut got = [0usize; 4];
    for _ in 0..8 {
        let m = w.connect().expect("a member");
        got[m as usize] += 1;
        if got[m as usize] % 2 == 0 {
            w.take_all(m);
        }
    }
    assert_eq!(got[1], 0, "the head never accepts: {got:?}");
    assert!(got[2] > 0 && got[3] > 0, "spread over 2 and 3: {got:?}");
    // The head leaves: the port stays bound for the others; the last
    // member's close unbinds it.
    w.take_all(2);
    w.take_all(3);
    w.close(1);
    let m = w.connect();
    assert!(matches!(m, Some(2 | 3)), "{m:?}");
    w.close(2);
    assert_eq!(w.connect(), Some(3));
    w.close(3);
    assert_eq!(w.connect(), None, "refused once the last member closed");
}

/// The engine keeps each socket's owner as its opening command named it,
/// whatever its id: a member's listener and the connection it accepted
/// belong to the member's association, and dropping that association
/// closes those and nothing else.
#[test]
fn sockets_belong_to_the_owner_their_opening_named() {
    let mut w = Setup::new();
    // A listener whose id says nothing of its owner.
    let (plain_tx, _plain_rx) = appif::spsc::channel(4);
    let plain = StatusHandle::local();
    push(
        &mut w.cb,
        Command::Listen {
            id: 77,
            owner: Owner::association(9),
            shared: plain.clone(),
            local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT + 1).into(),
            v6only: false,
            accept: AcceptQueue::Local(plain_tx),
            reuseport: None,
        },
    );
    w.run(|_| plain.state() == SockState::Open);
    assert_eq!(w.b.sockets_of(9), vec![77]);
    // Member 3 waits in epoll: the next connection is its.
    let efd = appif::ctl::eventfd().expect("an eventfd");
    {
        let seg3 = w.segs[2].clone();
        let _armed = seg3.app_wake().arm(efd.as_raw_fd()).expect("armed");
        assert_eq!(w.connect(), Some(3), "member 3 waits in epoll");
    }
    let mut of3 = w.b.sockets_of(3);
    of3.sort_unstable();
    // Slot 0 is the listener; the accepted connection took slot 1.
    assert_eq!(of3, vec![seg::service_id(3, 0), seg::service_id(3, 1)]);
    assert_eq!(w.b.sockets_of(1), vec![seg::service_id(1, 0)], "the head");
    assert_eq!(w.b.sockets_of(2), vec![seg::service_id(2, 0)]);
    let dropped =
        w.b.drop_owner(3, appif::errno::ECONNRESET, Instant(w.t), |_| false);
    assert_eq!(dropped, 2, "member 3's listener and connection");
    let conn = w.segs[2].shared(1, false).expect("slot 1");
    assert_eq!(conn.state(), SockState::Closed);
    assert_eq!(conn.error(), appif::errno::ECONNRESET);
    assert!(w.b.sockets_of(3).is_empty());
    assert_eq!(w.b.sockets_of(1), vec![seg::service_id(1, 0)]);
    assert_eq!(w.b.sockets_of(9), vec![77], "another owner's socket stays");
    assert_eq!(plain.state(), SockState::Open);
}
