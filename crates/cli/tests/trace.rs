//! `corestack trace` (the real binary) on this process: two stacks on a clean `mem` wire run a
//! 64-byte ping-pong while `corestack trace --pid <this process> --seconds 1` collects; its table
//! has every stage with samples. The same over IPv6 (trace records name a connection by its
//! ports, whatever its family). No root, no namespaces. One test at a time: the trace takes
//! every stack of this process.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corestack::{Stack, TcpListener, TcpStream};
use observe::trace_report::STAGES;

use testkit::mem_wire::{stacks, stacks_v6, B, B6};

/// Held by each test: `corestack trace --pid` sees every stack of this process.
static ONE_TRACE: Mutex<()> = Mutex::new(());

#[test]
fn trace_command_on_a_ping_pong_prints_every_stage_with_samples() {
    let _one = ONE_TRACE.lock().unwrap_or_else(|e| e.into_inner());
    let (a, b) = stacks(true);
    traced_ping_pong(
        a,
        b,
        SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7).into(),
        SocketAddrV4::new(B, 7).into(),
    );
}

#[test]
fn trace_command_on_an_ipv6_ping_pong_prints_every_stage_with_samples() {
    let _one = ONE_TRACE.lock().unwrap_or_else(|e| e.into_inner());
    let (a, b) = stacks_v6(true);
    traced_ping_pong(
        a,
        b,
        SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 7, 0, 0).into(),
        SocketAddrV6::new(B6, 7, 0, 0).into(),
    );
}

/// A 64-byte ping-pong from stack `a` to a listener of `b` on `listen`, connecting to `to`,
/// while `corestack trace` collects for 1 s; its table must have every stage with samples.
fn traced_ping_pong(a: Stack, b: Stack, listen: SocketAddr, to: SocketAddr) {
    let mut l = TcpListener::bind(&b, listen).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_srv = stop.clone();
    let srv = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        while !stop_srv.load(Ordering::Acquire) {
            match s.read(&mut buf) {
                Ok(n) if n > 0 => s.write_all(&buf[..n]).unwrap(),
                _ => b.poll(Some(Duration::from_millis(1))),
            }
        }
    });
    let mut c = TcpStream::connect(&a, to).unwrap();
    assert_eq!(c.peer_addr().unwrap(), to);
    let tracer = Command::new(env!("CARGO_BIN_EXE_corestack"))
        .args([
            "trace",
            "--pid",
            &std::process::id().to_string(),
            "--seconds",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("running corestack trace");
    // Ping-pong until the trace is over (bounded).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 64];
    let mut tracer = tracer;
    let status = loop {
        c.write_all(&[7u8; 64]).unwrap();
        c.read_exact(&mut buf).unwrap();
        if let Some(s) = tracer.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "corestack trace did not finish");
    };
    stop.store(true, Ordering::Release);
    srv.join().unwrap();
    let mut out = String::new();
    tracer
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(status.success(), "corestack trace failed:\n{out}");
    assert!(out.contains("0 dropped"), "{out}");
    for stage in STAGES {
        let line = out
            .lines()
            .find(|l| l.starts_with(stage))
            .unwrap_or_else(|| panic!("no row {stage:?} in:\n{out}"));
        let samples: usize = line[stage.len()..]
            .split_whitespace()
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        assert!(samples > 0, "no samples for {stage:?}:\n{out}");
    }
    assert!(out.contains("round trip at this end"), "{out}");
}
