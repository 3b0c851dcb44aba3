//! SACK (RFC 2018), D-SACK (RFC 2883), and loss recovery: NewReno
//! (RFC 6582), SACK-based (RFC 6675) paced by PRR (RFC 9937), RACK-TLP
//! (RFC 8985), undo; between two Tcbs with a one-way delay of 10 ms.

use super::delayed::*;
use super::*;
use crate::tcp::{CcKind, TcpConfig};

#[test]
fn syn_sent_sack_on_both_ends_negotiates_sack() {
    let (a, b, _) = warm(&TcpConfig::default());
    assert!(a.tcb.sack_enabled() && b.tcb.sack_enabled());
    let (a, b, _) = warm(&cfg(CcKind::Cubic, false));
    assert!(!a.tcb.sack_enabled() && !b.tcb.sack_enabled());
}

#[test]
fn established_out_of_order_arrivals_ack_sack_blocks_most_recent_first() {
    let (_a, mut b, t, mss, _, segs) = flight(10, 1);
    assert_eq!(segs.len(), 10);
    let seq = |i: usize| ISS_A + 2 + i * mss;
    let mut last = Vec::new();
    for i in [0, 2, 5, 8, 3] {
        b.input(&segs[i], t);
        last = b.output(t);
    }
    let ack = last.last().expect("a duplicate ACK");
    assert_eq!(ack.repr.ack, seq(1));
    // Most recent arrival (3) first, merged with 2; then 8, then 5; at most
    // 3 blocks with timestamps.
    assert_eq!(
        blocks(ack),
        vec![(seq(2), seq(4)), (seq(8), seq(9)), (seq(5), seq(6))]
    );
}

#[test]
fn established_duplicate_segment_ack_carries_dsack_block() {
    let (_a, mut b, t, mss, _, segs) = flight(2, 2);
    deliver(&mut b, &segs, &[], t);
    b.input(&segs[0], t);
    let out = b.output(t);
    assert_eq!(out.len(), 1);
    // RFC 2883: the first block reports the duplicate, below the ACK.
    assert_eq!(out[0].repr.ack, ISS_A + 2 + 2 * mss);
    assert_eq!(blocks(&out[0]), vec![(ISS_A + 2, ISS_A + 2 + mss)]);
    assert_eq!(b.tcb.stats().dsacks_sent, 1);
}

#[test]
fn established_three_losses_in_one_window_sack_retransmits_exactly_the_holes_at_once() {
    let (mut a, mut b, t, mss, data, segs) = flight(20, 3);
    let re = three_holes_repaired_in_one_round_trip(&mut a, &mut b, (t, mss, &data, &segs));
    assert_eq!(a.tcb.stats().sack_recoveries, 1);
    for (w, i) in re.iter().zip([2, 6, 11]) {
        assert_eq!(w.payload, segs[i].payload);
    }
}

#[test]
fn established_three_losses_in_one_window_newreno_without_sack_retransmits_one_per_rtt() {
    let (mut a, mut b, t) = warm(&cfg(CcKind::NewReno, false));
    let mss = a.tcb.mss();
    a.write(&pattern(20 * mss, 3));
    let segs = a.output(t);
    let acks = deliver(&mut b, &segs, &[2, 6, 11], t + ms(D));
    feed(&mut a, &acks, t + ms(2 * D));
    let re = a.output(t + ms(2 * D));
    assert_eq!(re.len(), 1, "only the first hole is known");
    assert_eq!(re[0].repr.seq, ISS_A + 2 + 2 * mss);
    // The partial ACK reveals the next hole one RTT later.
    let acks = deliver(&mut b, &re, &[], t + ms(3 * D));
    feed(&mut a, &acks, t + ms(4 * D));
    let re = a.output(t + ms(4 * D));
    assert_eq!(re[0].repr.seq, ISS_A + 2 + 6 * mss);
}

