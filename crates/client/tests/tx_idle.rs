//! The TX idle kick (`appif::socket::FLAG_TX_IDLE`): once the engine has
//! sent every byte of a connection's TX ring it stops looking at the ring
//! until an ACK, a timer or a Send command. A write behind unacknowledged
//! bytes must therefore kick it, or with TCP_NODELAY the new bytes wait for
//! the peer's ACK (or the RTO when no ACK comes): memcached's p99 was 5 ms
//! at 10k requests/s before the kick.
//!
//! The peer here (an inline stack nobody drives after the handshake) never
//! ACKs, and TLP is off, so the only things that can send the second write
//! are the kick (at once) or the RTO (200 ms at the earliest, counted as a
//! retransmission).

use corestack::{EngineConfig, Stack, Stats, TcpListener, TcpStream};
use nic::impair::Impairments;
use nic::mem;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Several of the engine's 10 ms publishing periods.
const SETTLE: Duration = Duration::from_millis(50);

/// Waits (at most 2 s) until stack `a` has sent `n` TCP segments; returns
/// its stats then.
fn sent_segments(a: &Stack, n: u64) -> Stats {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let st = a.stats();
        if st.tcp_tx_segments >= n {
            return st;
        }
        assert!(
            Instant::now() < deadline,
            "{} TCP segments sent, waited for {n}",
            st.tcp_tx_segments
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn write_behind_unacked_bytes_leaves_at_once_without_an_ack() {
    let (pa, pb) = mem::pair(Impairments::none(), Impairments::none(), 1);
    let mut cfg = EngineConfig::default();
    cfg.tcp.rack_tlp = false;
    cfg.tcp.nodelay = true;
    let start = |port, ip, inline, cfg| {
        let b = Stack::builder().engine_config(cfg).mem_port(port);
        b.ip(ip, 24).inline(inline).start().unwrap()
    };
    // A embedded: its engine thread naps when idle, as in a server.
    let a = start(pa, A, false, cfg);
    let b = start(pb, B, true, EngineConfig::default());
    let mut l = TcpListener::bind(&b, SocketAddrV4::new(B, 7)).unwrap();
    // B's engine runs only while this thread waits in accept.
    let acceptor = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        (l, s)
    });
    let mut c = TcpStream::connect(&a, SocketAddrV4::new(B, 7)).unwrap();
    let (_l, _s) = acceptor.join().unwrap();
    c.set_nodelay(true).unwrap();

    // The engine publishes its counters every 10 ms: let the handshake's
    // segments be counted first.
    std::thread::sleep(SETTLE);
    let before = a.stats().tcp_tx_segments;
    c.write_all(&[1; 100]).unwrap();
    sent_segments(&a, before + 1);
    // Let the engine set the flag and nap, and its counters settle.
    std::thread::sleep(SETTLE);
    assert_eq!(a.stats().tcp_tx_segments, before + 1);
    let written = Instant::now();
    c.write_all(&[2; 100]).unwrap();
    let st = sent_segments(&a, before + 2);
    assert_eq!(
        st.tcp_retransmits,
        0,
        "the second write left only with the RTO, {:?} after it: the writer did not kick the \
         idle engine",
        written.elapsed()
    );
}
