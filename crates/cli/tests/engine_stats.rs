//! Per-engine visibility (issue 24) through the real binary: a stack with two engines (b, whose
//! `mem` NIC cannot steer, so its engines hand frames to each other) serves connections from a
//! one-engine stack (a) in this process; `corestack stat`, `ss` and `stat --prometheus` on this
//! process show each engine's counters (which differ, and add up to the total column), the
//! engine of every connection, and `engine`-labelled samples. No root, no namespaces.
//!
//! One test in this binary: it points `CORESTACK_STATS_DIR` at a directory of its own before
//! stack b starts, so the segments there are b's alone (a's are in another directory).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use corestack::{Stack, TcpListener, TcpStream};
use testkit::mem_wire::{stacks_with_engines_then, B};

/// Connections a opens to b.
const CONNS: usize = 16;

/// A directory of this test's own, emptied.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cs-engine-stats-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `corestack <args> --pid <this process>` reading the segments in `dir`: its stdout; panics
/// when it fails.
fn corestack(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_corestack"))
        .args(args)
        .args(["--pid", &std::process::id().to_string()])
        .env("CORESTACK_STATS_DIR", dir)
        .output()
        .expect("running corestack");
    assert!(
        out.status.success(),
        "corestack {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// `corestack stat --all` of a process with several engines: counter -> its cells (one per
/// engine, then the total), with the title's cells.
fn stat_columns(text: &str) -> (Vec<String>, HashMap<String, Vec<u64>>) {
    let mut lines = text.lines();
    let head = lines.next().unwrap_or_default();
    assert!(head.ends_with(", 2 engines)"), "stat's first line: {text}");
    let title: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let rows = lines
        .map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next().unwrap().to_string();
            let cells: Vec<u64> = w.map(|c| c.parse().unwrap()).collect();
            (name, cells)
        })
        .collect();
    (title, rows)
}

