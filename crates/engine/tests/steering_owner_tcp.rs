//! SYN cookies and TIME-WAIT resolve at the owner engine (issue: "Fragments,
//! ICMP errors, SYN cookies and TIME-WAIT resolve at the owner"; fragments
//! and ICMP errors are `steering_owner.rs`). Four engines behind a
//! four-queue `mem` NIC that puts every frame on queue 0, or each frame on
//! a random queue, and a raw peer writing frames by hand (`owner_bench`):
//! - with the SYN queue full, the engine owning a flow answers its SYNs
//!   with cookies and validates the cookie in the returning ACK: the
//!   connection is accepted there;
//! - a connection the engines close first waits in TIME-WAIT on its owner,
//!   which alone takes a newer SYN for the 4-tuple (RFC 6191);
//! - a segment of no connection is reset by its flow's owner alone.

mod owner_bench;

use appif::command::Command;
use engine::tcp::State;
use nic::mem::Steer;
use owner_bench::{
    check_clean, push, segment, syn, under_foreign_spreads, Bench, ENGINES, PEER, PORT,
};
use std::net::SocketAddrV4;
use wire::tcp::TcpFlags;
use wire::SeqNum;

/// The listeners' backlog in the cookie test: two half-open connections
/// fill an engine's SYN queue.
const BACKLOG: usize = 2;

/// For each engine `k` but 0: SYNs from five ports whose flows `k` owns;
/// two fill `k`'s SYN queue, three are answered with cookies; the ACK
/// returning the last cookie (with data) opens a connection, accepted on
/// `k`. Every cookie is minted and checked on `k` alone.
fn cookies_resolve_at_the_owner(steer: Steer, policy: &str) {
    let mut b = Bench::new(steer, BACKLOG);
    for k in 1..ENGINES {
        let mut ports = vec![];
        let mut from = 20_000 + 1000 * k as u16;
        for _ in 0..5 {
            let p = b.port_owned_by(k, PORT, from);
            ports.push(p);
            from = p + 1;
        }
        let before = b.stats();
        for &p in &ports {
            b.send_tcp(&syn(p, u32::from(p) * 1000), &[]);
            b.run(2);
        }
        let synacks: Vec<_> = b
            .received_tcp()
            .into_iter()
            .map(|(s, _)| s)
            .filter(|s| s.flags.syn() && s.flags.ack())
            .collect();
        assert_eq!(synacks.len(), 5, "{policy}: every SYN answered once");
        let d = b.since(&before);
        assert_eq!(d(k, |s| s.tcp_passive_opens), 2, "{policy}: engine {k}");
        assert_eq!(d(k, |s| s.tcp_syncookies_sent), 3, "{policy}: engine {k}");
        for e in (0..ENGINES).filter(|&e| e != k) {
            assert_eq!(d(e, |s| s.tcp_syncookies_sent), 0, "{policy}: engine {e}");
            assert_eq!(d(e, |s| s.tcp_passive_opens), 0, "{policy}: engine {e}");
        }
        // The cookie SYN-ACK remembers no window scale.
        let last = ports[4];
        let cookie = synacks.iter().find(|s| s.dst_port == last).unwrap();
        assert_eq!(cookie.options.window_scale, None, "{policy}: a cookie");
        let ack = segment(
            last,
            u32::from(last) * 1000 + 1,
            cookie.seq + 1usize,
            TcpFlags::ACK | TcpFlags::PSH,
            5,
        );
        let mid = b.stats();
        b.send_tcp(&ack, b"hello");
        b.run(4);
        let d = b.since(&mid);
        assert_eq!(d(k, |s| s.tcp_syncookies_ok), 1, "{policy}: engine {k}");
        for e in (0..ENGINES).filter(|&e| e != k) {
            assert_eq!(d(e, |s| s.tcp_syncookies_ok), 0, "{policy}: engine {e}");
            assert_eq!(d(e, |s| s.tcp_rst_tx), 0, "{policy}: engine {e}");
            assert!(b.accepted[e].pop().is_none(), "{policy}: engine {e}");
        }
        assert_eq!(d(k, |s| s.tcp_rst_tx), 0, "{policy}: the cookie is valid");
        let mut a = b.accepted[k]
            .pop()
            .expect("the cookie connection is accepted");
        assert_eq!(a.shared.remote(), SocketAddrV4::new(PEER, last).into());
        assert_eq!(appif::socket::engine_of(a.id), k);
        let mut buf = [0u8; 16];
        let n = a.rx.read(&mut buf);
        assert_eq!(&buf[..n], b"hello", "{policy}");
        assert!(b.tcb(k, last).is_some_and(|t| t.0 == State::Established));
        b.received();
    }
    check_clean(&b.stats(), policy);
}