#[test]
fn established_lost_retransmission_rack_detects_and_retransmits_again() {
    let (mut a, mut b, t) = warm(&cfg(CcKind::Cubic, true));
    let mss = a.tcb.mss();
    let data = pattern(25 * mss, 4);
    a.write(&data[..20 * mss]);
    let segs = a.output(t);
    let acks = deliver(&mut b, &segs, &[2], t + ms(D));
    feed(&mut a, &acks, t + ms(2 * D));
    // New data goes out after the retransmission; the retransmission is lost.
    a.write(&data[20 * mss..]);
    let t2 = t + ms(2 * D);
    let out = a.output(t2);
    assert_eq!(out[0].repr.seq, ISS_A + 2 + 2 * mss);
    assert!(out.len() > 1, "new data after the retransmission");
    let acks = deliver(&mut b, &out, &[0], t2 + ms(D));
    feed(&mut a, &acks, t2 + ms(2 * D));
    // RACK: the retransmission was sent before delivered data and is older
    // than RTT + reordering window: lost, well before any RTO.
    let at = a.tcb.next_timeout().expect("RACK timer");
    assert!(at < t2 + ms(100), "RACK fires before the RTO");
    a.timer(at);
    let again = a.output(at);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].repr.seq, ISS_A + 2 + 2 * mss);
    assert!(a.tcb.stats().rack_losses >= 1);
    assert_eq!(a.tcb.stats().timeouts, 0);
    let acks = deliver(&mut b, &again, &[], at + ms(D));
    feed(&mut a, &acks, at + ms(2 * D));
    assert_eq!(a.tcb.bytes_in_flight(), 0);
    assert_eq!(b.rx.take(), data);
}

#[test]
fn established_lost_last_segment_tail_loss_probe_recovers_without_rto() {
    let (mut a, mut b, t, mss, data, segs) = flight(5, 5);
    assert_eq!(segs.len(), 5);
    let acks = deliver(&mut b, &segs, &[4], t + ms(D));
    feed(&mut a, &acks, t + ms(2 * D));
    assert_eq!(a.tcb.bytes_in_flight(), mss);
    let rto_at = t + ms(2 * D) + a.tcb.rto();
    let pto = a.tcb.next_timeout().expect("probe timer");
    // One segment in flight: the probe waits for a delayed ACK (RFC 8985
    // §7.2), at most until the RTO, and goes instead of it.
    assert!(pto <= rto_at, "PTO {pto:?} after RTO {rto_at:?}");
    let wc_del_ack = (t + ms(2 * D + 200)).min(rto_at);
    assert!(
        pto >= wc_del_ack,
        "PTO {pto:?} before a delayed ACK could come"
    );
    a.timer(pto);
    let probe = a.output(pto);
    assert_eq!(probe.len(), 1);
    assert_eq!(probe[0].repr.seq, ISS_A + 2 + 4 * mss);
    assert_eq!(a.tcb.stats().tlp_probes, 1);
    b.input(&probe[0], pto + ms(D));
    let t3 = pto + ms(D + 40);
    b.timer(t3);
    let ack = b.output(t3);
    assert_eq!(ack.len(), 1, "the delayed ACK");
    a.input(&ack[0], t3 + ms(D));
    assert_eq!(a.tcb.bytes_in_flight(), 0);
    assert_eq!(a.tcb.stats().timeouts, 0);
    assert_eq!(b.rx.take(), data);
}

#[test]
fn established_reordered_segment_dsack_marks_retransmission_spurious_and_undoes_cwnd() {
    let (mut a, mut b, t, mss, _, segs) = flight(20, 6);
    let cwnd_before = a.tcb.cwnd();
    let acks = deliver(&mut b, &segs, &[2], t + ms(D));
    feed(&mut a, &acks, t + ms(2 * D));
    assert!(a.tcb.cwnd() < cwnd_before, "reduced on entering recovery");
    let re = a.output(t + ms(2 * D));
    assert_eq!(re.len(), 1);
    // The original was only late: it fills the hole; then the
    // retransmission arrives as a duplicate and is D-SACKed.
    let ack1 = deliver(&mut b, &segs[2..3], &[], t + ms(2 * D + 1));
    let ack2 = deliver(&mut b, &re, &[], t + ms(3 * D));
    assert_eq!(
        blocks(&ack2[0]),
        vec![(re[0].repr.seq, re[0].repr.seq + mss)]
    );
    feed(&mut a, &ack1, t + ms(3 * D + 1));
    assert!(!a.tcb.in_recovery());
    feed(&mut a, &ack2, t + ms(4 * D));
    assert_eq!(a.tcb.stats().dsacks_received, 1);
    assert_eq!(a.tcb.stats().spurious_retransmits, 1);
    assert_eq!(a.tcb.stats().cwnd_undos, 1);
    assert!(a.tcb.cwnd() >= cwnd_before, "cwnd restored");
    assert_eq!(a.tcb.ssthresh(), usize::MAX);
}

