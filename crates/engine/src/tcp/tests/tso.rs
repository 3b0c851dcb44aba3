//! TSO: whole-MSS segments in one segment the port cuts apart.

use super::delayed::*;
use super::*;
use crate::tcp::CcKind;

/// TSO: new data leaves as one segment of whole MSS pieces, which the port
/// cuts into exactly what the Tcb without TSO sends; each piece is tracked
/// on its own.
#[test]
fn established_tso_sends_whole_mss_pieces_that_cut_back_to_the_plain_segments() {
    let c = cfg(CcKind::Cubic, true);
    let (mut a, _b, t) = warm(&c);
    let (mut plain, _pb, _) = warm(&c);
    let mss = a.tcb.mss();
    a.tcb.snd.gso_max = 64_000;
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
    a.tcb.snd.gso_max = 64_000;
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
    a.tcb.snd.gso_max = 5 * a.tcb.mss() + 7;
    let mss = a.tcb.mss();
    a.write(&pattern(12 * mss, 5));
    let raw = a.output_raw(t);
    let sizes: Vec<usize> = raw.iter().map(|s| s.repr.payload_len).collect();
    assert_eq!(sizes, vec![5 * mss, 5 * mss, 2 * mss], "gso_max caps each");
    let (mut a, _b, t) = warm(&cfg(CcKind::Cubic, true));
    a.tcb.snd.gso_max = 64_000;
    a.write(&pattern(30 * mss, 5));
    let mut n = 0;
    let free = a.rx.free();
    let sent = a.tcb.poll_output(t, &a.tx, free, 7, &mut |s: &Segment| {
        n += s.segments();
        assert!(s.segments() <= 7);
    });
    assert_eq!((sent, n), (7, 7), "the budget counts segments");
}