#[test]
fn syn_cookies_on_queue_0_or_spread_per_frame_are_minted_and_checked_by_the_flows_owner() {
    under_foreign_spreads(cookies_resolve_at_the_owner);
}

/// For each engine `k` but 0: a connection (with timestamps) from a port
/// whose flow `k` owns, closed first by the application on `k`, waits in
/// TIME-WAIT on `k`; a SYN for the same 4-tuple with a newer TSval is
/// taken by `k` (`tcp_time_wait_recycled`, a SYN-ACK), answered by no RST
/// anywhere; an ACK for no connection from another of `k`'s ports gets one
/// RST, from `k`.
fn time_wait_resolves_at_the_owner(steer: Steer, policy: &str) {
    let mut b = Bench::new(steer, 16);
    for k in 1..ENGINES {
        let sport = b.port_owned_by(k, PORT, 30_000 + 1000 * k as u16);
        let mut c = b.open(sport, k, true);
        assert!(c.ts_ecr.is_some(), "{policy}: timestamps on");
        let a = c.accepted.take().unwrap();
        push(&mut b.cmds[k], Command::Close { id: a.id });
        b.run(3);
        let fin = b
            .received_tcp_to(sport)
            .into_iter()
            .find(|s| s.flags.fin())
            .expect("the owner closes first: FIN");
        assert_eq!(fin.seq, c.rcv_nxt, "{policy}");
        // The peer acknowledges the FIN and sends its own.
        c.rcv_nxt = fin.seq + 1usize;
        c.ts_ecr = fin.options.timestamps.map(|(v, _)| v);
        let finack = c.segment(TcpFlags::FIN | TcpFlags::ACK, 0);
        b.send_tcp(&finack, &[]);
        b.run(3);
        let last_ack = b.received_tcp();
        assert!(
            last_ack
                .iter()
                .any(|(s, _)| s.dst_port == sport && s.flags.ack() && !s.flags.rst()),
            "{policy}: our FIN acknowledged"
        );
        // TIME-WAIT is a compact record on the owner, no connection.
        for e in 0..ENGINES {
            assert!(b.tcb(e, sport).is_none(), "{policy}: engine {e}");
            let records = b.engines[e].time_wait_records() as u64;
            assert_eq!(records, u64::from(e == k), "{policy}: engine {e}");
        }

        // A new incarnation: same 4-tuple, a newer TSval, a new ISN.
        let before = b.stats();
        let mut again = syn(sport, c.snd_nxt.wrapping_add(1_000_000));
        again.options.timestamps = Some((c.ts_val + 1000, 0));
        b.send_tcp(&again, &[]);
        b.run(3);
        let d = b.since(&before);
        let answers = b.received_tcp_to(sport);
        assert!(
            answers.len() == 1 && answers[0].flags.syn() && answers[0].flags.ack(),
            "{policy}: one SYN-ACK: {answers:?}"
        );
        assert_eq!(
            d(k, |s| s.tcp_time_wait_recycled),
            1,
            "{policy}: engine {k}"
        );
        assert_eq!(d(k, |s| s.tcp_passive_opens), 1, "{policy}: engine {k}");
        assert_eq!(b.tcb(k, sport).map(|t| t.0), Some(State::SynReceived));
        for e in 0..ENGINES {
            assert_eq!(d(e, |s| s.tcp_rst_tx), 0, "{policy}: engine {e}");
            assert_eq!(d(e, |s| s.tcp_no_socket), 0, "{policy}: engine {e}");
            if e != k {
                assert_eq!(d(e, |s| s.tcp_time_wait_recycled), 0, "{policy}: {e}");
                assert_eq!(d(e, |s| s.tcp_passive_opens), 0, "{policy}: {e}");
            }
        }

        // A stray ACK of no connection, from another port of engine k.
        let stray_port = b.port_owned_by(k, PORT, sport + 1);
        let before = b.stats();
        b.send_tcp(
            &segment(stray_port, 777, SeqNum(4242), TcpFlags::ACK, 0),
            &[],
        );
        b.run(3);
        let d = b.since(&before);
        let rsts = b.received_tcp_to(stray_port);
        assert!(
            rsts.len() == 1 && rsts[0].flags.rst() && rsts[0].seq == SeqNum(4242),
            "{policy}: one RST: {rsts:?}"
        );
        for e in 0..ENGINES {
            let want = u64::from(e == k);
            assert_eq!(d(e, |s| s.tcp_rst_tx), want, "{policy}: engine {e}");
            assert_eq!(d(e, |s| s.tcp_no_socket), want, "{policy}: engine {e}");
        }
        b.received();
    }
    check_clean(&b.stats(), policy);
}

#[test]
fn time_wait_on_queue_0_or_spread_per_frame_is_kept_recycled_and_reset_by_the_flows_owner() {
    under_foreign_spreads(time_wait_resolves_at_the_owner);
}
