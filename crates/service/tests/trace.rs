//! `corestack trace` on a running daemon: tracing switched on and off through the process's
//! trace segment (found as the CLI finds it) while the daemon serves an application; on, the
//! daemon's engine and the application record their stages of the connection; off, nothing.
//! The daemon and the application are this process, over the `mem` port; no root.

mod common;

use common::*;
use corestack::TcpListener;
use observe::observer_shm::find_segments;
use observe::trace::{Kind, Record, TraceControl, TRACE};

/// The kinds among `records` of connections whose local port is `port`.
fn kinds_on(records: &[Record], port: u16) -> Vec<Kind> {
    let mut k: Vec<Kind> = records
        .iter()
        .filter(|r| r.key >> 16 == u32::from(port))
        .map(|r| r.kind)
        .collect();
    k.sort_by_key(|k| *k as u8);
    k.dedup();
    k
}

#[test]
fn daemon_trace_switched_on_records_every_stage_and_off_records_nothing() {
    let d = Daemon::start("trace");
    let (_app, mut l) = d.app_listening(9090);
    let me = std::process::id();
    let (_, path) = find_segments(TRACE)
        .into_iter()
        .find(|(pid, _)| *pid == me)
        .expect("this process's trace segment in /dev/shm");
    let ctl = TraceControl::open(&path).expect("opening the trace segment");
    assert_eq!(ctl.every(), 0, "tracing starts off");
    // A 16 KiB echo on port 9090 with tracing at `every` (0: off), and the records it left.
    let echo = |l: &mut TcpListener, every: u64, what: &str| -> Vec<Record> {
        ctl.set_every(every);
        d.assert_echo(l, 9090, 16 << 10, what);
        ctl.set_every(0);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let mut records = Vec::new();
        ctl.drain(&mut records);
        records
    };

    assert_eq!(
        kinds_on(&echo(&mut l, 1, "echo traced"), 9090),
        vec![Kind::Rx, Kind::Read, Kind::Write, Kind::Tx],
        "the daemon's engine (rx, tx) and the application (read, write) on port 9090"
    );
    let records = echo(&mut l, 0, "echo untraced");
    assert!(records.is_empty(), "{} records while off", records.len());
    assert!(
        kinds_on(&echo(&mut l, 4, "echo traced again"), 9090).contains(&Kind::Rx),
        "on again: no records"
    );
    assert_eq!(ctl.dropped(), 0);
}
