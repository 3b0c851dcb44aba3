//! TIME-WAIT as a compact record (issue 23): a connection in TIME-WAIT
//! whose application let go of it leaves its engine's socket table and
//! lives on as a record that behaves as the connection did.
//! - Against a raw peer (the engine closes first, timestamps on): a
//!   retransmitted FIN is ACKed again by the record with valid
//!   timestamps and restarts 2*MSL; a SYN with an older TSval gets an ACK,
//!   one with a newer TSval a SYN-ACK (RFC 6191); an RST at RCV.NXT ends
//!   the record.
//! - Two engines on the `mem` wire: the active and the passive closer each
//!   keep a record and no connection, listed by `ss`, gone after a short
//!   `time_wait`; a client that closes first makes 5 000 connections to
//!   the same server from 8 ports; a TIME-WAIT whose application still
//!   holds the socket stays a connection until the application closes it.

mod common;
mod owner_bench;

use appif::bytes;
use appif::command::{Command, Owner};
use appif::socket::{SockState, StatusHandle};
use common::{listening_pair, push, End, ListeningPair, A_IP, B_IP, STEP_NS};
use core::time::Duration;
use engine::time::Instant;
use engine::{Engine, EngineConfig};
use nic::mem::{self, MemPort, Steer};
use observe::stats_shm::ConnState;
use owner_bench::{syn, Bench, RawConn, PORT};
use std::net::SocketAddrV4;
use std::sync::atomic::Ordering;
use wire::tcp::{TcpFlags, TcpRepr};

/// The raw peer's connection to engine 0, closed by the engine first and
/// then by the peer: the engine's side is in TIME-WAIT. Returns the peer's
/// view and the engine's FIN.
fn engine_closes_first(b: &mut Bench, sport: u16) -> (RawConn, TcpRepr) {
    let mut c = b.open(sport, 0, true);
    assert!(c.ts_ecr.is_some(), "timestamps on");
    let a = c.accepted.take().unwrap();
    push(&mut b.cmds[0], Command::Close { id: a.id });
    b.run(3);
    let fin = from_engine(b, sport)
        .into_iter()
        .find(|s| s.flags.fin())
        .expect("FIN");
    c.rcv_nxt = fin.seq + 1usize;
    c.ts_ecr = fin.options.timestamps.map(|(v, _)| v);
    let finack = c.segment(TcpFlags::FIN | TcpFlags::ACK, 0);
    b.send_tcp(&finack, &[]);
    b.run(3);
    let acks = from_engine(b, sport);
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert_eq!(
        acks[0].ack,
        wire::SeqNum(c.snd_nxt) + 1usize,
        "our FIN ACKed"
    );
    c.snd_nxt += 1;
    (c, acks[0])
}

/// The segments the engines sent to the peer's `sport` since last asked.
fn from_engine(b: &mut Bench, sport: u16) -> Vec<TcpRepr> {
    b.received_tcp()
        .into_iter()
        .map(|(s, _)| s)
        .filter(|s| s.dst_port == sport)
        .collect()
}

fn records(e: &Engine<MemPort>) -> u64 {
    e.time_wait_records() as u64
}

fn conns(e: &Engine<MemPort>) -> usize {
    let mut n = 0;
    e.for_each_tcb(|_| n += 1);
    n
}

#[test]
fn retransmitted_fin_is_acked_by_the_record_with_valid_timestamps_and_restarts_2msl() {
    let mut b = Bench::new(Steer::AllToZero, 16);
    let sport = b.port_owned_by(0, PORT, 30_000);
    let (mut c, last_ack) = engine_closes_first(&mut b, sport);
    assert_eq!(records(&b.engines[0]), 1);
    assert_eq!(conns(&b.engines[0]), 0, "the connection is freed");
    let (tsval0, _) = last_ack.options.timestamps.expect("timestamps");

    // 30 s later the peer sends its FIN again (our last ACK was lost).
    b.run_ms(30_000);
    c.snd_nxt -= 1;
    let fin_again = c.segment(TcpFlags::FIN | TcpFlags::ACK, 0);
    c.snd_nxt += 1;
    b.send_tcp(&fin_again, &[]);
    b.run(3);
    let acks = from_engine(&mut b, sport);
    assert_eq!(acks.len(), 1, "{acks:?}");
    let ack = acks[0];
    assert!(ack.flags.ack() && !ack.flags.fin() && !ack.flags.rst());
    assert_eq!((ack.seq, ack.ack), (last_ack.seq, last_ack.ack));
    assert_eq!(ack.window, last_ack.window);
    let (tsval, tsecr) = ack
        .options
        .timestamps
        .expect("timestamps on the record's ACK");
    // The connection's clock went on: 30 s (and a few steps) later.
    let elapsed = tsval.wrapping_sub(tsval0);
    assert!(
        (30_000..30_100).contains(&elapsed),
        "TSval moved {elapsed} ms"
    );
    // TS.Recent: the TSval of the peer's first FIN.
    assert_eq!(tsecr, c.ts_val - 2);
    assert_eq!(b.engines[0].stats().tcp_time_wait_acks, 1);

    // 2*MSL restarted at the retransmission: still there 50 s later (80 s
    // after TIME-WAIT began), gone after 60 s.
    b.run_ms(50_000);
    assert_eq!(records(&b.engines[0]), 1, "2*MSL restarted");
    b.run_ms(10_200);
    assert_eq!(records(&b.engines[0]), 0, "expired");
    // Gone: a segment for it now is answered with RST.
    let late = c.segment(TcpFlags::ACK, 0);
    b.send_tcp(&late, &[]);
    b.run(3);
    let rst = from_engine(&mut b, sport);
    assert!(rst.len() == 1 && rst[0].flags.rst(), "{rst:?}");
}

