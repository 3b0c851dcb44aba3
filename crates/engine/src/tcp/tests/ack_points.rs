//! Receiver ACKs for a batch of segments processed before one
//! `poll_output` (RFC 5681 §4.2): one per two full-sized segments and one
//! at a filled hole, each with its own acknowledgment number, as a
//! receiver that ACKs segment by segment sends them; not one stretch ACK
//! whose loss leaves the sender with nothing but its RTO.

use super::*;

/// An established pair after `a` sent `n` full segments of
/// `pattern(n * mss, salt)` at T0 (returned with the MSS).
fn established_sent(n: usize, salt: u8) -> (Host, Host, usize, Vec<Wire>) {
    let (mut a, b) = established();
    let mss = a.tcb.snd.mss;
    a.write(&pattern(n * mss, salt));
    let segs = a.output(T0);
    assert_eq!(segs.len(), n);
    (a, b, mss, segs)
}

/// The sequence numbers of the data segments `a` sends while it takes
/// `acks` one by one, 1 ms after T0.
fn resent_answering(a: &mut Host, acks: &[Wire]) -> Vec<SeqNum> {
    let now = T0 + core::time::Duration::from_millis(1);
    let mut resent = Vec::new();
    for w in acks {
        a.input(w, now);
        let out = a.output(now);
        resent.extend(
            out.iter()
                .filter(|s| !s.payload.is_empty())
                .map(|s| s.repr.seq),
        );
    }
    resent
}

#[test]
fn established_batch_of_six_segments_gets_an_ack_per_two() {
    let (mut a, mut b, mss, segs) = established_sent(6, 1);
    for s in &segs {
        b.input(s, T0);
    }
    let acks = b.output(T0);
    let nums: Vec<SeqNum> = acks.iter().map(|w| w.repr.ack).collect();
    let base = ISS_A + 1;
    assert_eq!(nums, vec![base + 2 * mss, base + 4 * mss, base + 6 * mss]);
    // The right edge never moves left (RFC 9293 §3.8.6.2.2).
    let shift = b.tcb.rcv.wscale;
    let edges: Vec<SeqNum> = acks
        .iter()
        .map(|w| w.repr.ack + (usize::from(w.repr.window) << shift))
        .collect();
    assert!(edges.windows(2).all(|e| e[0] <= e[1]), "{edges:?}");
    // Each is new data to the sender, none a duplicate ACK.
    for w in &acks {
        a.input(w, T0);
    }
    assert_eq!(a.tcb.stats().fast_retransmits, 0);
    assert_eq!(a.tcb.snd.una, base + 6 * mss);
    assert_eq!(a.tcb.rec.dupacks, 0);
}

#[test]
fn established_hole_filled_then_new_data_in_one_batch_acked_twice() {
    let (mut a, mut b, mss, segs) = established_sent(4, 2);
    // The first is lost; the other three arrive out of order.
    for s in &segs[1..] {
        b.input(s, T0);
    }
    let dup = b.output(T0);
    assert_eq!(dup.len(), 3, "one duplicate ACK per out-of-order segment");
    // The retransmission fills the hole; one more segment follows in the
    // same batch.
    a.write(&pattern(mss, 3));
    b.input(&segs[0], T0);
    let mut next = segs[3].clone();
    next.repr.seq = segs[3].repr.seq + mss;
    next.payload = pattern(mss, 3);
    b.input(&next, T0);
    let acks = b.output(T0);
    let nums: Vec<SeqNum> = acks.iter().map(|w| w.repr.ack).collect();
    let base = ISS_A + 1;
    assert_eq!(nums, vec![base + 4 * mss, base + 5 * mss]);
}

#[test]
fn established_single_segment_still_delays_its_ack() {
    let (mut a, mut b) = established();
    a.write(&pattern(100, 4));
    let segs = a.output(T0);
    assert_eq!(segs.len(), 1);
    b.input(&segs[0], T0);
    assert!(b.output(T0).is_empty(), "delayed ACK (RFC 5681 §4.2)");
}

