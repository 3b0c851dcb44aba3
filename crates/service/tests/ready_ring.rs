//! Service mode: a readiness wait costs O(sockets that changed), not
//! O(sockets registered). The daemon's engine pushes the slot of every
//! socket it changes to a ready ring in the application's segment
//! (`appif::seg::ready`); the application's waits drain it into their
//! pollers' ready lists. Measured through `Poller::looks` (how many
//! sockets the waits looked at): with thousands of idle connections and
//! one busy one, a wait looks at a handful. A full ring still reports every
//! ready socket (an overflow makes the next wait look at each once), and an
//! application writing garbage into its ready ring harms only itself.

mod common;

use common::*;
use corestack::{Event, Interest, Poller, Source, TcpListener, TcpStream};
use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};
use testkit::rogue::RogueApp;

/// Connects the peer `n` times to the application behind `listener` on
/// `port`; returns (peer side, application side) pairs, both nonblocking.
fn connections(
    d: &Daemon,
    listener: &mut TcpListener,
    port: u16,
    n: usize,
) -> Vec<(TcpStream, TcpStream)> {
    (0..n)
        .map(|i| {
            let what = format!("connection {i}");
            let (c, s, _) = d.connect_accept(listener, addr(DAEMON_IP, port), &what);
            // One byte at a time, each sent at once (no Nagle wait for
            // the delayed ACK of the one before).
            c.set_nodelay(true).expect("nodelay");
            (c, s)
        })
        .collect()
}

/// Reads one byte from `s` (nonblocking), within [`BOUND`].
fn read_byte(s: &mut TcpStream) {
    let mut b = [0u8; 1];
    within(
        || "a byte the wait reported did not come".to_string(),
        || match s.read(&mut b) {
            Ok(1) => Some(()),
            Ok(_) => panic!("end of stream"),
            Err(e) if e.kind() == ErrorKind::WouldBlock => None,
            Err(e) => panic!("read: {e}"),
        },
    );
}

/// Connections: idle ones, then one busy one.
const IDLE: usize = 5000;
/// Rounds of a byte on the busy connection and a wait for it.
const ROUNDS: u64 = 200;

/// A poller with the application's end of every pair registered readable, its token the
/// pair's index.
fn registered(app: &corestack::Stack, pairs: &[(TcpStream, TcpStream)]) -> Poller {
    let mut poller = Poller::new(app);
    for (i, (_, s)) in pairs.iter().enumerate() {
        poller
            .register(s, i as u64, Interest::READABLE)
            .expect("register");
    }
    poller
}

/// The application's listener on `port` and `n` connections to it from the
/// peer, registered with a poller that reports nothing yet: the listener
/// (kept open), the pairs and the poller.
fn registered_connections(
    d: &Daemon,
    app: &corestack::Stack,
    port: u16,
    n: usize,
) -> (TcpListener, Vec<(TcpStream, TcpStream)>, Poller) {
    let mut listener = TcpListener::bind(app, any(port)).expect("listen");
    let pairs = connections(d, &mut listener, port, n);
    let mut poller = registered(app, &pairs);
    assert_quiet(&mut poller, &mut Vec::new());
    (listener, pairs, poller)
}

/// A byte from the peer on pair `k`: the next wait reports that pair's
/// token alone (`what` names the round in the message), and the byte is read.
fn a_byte_is_reported_alone(
    pairs: &mut [(TcpStream, TcpStream)],
    poller: &mut Poller,
    events: &mut Vec<Event>,
    k: usize,
    what: &str,
) {
    pairs[k].0.write_all(b"b").expect("the peer's write");
    poller.wait(events, 64, Some(BOUND)).expect("wait");
    assert_eq!(
        events.iter().map(|e| e.token).collect::<Vec<_>>(),
        vec![k as u64],
        "{what}"
    );
    read_byte(&mut pairs[k].1);
}

/// A wait that does not block reports nothing.
fn assert_quiet(poller: &mut Poller, events: &mut Vec<Event>) {
    poller.wait(events, 64, Some(Duration::ZERO)).expect("wait");
    assert!(events.is_empty(), "nothing is ready yet: {events:?}");
}