/// Polls `f` every 20 ms until it returns true or 10 s pass; returns its last answer.
fn until(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn stat_ss_and_prometheus_show_each_engine_of_a_two_engine_stack() {
    let (dir_a, dir_b) = (fresh_dir("a"), fresh_dir("b"));
    std::env::set_var("CORESTACK_STATS_DIR", &dir_a);
    let (a, b): (Stack, Stack) = stacks_with_engines_then(false, 1, 2, || {
        std::env::set_var("CORESTACK_STATS_DIR", &dir_b)
    });
    assert_eq!(b.engines(), 2);
    let mut l = TcpListener::bind(&b, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    // The server keeps its listener and connections open (returned).
    let srv = std::thread::spawn(move || {
        let conns = (0..CONNS)
            .map(|_| {
                let (mut s, _) = l.accept().unwrap();
                let mut buf = [0u8; 100];
                s.read_exact(&mut buf).unwrap();
                s.write_all(&buf).unwrap();
                s
            })
            .collect::<Vec<_>>();
        (l, conns)
    });
    let clients: Vec<TcpStream> = (0..CONNS)
        .map(|i| {
            let mut c = TcpStream::connect(&a, SocketAddrV4::new(B, 7)).unwrap();
            c.write_all(&[i as u8; 100]).unwrap();
            let mut back = [0u8; 100];
            c.read_exact(&mut back).unwrap();
            assert_eq!(back, [i as u8; 100]);
            c
        })
        .collect();
    let servers = srv.join().unwrap();

    // The engines' own counts, which the published segments catch up with.
    let mut opens: Vec<u64> = Vec::new();
    let counted = until(|| {
        opens = b
            .engine_stats()
            .iter()
            .map(|s| s.tcp_passive_opens)
            .collect();
        opens.iter().sum::<u64>() == CONNS as u64
    });
    assert!(counted, "passive opens by engine: {opens:?}");
    assert!(
        opens.iter().all(|&n| n > 0),
        "both engines own connections: {opens:?}"
    );

    // stat: a column per engine and the total.
    let mut text = String::new();
    let caught_up = until(|| {
        text = corestack(&dir_b, &["stat", "--all"]);
        let (_, rows) = stat_columns(&text);
        rows.get("tcp_passive_opens")
            .is_some_and(|c| c[..2] == opens[..])
    });
    assert!(
        caught_up,
        "stat's tcp_passive_opens never read {opens:?}:\n{text}"
    );
    let (title, rows) = stat_columns(&text);
    assert_eq!(title, ["counter", "e0", "e1", "total"], "{text}");
    assert_eq!(
        rows.len(),
        corestack::Stats::default().iter().count(),
        "{text}"
    );
    for (name, cells) in &rows {
        assert_eq!(cells.len(), 3, "{name}: {text}");
        assert_eq!(
            cells[0] + cells[1],
            cells[2],
            "{name}: the total is the sum"
        );
    }
    let column = |e: usize| rows.values().map(|c| c[e]).collect::<Vec<u64>>();
    assert_ne!(
        column(0),
        column(1),
        "the engines' counters are each their own"
    );
    for name in ["rx_frames", "tcp_rx_segments", "handoff_tx", "handoff_rx"] {
        assert!(
            rows[name][..2].iter().all(|&v| v > 0),
            "{name} counted on both engines:\n{text}"
        );
    }
    assert!(rows["rx_foreign"][2] > 0, "{text}");
    for name in ["owner_violations", "handoff_dropped"] {
        assert_eq!(rows[name][2], 0, "{name}:\n{text}");
    }
    // One engine alone, as a one-engine process prints it.
    let one = corestack(&dir_b, &["stat", "--engine", "1"]);
    assert!(
        one.lines()
            .next()
            .unwrap()
            .ends_with(".stats.e1, engine 1)"),
        "{one}"
    );
    let passive = one
        .lines()
        .find_map(|l| l.trim().strip_prefix("tcp_passive_opens"))
        .map(|v| v.trim().parse::<u64>().unwrap());
    assert_eq!(passive, Some(opens[1]), "{one}");

    // ss: every connection names the engine that owns it.
    let mut ss = String::new();
    let all_seen = until(|| {
        ss = corestack(&dir_b, &["ss"]);
        ss.lines().filter(|l| l.contains(" ESTAB ")).count() == CONNS
    });
    assert!(all_seen, "ss does not show {CONNS} connections:\n{ss}");
    let header: Vec<&str> = ss.lines().next().unwrap().split_whitespace().collect();
    let eng = header
        .iter()
        .position(|&c| c == "eng")
        .expect("an eng column");
    let mut per_engine = [0u64; 2];
    for line in ss.lines().filter(|l| l.contains(" ESTAB ")) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells[eng + 1], "ESTAB", "{line}");
        let e: usize = cells[eng].parse().expect("an engine number");
        per_engine[e] += 1;
    }
    assert_eq!(
        per_engine[..],
        opens[..],
        "connections by engine in ss:\n{ss}"
    );
    let listeners: Vec<&str> = ss
        .lines()
        .filter(|l| l.contains(" LISTEN "))
        .map(|l| l.split_whitespace().nth(eng).unwrap())
        .collect();
    assert_eq!(listeners, ["0", "1"], "the listener, on each engine:\n{ss}");

    // Prometheus: each engine's samples, labelled.
    let prom = corestack(&dir_b, &["stat", "--prometheus"]);
    for e in ["0", "1"] {
        let label = format!(
            "corestack_tcp_passive_opens_total{{pid=\"{}\",engine=\"{e}\"}} ",
            std::process::id()
        );
        assert!(prom.contains(&label), "no {label} in:\n{prom}");
    }
    drop((clients, servers, a, b));
    let _ = std::fs::remove_dir_all(&dir_a);
    let _ = std::fs::remove_dir_all(&dir_b);
}