#[test]
fn the_record_takes_a_newer_syn_acks_an_older_one_and_ends_on_rst() {
    let mut b = Bench::new(Steer::AllToZero, 16);
    let sport = b.port_owned_by(0, PORT, 31_000);
    let (c, last_ack) = engine_closes_first(&mut b, sport);
    // An older TSval (RFC 6191: not a new incarnation): an ACK, no SYN-ACK.
    let mut old = syn(sport, c.snd_nxt.wrapping_add(1_000_000));
    old.options.timestamps = Some((c.ts_val - 10, 0));
    b.send_tcp(&old, &[]);
    b.run(3);
    let answers = from_engine(&mut b, sport);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(!answers[0].flags.syn() && answers[0].flags.ack());
    assert_eq!(answers[0].ack, last_ack.ack);
    assert_eq!(records(&b.engines[0]), 1);
    // A newer TSval: the record gives way, the listener answers.
    let mut new = syn(sport, c.snd_nxt.wrapping_add(1_000_000));
    new.options.timestamps = Some((c.ts_val + 1000, 0));
    b.send_tcp(&new, &[]);
    b.run(3);
    let answers = from_engine(&mut b, sport);
    assert!(
        answers.len() == 1 && answers[0].flags.syn() && answers[0].flags.ack(),
        "{answers:?}"
    );
    let s = b.engines[0].stats();
    assert_eq!(s.tcp_time_wait_recycled, 1);
    assert_eq!(b.engines[0].time_wait_records(), 0);

    // Another connection in TIME-WAIT ends on an RST at RCV.NXT; one out
    // of place gets a challenge ACK.
    let sport = b.port_owned_by(0, PORT, 32_000);
    let (mut c, _) = engine_closes_first(&mut b, sport);
    c.snd_nxt += 5;
    let off = c.segment(TcpFlags::RST, 0);
    b.send_tcp(&off, &[]);
    b.run(3);
    assert_eq!(from_engine(&mut b, sport).len(), 1, "challenge ACK");
    assert_eq!(records(&b.engines[0]), 1);
    c.snd_nxt -= 5;
    let rst = c.segment(TcpFlags::RST, 0);
    b.send_tcp(&rst, &[]);
    b.run(3);
    assert_eq!(records(&b.engines[0]), 0, "an RST at RCV.NXT ends it");
}

/// Two engines, B listening on 80, with `time_wait` and A's ephemeral
/// ports `ports`.
fn pair(time_wait: Duration, ports: (u16, u16)) -> ListeningPair {
    let mut cfg = EngineConfig {
        ephemeral_ports: ports,
        ..EngineConfig::default()
    };
    cfg.tcp.time_wait = time_wait;
    listening_pair(cfg, mem::MEM_WIRE_FRAMES, 80, 16)
}

/// Both engines until idle, then `idle_ms` more of virtual time in 1 ms
/// steps.
fn run(p: &mut ListeningPair, idle_ms: u64) {
    let mut idle = 0;
    while idle < idle_ms * 1_000_000 {
        p.clock.store(p.t, Ordering::Release);
        let a = p.a.poll(Instant(p.t));
        let b = p.b.poll(Instant(p.t));
        let step = if a || b { STEP_NS } else { 1_000_000 };
        if !(a || b) {
            idle += step;
        }
        p.t += step;
    }
}

/// A connects to B from an ephemeral port; both ends once open.
fn open(p: &mut ListeningPair, id: u64) -> (End, End) {
    let shared = StatusHandle::local();
    let (a_tx, eng_tx) = bytes::growable_ring(4096, 4096);
    let (eng_rx, a_rx) = bytes::growable_ring(4096, 4096);
    push(
        &mut p.ca,
        Command::Connect {
            id,
            owner: Owner::LOCAL,
            shared: shared.clone(),
            local_port: 0,
            remote: SocketAddrV4::new(B_IP, 80).into(),
            tx: eng_tx,
            rx: eng_rx,
            nodelay: true,
        },
    );
    run(p, 1);
    assert_eq!(shared.state(), SockState::Open, "connection {id}");
    let acc = p.accepted.pop().expect("accepted");
    let a = End {
        id,
        shared,
        tx: a_tx,
        rx: a_rx,
    };
    let b = End {
        id: acc.id,
        shared: acc.shared,
        tx: acc.tx,
        rx: acc.rx,
    };
    (a, b)
}

