//! RTO (RFC 6298), fast retransmit and NewReno (RFC 5681, RFC 6582).

use super::*;
use crate::tcp::{CloseReason, TcpConfig};

/// NewReno without SACK (so without RACK-TLP either): the classic
/// RFC 5681 / RFC 6582 behaviour these tests pin down.
pub(super) fn reno() -> TcpConfig {
    TcpConfig {
        cc: crate::tcp::CcKind::NewReno,
        sack: false,
        ..TcpConfig::default()
    }
}

/// A pair after one small exchange, so that `a` knows b's full (scaled)
/// window and further ACKs from b carry the same window (dupack rule).
pub(super) fn warm_pair(cfg: &TcpConfig) -> (Host, Host) {
    let (mut a, mut b) = established_with(cfg, cfg);
    a.write(b"x");
    exchange(&mut a, &mut b, T0);
    b.rx.take();
    b.timer(T0 + ms(40));
    exchange(&mut b, &mut a, T0 + ms(40));
    assert_eq!(a.tcb.bytes_in_flight(), 0);
    (a, b)
}

/// A warm NewReno pair (`warm_pair`) after `a` sent ten full segments of
/// `pattern(10 * mss, salt)` at T0 + 40 ms and `b` got all but those
/// numbered in `lost`: returns the pair, the data, the ten segments and
/// what `b` answered to the ones it got (in order).
fn ten_sent_some_lost(salt: u8, lost: &[usize]) -> (Host, Host, Vec<u8>, Vec<Wire>, Vec<Wire>) {
    let (mut a, mut b) = warm_pair(&reno());
    let data = pattern(10 * a.tcb.mss(), salt);
    a.write(&data);
    let now = T0 + ms(40);
    let segs = a.output(now);
    assert_eq!(segs.len(), 10);
    let mut acks = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        if !lost.contains(&i) {
            b.input(s, now);
            acks.extend(b.output(now));
        }
    }
    (a, b, data, segs, acks)
}

#[test]
fn syn_sent_syn_ack_after_10ms_sets_srtt() {
    let cfg = reno();
    let mut a = Host::connect(&cfg, ISS_A);
    let syn = a.output(T0).remove(0);
    let mut b = Host::accept(&cfg, &syn, ISS_B);
    let sa = b.output(T0 + ms(5)).remove(0);
    a.input(&sa, T0 + ms(10));
    // RFC 6298 §2.2: SRTT = R, RTTVAR = R/2, RTO = SRTT + 4*RTTVAR, at least rto_min.
    assert_eq!(a.tcb.srtt_us(), 10_000);
    assert_eq!(a.tcb.rttvar_us(), 5_000);
    assert_eq!(a.tcb.rto(), ms(200));
}

#[test]
fn established_unacked_data_backs_off_rto_until_timed_out() {
    let (mut a, _b) = established_with(&reno(), &reno());
    a.write(&[9; 100]);
    a.output(T0);
    let (intervals, closed) = a.expire_unanswered(T0, 40, |out| {
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].repr.seq, ISS_A + 1);
        assert_eq!(out[0].payload, vec![9; 100]);
    });
    assert_eq!(closed, Some(CloseReason::TimedOut));
    assert_eq!(a.tcb.stats().retransmits, 15);
    let millis: Vec<u64> = intervals.iter().map(|d| d.as_millis() as u64).collect();
    assert_eq!(
        millis,
        vec![
            200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200, 60000, 60000, 60000, 60000,
            60000, 60000, 60000
        ]
    );
    assert_eq!(a.tcb.state(), crate::tcp::State::Closed);
}

#[test]
fn established_rto_resets_cwnd_to_one_mss() {
    let (mut a, _b) = warm_pair(&reno());
    let mss = a.tcb.mss();
    a.write(&pattern(10 * mss, 1));
    assert_eq!(a.output(T0 + ms(40)).len(), 10);
    let t = a.tcb.next_timeout().unwrap();
    a.timer(t);
    assert_eq!(a.tcb.cwnd(), mss);
    assert_eq!(a.tcb.ssthresh(), 5 * mss);
    let out = a.output(t);
    assert_eq!(out.len(), 1, "one segment in a one-segment window");
    assert_eq!(out[0].repr.seq, ISS_A + 2);
}

