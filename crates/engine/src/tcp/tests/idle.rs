//! Keepalive (RFC 1122 §4.2.3.6), the challenge-ACK rate limit (RFC 5961
//! §7), the FIN-WAIT-2 timeout of orphans, and the timestamp offset
//! (RFC 7323 §5.4).

use core::time::Duration;

use wire::tcp::TcpFlags;

use super::*;
use crate::tcp::{CloseReason, IsnGenerator, State, TcpConfig};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn established_keepalive_off_by_default_arms_no_timer() {
    let (a, _b) = established();
    assert_eq!(a.tcb.next_timeout(), None);
}

#[test]
fn established_idle_keepalive_probes_then_times_out() {
    let (mut a, _b) = established();
    a.tcb.set_keepalive_params(secs(10), secs(1), 3);
    a.tcb.set_keepalive(true);
    assert_eq!(a.tcb.next_timeout(), Some(T0 + secs(10)));
    let mut now = T0;
    for i in 0..3 {
        now = a.tcb.next_timeout().expect("keepalive timer");
        assert_eq!(now, T0 + secs(10) + secs(i));
        assert_eq!(a.timer(now).closed, None);
        let probe = a.output(now);
        assert_eq!(probe.len(), 1);
        // SEG.SEQ = SND.NXT - 1, no data.
        assert_eq!(probe[0].repr.seq, ISS_A);
        assert!(probe[0].payload.is_empty());
    }
    assert_eq!(a.tcb.stats().keepalive_probes, 3);
    let t = a.tcb.next_timeout().expect("last interval");
    assert!(t > now);
    assert_eq!(a.timer(t).closed, Some(CloseReason::TimedOut));
    assert_eq!(a.tcb.state(), State::Closed);
}

#[test]
fn established_keepalive_probe_answered_restarts_idle_time() {
    let (mut a, mut b) = established();
    a.tcb.set_keepalive_params(secs(10), secs(1), 3);
    a.tcb.set_keepalive(true);
    let t = T0 + secs(10);
    a.timer(t);
    let probe = a.output(t);
    b.input(&probe[0], t);
    let ack = b.output(t);
    assert_eq!(ack.len(), 1, "the peer answers an old sequence number");
    a.input(&ack[0], t);
    assert_eq!(a.tcb.next_timeout(), Some(t + secs(10)));
}

#[test]
fn established_rst_flood_challenge_acks_limited_per_second() {
    let cfg = TcpConfig {
        challenge_ack_limit: 5,
        ..TcpConfig::default()
    };
    let (mut a, _b) = established_with(&cfg, &cfg);
    let rst = craft(a.tcb.rcv_nxt() + 100, None, TcpFlags::RST, 1000, &[]);
    for _ in 0..10 {
        a.input(&rst, T0);
    }
    assert_eq!(a.tcb.stats().challenge_acks, 5);
    assert_eq!(a.tcb.stats().challenge_acks_suppressed, 5);
    assert_eq!(a.tcb.state(), State::Established);
    a.input(&rst, T0 + secs(1));
    assert_eq!(
        a.tcb.stats().challenge_acks,
        6,
        "a new second, a new budget"
    );
}

#[test]
fn fin_wait2_orphan_closes_after_fin_timeout() {
    let (mut a, mut b) = established();
    a.tcb.close();
    exchange(&mut a, &mut b, T0);
    exchange(&mut b, &mut a, T0);
    assert_eq!(a.tcb.state(), State::FinWait2);
    assert_eq!(
        a.tcb.next_timeout(),
        None,
        "not orphaned: waits for the FIN"
    );
    a.tcb.orphan(T0);
    assert_eq!(a.tcb.next_timeout(), Some(T0 + secs(60)));
    assert_eq!(a.timer(T0 + secs(60)).closed, Some(CloseReason::Normal));
    assert_eq!(a.tcb.state(), State::Closed);
}

#[test]
fn closed_ts_offset_depends_on_hosts_and_sets_tsval() {
    let g = IsnGenerator::new();
    let p1 = addr_a();
    let mut p2 = addr_a();
    p2.set_port(40001);
    assert_eq!(g.ts_offset(p1, addr_b()), g.ts_offset(p2, addr_b()));
    let mut other = addr_b();
    other.set_ip(std::net::Ipv4Addr::new(10, 0, 0, 3));
    assert_ne!(g.ts_offset(p1, addr_b()), g.ts_offset(p1, other));
    let cfg = TcpConfig::default();
    let mut a = Host::connect(&cfg, ISS_A);
    a.tcb.set_ts_offset(12345);
    let syn = a.output(T0);
    let ms = (T0.as_nanos() / 1_000_000) as u32;
    assert_eq!(syn[0].repr.options.timestamps, Some((ms + 12345, 0)));
}