#[test]
fn established_scoreboard_full_holds_new_data_until_acked() {
    let c = TcpConfig {
        max_segments_in_flight: 4,
        ..cfg(CcKind::Cubic, true)
    };
    let (mut a, mut b, t) = warm(&c);
    let mss = a.tcb.mss();
    a.write(&pattern(8 * mss, 7));
    let segs = a.output(t);
    assert_eq!(segs.len(), 4, "bounded by the scoreboard");
    assert!(!a.tcb.has_output());
    let acks = deliver(&mut b, &segs, &[], t + ms(D));
    feed(&mut a, &acks, t + ms(2 * D));
    assert_eq!(a.output(t + ms(2 * D)).len(), 4);
}

#[test]
fn established_rto_with_sacked_head_treats_it_as_reneging_and_resends_it() {
    let (mut a, mut b, t) = warm(&TcpConfig {
        rack_tlp: false,
        ..cfg(CcKind::Cubic, true)
    });
    let mss = a.tcb.mss();
    a.write(&pattern(4 * mss, 11));
    let segs = a.output(t);
    // A forged ACK SACKs the first segment, which the receiver then "loses".
    let mut ack = b.output(t);
    assert!(ack.is_empty());
    b.input(&segs[1], t);
    ack = b.output(t);
    let mut forged = ack[0].clone();
    forged.repr.options.sack[0] = wire::tcp::SackBlock {
        left: segs[0].repr.seq,
        right: segs[0].repr.seq + mss,
    };
    forged.repr.options.sack_len = 1;
    a.input(&forged, t + ms(2 * D));
    assert_eq!(a.tcb.sacked_bytes(), mss);
    let rto = a.tcb.next_timeout().expect("rto");
    a.timer(rto);
    assert_eq!(a.tcb.stats().sack_reneging, 1);
    let out = a.output(rto);
    assert_eq!(out[0].repr.seq, segs[0].repr.seq, "the head goes again");
}

/// A Linux receiver sends the first three duplicate ACKs at once and then
/// compresses SACKs (one ACK for many out-of-order segments). The sender
/// takes all the SACK information of the compressed ACK, retransmits the
/// hole and sends new data with the room that leaves.
#[test]
fn established_compressed_sack_after_three_dupacks_is_used_whole() {
    let ((mut a, mut b, t, mss, _, segs), t1, dupacks) = head_lost_flight(40, 12);
    for s in &segs[4..] {
        b.input(s, t1);
    }
    let compressed = b.output(t1).pop().expect("an ACK");
    assert_eq!(
        blocks(&compressed),
        vec![(segs[1].repr.seq, segs[19].repr.seq + mss)]
    );
    let t2 = t + ms(2 * D);
    feed(&mut a, &dupacks, t2);
    assert_eq!(a.tcb.sacked_bytes(), 3 * mss);
    let first = a.output(t2);
    assert_eq!(first[0].repr.seq, segs[0].repr.seq, "the hole first");
    // RFC 9937: the ACK that starts recovery delivered one segment, which
    // allows ⌈0.7⌉ of one: the retransmission only.
    assert_eq!(first.len(), 1, "the retransmission alone");
    a.input(&compressed, t2);
    assert_eq!(
        a.tcb.sacked_bytes(),
        19 * mss,
        "every SACKed segment counted"
    );
    // 16 more delivered: PRR lets the total sent since recovery began
    // reach about ssthresh (14 segments).
    let more = a.output(t2);
    assert_eq!(
        first.len() + more.len(),
        14,
        "{} then {}",
        first.len(),
        more.len()
    );
}

