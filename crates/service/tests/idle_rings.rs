//! Service mode: the rings of an idle connection give their pages back. An
//! application's rings live in the segment it shares with the daemon (a
//! memfd mapped by both); once a connection has been still for the
//! engine's idle time, the engine hands the pages of its two empty rings
//! back to the system (`madvise(MADV_REMOVE)`), so that idle connections
//! cost memory as they do in embedded mode, and the rings carry data again
//! afterwards. Measured, not computed: the process's resident shared memory
//! (`RssShmem`: the segment's pages, as both the daemon and the application
//! map them here) before and after the connections idled.

mod common;

use common::*;
use corestack::TcpStream;
use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

/// Connections.
const N: usize = 200;
/// Bytes each connection echoes per round: more than a page, so that both
/// rings hold resident pages.
const BYTES: usize = 6000;

/// The process's resident shared memory, bytes (`RssShmem` in
/// /proc/self/status).
fn rss_shmem() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("RssShmem:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("an RssShmem line");
    kib * 1024
}

/// Moves what a nonblocking call moved: 0 when it would block; panics on
/// an error or an end of stream.
fn moved(r: std::io::Result<usize>, what: &str) -> usize {
    match r {
        Ok(0) => panic!("{what}: end of stream"),
        Ok(k) => k,
        Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
        Err(e) => panic!("{what}: {e}"),
    }
}

/// One round: every peer connection sends `data`, the application echoes
/// it, and the peer reads it back byte-exact, within [`BOUND`] × 4.
fn echo_round(d: &Daemon, pairs: &mut [(TcpStream, TcpStream)], data: &[u8], what: &str) {
    let n = data.len();
    let mut state = vec![(0usize, Vec::new(), Vec::with_capacity(n)); pairs.len()];
    let mut buf = vec![0u8; 16384];
    let deadline = Instant::now() + BOUND * 4;
    while state.iter().any(|(_, _, back)| back.len() < n) {
        assert!(
            Instant::now() < deadline,
            "{what}: the echo did not finish; log:\n{}",
            d.log()
        );
        for ((c, s), (sent, pending, back)) in pairs.iter_mut().zip(state.iter_mut()) {
            if *sent < n {
                *sent += moved(c.write(&data[*sent..]), what);
            }
            let k = moved(s.read(&mut buf), what);
            pending.extend_from_slice(&buf[..k]);
            if !pending.is_empty() {
                let k = moved(s.write(pending), what);
                pending.drain(..k);
            }
            let k = moved(c.read(&mut buf), what);
            back.extend_from_slice(&buf[..k]);
        }
    }
    for (i, (_, _, back)) in state.iter().enumerate() {
        assert!(
            back[..] == data[..],
            "{what}: connection {i} echoed other bytes"
        );
    }
}

#[test]
fn idle_connections_give_their_ring_pages_back_and_carry_data_after() {
    let d = Daemon::start("idle-rings");
    let port = 7100;
    let (_app, mut listener) = d.app_listening(port);
    let mut pairs = Vec::with_capacity(N);
    for i in 0..N {
        let (c, s, _) = d.connect_accept(
            &mut listener,
            addr(DAEMON_IP, port),
            &format!("connection {i}"),
        );
        pairs.push((c, s));
    }
    let data: Vec<u8> = (0..BYTES).map(|i| (i * 13 % 251) as u8).collect();
    echo_round(&d, &mut pairs, &data, "the first round");
    let busy = rss_shmem();
    // The engine gives an idle connection's pages back after a second
    // still; wait for most of them (both rings of every connection, in at
    // least one of the two mappings), for at most 10 s.
    let want = N * 2 * 4096;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut idle = busy;
    while busy.saturating_sub(idle) < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        idle = rss_shmem();
    }
    eprintln!(
        "RssShmem with {N} connections: {} KiB busy, {} KiB idle ({} B per connection given back)",
        busy / 1024,
        idle / 1024,
        busy.saturating_sub(idle) / N
    );
    assert!(
        busy.saturating_sub(idle) >= want,
        "the idle rings gave back {} bytes, want at least {want} ({} KiB busy, {} KiB idle)",
        busy.saturating_sub(idle),
        busy / 1024,
        idle / 1024
    );
    // The released rings carry data again, byte-exact, in both directions.
    let data2: Vec<u8> = (0..BYTES).map(|i| (i * 31 % 241) as u8).collect();
    echo_round(&d, &mut pairs, &data2, "the round after idling");
}
