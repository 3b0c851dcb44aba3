//! Two Tcbs with a one-way delay of 10 ms, so that RTTs are real: the
//! set-ups the SACK, recovery, ECN, cwnd and TSO tests share.

use super::*;
use crate::tcp::{CcKind, TcpConfig};

pub(super) const D: u64 = 10;

pub(super) fn cfg(cc: CcKind, sack: bool) -> TcpConfig {
    TcpConfig {
        cc,
        sack,
        initial_cwnd_segments: 20,
        // Flights of up to a few hundred segments leave in one output call
        // here; the engine grows a smaller queue between its calls.
        max_segments_in_flight: 1024,
        ..TcpConfig::default()
    }
}

/// Handshake and one 1-byte exchange with a one-way delay of D ms; returns
/// the pair idle, with `a` knowing b's window, and the time.
pub(super) fn warm(cfg: &TcpConfig) -> (Host, Host, Instant) {
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
pub(super) type Flight = (Host, Host, Instant, usize, Vec<u8>, Vec<Wire>);

pub(super) fn flight(segments: usize, salt: u8) -> Flight {
    let (mut a, b, t) = warm(&cfg(CcKind::Cubic, true));
    let mss = a.tcb.mss();
    let data = pattern(segments * mss, salt);
    a.write(&data);
    let segs = a.output(t);
    (a, b, t, mss, data, segs)
}

/// Delivers `segs` (except the indices in `drop`) to `to` at `now`,
/// returning everything `to` sends in reply.
pub(super) fn deliver(to: &mut Host, segs: &[Wire], drop: &[usize], now: Instant) -> Vec<Wire> {
    let mut out = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        if !drop.contains(&i) {
            to.input(s, now);
            out.extend(to.output(now));
        }
    }
    out
}

pub(super) fn feed(to: &mut Host, segs: &[Wire], now: Instant) {
    for s in segs {
        to.input(s, now);
    }
}

pub(super) fn blocks(w: &Wire) -> Vec<(SeqNum, SeqNum)> {
    w.repr
        .options
        .sack_blocks()
        .iter()
        .map(|b| (b.left, b.right))
        .collect()
}

/// Delivers segments 1 to 3 of a flight whose first segment was lost, one
/// at a time, as a Linux receiver answers them: three immediate duplicate
/// ACKs, which are returned.
pub(super) fn three_dupacks(b: &mut Host, segs: &[Wire], now: Instant) -> Vec<Wire> {
    let mut dupacks = Vec::new();
    for s in &segs[1..4] {
        b.input(s, now);
        dupacks.extend(b.output(now));
    }
    assert_eq!(dupacks.len(), 3);
    dupacks
}

/// `flight(segments, salt)` whose first flight is 20 segments (the initial
/// cwnd) and whose first segment is lost: `b` answers segments 1 to 3 with
/// three duplicate ACKs at t1 = t + D. Returns the flight, t1 and the
/// duplicate ACKs.
pub(super) fn head_lost_flight(segments: usize, salt: u8) -> (Flight, Instant, Vec<Wire>) {
    let (a, mut b, t, mss, data, segs) = flight(segments, salt);
    assert_eq!(segs.len(), 20);
    let t1 = t + ms(D);
    let dupacks = three_dupacks(&mut b, &segs, t1);
    ((a, b, t, mss, data, segs), t1, dupacks)
}

/// Segments 2, 6 and 11 of a 20-segment flight are lost: the recovery
/// retransmits exactly those holes at once and one round trip repairs
/// them. Returns the retransmissions.
pub(super) fn three_holes_repaired_in_one_round_trip(
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