/// RFC 9937: during recovery, each duplicate ACK clocks out about
/// ssthresh/RecoverFS of what it reports delivered, from the first one on,
/// instead of nothing until pipe has fallen below the reduced cwnd.
#[test]
fn established_prr_spreads_sending_over_the_recovery() {
    let (mut a, mut b, t, _, _, segs) = flight(60, 13);
    assert_eq!(segs.len(), 20);
    let t1 = t + ms(D);
    let t2 = t + ms(2 * D);
    let mut sent_after = Vec::new();
    let mut total = 0;
    for (k, s) in segs[1..].iter().enumerate() {
        b.input(s, t1);
        for ack in b.output(t1) {
            a.input(&ack, t2);
        }
        total += a.output(t2).len();
        sent_after.push(total);
        if k + 1 == 3 {
            assert!(a.tcb.in_recovery(), "recovery at the third duplicate ACK");
        }
    }
    // Dupacks 1 and 2 send one new segment each (limited transmit, RFC
    // 3042), the third the retransmission. From there PRR sends about 0.7
    // segment per delivered one: by dupack 7, ⌈5 · 0.7⌉ = 4 since recovery
    // began (5 in all), where pipe < cwnd kept silent until dupack 9.
    assert_eq!(
        &sent_after[..8],
        &[1, 2, 3, 3, 3, 4, 5, 5],
        "{sent_after:?}"
    );
    // By the last duplicate ACK about ssthresh (14 segments) went out.
    assert_eq!(sent_after[18], 14, "{sent_after:?}");
}

/// A receiver that compresses SACKs answers the retransmission of the only
/// hole with one cumulative ACK. When that ACK is lost, the recovery's ACK
/// clock stops with everything delivered. A probe a PTO later draws a fresh
/// ACK, long before the RTO, and its D-SACK does not pass for a spurious
/// retransmission: the reduction stays.
#[test]
fn established_recovery_final_ack_lost_probe_ends_recovery_without_rto() {
    let ((mut a, mut b, t, mss, data, segs), t1, dupacks) = head_lost_flight(20, 14);
    // The rest arrives while the receiver compresses: no ACK leaves yet.
    feed(&mut b, &segs[4..], t1);
    let t2 = t + ms(2 * D);
    feed(&mut a, &dupacks, t2);
    let re = a.output(t2);
    assert_eq!(re.len(), 1, "the retransmission alone");
    assert_eq!(re[0].repr.seq, segs[0].repr.seq);
    let ssthresh = a.tcb.ssthresh();
    // The hole is filled: the receiver acknowledges everything; it is lost.
    let lost = deliver(&mut b, &re, &[], t + ms(3 * D));
    let end = segs[19].repr.seq + mss;
    assert!(lost.iter().any(|w| w.repr.ack == end), "a cumulative ACK");
    assert_eq!(b.rx.take(), data);
    assert!(a.tcb.in_recovery());
    let rto_at = t2 + a.tcb.rto();
    let pto = a.tcb.next_timeout().expect("probe timer");
    assert!(
        pto <= t2 + ms(5 * D) && pto < rto_at,
        "PTO {pto:?}, RTO {rto_at:?}"
    );
    a.timer(pto);
    let probe = a.output(pto);
    assert_eq!(probe.len(), 1);
    assert_eq!(probe[0].repr.seq, segs[19].repr.seq, "the last segment");
    assert_eq!(a.tcb.stats().recovery_probes, 1);
    assert_eq!(a.tcb.stats().tlp_probes, 0);
    let acks = deliver(&mut b, &probe, &[], pto + ms(D));
    assert_eq!(blocks(&acks[0]), vec![(segs[19].repr.seq, end)], "D-SACK");
    feed(&mut a, &acks, pto + ms(2 * D));
    assert_eq!(a.tcb.bytes_in_flight(), 0);
    assert!(!a.tcb.in_recovery());
    assert_eq!(a.tcb.stats().timeouts, 0);
    assert_eq!(a.tcb.stats().cwnd_undos, 0, "the loss was real");
    assert_eq!(a.tcb.ssthresh(), ssthresh);
}

