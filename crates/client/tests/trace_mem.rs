//! `corestack trace` on a known ping-pong: two inline stacks on a clean
//! `mem` wire in this process, the client on this thread, an echo server on
//! another; tracing switched on through the process's trace segment (as
//! the CLI does), every stage present, non-negative, and within the round
//! trip the client measured.

use corestack::{TcpListener, TcpStream};
use observe::trace::{clock, conn_key, ticks_per_ns, TraceControl, Tracer};
use observe::trace_report::Breakdown;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::mem_wire::{stacks, B};

const ROUNDS: usize = 300;
const WARM_UP: usize = 50;

#[test]
fn traced_ping_pong_has_every_stage_within_the_round_trip() {
    let (a, b) = stacks(true);
    let tracer = Tracer::process();
    let path = tracer
        .path()
        .expect("a trace segment: this test needs a writable /dev/shm");
    // The observer's view, opened by path as `corestack trace` opens it.
    let ctl = TraceControl::open(&path).unwrap();
    assert_eq!(ctl.every(), 0, "tracing starts off");

    let mut l = TcpListener::bind(&b, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let srv_done = done.clone();
    let srv = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 64];
        // The client's inline engine stops running when it is done: the
        // server counts the messages rather than waiting for a FIN.
        for _ in 0..WARM_UP + ROUNDS {
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        }
        // Inline: the last reply leaves while this thread runs the engine.
        while !srv_done.load(Ordering::Acquire) {
            b.poll(Some(Duration::from_millis(1)));
        }
    });
    let mut c = TcpStream::connect(&a, SocketAddrV4::new(B, 7)).unwrap();
    let key = conn_key(c.local_addr().unwrap().port(), 7);
    let msg = [0x5au8; 64];
    let mut buf = [0u8; 64];
    let mut round = |c: &mut TcpStream| {
        c.write_all(&msg).unwrap();
        c.read_exact(&mut buf).unwrap();
    };
    for _ in 0..WARM_UP {
        round(&mut c); // warm up, untraced
    }
    let mut drained = Vec::new();
    ctl.drain(&mut drained);
    assert!(drained.is_empty(), "records while tracing was off");

    ctl.set_every(1);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut rtt_ticks = 0u64;
    for _ in 0..ROUNDS {
        assert!(Instant::now() < deadline, "ping-pong stalled");
        let t0 = clock();
        round(&mut c);
        rtt_ticks += clock() - t0;
    }
    ctl.set_every(0);
    let mut records = Vec::new();
    ctl.drain(&mut records);
    assert_eq!(ctl.dropped(), 0);
    done.store(true, Ordering::Release);
    srv.join().unwrap();
    drop(c);

    let tpn = ticks_per_ns(Duration::from_millis(20));
    let rtt_mean_ns = rtt_ticks as f64 / tpn / ROUNDS as f64;
    for (end, keep) in [("client", key), ("server", key.rotate_left(16))] {
        let bd = Breakdown::of(&records, tpn, |k| k == keep);
        println!(
            "{end} end, measured mean round trip {rtt_mean_ns:.0} ns\n{}",
            bd.render()
        );
        assert!(
            bd.complete(),
            "{end}: a stage without samples:\n{}",
            bd.render()
        );
        for (i, f) in bd.stages.iter().enumerate() {
            assert!(f.n >= ROUNDS / 2, "{end}: stage {i} has {} samples", f.n);
            assert!(f.min_ns >= 0, "{end}: stage {i} negative:\n{}", bd.render());
        }
        assert!(
            bd.stack_mean_ns() <= rtt_mean_ns,
            "{end}: stages {:.0} ns > round trip {rtt_mean_ns:.0} ns",
            bd.stack_mean_ns()
        );
    }
    // The client's round trips as the trace sees them match the measured ones.
    let client = Breakdown::of(&records, tpn, |k| k == key);
    let rt = client.round_trips.expect("round trips at the client");
    assert!(rt.round_trip.n >= ROUNDS / 2);
    assert!(rt.round_trip.mean_ns <= rtt_mean_ns * 1.05 + 1000.0);
    assert!(client.stack_mean_ns() + rt.outside.mean_ns <= rt.round_trip.mean_ns * 1.01 + 100.0);
}