/// Closes `first` (on A when `a_first`), then the other end.
fn close_both(p: &mut ListeningPair, a: &End, b: &End, a_first: bool) {
    if a_first {
        push(&mut p.ca, Command::Close { id: a.id });
        run(p, 1);
        push(&mut p.cb, Command::Close { id: b.id });
    } else {
        push(&mut p.cb, Command::Close { id: b.id });
        run(p, 1);
        push(&mut p.ca, Command::Close { id: a.id });
    }
    run(p, 1);
}

#[test]
fn active_and_passive_closers_keep_a_record_listed_by_ss_until_time_wait_ends() {
    let mut p = pair(Duration::from_secs(2), sockets_ephemeral());
    let (a, b) = open(&mut p, 10);
    close_both(&mut p, &a, &b, true);
    let (a2, b2) = open(&mut p, 11);
    close_both(&mut p, &a2, &b2, false);
    // A closed the first connection first, B the second.
    for (e, who) in [(&p.a, "A"), (&p.b, "B")] {
        assert_eq!(conns(e), 0, "{who}: no connection left");
        assert_eq!(records(e), 1, "{who}: one record");
    }
    let rows = |e: &Engine<MemPort>| {
        let mut v = Vec::new();
        e.for_each_socket(|r| v.push(r));
        v
    };
    let ra = rows(&p.a);
    assert_eq!(ra.len(), 1);
    assert_eq!(ra[0].state, ConnState::TimeWait);
    assert_eq!(ra[0].local, a.shared.local());
    assert_eq!(ra[0].remote, SocketAddrV4::new(B_IP, 80).into());
    let rb: Vec<_> = rows(&p.b)
        .into_iter()
        .filter(|r| r.state == ConnState::TimeWait)
        .collect();
    assert_eq!(rb.len(), 1);
    assert_eq!(rb[0].remote, a2.shared.local());
    assert_eq!(rb[0].remote.ip(), std::net::IpAddr::V4(A_IP));
    // The publication for `corestack ss` walks slots then records.
    let mut published = Vec::new();
    p.a.for_each_socket_from(0, 1024, |r| published.push(r));
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].state, ConnState::TimeWait);
    // time_wait = 2 s: both gone a little after.
    run(&mut p, 2_100);
    assert_eq!((records(&p.a), records(&p.b)), (0, 0));
    assert_eq!(rows(&p.a).len(), 0);
}

#[test]
fn a_time_wait_its_application_still_holds_stays_a_connection_until_closed() {
    let mut p = pair(Duration::from_secs(60), sockets_ephemeral());
    let (a, b) = open(&mut p, 10);
    // A shuts its sending side down, B closes: A is in TIME-WAIT, its
    // socket still open in the application.
    push(&mut p.ca, Command::Shutdown { id: a.id });
    run(&mut p, 1);
    push(&mut p.cb, Command::Close { id: b.id });
    run(&mut p, 1);
    let mut states = Vec::new();
    p.a.for_each_tcb(|t| states.push(t.state()));
    assert_eq!(states, vec![engine::tcp::State::TimeWait]);
    assert_eq!(records(&p.a), 0);
    // The application closes it: now a record.
    push(&mut p.ca, Command::Close { id: a.id });
    run(&mut p, 1);
    assert_eq!((conns(&p.a), records(&p.a)), (0, 1));
    let s = p.a.stats();
    assert_eq!((s.tcp_time_wait_entered, s.tcp_time_wait_ended), (1, 0));
}

fn sockets_ephemeral() -> (u16, u16) {
    (40_000, 40_099)
}

#[test]
fn a_client_that_closes_first_makes_5000_connections_from_8_ports() {
    const N: u64 = 5_000;
    let mut p = pair(Duration::from_secs(60), (41_000, 41_007));
    let mut ports = std::collections::HashSet::new();
    for i in 0..N {
        let (a, b) = open(&mut p, 100 + i);
        ports.insert(a.shared.local().port());
        close_both(&mut p, &a, &b, true);
        assert_eq!(conns(&p.a), 0, "connection {i}: A holds no connection");
        // Each port is taken again a second after its close at the soonest.
        p.t += 150_000_000;
    }
    assert_eq!(ports.len(), 8);
    let s = p.a.stats();
    assert_eq!(p.a.time_wait_records(), 8, "one record per port");
    assert_eq!(s.tcp_time_wait_entered - s.tcp_time_wait_ended, 8);
    assert_eq!(s.tcp_time_wait_recycled, N - 8);
    assert_eq!(s.tcp_active_opens, N);
    assert_eq!(p.b.stats().tcp_rst_tx, 0);
}