/// While ACKs keep reporting delivery the recovery probe never fires: each
/// one restarts it.
#[test]
fn established_recovery_with_running_ack_clock_sends_no_probe() {
    let (mut a, mut b, t) = warm(&cfg(CcKind::Cubic, true));
    let mss = a.tcb.mss();
    let data = pattern(60 * mss, 15);
    a.write(&data);
    let mut now = t;
    let mut segs = a.output(now);
    let mut first = true;
    for _ in 0..200 {
        if segs.is_empty() {
            break;
        }
        now = now + ms(D);
        let drop: &[usize] = if first { &[0] } else { &[] };
        first = false;
        let acks = deliver(&mut b, &segs, drop, now);
        now = now + ms(D);
        segs.clear();
        for ack in &acks {
            a.input(ack, now);
            segs.extend(a.output(now));
        }
        if let Some(at) = a.tcb.next_timeout() {
            assert!(at > now, "no timer due while ACKs flow");
        }
    }
    assert_eq!(b.rx.take(), data);
    assert!(a.tcb.stats().sack_recoveries >= 1);
    assert_eq!(a.tcb.stats().recovery_probes, 0);
    assert_eq!(a.tcb.stats().timeouts, 0);
}

/// RFC 9937: a SACK recovery ends with cwnd = ssthresh, also when the full
/// ACK covers everything in flight (RFC 6582's FlightSize + SMSS would
/// leave 2 segments).
#[test]
fn established_sack_recovery_full_ack_of_everything_leaves_cwnd_at_ssthresh() {
    let (mut a, mut b, t, mss, data, segs) = flight(20, 16);
    let acks = deliver(&mut b, &segs, &[0], t + ms(D));
    feed(&mut a, &acks, t + ms(2 * D));
    assert!(a.tcb.in_recovery());
    let ssthresh = a.tcb.ssthresh();
    let re = a.output(t + ms(2 * D));
    let acks = deliver(&mut b, &re, &[], t + ms(3 * D));
    feed(&mut a, &acks, t + ms(4 * D));
    assert!(!a.tcb.in_recovery());
    assert_eq!(
        a.tcb.bytes_in_flight(),
        0,
        "the full ACK covered everything"
    );
    assert_eq!(a.tcb.cwnd(), ssthresh);
    assert!(ssthresh >= 10 * mss, "ssthresh {ssthresh}");
    assert_eq!(b.rx.take(), data);
}

/// When every ACK of a flight is lost, the probe carries two full segments
/// of new data, so that the receiver ACKs at once (every second segment)
/// instead of after its delayed-ACK time.
#[test]
fn established_all_acks_lost_probe_sends_two_new_segments_and_is_acked_at_once() {
    let (mut a, mut b, t, mss, _, segs) = flight(30, 17);
    assert_eq!(segs.len(), 20, "the initial window");
    let lost = deliver(&mut b, &segs, &[], t + ms(D));
    assert!(!lost.is_empty());
    let pto = a.tcb.next_timeout().expect("probe timer");
    assert!(pto < t + a.tcb.rto());
    a.timer(pto);
    let probe = a.output(pto);
    assert_eq!(probe.len(), 2, "two segments of new data");
    assert_eq!(probe[0].repr.seq, segs[19].repr.seq + mss);
    assert_eq!(probe[1].repr.seq, probe[0].repr.seq + mss);
    assert_eq!(a.tcb.stats().tlp_probes, 1);
    let acks = deliver(&mut b, &probe, &[], pto + ms(D));
    let end = probe[1].repr.seq + mss;
    assert!(
        acks.iter().any(|w| w.repr.ack == end),
        "an immediate ACK of both"
    );
    feed(&mut a, &acks, pto + ms(2 * D));
    assert!(a.tcb.snd_una() >= end);
    assert_eq!(a.tcb.stats().timeouts, 0);
}

