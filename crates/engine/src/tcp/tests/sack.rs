//! SACK (RFC 2018), D-SACK (RFC 2883), SACK-based recovery (RFC 6675),
//! RACK-TLP (RFC 8985) and ECN (RFC 3168) between two Tcbs, with a one-way
//! delay of 10 ms so that RTTs are real.

use wire::tcp::TcpFlags;

use super::*;
use crate::tcp::{CcKind, TcpConfig};

const D: u64 = 10;

fn cfg(cc: CcKind, sack: bool) -> TcpConfig {
    TcpConfig {
        cc,
        sack,
        initial_cwnd_segments: 20,
        ..TcpConfig::default()
    }
}

/// Handshake and one 1-byte exchange with a one-way delay of D ms; returns
/// the pair idle, with `a` knowing b's window, and the time.
fn warm(cfg: &TcpConfig) -> (Host, Host, Instant) {
    let d = ms(D);
    let mut a = Host::connect(cfg, ISS_A);
    let syn = a.output(T0);
    let mut b = Host::accept(cfg, &syn[0], ISS_B);
    let sa = b.output(T0 + d);
    a.input(&sa[0], T0 + d * 2);
    a.write(b"x");
    for s in a.output(T0 + d * 2) {
        b.input(&s, T0 + d * 3);
    }
    b.rx.take();
    let t = T0 + d * 3 + ms(40);
    b.timer(t);
    for s in b.output(t) {
        a.input(&s, t + d);
    }
    assert_eq!(a.tcb.bytes_in_flight(), 0);
    (a, b, t + d)
}

/// A warmed-up CUBIC pair with SACK after `a` wrote `segments` MSS of
/// `pattern(.., salt)` and sent its first flight at `t`:
/// (a, b, t, mss, data, the flight).
type Flight = (Host, Host, Instant, usize, Vec<u8>, Vec<Wire>);

fn flight(segments: usize, salt: u8) -> Flight {
    let (mut a, b, t) = warm(&cfg(CcKind::Cubic, true));
    let mss = a.tcb.mss();
    let data = pattern(segments * mss, salt);
    a.write(&data);
    let segs = a.output(t);
    (a, b, t, mss, data, segs)
}

/// Delivers `segs` (except the indices in `drop`) to `to` at `now`,
/// returning everything `to` sends in reply.
fn deliver(to: &mut Host, segs: &[Wire], drop: &[usize], now: Instant) -> Vec<Wire> {
    let mut out = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        if !drop.contains(&i) {
            to.input(s, now);
            out.extend(to.output(now));
        }
    }
    out
}

fn feed(to: &mut Host, segs: &[Wire], now: Instant) {
    for s in segs {
        to.input(s, now);
    }
}

fn blocks(w: &Wire) -> Vec<(SeqNum, SeqNum)> {
    w.repr
        .options
        .sack_blocks()
        .iter()
        .map(|b| (b.left, b.right))
        .collect()
}

#[test]
fn syn_sent_sack_on_both_ends_negotiates_sack() {
    let (a, b, _) = warm(&TcpConfig::default());
    assert!(a.tcb.sack_enabled() && b.tcb.sack_enabled());
    let (a, b, _) = warm(&cfg(CcKind::Cubic, false));
    assert!(!a.tcb.sack_enabled() && !b.tcb.sack_enabled());
}

#[test]
fn established_out_of_order_arrivals_ack_sack_blocks_most_recent_first() {
    let (mut a, mut b, t) = warm(&cfg(CcKind::Cubic, true));
    let mss = a.tcb.mss();
    a.write(&pattern(10 * mss, 1));
    let segs = a.output(t);
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
    let (mut a, mut b, t) = warm(&cfg(CcKind::Cubic, true));
    let mss = a.tcb.mss();
    a.write(&pattern(2 * mss, 2));
    let segs = a.output(t);
    deliver(&mut b, &segs, &[], t);
    b.input(&segs[0], t);
    let out = b.output(t);
    assert_eq!(out.len(), 1);
    // RFC 2883: the first block reports the duplicate, below the ACK.
    assert_eq!(out[0].repr.ack, ISS_A + 2 + 2 * mss);
    assert_eq!(blocks(&out[0]), vec![(ISS_A + 2, ISS_A + 2 + mss)]);
    assert_eq!(b.tcb.stats().dsacks_sent, 1);
}

