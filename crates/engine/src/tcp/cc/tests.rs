//! Window trajectories of each algorithm against hand-computed values.

use core::time::Duration;

use wire::SeqNum;

use super::cubic::{ALPHA, C};
use super::*;

const MSS: usize = 1000;
const T0: Instant = Instant(1_000_000_000);

fn ack(acked: usize, now: Instant) -> AckInfo {
    AckInfo {
        acked,
        srtt: Duration::ZERO,
        now,
        flight: 0,
        mss: MSS,
    }
}

/// An algorithm of `kind` started at a cwnd of `cwnd` segments after
/// congestion `event` with `flight` segments in flight.
fn after_event(kind: CcKind, cwnd: usize, event: CongestionEvent, flight: usize) -> Cc {
    let mut cc = Cc::new(kind, cwnd * MSS);
    cc.on_congestion_event(event, flight * MSS, MSS);
    cc
}

#[test]
fn newreno_slow_start_then_congestion_avoidance() {
    let mut cc = Cc::new(CcKind::NewReno, 2 * MSS);
    cc.on_ack(&ack(1000, T0));
    assert_eq!(cc.cwnd(), 3 * MSS);
    cc.on_congestion_event(CongestionEvent::Rto, 8 * MSS, MSS);
    assert_eq!((cc.cwnd(), cc.ssthresh()), (MSS, 4 * MSS));
    for _ in 0..3 {
        cc.on_ack(&ack(1000, T0));
    }
    assert_eq!(cc.cwnd(), 4 * MSS, "slow start up to ssthresh");
    // Congestion avoidance: one SMSS per cwnd of acknowledged bytes.
    for _ in 0..4 {
        cc.on_ack(&ack(1000, T0));
    }
    assert_eq!(cc.cwnd(), 5 * MSS);
}

#[test]
fn newreno_fast_recovery_halves_flight_then_exit_sets_ssthresh() {
    let mut cc = after_event(CcKind::NewReno, 20, CongestionEvent::FastRecovery, 20);
    assert_eq!((cc.cwnd(), cc.ssthresh()), (10 * MSS, 10 * MSS));
    // RFC 6582 option 1: min(ssthresh, max(FlightSize, SMSS) + SMSS).
    cc.on_recovery_exit(3 * MSS, MSS);
    assert_eq!(cc.cwnd(), 4 * MSS);
    cc.on_recovery_exit(30 * MSS, MSS);
    assert_eq!(cc.cwnd(), 10 * MSS);
}

#[test]
fn cubic_loss_sets_beta_and_wmax_then_follows_cubic_curve() {
    let mut cc = after_event(CcKind::Cubic, 100, CongestionEvent::FastRecovery, 100);
    // beta_cubic = 0.7: ssthresh = cwnd = 70 segments; W_max = 100.
    assert_eq!((cc.cwnd(), cc.ssthresh()), (70 * MSS, 70 * MSS));
    // First ACK starts the epoch: K = cbrt((100 - 70) / 0.4) = cbrt(75).
    cc.on_ack(&ack(MSS, T0));
    let Cc::Cubic(c) = cc else { unreachable!() };
    let k = 75f64.cbrt();
    assert!((c.k() - k).abs() < 1e-9, "K = {}", c.k());
    // At t = 0, W_cubic(0) = 70 < W_est = 70 + alpha/70: Reno-friendly region.
    let w_est = 70.0 + ALPHA / 70.0;
    assert_eq!(cc.cwnd(), (w_est * MSS as f64) as usize);
    // At t = K the curve reaches W_max = 100; target = 100, so the ACK of one
    // segment adds (100 - cwnd)/cwnd segments.
    let before = cc.cwnd() as f64 / MSS as f64;
    let at_k = T0 + Duration::from_secs_f64(k);
    cc.on_ack(&ack(MSS, at_k));
    let expect = before * MSS as f64 + (100.0 - before) / before * MSS as f64;
    assert!(
        (cc.cwnd() as f64 - expect).abs() <= 1.0,
        "cwnd {} expected {expect}",
        cc.cwnd()
    );
    // At t = 2K: W_cubic = C*K^3 + 100 = 130, clamped to 1.5*cwnd (> 130 is
    // not reached from ~70): growth is (min(130, 1.5 cwnd) - cwnd)/cwnd.
    let before = cc.cwnd() as f64 / MSS as f64;
    let w = C * k.powi(3) + 100.0;
    assert!((w - 130.0).abs() < 1e-9);
    let target = w.min(1.5 * before);
    cc.on_ack(&ack(MSS, T0 + Duration::from_secs_f64(2.0 * k)));
    let expect = before * MSS as f64 + (target - before) / before * MSS as f64;
    assert!((cc.cwnd() as f64 - expect).abs() <= 1.0);
}

#[test]
fn cubic_second_loss_below_wmax_applies_fast_convergence() {
    let mut cc = after_event(CcKind::Cubic, 100, CongestionEvent::FastRecovery, 0);
    cc.set_cwnd(80 * MSS);
    cc.on_congestion_event(CongestionEvent::FastRecovery, 0, MSS);
    let Cc::Cubic(c) = cc else { unreachable!() };
    // cwnd 80 < W_max 100: W_max = 80 * (1 + 0.7) / 2 = 68.
    assert!((c.w_max() - 68.0).abs() < 1e-9);
    assert_eq!(cc.ssthresh(), 56 * MSS);
}