/// A D-SACK that undoes the reduction while the recovery is still open
/// (a later hole not yet repaired) leaves the restored cwnd at the
/// recovery's end, not ssthresh, which the undo made infinite.
#[test]
fn established_dsack_undo_inside_recovery_keeps_restored_cwnd_at_exit() {
    let (mut a, mut b, t, _, data, segs) = flight(20, 17);
    let cwnd_before = a.tcb.cwnd();
    // Segment 2 is late, segment 18 lost.
    let acks = deliver(&mut b, &segs, &[2, 18], t + ms(D));
    feed(&mut a, &acks, t + ms(2 * D));
    assert!(a.tcb.in_recovery());
    let re = a.output(t + ms(2 * D));
    assert_eq!(re.len(), 1);
    assert_eq!(re[0].repr.seq, segs[2].repr.seq);
    // The late original fills hole 2: a partial ACK, up to hole 18.
    let ack1 = deliver(&mut b, &segs[2..3], &[], t + ms(2 * D + 1));
    feed(&mut a, &ack1, t + ms(3 * D + 1));
    assert!(a.tcb.in_recovery());
    // The retransmission of 2 comes back D-SACKed: the reduction is undone.
    let ack2 = deliver(&mut b, &re, &[], t + ms(3 * D));
    feed(&mut a, &ack2, t + ms(4 * D));
    assert_eq!(a.tcb.stats().cwnd_undos, 1);
    assert!(a.tcb.in_recovery(), "hole 18 is still open");
    let restored = a.tcb.cwnd();
    assert!(restored >= cwnd_before);
    // Segment 18 is repaired (RACK or the probe) and the recovery ends.
    let mut now = t + ms(4 * D);
    for _ in 0..20 {
        if !a.tcb.in_recovery() {
            break;
        }
        now = now + ms(5);
        a.timer(now);
        let out = a.output(now);
        let acks = deliver(&mut b, &out, &[], now + ms(D));
        feed(&mut a, &acks, now + ms(2 * D));
    }
    assert!(!a.tcb.in_recovery());
    assert_eq!(a.tcb.cwnd(), restored);
    assert_eq!(b.rx.take(), data);
}

/// The out-of-order arrivals of one receive batch beyond the third per
/// rcv_nxt share one ACK (`TcpConfig::sack_compress`, as Linux's
/// `tcp_comp_sack`): a batch of ten gets three duplicate ACKs, each with the
/// SACK block of all ten; a later batch of four gets one.
#[test]
fn established_out_of_order_batch_beyond_three_dupacks_shares_one_ack() {
    let (_a, mut b, t, mss, _, segs) = flight(20, 15);
    let t1 = t + ms(D);
    let end = |i: usize| segs[i].repr.seq + mss;
    feed(&mut b, &segs[1..11], t1);
    let dupacks = b.output(t1);
    assert_eq!(dupacks.len(), 3);
    for w in &dupacks {
        assert_eq!(w.repr.ack, segs[0].repr.seq);
        assert_eq!(blocks(w), vec![(segs[1].repr.seq, end(10))]);
    }
    feed(&mut b, &segs[11..15], t1);
    let one = b.output(t1);
    assert_eq!(one.len(), 1);
    assert_eq!(blocks(&one[0]), vec![(segs[1].repr.seq, end(14))]);
    assert_eq!(b.tcb.stats().acks_compressed, 7 + 3);
    // Without compression, one each.
    b.tcb.cfg.sack_compress = false;
    feed(&mut b, &segs[15..18], t1);
    assert_eq!(b.output(t1).len(), 3);
}

