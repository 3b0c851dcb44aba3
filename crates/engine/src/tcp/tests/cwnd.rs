//! The congestion window outside loss recovery: switching the controller,
//! an application-limited sender (RFC 9438 §5.8), restart after idle
//! (RFC 5681 §4.1).

use super::delayed::*;
use super::*;
use crate::tcp::{CcKind, TcpConfig};

#[test]
fn established_set_cc_switches_algorithm_keeping_window() {
    let (mut a, _b, _t) = warm(&cfg(CcKind::Cubic, true));
    assert_eq!(a.tcb.cc(), CcKind::Cubic);
    let cwnd = a.tcb.cwnd();
    a.tcb.set_cc(CcKind::NewReno);
    assert_eq!(a.tcb.cc(), CcKind::NewReno);
    assert_eq!(a.tcb.cwnd(), cwnd);
    assert_eq!(a.tcb.dctcp_alpha(), None);
}

#[test]
fn syn_sent_set_cc_dctcp_before_syn_offers_ecn() {
    let c = TcpConfig::default();
    let mut a = Host::connect(&c, ISS_A);
    a.tcb.set_cc(CcKind::Dctcp);
    let syn = a.output(T0);
    assert!(syn[0].flags().ece() && syn[0].flags().cwr());
}

/// RFC 9438 §5.8: a sender the application holds below cwnd does not grow
/// cwnd on its ACKs; once it fills cwnd again, slow start resumes.
#[test]
fn established_application_limited_sender_does_not_grow_cwnd() {
    let (mut a, mut b, mut t) = warm(&cfg(CcKind::Cubic, true));
    let mss = a.tcb.mss();
    let cwnd0 = a.tcb.cwnd();
    for round in 0..10u8 {
        a.write(&pattern(2 * mss, round));
        let segs = a.output(t);
        assert_eq!(segs.len(), 2);
        let acks = deliver(&mut b, &segs, &[], t + ms(D));
        feed(&mut a, &acks, t + ms(2 * D));
        b.rx.take();
        t = t + ms(2 * D);
        assert_eq!(a.tcb.bytes_in_flight(), 0);
    }
    assert_eq!(a.tcb.cwnd(), cwnd0, "20 ACKed segments, cwnd never used");
    // A bulk write fills cwnd: its ACKs grow it again (slow start).
    a.write(&pattern(100 * mss, 11));
    let segs = a.output(t);
    assert_eq!(segs.len(), cwnd0 / mss);
    let acks = deliver(&mut b, &segs, &[], t + ms(D));
    feed(&mut a, &acks, t + ms(2 * D));
    assert_eq!(a.tcb.cwnd(), 2 * cwnd0);
}

/// RFC 5681 §4.1, in Linux's form (`tcp_cwnd_restart`): new data after an
/// idle period longer than the RTO starts from a cwnd halved once per RTO
/// of idleness, not below the restart window min(IW, cwnd); ssthresh keeps
/// at least 3/4 of the old cwnd. A shorter pause, or the restart turned
/// off, leaves the whole cwnd to the next flight.
#[test]
fn established_idle_longer_than_rto_restarts_cwnd() {
    let flight_after = |restart: bool, idle_rtos: f64| -> (usize, usize, u64) {
        let cfg = TcpConfig {
            slow_start_after_idle: restart,
            ..cfg(CcKind::Cubic, true)
        };
        let (mut a, mut b, mut t) = warm(&cfg);
        let mss = a.tcb.mss();
        // Two rounds that fill cwnd double it twice: 4 × IW.
        for round in 0..2u8 {
            a.write(&pattern(a.tcb.cwnd(), round));
            let segs = a.output(t);
            let acks = deliver(&mut b, &segs, &[], t + ms(D));
            feed(&mut a, &acks, t + ms(2 * D));
            b.rx.take();
            t = t + ms(2 * D);
        }
        assert_eq!(a.tcb.cwnd(), 80 * mss);
        assert_eq!(a.tcb.bytes_in_flight(), 0);
        let idle = core::time::Duration::from_secs_f64(a.tcb.rto().as_secs_f64() * idle_rtos);
        a.write(&pattern(150 * mss, 9));
        let segs = a.output(t + idle);
        let sent: usize = segs.iter().map(|s| s.repr.payload_len).sum();
        assert!(a.tcb.ssthresh() >= 60 * mss);
        (sent / mss, a.tcb.cwnd() / mss, a.tcb.stats().cwnd_restarts)
    };
    assert_eq!(
        flight_after(true, 0.5),
        (80, 80, 0),
        "idle shorter than the RTO"
    );
    assert_eq!(flight_after(true, 1.5), (40, 40, 1), "halved once");
    assert_eq!(flight_after(true, 50.0), (20, 20, 1), "down to IW");
    assert_eq!(flight_after(false, 50.0), (80, 80, 0), "restart off");
}