/// The segments all arrived, only the ACK was late: the first ACK after the
/// RTO echoes a timestamp from before it, so the RTO was spurious (RFC
/// 3522, as Linux): cwnd comes back and the rest of the flight is not sent
/// again.
#[test]
fn established_rto_answered_by_ack_of_the_originals_is_undone() {
    let (mut a, mut b) = warm_pair(&reno());
    let mss = a.tcb.mss();
    a.write(&pattern(10 * mss, 1));
    let flight = a.output(T0 + ms(50));
    assert_eq!(flight.len(), 10);
    let cwnd = a.tcb.cwnd();
    for s in &flight {
        b.input(s, T0 + ms(60));
    }
    // b's ACK, echoing the originals' timestamps, is held up past the RTO.
    let late = b.output(T0 + ms(60));
    let t = a.tcb.next_timeout().unwrap();
    a.timer(t);
    assert_eq!(a.tcb.cwnd(), mss);
    assert_eq!(a.output(t).len(), 1, "the first retransmission");
    for w in &late {
        a.input(w, t + ms(5));
    }
    assert_eq!(a.tcb.stats().spurious_rtos, 1);
    assert!(a.tcb.cwnd() >= cwnd, "the reduction was undone");
    assert_eq!(a.tcb.bytes_in_flight(), 0);
    assert!(a.output(t + ms(5)).is_empty(), "nothing left to resend");
}

/// The flight was lost: the ACK answers the retransmission (its TSecr is
/// the retransmission's TSval), so the reduction stays.
#[test]
fn established_rto_after_real_loss_keeps_the_reduction() {
    let (mut a, mut b) = warm_pair(&reno());
    let mss = a.tcb.mss();
    a.write(&pattern(2 * mss, 1));
    assert_eq!(a.output(T0 + ms(50)).len(), 2);
    let t = a.tcb.next_timeout().unwrap();
    a.timer(t);
    let re = a.output(t + ms(3));
    assert_eq!(re.len(), 1);
    b.input(&re[0], t + ms(4));
    b.timer(t + ms(50));
    for w in b.output(t + ms(50)) {
        a.input(&w, t + ms(51));
    }
    assert_eq!(a.tcb.stats().spurious_rtos, 0);
    assert!(a.tcb.cwnd() <= 2 * mss, "cwnd {}", a.tcb.cwnd());
}

#[test]
fn established_rto_retransmission_gives_no_rtt_sample_without_timestamps() {
    let cfg = TcpConfig {
        timestamps: false,
        ..reno()
    };
    let (mut a, mut b) = established_with(&cfg, &cfg);
    a.write(&[1; 100]);
    a.output(T0);
    let t = a.tcb.next_timeout().unwrap();
    a.timer(t);
    let re = a.output(t);
    b.input(&re[0], t);
    b.timer(t + ms(40));
    let ack = b.output(t + ms(40));
    a.input(&ack[0], t + ms(50));
    // Karn: the ACK is ambiguous, so SRTT stays (0 from the handshake) and the
    // backed-off RTO is kept.
    assert_eq!(a.tcb.srtt_us(), 0);
    assert_eq!(a.tcb.rto(), ms(400));
    assert_eq!(a.tcb.bytes_in_flight(), 0);
}

#[test]
fn established_third_dupack_fast_retransmits() {
    // Segment 0 is lost; the other nine each cause a duplicate ACK.
    let (mut a, mut b, data, segs, dupacks) = ten_sent_some_lost(2, &[0]);
    let (mss, una, now) = (a.tcb.mss(), a.tcb.snd_una(), T0 + ms(40));
    assert_eq!(dupacks.len(), 9);
    assert!(dupacks.iter().all(|d| d.repr.ack == una));
    a.input(&dupacks[0], now);
    a.input(&dupacks[1], now);
    assert!(a.output(now).is_empty());
    a.input(&dupacks[2], now);
    let re = a.output(now);
    assert_eq!(re.len(), 1);
    assert_eq!(re[0].repr.seq, una);
    assert_eq!(re[0].payload, segs[0].payload);
    assert!(a.tcb.in_recovery());
    assert_eq!(a.tcb.stats().fast_retransmits, 1);
    // RFC 5681 §3.2: ssthresh = FlightSize/2, cwnd = ssthresh + 3*SMSS.
    assert_eq!(a.tcb.ssthresh(), 5 * mss);
    assert_eq!(a.tcb.cwnd(), 8 * mss);
    for d in &dupacks[3..] {
        a.input(d, now);
    }
    assert_eq!(
        a.tcb.cwnd(),
        14 * mss,
        "inflated by one SMSS per further dupack"
    );
    // The retransmission fills the hole; the full ACK ends recovery.
    b.input(&re[0], now);
    let ack = b.output(now);
    a.input(&ack[0], now);
    assert!(!a.tcb.in_recovery());
    assert!(a.tcb.cwnd() <= a.tcb.ssthresh());
    assert_eq!(a.tcb.bytes_in_flight(), 0);
    let mut got = b.rx.take();
    got.truncate(data.len());
    assert_eq!(got, data);
}