#[test]
fn established_tail_loss_probe_after_the_recovery_leaves_its_undo_to_the_recovery() {
    // As above, but the D-SACK of the spurious retransmission comes late:
    // after the recovery, new data and that data's tail loss probe (a
    // resent segment) went out. The probe is no retransmission of the
    // recovery, so the recovery's one D-SACK still undoes the reduction.
    let (mut a, mut b, t, mss, _, segs) = flight(20, 6);
    let acks = deliver(&mut b, &segs, &[2], t + ms(D));
    feed(&mut a, &acks, t + ms(2 * D));
    let re = a.output(t + ms(2 * D));
    assert_eq!(re.len(), 1);
    let ack1 = deliver(&mut b, &segs[2..3], &[], t + ms(2 * D + 1));
    let ack2 = deliver(&mut b, &re, &[], t + ms(3 * D));
    feed(&mut a, &ack1, t + ms(3 * D + 1));
    assert!(!a.tcb.in_recovery());
    assert_eq!(a.tcb.stats().cwnd_undos, 0);
    a.write(&pattern(mss, 7));
    let tail = a.output(t + ms(3 * D + 1));
    assert_eq!(tail.len(), 1, "new data, lost");
    let pto = a.tcb.next_timeout().expect("probe timer");
    a.timer(pto);
    let probe = a.output(pto);
    assert_eq!(probe.len(), 1);
    assert_eq!(probe[0].repr.seq, tail[0].repr.seq, "the tail sent again");
    assert_eq!(a.tcb.stats().tlp_probes, 1);
    feed(&mut a, &ack2, pto + ms(1));
    assert_eq!(a.tcb.stats().spurious_retransmits, 1);
    assert_eq!(a.tcb.stats().cwnd_undos, 1);
}

/// Reordering, not loss (the echo matrix's 2 ms + 5 % reorder, where a
/// corestack server resent hundreds of delivered segments and then crawled
/// for seconds): 3, 4 and 5 of a flight of 20 arrive before 2, which
/// DupThresh deems lost (RFC 6675), and the recovery resends it. Then the
/// original 2 and the rest of the flight come in order: each ACK is
/// partial (below the recovery point) and carries no SACK block, as the
/// receiver holds nothing out of order. That says nothing about the
/// segment at snd_una, sent after everything delivered: nothing is resent.
#[test]
fn established_partial_acks_of_a_reordered_flight_resend_nothing() {
    let (mut a, mut b, t, _, data, segs) = flight(20, 18);
    let acks = deliver(&mut b, &segs[..6], &[2], t + ms(D));
    feed(&mut a, &acks, t + ms(2 * D));
    assert!(a.tcb.in_recovery());
    let re = a.output(t + ms(2 * D));
    assert_eq!(re.len(), 1);
    assert_eq!(re[0].repr.seq, segs[2].repr.seq);
    let mut resent = Vec::new();
    for i in [2].into_iter().chain(6..20) {
        let acks = deliver(&mut b, &segs[i..=i], &[], t + ms(D));
        feed(&mut a, &acks, t + ms(2 * D));
        let out = a.output(t + ms(2 * D));
        resent.extend(
            out.iter()
                .filter(|w| !w.payload.is_empty())
                .map(|w| w.repr.seq),
        );
    }
    assert_eq!(resent, vec![], "retransmissions of segments in flight");
    assert_eq!(a.tcb.bytes_in_flight(), 0);
    let acks = deliver(&mut b, &re, &[], t + ms(3 * D));
    feed(&mut a, &acks, t + ms(4 * D));
    assert_eq!(b.rx.take(), data);
}