#[test]
fn a_wait_with_thousands_of_idle_connections_looks_at_a_handful() {
    let d = Daemon::with("ready-ring", |c| c.max_sockets_per_app = 8192);
    let port = 7300;
    let (app, mut listener) = d.app_listening(port);
    let t = Instant::now();
    let mut pairs = connections(&d, &mut listener, port, IDLE + 1);
    eprintln!("{} connections in {:?}", IDLE + 1, t.elapsed());
    let mut poller = registered(&app, &pairs);
    let mut events: Vec<Event> = Vec::new();
    // The first wait looks at every socket once (each may be ready at
    // registration); none is.
    assert_eq!(
        poller
            .wait(&mut events, 64, Some(Duration::ZERO))
            .expect("wait"),
        0
    );
    // Waits with nothing ready: the cost of a look at idle sockets.
    let before = poller.looks();
    let t = Instant::now();
    for _ in 0..ROUNDS {
        poller
            .wait(&mut events, 64, Some(Duration::ZERO))
            .expect("wait");
        assert!(events.is_empty(), "idle, yet {events:?}");
    }
    let idle_ns = t.elapsed().as_nanos() as u64 / ROUNDS;
    let idle_looks = (poller.looks() - before) / ROUNDS;
    // One busy connection: a byte, a wait that reports it, a read.
    let busy = IDLE as u64;
    let before = poller.looks();
    let t = Instant::now();
    for r in 0..ROUNDS {
        pairs[IDLE].0.write_all(b"x").expect("the peer's write");
        let n = poller.wait(&mut events, 64, Some(BOUND)).expect("wait");
        assert_eq!(n, 1, "round {r}: {events:?}");
        assert_eq!((events[0].token, events[0].readable), (busy, true));
        read_byte(&mut pairs[IDLE].1);
    }
    let busy_ns = t.elapsed().as_nanos() as u64 / ROUNDS;
    let busy_looks = (poller.looks() - before) as f64 / ROUNDS as f64;
    eprintln!(
        "{} registered ({IDLE} idle): an idle wait looks at {idle_looks} sockets in {idle_ns} ns; \
         a round of one busy connection (write, wait, read) looks at {busy_looks:.1} in {busy_ns} ns",
        IDLE + 1
    );
    assert!(
        idle_looks <= 2,
        "an idle wait looked at {idle_looks} of {} sockets",
        IDLE + 1
    );
    assert!(
        busy_looks <= 16.0,
        "a wait for one busy connection looked at {busy_looks} of {} sockets",
        IDLE + 1
    );
    // The idle ones are still watched: a byte on any reaches a wait.
    for k in [0, IDLE / 2, IDLE - 1] {
        a_byte_is_reported_alone(
            &mut pairs,
            &mut poller,
            &mut events,
            k,
            "an idle connection",
        );
    }
}

#[test]
fn more_ready_sockets_than_the_ring_holds_are_all_reported() {
    // 64 slots: a ready ring of 16 entries.
    let d = Daemon::with("ready-overflow", |c| c.max_sockets_per_app = 64);
    let app = d.app();
    let port = 7301;
    let n = 40;
    let (_listener, mut pairs, mut poller) = registered_connections(&d, &app, port, n);
    let mut events = Vec::new();
    for (c, _) in pairs.iter_mut() {
        c.write_all(b"z").expect("the peer's write");
    }
    // Every byte in before the next wait drains: 40 pushes for 16 entries.
    within(
        || "the bytes did not all arrive".to_string(),
        || pairs.iter().all(|(_, s)| s.status().readable).then_some(()),
    );
    let mut seen = vec![false; n];
    let deadline = Instant::now() + BOUND;
    while seen.iter().any(|s| !s) && Instant::now() < deadline {
        poller.wait(&mut events, 8, Some(BOUND)).expect("wait");
        for e in &events {
            seen[e.token as usize] = true;
            read_byte(&mut pairs[e.token as usize].1);
        }
    }
    let missed: Vec<usize> = (0..n).filter(|&i| !seen[i]).collect();
    assert!(missed.is_empty(), "never reported: {missed:?}");
}