#[test]
fn established_newreno_partial_ack_retransmits_next_hole() {
    // Segments 0 and 4 are lost.
    let (mut a, mut b, data, segs, dupacks) = ten_sent_some_lost(3, &[0, 4]);
    let (mss, una, now) = (a.tcb.mss(), a.tcb.snd_una(), T0 + ms(40));
    for d in &dupacks[..3] {
        a.input(d, now);
    }
    let re0 = a.output(now);
    assert_eq!(re0[0].repr.seq, una);
    for d in &dupacks[3..] {
        a.input(d, now);
    }
    a.output(now);
    // The first retransmission fills hole 0; b now acks up to hole 4.
    b.input(&re0[0], now);
    let partial = b.output(now);
    assert_eq!(partial.len(), 1);
    assert_eq!(partial[0].repr.ack, una + 4 * mss);
    a.input(&partial[0], now);
    assert!(a.tcb.in_recovery(), "a partial ACK does not end recovery");
    let re4 = a.output(now);
    assert!(!re4.is_empty());
    assert_eq!(
        re4[0].repr.seq,
        una + 4 * mss,
        "RFC 6582: retransmit the next hole at once"
    );
    assert_eq!(re4[0].payload, segs[4].payload);
    b.input(&re4[0], now);
    let full = b.output(now);
    a.input(&full[0], now);
    assert!(!a.tcb.in_recovery());
    assert_eq!(a.tcb.snd_una(), una + 10 * mss);
    assert_eq!(
        a.tcb.stats().fast_retransmits,
        1,
        "one recovery for both losses"
    );
    assert_eq!(b.rx.take(), data);
}

#[test]
fn established_path_mtu_drop_resends_in_smaller_pieces() {
    let (mut a, mut b) = established();
    let data = pattern(8 * 1448, 9);
    a.write(&data);
    let first = a.output(T0);
    assert!(first.iter().all(|w| w.payload.len() <= 1448));
    assert!(first.iter().any(|w| w.payload.len() == 1448));
    // The path says 1000 bytes fit; every big segment was dropped.
    let una = a.tcb.snd_una();
    assert!(
        !a.tcb.on_path_mtu(1000, una + 100_000usize),
        "seq outside the window is ignored"
    );
    assert!(a.tcb.on_path_mtu(1000, una));
    assert_eq!(a.tcb.mss(), 1000 - 40 - 12);
    let t = T0 + ms(1);
    let mut delivered = 0;
    for round in 0..50 {
        let now = t + ms(round);
        let segs = a.output(now);
        for s in &segs {
            assert!(
                s.payload.len() <= 948,
                "segment of {} bytes after the MTU drop",
                s.payload.len()
            );
            b.input(s, now);
        }
        let acks = b.output(now + ms(1));
        for s in &acks {
            a.input(s, now + ms(1));
        }
        a.timer(now + ms(1));
        delivered = b.rx.unread();
        if delivered == data.len() {
            break;
        }
    }
    assert_eq!(
        delivered,
        data.len(),
        "everything arrives in smaller segments"
    );
    assert_eq!(b.rx.take(), data);
    assert_eq!(a.tcb.stats().pmtu_reductions, 1);
}

#[test]
fn user_timeout_gives_up_unacknowledged_data_before_the_retry_limit() {
    let cfg = TcpConfig {
        user_timeout: ms(1000),
        ..reno()
    };
    let (mut a, _b) = established_with(&cfg, &reno());
    a.write(&[9; 100]);
    a.output(T0);
    let (intervals, closed) = a.expire_unanswered(T0, 40, |_| {});
    assert_eq!(closed, Some(CloseReason::TimedOut));
    // RTOs of 200 and 400 ms, then one clamped to what is left of the 1 s
    // user timeout counted from the data's send (as Linux does): the
    // connection is given up 1 s after the send, not at the next backed-off
    // RTO 1.4 s after it.
    let millis: Vec<u64> = intervals.iter().map(|d| d.as_millis() as u64).collect();
    assert_eq!(millis, vec![200, 400, 400]);
    assert_eq!(a.tcb.stats().retransmits, 2);
}

/// Runs `a` → `b` over a path that drops every segment with more than
/// `max_payload` bytes and says nothing (no ICMP), with `b`'s ACKs always
/// arriving, from `start` until `b` has `len` bytes or 200 events passed;
/// returns when it got there (None: never).
fn through_black_hole(
    a: &mut Host,
    b: &mut Host,
    start: Instant,
    max_payload: usize,
    len: usize,
) -> Option<Instant> {
    let mut now = start;
    for _ in 0..200 {
        for s in a.output(now) {
            if s.payload.len() <= max_payload {
                b.input(&s, now);
            }
        }
        b.timer(now + ms(1));
        for s in b.output(now + ms(1)) {
            a.input(&s, now + ms(2));
        }
        if b.rx.unread() >= len {
            return Some(now);
        }
        now = a
            .tcb
            .next_timeout()
            .map_or(now + ms(10), |t| t.max(now + ms(2)));
        a.timer(now);
    }
    None
}