/// Two holes, both resent; the first retransmission is lost, the second
/// comes back SACKed, with the TSecr of the last segment that advanced
/// rcv_nxt (RFC 7323 §4.3: out-of-order data does not update TS.Recent),
/// older than the retransmission. That echo says nothing about which copy
/// arrived: the SACK of a retransmission updates RACK by its RTT alone, as
/// Linux's `tcp_rack_advance` does, and the lost retransmission, sent
/// before it, is found within a round trip, not by the RTO (the echo
/// matrix's 200 ms tails at 5 % loss).
#[test]
fn established_sacked_retransmission_with_old_tsecr_finds_lost_retransmission() {
    let (mut a, mut b, t, _, data, segs) = flight(20, 19);
    assert!(a.tcb.opts.ts, "timestamps in use");
    let acks = deliver(&mut b, &segs, &[2, 6], t + ms(D));
    feed(&mut a, &acks, t + ms(2 * D));
    let t2 = t + ms(2 * D);
    let re = a.output(t2);
    let seqs: Vec<SeqNum> = re.iter().map(|w| w.repr.seq).collect();
    assert_eq!(seqs, vec![segs[2].repr.seq, segs[6].repr.seq]);
    // The retransmission of 2 is lost; that of 6 arrives.
    let acks = deliver(&mut b, &re, &[0], t2 + ms(D));
    assert!(acks.iter().all(|w| w.repr.ack == segs[2].repr.seq));
    feed(&mut a, &acks, t2 + ms(2 * D));
    let at = a.tcb.next_timeout().expect("a timer");
    assert!(
        at < t2 + ms(2 * D + 20),
        "RACK fires well before the RTO: {at:?}"
    );
    a.timer(at);
    let again = a.output(at);
    assert_eq!(
        again.iter().map(|w| w.repr.seq).collect::<Vec<_>>(),
        vec![segs[2].repr.seq]
    );
    assert_eq!(a.tcb.stats().timeouts, 0);
    let acks = deliver(&mut b, &again, &[], at + ms(D));
    feed(&mut a, &acks, at + ms(2 * D));
    assert_eq!(b.rx.take(), data);
}

/// A spurious retransmission's late original, SACKed, is not taken for
/// the retransmission when it comes back sooner than half a smoothed RTT
/// after it (though later than min_rtt, which a queue that built up
/// leaves far behind): else RACK deems everything sent before that
/// retransmission lost, here the retransmission of a real hole still in
/// flight (hundreds of spurious retransmissions per run in the echo
/// matrix at 5 % loss).
#[test]
fn established_late_original_of_spurious_retransmission_marks_nothing_lost() {
    let (mut a, mut b, mut t) = warm(&cfg(CcKind::Cubic, true));
    let mss = a.tcb.mss();
    // A queue builds up: flights whose ACKs come back after 80 ms.
    for k in 0..30u8 {
        a.write(&pattern(4 * mss, k));
        let segs = a.output(t);
        let acks = deliver(&mut b, &segs, &[], t + ms(D));
        feed(&mut a, &acks, t + ms(80));
        b.rx.take();
        t = t + ms(100);
        b.timer(t);
        feed(&mut a, &b.output(t), t);
    }
    assert!(a.tcb.srtt_us() > 60_000, "srtt {} µs", a.tcb.srtt_us());
    let data = pattern(20 * mss, 40);
    a.write(&data);
    let segs = a.output(t);
    assert_eq!(segs.len(), 20);
    // 2 is lost, 6 is late: DupThresh deems both lost.
    let acks = deliver(&mut b, &segs, &[2, 6], t + ms(D));
    let tr = t + ms(2 * D);
    feed(&mut a, &acks, tr);
    let re = a.output(tr);
    let seqs: Vec<SeqNum> = re.iter().map(|w| w.repr.seq).collect();
    assert_eq!(seqs, vec![segs[2].repr.seq, segs[6].repr.seq]);
    // The original 6 comes back SACKed 22 ms after its retransmission left
    // (min_rtt is 20 ms); the retransmission of 2 is still on its way.
    let acks = deliver(&mut b, &segs[6..7], &[], tr + ms(11));
    feed(&mut a, &acks, tr + ms(22));
    let mut resent = Vec::new();
    let mut now = tr + ms(22);
    resent.extend(a.output(now).iter().map(|w| w.repr.seq));
    while let Some(at) = a.tcb.next_timeout() {
        if at >= tr + ms(40) {
            break;
        }
        now = at;
        a.timer(now);
        resent.extend(a.output(now).iter().map(|w| w.repr.seq));
    }
    assert_eq!(
        resent,
        vec![],
        "resent while the retransmission of 2 is in flight"
    );
    let acks = deliver(&mut b, &re[..1], &[], tr + ms(40));
    feed(&mut a, &acks, tr + ms(50));
    assert_eq!(a.tcb.stats().timeouts, 0);
    assert_eq!(a.tcb.bytes_in_flight(), 0);
    assert_eq!(b.rx.take(), data);
}