/// Segments 2, 6 and 11 of a 20-segment flight are lost: the recovery
/// retransmits exactly those holes at once and one round trip repairs
/// them. Returns the retransmissions.
fn three_holes_repaired_in_one_round_trip(
    a: &mut Host,
    b: &mut Host,
    (t, mss, data, segs): (Instant, usize, &[u8], &[Wire]),
) -> Vec<Wire> {
    assert_eq!(segs.len(), 20);
    let acks = deliver(b, segs, &[2, 6, 11], t + ms(D));
    feed(a, &acks, t + ms(2 * D));
    assert!(a.tcb.in_recovery());
    assert_eq!(a.tcb.sacked_bytes(), 17 * mss - 2 * mss);
    let re = a.output(t + ms(2 * D));
    let seqs: Vec<SeqNum> = re.iter().map(|w| w.repr.seq).collect();
    let seq = |i: usize| ISS_A + 2 + i * mss;
    assert_eq!(seqs, vec![seq(2), seq(6), seq(11)], "exactly the holes");
    let acks = deliver(b, &re, &[], t + ms(3 * D));
    feed(a, &acks, t + ms(4 * D));
    assert!(!a.tcb.in_recovery());
    assert_eq!(a.tcb.bytes_in_flight(), 0);
    assert_eq!(a.tcb.stats().timeouts, 0);
    assert_eq!(b.rx.take(), data);
    re
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
    assert!(pto < rto_at, "PTO {pto:?} before RTO {rto_at:?}");
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

fn ecn_cfg(cc: CcKind) -> TcpConfig {
    TcpConfig {
        ecn: true,
        ..cfg(cc, true)
    }
}

#[test]
fn syn_sent_ecn_configured_negotiates_with_ece_cwr_and_data_is_ect() {
    let c = ecn_cfg(CcKind::Cubic);
    let mut a = Host::connect(&c, ISS_A);
    let syn = a.output(T0);
    assert!(syn[0].flags().ece() && syn[0].flags().cwr());
    let mut b = Host::accept(&c, &syn[0], ISS_B);
    let sa = b.output(T0);
    assert!(sa[0].flags().ece() && !sa[0].flags().cwr());
    a.input(&sa[0], T0);
    assert!(a.tcb.ecn_enabled() && b.tcb.ecn_enabled());
    a.write(&[1; 100]);
    let out = a.output_ect(T0);
    assert!(out.iter().any(|(w, ect)| w.payload.len() == 100 && *ect));
}

#[test]
fn syn_sent_default_config_offers_no_ecn() {
    let c = TcpConfig::default();
    let mut a = Host::connect(&c, ISS_A);
    let syn = a.output(T0);
    assert!(!syn[0].flags().ece() && !syn[0].flags().cwr());
    // A peer offering ECN is not answered with ECE.
    let ecn_syn = {
        let mut s = syn[0].clone();
        s.repr.flags = TcpFlags(s.repr.flags.0 | TcpFlags::ECE | TcpFlags::CWR);
        s
    };
    let mut b = Host::accept(&c, &ecn_syn, ISS_B);
    let sa = b.output(T0);
    assert!(!sa[0].flags().ece());
    assert!(!b.tcb.ecn_enabled());
    a.input(&sa[0], T0);
    a.write(&[1; 100]);
    assert!(a.output_ect(T0).iter().all(|(_, ect)| !ect));
}

#[test]
fn established_ce_mark_echoes_ece_until_cwr_and_sender_reduces_once_per_window() {
    let (mut a, mut b, t) = warm(&ecn_cfg(CcKind::Cubic));
    assert!(a.tcb.ecn_enabled());
    let mss = a.tcb.mss();
    a.write(&pattern(4 * mss, 8));
    let segs = a.output(t);
    let cwnd = a.tcb.cwnd();
    b.tcb.input_ecn(true);
    b.input(&segs[0], t + ms(D));
    b.input(&segs[1], t + ms(D));
    let ack1 = b.output(t + ms(D));
    assert!(ack1[0].flags().ece(), "CE echoed");
    b.input(&segs[2], t + ms(D));
    b.input(&segs[3], t + ms(D));
    let ack2 = b.output(t + ms(D));
    assert!(ack2[0].flags().ece(), "ECE repeats until CWR");
    a.input(&ack1[0], t + ms(2 * D));
    assert_eq!(a.tcb.stats().ecn_reductions, 1);
    assert_eq!(a.tcb.cwnd(), (cwnd as f64 * 0.7) as usize);
    a.input(&ack2[0], t + ms(2 * D));
    assert_eq!(a.tcb.stats().ecn_reductions, 1, "once per window");
    // The next new data carries CWR; b stops echoing.
    a.write(&pattern(mss, 9));
    let out = a.output(t + ms(2 * D));
    assert!(out[0].flags().cwr());
    b.input(&out[0], t + ms(3 * D));
    b.timer(t + ms(3 * D + 40));
    let ack3 = b.output(t + ms(3 * D + 40));
    assert!(!ack3[0].flags().ece());
}

#[test]
fn established_dctcp_echoes_ce_exactly_and_cuts_by_alpha() {
    let (mut a, mut b, t) = warm(&cfg(CcKind::Dctcp, true));
    assert!(a.tcb.ecn_enabled(), "DCTCP offers ECN on its own");
    let mss = a.tcb.mss();
    a.write(&pattern(2 * mss, 10));
    let segs = a.output(t);
    let cwnd = a.tcb.cwnd();
    b.tcb.input_ecn(true);
    b.input(&segs[0], t + ms(D));
    let ack1 = b.output(t + ms(D));
    assert!(ack1[0].flags().ece(), "CE state change is ACKed at once");
    b.input(&segs[1], t + ms(D));
    let ack2 = b.output(t + ms(D));
    assert!(!ack2[0].flags().ece(), "unmarked segment: no ECE");
    let alpha_before = a.tcb.dctcp_alpha().expect("dctcp");
    a.input(&ack1[0], t + ms(2 * D));
    // The window ends with all bytes marked: alpha += g * (1 - alpha);
    // then cwnd * (1 - alpha/2).
    let alpha = a.tcb.dctcp_alpha().expect("dctcp");
    assert_eq!(alpha, alpha_before - (alpha_before >> 4) + (1024 >> 4));
    assert_eq!(a.tcb.cwnd(), cwnd - cwnd * alpha as usize / 2048);
    assert_eq!(a.tcb.stats().ecn_reductions, 1);
}

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

/// TSO: new data leaves as one segment of whole MSS pieces, which the port
/// cuts into exactly what the Tcb without TSO sends; each piece is tracked
/// on its own.
#[test]
fn established_tso_sends_whole_mss_pieces_that_cut_back_to_the_plain_segments() {
    let c = cfg(CcKind::Cubic, true);
    let (mut a, _b, t) = warm(&c);
    let (mut plain, _pb, _) = warm(&c);
    let mss = a.tcb.mss();
    a.tcb.gso_max = 64_000;
    let data = pattern(20 * mss + 100, 8);
    a.write(&data);
    plain.write(&data);
    let raw = a.output_raw(t);
    // cwnd is 20 segments: all 20 whole ones in one TSO segment; the tail
    // waits (Nagle) like in the plain Tcb.
    assert_eq!(raw.len(), 1, "{raw:?}");
    assert_eq!(raw[0].gso_size, mss);
    assert_eq!(raw[0].repr.payload_len, 20 * mss);
    assert_eq!(raw[0].segments(), 20);
    let expect = plain.output(t);
    assert_eq!(expect.len(), 20);
    assert_eq!(cut(&raw[0], &data[..20 * mss]), expect);
    assert_eq!(a.tcb.bytes_in_flight(), plain.tcb.bytes_in_flight());
}

/// The same three losses with TSO on: the holes are retransmitted MSS by
/// MSS at once, and the transfer completes.
#[test]
fn established_tso_three_losses_in_one_window_sack_retransmits_exactly_the_holes() {
    let (mut a, mut b, t) = warm(&cfg(CcKind::Cubic, true));
    a.tcb.gso_max = 64_000;
    let mss = a.tcb.mss();
    let data = pattern(20 * mss, 3);
    a.write(&data);
    let segs = a.output(t);
    let re = three_holes_repaired_in_one_round_trip(&mut a, &mut b, (t, mss, &data, &segs));
    assert!(re.iter().all(|w| w.payload.len() == mss));
}

/// TSO never takes more than the window allows, nor a segment the
/// retransmission queue cannot track, nor more than the caller's budget.
#[test]
fn established_tso_stays_within_window_queue_and_budget() {
    let (mut a, _b, t) = warm(&cfg(CcKind::Cubic, true));
    a.tcb.gso_max = 5 * a.tcb.mss() + 7;
    let mss = a.tcb.mss();
    a.write(&pattern(12 * mss, 5));
    let raw = a.output_raw(t);
    let sizes: Vec<usize> = raw.iter().map(|s| s.repr.payload_len).collect();
    assert_eq!(sizes, vec![5 * mss, 5 * mss, 2 * mss], "gso_max caps each");
    let (mut a, _b, t) = warm(&cfg(CcKind::Cubic, true));
    a.tcb.gso_max = 64_000;
    a.write(&pattern(30 * mss, 5));
    let mut n = 0;
    let free = a.rx.free();
    let sent = a.tcb.poll_output(t, &a.tx, free, 7, &mut |s: &Segment| {
        n += s.segments();
        assert!(s.segments() <= 7);
    });
    assert_eq!((sent, n), (7, 7), "the budget counts segments");
}

/// Delivers segments 1 to 3 of a flight whose first segment was lost, one
/// at a time, as a Linux receiver answers them: three immediate duplicate
/// ACKs, which are returned.
fn three_dupacks(b: &mut Host, segs: &[Wire], now: Instant) -> Vec<Wire> {
    let mut dupacks = Vec::new();
    for s in &segs[1..4] {
        b.input(s, now);
        dupacks.extend(b.output(now));
    }
    assert_eq!(dupacks.len(), 3);
    dupacks
}

/// A Linux receiver sends the first three duplicate ACKs at once and then
/// compresses SACKs (one ACK for many out-of-order segments). The sender
/// takes all the SACK information of the compressed ACK, retransmits the
/// hole and sends new data with the room that leaves.
#[test]
fn established_compressed_sack_after_three_dupacks_is_used_whole() {
    let (mut a, mut b, t, mss, _, segs) = flight(40, 12);
    assert_eq!(segs.len(), 20);
    let t1 = t + ms(D);
    let dupacks = three_dupacks(&mut b, &segs, t1);
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
    // RFC 6937: the ACK that starts recovery delivered one segment, which
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

/// RFC 6937: during recovery, each duplicate ACK clocks out about
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
    let (mut a, mut b, t, mss, data, segs) = flight(20, 14);
    assert_eq!(segs.len(), 20);
    let t1 = t + ms(D);
    let dupacks = three_dupacks(&mut b, &segs, t1);
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