/// Segment 4 of 10 is lost; 0–3 and 5–9 arrive in one batch. The point ACK
/// at two segments is older than rcv_nxt, so it carries no SACK block: with
/// the batch's block (5–9) it would show 2–3 as a hole too, and the sender
/// would retransmit them (this is what sent a Linux client into a spurious
/// recovery and then a 200 ms RTO in the echo matrix).
#[test]
fn established_point_acks_below_a_hole_carry_no_sack_blocks() {
    let (mut a, mut b, mss, segs) = established_sent(10, 5);
    for (i, s) in segs.iter().enumerate() {
        if i != 4 {
            b.input(s, T0);
        }
    }
    let acks = b.output(T0);
    let base = ISS_A + 1;
    let hole = base + 4 * mss;
    let above = (base + 5 * mss, base + 10 * mss);
    assert_eq!(acks[0].repr.ack, base + 2 * mss);
    for w in &acks {
        if w.repr.ack < hole {
            assert_eq!(
                super::delayed::blocks(w),
                vec![],
                "point ACK {:?}",
                w.repr.ack
            );
        } else {
            assert_eq!(w.repr.ack, hole);
            assert_eq!(super::delayed::blocks(w), vec![above]);
        }
    }
    // The sender, answering ACK by ACK, retransmits only the lost segment.
    assert_eq!(resent_answering(&mut a, &acks), vec![hole]);
    assert_eq!(a.tcb.stats().spurious_retransmits, 0);
}

/// A receiver holding out-of-order data that also has data to send: the
/// ACK with the SACK blocks goes out before its data segments, which carry
/// none (RFC 2018 §4). Sent after them, a sender would first take the data
/// segments' cumulative ACK without the blocks (this sent a Linux client
/// into resending what it had delivered: D-SACKs in the echo matrix).
#[test]
fn established_sack_blocks_go_before_data_while_out_of_order_data_is_held() {
    let (mut a, mut b, mss, segs) = established_sent(4, 6);
    b.write(&pattern(3 * mss, 7));
    // The first is lost; the others arrive out of order.
    for s in &segs[1..] {
        b.input(s, T0);
    }
    let out = b.output(T0);
    let base = ISS_A + 1;
    let above = (base + mss, base + 4 * mss);
    assert!(out[0].payload.is_empty(), "an ACK first: {:?}", out[0].repr);
    assert_eq!(
        (out[0].repr.ack, super::delayed::blocks(&out[0])),
        (base, vec![above])
    );
    let first_data = out.iter().position(|w| !w.payload.is_empty());
    assert!(first_data.is_some(), "B's data goes too");
    // The sender takes them in order and resends only the lost segment.
    let resent = resent_answering(&mut a, &out);
    assert!(resent.iter().all(|&s| s == base), "{resent:?}");
}

/// Two holes filled in one batch that also brought new out-of-order
/// data: no intermediate ACK at the first hole's end, which could carry
/// neither the new range's block (it came in before) nor leave it out
/// without the sender's RACK taking that range for lost; the batch's ACK
/// reports the range.
#[test]
fn established_no_point_ack_while_out_of_order_data_is_held_above_it() {
    let (_a, mut b, mss, segs) = established_sent(8, 8);
    let base = ISS_A + 1;
    b.input(&segs[1], T0);
    b.input(&segs[2], T0);
    let _ = b.output(T0);
    // New out-of-order data, then both holes (0 and 3) filled.
    for i in [4, 5, 6, 0, 3] {
        b.input(&segs[i], T0);
    }
    assert_eq!(b.tcb.rcv.nxt, base + 7 * mss);
    let acks = b.output(T0);
    assert!(
        acks.iter().all(|w| w.repr.ack == base + 7 * mss),
        "{:?}",
        acks.iter().map(|w| w.repr.ack).collect::<Vec<_>>()
    );
}

/// One batch brings five new out-of-order ranges, more than an ACK's three
/// blocks (with timestamps): the batch's ACKs report every one of them, as
/// a receiver that ACKs segment by segment does, each ACK with its newest
/// arrival's range first and none newer (RFC 2018 §4): before each arrival
/// that pushes a reported range out of the three blocks, the ACK of that
/// moment, oldest first. Before, its duplicate ACKs were copies of one ACK
/// and two ranges went unreported: a sender's RACK takes those for lost
/// once it sees later segments SACKed.
#[test]
fn established_a_batchs_acks_report_every_range_it_brought() {
    let (_a, mut b, mss, segs) = established_sent(10, 9);
    let base = ISS_A + 1;
    for i in [1, 3, 5, 7, 9] {
        b.input(&segs[i], T0);
    }
    let range = |i: usize| (base + i * mss, base + (i + 1) * mss);
    let acks = b.output(T0);
    let firsts: Vec<_> = acks.iter().map(|w| super::delayed::blocks(w)[0]).collect();
    assert!(
        firsts.windows(2).all(|p| p[0] <= p[1]),
        "oldest first: {firsts:?}"
    );
    assert_eq!(firsts.last(), Some(&range(9)));
    let mut reported: Vec<(SeqNum, SeqNum)> = Vec::new();
    for w in &acks {
        let blocks = super::delayed::blocks(w);
        assert!(blocks.len() <= 3);
        assert!(
            blocks.windows(2).all(|p| p[0] > p[1]),
            "{blocks:?}: none newer than the first"
        );
        reported.extend(blocks);
    }
    reported.sort();
    reported.dedup();
    assert_eq!(reported, [1, 3, 5, 7, 9].map(range));
}