#[test]
fn full_stop_timeout_falls_back_to_the_search_floor_then_retries_the_mss() {
    let (mut a, mut b) = established();
    let data = pattern(8 * 1448, 12);
    a.write(&data);
    // Nothing over 1100 bytes of payload crosses, and no ICMP says so.
    let got = through_black_hole(&mut a, &mut b, T0, 1100, data.len());
    let at = got.unwrap_or_else(|| {
        panic!(
            "the data did not cross the black hole: {:?} mss {} got {}",
            a.tcb.stats(),
            a.tcb.mss(),
            b.rx.unread()
        )
    });
    assert_eq!(b.rx.take(), data);
    assert_eq!(a.tcb.stats().pmtu_blackholes, 1);
    assert_eq!(
        a.tcb.mss(),
        1024 - 40 - 12,
        "RFC 4821 §7.2's IPv4 floor, less the timestamp option"
    );
    assert!(
        a.tcb.stats().timeouts >= 3,
        "a full stop is three RTOs of the same segment"
    );
    // Ten minutes on, the full MSS is tried again.
    let later = at + core::time::Duration::from_secs(601);
    a.write(&pattern(4 * 1448, 13));
    let segs = a.output(later);
    assert!(
        segs.iter().any(|w| w.payload.len() == 1448),
        "the full MSS again: {:?}",
        segs.iter().map(|w| w.payload.len()).collect::<Vec<_>>()
    );
}

/// After the fallback, probes search between the floor and the MSS that
/// failed (RFC 4821 §7.5): the MSS ends within the search's resolution
/// of the largest payload the black hole lets through.
#[test]
fn after_a_fallback_probes_find_the_largest_segment_the_black_hole_passes() {
    let (mut a, mut b) = established();
    let data = pattern(40 * 1448, 16);
    a.write(&data);
    let got = through_black_hole(&mut a, &mut b, T0, 1100, data.len());
    assert!(
        got.is_some(),
        "the data did not cross: {:?} mss {} got {}",
        a.tcb.stats(),
        a.tcb.mss(),
        b.rx.unread()
    );
    assert_eq!(b.rx.take(), data);
    let st = a.tcb.stats();
    assert_eq!(st.pmtu_blackholes, 1);
    assert!(st.pmtu_probes >= 2 && st.pmtu_probes_ok >= 1, "{st:?}");
    // The black hole drops only what is too big: the probes that failed
    // were resent without a recovery (RFC 8899 §3), and nothing else was lost.
    assert!(st.pmtu_probes > st.pmtu_probes_ok, "a probe failed: {st:?}");
    assert_eq!(
        st.fast_retransmits, 0,
        "a lost probe is no congestion: {st:?}"
    );
    let mss = a.tcb.mss();
    assert!(mss <= 1100 && mss + 32 > 1100, "mss {mss} after {st:?}");
}

#[test]
fn rtos_of_small_segments_or_fewer_than_three_keep_the_mss() {
    // Two RTOs of a full-size segment, then it arrives: no fallback.
    let (mut a, mut b) = established();
    let data = pattern(1448, 14);
    a.write(&data);
    a.output(T0);
    let (_, closed) = a.expire_unanswered(T0, 2, |_| {});
    assert_eq!(closed, None);
    let now = a.tcb.next_timeout().expect("armed");
    a.timer(now);
    for s in a.output(now) {
        b.input(&s, now);
    }
    assert_eq!(b.rx.take(), data);
    assert_eq!(a.tcb.stats().pmtu_blackholes, 0);
    assert_eq!(a.tcb.mss(), 1448);
    // Many RTOs of a segment below the floor: not a black hole's doing.
    let (mut a, _b) = established();
    a.write(&[7; 500]);
    a.output(T0);
    a.expire_unanswered(T0, 6, |_| {});
    assert_eq!(a.tcb.stats().pmtu_blackholes, 0);
    assert_eq!(a.tcb.mss(), 1448);
}

#[test]
fn a_path_mtu_another_connection_learned_lowers_the_mss_without_a_quote() {
    let (mut a, _b) = established();
    a.write(&pattern(4 * 1448, 15));
    let first = a.output(T0);
    assert!(first.iter().all(|w| w.payload.len() == 1448));
    assert!(!a.tcb.clamp_path_mtu(1500), "the link MTU changes nothing");
    assert!(a.tcb.clamp_path_mtu(1000));
    assert_eq!(a.tcb.mss(), 1000 - 40 - 12);
    // What was in flight at the old size is sent again in pieces.
    let again = a.output(T0 + ms(1));
    assert!(!again.is_empty(), "the oversized segments go again at once");
    assert!(again.iter().all(|w| w.payload.len() <= 948));
    assert_eq!(a.tcb.stats().pmtu_reductions, 1);
}