#[test]
fn cubic_rto_sets_one_mss_and_ssthresh_beta() {
    let mut cc = after_event(CcKind::Cubic, 40, CongestionEvent::Rto, 40);
    assert_eq!((cc.cwnd(), cc.ssthresh()), (MSS, 28 * MSS));
    cc.on_ack(&ack(MSS, T0));
    assert_eq!(cc.cwnd(), 2 * MSS, "slow start after the RTO");
}

#[test]
fn cubic_above_wmax_starts_convex_with_k_zero() {
    let mut cc = after_event(CcKind::Cubic, 10, CongestionEvent::Ecn, 0);
    // 7 segments; grow above W_max = 10 by hand, then a new epoch has K = 0.
    cc.set_cwnd(12 * MSS);
    if let Cc::Cubic(c) = &mut cc {
        c.win.ssthresh = 7 * MSS;
    }
    cc.on_ack(&ack(MSS, T0));
    let Cc::Cubic(c) = cc else { unreachable!() };
    assert_eq!(c.k(), 0.0);
    assert!((c.w_max() - 12.0).abs() < 1e-9);
}

#[test]
fn dctcp_alpha_tracks_marked_fraction_and_cuts_by_half_alpha() {
    let mut cc = Cc::new(CcKind::Dctcp, 100 * MSS);
    let alpha = |cc: &Cc| match cc {
        Cc::Dctcp(d) => d.alpha(),
        _ => unreachable!(),
    };
    assert_eq!(alpha(&cc), 1024, "alpha starts at 1");
    // One window (snd_nxt 20000 when it began): 20000 bytes, half with ECE.
    cc.on_ecn_feedback(10_000, false, SeqNum(10_000), SeqNum(20_000));
    assert_eq!(alpha(&cc), 1024, "window not complete");
    cc.on_ecn_feedback(10_000, true, SeqNum(20_000), SeqNum(30_000));
    // alpha = 15/16 * 1024 + 1/16 * 512 = 960 + 32.
    assert_eq!(alpha(&cc), 992);
    // A clean window: alpha = 15/16 * 992.
    cc.on_ecn_feedback(10_000, false, SeqNum(30_000), SeqNum(40_000));
    assert_eq!(alpha(&cc), 992 - 62);
    // ECN response: cwnd * (1 - alpha/2) = 100000 * (1 - 930/2048).
    cc.on_congestion_event(CongestionEvent::Ecn, 0, MSS);
    let expect = 100_000 - 100_000 * 930 / 2048;
    assert_eq!((cc.cwnd(), cc.ssthresh()), (expect, expect));
    // Loss halves like NewReno.
    cc.on_congestion_event(CongestionEvent::FastRecovery, 40 * MSS, MSS);
    assert_eq!(cc.cwnd(), 20 * MSS);
}

#[test]
fn cc_undo_restores_window_before_reduction() {
    let mut cc = Cc::new(CcKind::Cubic, 50 * MSS);
    let saved = cc;
    cc.on_congestion_event(CongestionEvent::FastRecovery, 50 * MSS, MSS);
    assert_eq!(cc.cwnd(), 35 * MSS);
    cc.undo(saved);
    assert_eq!((cc.cwnd(), cc.ssthresh()), (50 * MSS, usize::MAX));
    assert_eq!(cc.kind(), CcKind::Cubic);
}

/// RFC 9438 §5.8: an idle period does not count in t. Two flows in the same
/// epoch, one idle for 5 s before an ACK at epoch time K/2: the idle one's
/// ACK at K/2 + 5 s grows cwnd exactly as the other's at K/2.
#[test]
fn cubic_idle_period_is_left_out_of_the_epoch() {
    let start = |cc: &mut Cc| {
        cc.on_congestion_event(CongestionEvent::FastRecovery, 100 * MSS, MSS);
        cc.on_ack(&ack(MSS, T0));
    };
    let mut busy = Cc::new(CcKind::Cubic, 100 * MSS);
    let mut idle = busy;
    start(&mut busy);
    start(&mut idle);
    let k = Duration::from_secs_f64(75f64.cbrt() / 2.0);
    let pause = Duration::from_secs(5);
    busy.on_ack(&ack(MSS, T0 + k));
    idle.on_tx_start(T0 + pause, pause);
    idle.on_ack(&ack(MSS, T0 + k + pause));
    assert_eq!(idle.cwnd(), busy.cwnd());
    // Without the shift, t = K/2 + 5 s puts the target far above W_max
    // (capped at 1.5 cwnd): 0.5 MSS for this ACK instead of 0.375.
    let mut unshifted = Cc::new(CcKind::Cubic, 100 * MSS);
    start(&mut unshifted);
    unshifted.on_ack(&ack(MSS, T0 + k + pause));
    assert!(unshifted.cwnd() > busy.cwnd() + MSS / 10);
    // The epoch never moves past now.
    let mut c = Cc::new(CcKind::Cubic, 100 * MSS);
    start(&mut c);
    c.on_tx_start(T0 + Duration::from_secs(1), Duration::from_secs(9));
    let Cc::Cubic(cubic) = c else { unreachable!() };
    assert_eq!(cubic.epoch_start(), Some(T0 + Duration::from_secs(1)));
}