/// True if `w` tells the sender that segment `i` (of `mss` bytes from
/// `base`) arrived: by its acknowledgment number or a SACK block.
fn reports(w: &Wire, base: SeqNum, mss: usize, i: usize) -> bool {
    let (l, r) = (base + i * mss, base + (i + 1) * mss);
    w.repr.ack >= r
        || super::delayed::blocks(w)
            .iter()
            .any(|&(bl, br)| bl <= l && r <= br)
}

/// Checks that no ACK of `acks` reports an arrival of `order` (segment
/// numbers, in arrival order) while an earlier arrival is reported
/// neither by it nor by an ACK before it: a sender's RACK (RFC 8985 §6.2)
/// takes what was sent before a delivered segment, and is not reported,
/// for lost.
fn assert_reported_in_order(acks: &[Wire], base: SeqNum, mss: usize, order: &[usize]) {
    let mut seen = vec![false; order.len()];
    for w in acks {
        let Some(last) = (0..order.len())
            .rev()
            .find(|&k| reports(w, base, mss, order[k]))
        else {
            continue;
        };
        for k in 0..=last {
            let now = reports(w, base, mss, order[k]);
            assert!(
                seen[k] || now,
                "ACK {:?} {:?} reports segment {} but not {}, which came in before it",
                w.repr.ack,
                super::delayed::blocks(w),
                order[last],
                order[k]
            );
            seen[k] |= now;
        }
    }
    assert!(seen.iter().all(|&s| s), "unreported arrivals: {seen:?}");
}

/// The echo matrix's spurious retransmissions (a Linux client resent
/// hundreds of segments corestack held, 0.5x of Linux's goodput at 5 %
/// loss): one batch brought three new ranges, then the retransmissions
/// that filled the first hole. The ACK for the oldest new range went out
/// with the batch's final acknowledgment number (the filled hole) but
/// without the newer ranges, which had come in before the fill; the
/// client's RACK, seeing its retransmission delivered and the segments it
/// sent before it not SACKed, sent those again at once. Now every ACK is
/// one a receiver that ACKs segment by segment sent: its acknowledgment
/// number and blocks of one moment.
#[test]
fn established_acks_report_arrivals_in_order_across_a_filled_hole() {
    let (_a, mut b, mss, segs) = established_sent(10, 10);
    let base = ISS_A + 1;
    for i in [2, 3, 4] {
        b.input(&segs[i], T0);
    }
    let _ = b.output(T0);
    let order = [6, 8, 0, 1, 9];
    for &i in &order {
        b.input(&segs[i], T0);
    }
    let acks = b.output(T0);
    assert_eq!(acks.last().map(|w| w.repr.ack), Some(base + 5 * mss));
    assert_reported_in_order(&acks, base, mss, &order);
}

/// The same with holes filled between new ranges, in 200 orders of a
/// batch drawn from a seeded generator (some of the first five segments
/// held before, the rest of them and most of the next five shuffled):
/// every batch's ACKs report its arrivals in order.
#[test]
fn established_batches_with_fills_report_arrivals_in_order() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    for round in 0..200 {
        let (_a, mut b, mss, segs) = established_sent(10, 11);
        let base = ISS_A + 1;
        // Some of the first half arrived before; the batch brings the
        // rest of the first half and some of the second, shuffled.
        let mut early = Vec::new();
        for (i, s) in segs.iter().enumerate().take(5) {
            if next(2) == 0 && i != 0 {
                b.input(s, T0);
                early.push(i);
            }
        }
        let _ = b.output(T0);
        let mut order: Vec<usize> = (0..10)
            .filter(|i| !early.contains(i) && (*i < 5 || next(3) > 0))
            .collect();
        for k in (1..order.len()).rev() {
            order.swap(k, next(k + 1));
        }
        for &i in &order {
            b.input(&segs[i], T0);
        }
        let acks = b.output(T0);
        assert!(!acks.is_empty(), "round {round}: {order:?}");
        assert_reported_in_order(&acks, base, mss, &order);
    }
}