#[test]
fn garbage_in_an_applications_ready_ring_harms_only_that_application() {
    let d = Daemon::start("ready-rogue");
    let port = 7302;
    let (app, mut listener) = d.app_listening(port);
    let rogue = RogueApp::join(&d.sock, "rogue");
    let layout = rogue.seg.layout();
    let lane = layout.ready_lane(0).expect("engine 0's ready ring");
    // An impossible head (far ahead of anything pushed), and every slot's
    // queued word cleared (the engine pushes each change).
    rogue.poke(lane.head, &(1u64 << 40).to_le_bytes());
    for s in 0..layout.nslots {
        rogue.poke(
            rogue.slot_off(s) + appif::seg::layout::SLOT_READY,
            &0u32.to_le_bytes(),
        );
    }
    // The rogue's sockets change (a connection to the peer, a UDP bind):
    // the engine pushes into the broken ring.
    let mut peer_l = d.peer_listener(9300);
    rogue.connect(addr(PEER_IP, 9300));
    rogue.udp_bind(any(9301));
    within(
        || format!("the engine never found the ring full; log:\n{}", d.log()),
        || (rogue.peek(lane.overflow) as u32 == 1).then_some(()),
    );
    let _ = d.accept(&mut peer_l, "the rogue's connection at the peer");
    // The rogue is still served (it broke nothing but its own reports),
    // and the well-behaved application's waits see every change.
    assert_eq!(
        rogue
            .seg
            .closed()
            .load(std::sync::atomic::Ordering::Acquire),
        0
    );
    let mut pairs = connections(&d, &mut listener, port, 3);
    let mut poller = registered(&app, &pairs);
    let mut events = Vec::new();
    for (i, k) in [2, 0, 1].into_iter().enumerate() {
        a_byte_is_reported_alone(
            &mut pairs,
            &mut poller,
            &mut events,
            k,
            &format!("round {i}"),
        );
    }
    d.assert_echo(&mut listener, port, 64 << 10, "the well-behaved app");
    let assoc = format!("assoc={} ", rogue.assoc());
    assert!(
        !d.log()
            .lines()
            .any(|l| l.contains("application disconnected") && l.contains(&assoc)),
        "the rogue was dropped: {}",
        d.log()
    );
}

#[test]
fn with_two_engines_each_engines_ring_reaches_the_poller() {
    // Two engines, flows landing on either queue (handoffs too): the
    // connections are held by both engines, each pushing to its own ring.
    let d = Daemon::with("ready-engines", |c| c.cores = 2);
    let app = d.app();
    let port = 7303;
    let n = 32;
    let (_listener, mut pairs, mut poller) = registered_connections(&d, &app, port, n);
    let mut events = Vec::new();
    let before = poller.looks();
    for k in (0..n).rev() {
        a_byte_is_reported_alone(&mut pairs, &mut poller, &mut events, k, "a connection");
    }
    let looks = (poller.looks() - before) as usize;
    assert!(looks <= 4 * n, "{looks} looks for {n} one-socket waits");
}

/// A listener on two engines has a slot on each: a connection that lands on
/// engine 1 changes engine 1's copy, not the status block the listener's
/// handle holds (engine 0's), so a poller must look at the listener itself
/// on every wait. Before, it watched engine 0's block only and never
/// reported engine 1's connections.
#[test]
fn a_listener_on_two_engines_is_reported_for_connections_on_either() {
    let d = Daemon::with("ready-listener", |c| c.cores = 2);
    let port = 7304;
    let (app, mut listener) = d.app_listening(port);
    listener.set_nonblocking(true).expect("nonblocking");
    let mut poller = Poller::new(&app);
    poller
        .register(&listener, 1, Interest::READABLE)
        .expect("register");
    let mut events = Vec::new();
    let mut pairs = Vec::new();
    let mut engines = [0usize; 2];
    for k in 0..16 {
        let c = TcpStream::connect(&d.peer, std::net::SocketAddr::from(addr(DAEMON_IP, port)))
            .unwrap_or_else(|e| panic!("connection {k}: the peer's connect failed: {e}"));
        poller.wait(&mut events, 8, Some(BOUND)).expect("wait");
        assert_eq!(
            events.iter().map(|e| e.token).collect::<Vec<_>>(),
            vec![1],
            "connection {k} (engines so far {engines:?}): the listener is readable; log:\n{}",
            d.log()
        );
        let (s, _) = listener.accept().expect("accept");
        engines[s.engine()] += 1;
        pairs.push((c, s));
    }
    assert!(
        engines[0] > 0 && engines[1] > 0,
        "connections on both engines: {engines:?}"
    );
}
