//! `multi_pair`: every steering policy over several receive queues, rx
//! rings, and one queue per end being exactly `pair`.

use std::sync::atomic::Ordering;

use super::super::*;
use crate::rss::Steering;
use crate::TxQueue;

/// Length of a test frame: Ethernet, IPv4, TCP, then flow and sequence.
const LEN: usize = 14 + 20 + 20 + 8;

/// A TCP/IPv4 frame from A to B of flow `flow` (a distinct 4-tuple per
/// flow, for up to 50 000 flows), carrying `flow` and `seq`.
fn flow_frame(buf: &mut [u8], flow: u32, seq: u32) -> usize {
    let f = &mut buf[..LEN];
    f.fill(0);
    f[0..6].copy_from_slice(&MAC_B);
    f[6..12].copy_from_slice(&MAC_A);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((LEN - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    // Not the address and the port both from `flow`: the symmetric hash
    // XORs their 16-bit words, and the changes could cancel.
    f[26..30].copy_from_slice(&[10, 0, 0, 1 + (flow % 4) as u8]);
    f[30..34].copy_from_slice(&[10, 1, 0, 1]);
    f[34..36].copy_from_slice(&(1024 + (flow % 50_000) as u16).to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f[46] = 0x50;
    f[54..58].copy_from_slice(&flow.to_be_bytes());
    f[58..62].copy_from_slice(&seq.to_be_bytes());
    LEN
}

fn frame_of(flow: u32, seq: u32) -> Vec<u8> {
    let mut f = vec![0; LEN];
    flow_frame(&mut f, flow, seq);
    f
}

/// The flow and sequence number a test frame carries.
fn flow_seq(f: &[u8]) -> (u32, u32) {
    let word = |i: usize| u32::from_be_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]);
    (word(54), word(58))
}

/// Sends `per_flow` frames of each of `flows` flows from a one-queue end
/// to an end of `queues` queues steered by `steer`, flows interleaved, in
/// flushes of [`MEM_TX_SLOTS`]; after each flush every receiving queue
/// reads, the last first (so that frames wait in rings). Returns what
/// each queue received, (flow, seq) in order, checking `rx_queue_frames`.
fn spread(
    steer: Steer,
    queues: usize,
    flows: u32,
    per_flow: u32,
    seed: u64,
) -> Vec<Vec<(u32, u32)>> {
    let (mut a, mut b) = multi_pair(
        Impairments::none(),
        Impairments::none(),
        seed,
        1,
        queues,
        Steer::AllToZero,
        steer,
    );
    assert_eq!(b.len(), queues);
    let (clock, _now) = MemClock::manual();
    a[0].set_clock(clock);
    let mut got = vec![Vec::new(); queues];
    let mut sent = 0;
    let total = flows * per_flow;
    while sent < total {
        while sent < total && a[0].tx().room() > 0 {
            let (flow, seq) = (sent % flows, sent / flows);
            assert!(a[0].tx().transmit(LEN, |buf| flow_frame(buf, flow, seq)));
            sent += 1;
        }
        a[0].tx().flush();
        for q in (0..queues).rev() {
            let got = &mut got[q];
            b[q].rx_burst(usize::MAX, |f, _| got.push(flow_seq(f)));
        }
    }
    for (q, port) in b.iter().enumerate() {
        assert_eq!(port.queue(), q);
        assert_eq!(port.rx_queue_frames(), got[q].len() as u64, "queue {q}");
        assert_eq!(port.rx_drops(), RxDrops::default(), "queue {q}");
    }
    let mut all: Vec<(u32, u32)> = got.iter().flatten().copied().collect();
    all.sort_unstable();
    let want: Vec<(u32, u32)> = (0..flows)
        .flat_map(|f| (0..per_flow).map(move |s| (f, s)))
        .collect();
    assert_eq!(all, want, "frames lost or duplicated");
    got
}

/// Each flow's queue; panics if one flow was received on two queues.
fn queue_of_each_flow(got: &[Vec<(u32, u32)>], flows: u32) -> Vec<usize> {
    let mut queue = vec![None; flows as usize];
    for (q, frames) in got.iter().enumerate() {
        for &(flow, seq) in frames {
            let was = queue[flow as usize].replace(q);
            assert!(
                was.is_none() || was == Some(q),
                "flow {flow} on queues {was:?} and {q} (seq {seq})"
            );
        }
    }
    queue
        .into_iter()
        .map(|q| q.expect("flow received"))
        .collect()
}

fn queues_used(got: &[Vec<(u32, u32)>]) -> usize {
    got.iter().filter(|q| !q.is_empty()).count()
}

/// Asserts that at least `min` queues received frames (the message gives each
/// queue's frame count).
fn assert_spread_over(got: &[Vec<(u32, u32)>], min: usize) {
    assert!(
        queues_used(got) >= min,
        "{:?}",
        got.iter().map(Vec::len).collect::<Vec<_>>()
    );
}

#[test]
fn hash_steering_puts_each_flow_on_its_rss_queue() {
    let steering = Arc::new(Steering::new(4));
    let got = spread(Steer::Hash(steering.clone()), 4, 256, 4, 1);
    for (flow, q) in queue_of_each_flow(&got, 256).into_iter().enumerate() {
        assert_eq!(
            q,
            steering.frame_queue(&frame_of(flow as u32, 0)),
            "flow {flow}"
        );
    }
    assert_spread_over(&got, 3);
}

#[test]
fn random_per_flow_keeps_each_flow_on_one_queue() {
    let got = spread(Steer::RandomPerFlow, 4, 256, 4, 2);
    queue_of_each_flow(&got, 256);
    assert_spread_over(&got, 3);
}

#[test]
fn random_per_frame_spreads_one_flow_over_queues() {
    let got = spread(Steer::RandomPerFrame, 4, 256, 4, 3);
    let flow0 = got
        .iter()
        .filter(|frames| frames.iter().any(|&(flow, _)| flow == 0))
        .count();
    assert!(flow0 > 1, "flow 0 on {flow0} queue");
    let one = spread(Steer::RandomPerFrame, 4, 1, 64, 3);
    assert!(queues_used(&one) > 1);
}

#[test]
fn all_to_zero_puts_every_frame_on_queue_0() {
    let got = spread(Steer::AllToZero, 4, 256, 4, 4);
    assert_eq!(got[0].len(), 1024);
    assert_eq!(queues_used(&got), 1);
}

#[test]
fn random_steering_is_the_same_for_a_seed() {
    for steer in [Steer::RandomPerFlow, Steer::RandomPerFrame] {
        let first = spread(steer.clone(), 4, 64, 8, 5);
        assert_eq!(first, spread(steer.clone(), 4, 64, 8, 5), "{steer:?}");
        assert_ne!(first, spread(steer.clone(), 4, 64, 8, 6), "{steer:?}");
    }
}

#[test]
fn frames_without_a_hash_go_to_queue_0_under_random_per_flow() {
    let (mut a, mut b) = multi_pair(
        Impairments::none(),
        Impairments::none(),
        7,
        1,
        4,
        Steer::AllToZero,
        Steer::RandomPerFlow,
    );
    for seq in 0..32u8 {
        // Not IPv4 (ethertype 0x88b5): no hash.
        assert!(a[0].tx().transmit(64, |buf| {
            buf[..64].fill(seq);
            buf[12..14].copy_from_slice(&[0x88, 0xb5]);
            64
        }));
    }
    a[0].tx().flush();
    for q in (1..4).rev() {
        assert_eq!(b[q].rx_burst(64, |_, _| {}), 0, "queue {q}");
    }
    assert_eq!(b[0].rx_burst(64, |_, _| {}), 32);
}

/// Everything `b` receives over a wire of `queues` queues per end steered
/// by `steer`, with every impairment, as (flow, seq) in order; and what
/// the wire did.
fn impaired(steer: Option<Steer>, seed: u64) -> (Vec<Vec<u8>>, ImpairStats) {
    let imp = Impairments {
        loss: 0.1,
        duplicate: 0.05,
        corrupt: 0.05,
        reorder: 0.1,
        delay_ns: 30_000,
        jitter_ns: 20_000,
    };
    let (mut a, mut b) = match steer {
        None => pair(imp, imp, seed),
        Some(s) => {
            let (mut a, mut b) = multi_pair(imp, imp, seed, 1, 1, s.clone(), s);
            (a.remove(0), b.remove(0))
        }
    };
    let (clock, now) = MemClock::manual();
    a.set_clock(clock);
    let mut got = Vec::new();
    for burst in 0..40u32 {
        for i in 0..64 {
            assert!(a.tx().transmit(LEN, |buf| flow_frame(buf, i, burst)));
        }
        a.tx().flush();
        now.fetch_add(10_000, Ordering::Release);
        b.rx_burst(usize::MAX, |f, _| got.push(f.to_vec()));
    }
    now.fetch_add(10_000_000_000, Ordering::Release);
    b.rx_burst(usize::MAX, |f, _| got.push(f.to_vec()));
    assert_eq!(b.rx_queue_frames(), got.len() as u64);
    (got, a.tx_stats())
}

#[test]
fn one_queue_per_end_is_exactly_pair_whatever_the_steering() {
    let want = impaired(None, 8);
    assert!(want.0.len() > 2000, "{}", want.0.len());
    for steer in [
        Steer::Hash(Arc::new(Steering::new(4))),
        Steer::RandomPerFlow,
        Steer::RandomPerFrame,
        Steer::AllToZero,
    ] {
        assert!(impaired(Some(steer.clone()), 8) == want, "{steer:?}");
    }
}

/// A flow that `steering` puts on queue `queue`.
fn flow_on(steering: &Steering, queue: usize) -> u32 {
    (0..)
        .find(|&flow| steering.frame_queue(&frame_of(flow, 0)) == queue)
        .expect("a flow")
}

#[test]
fn a_queue_idle_until_another_moved_its_frame_still_receives_it() {
    let steering = Arc::new(Steering::new(2));
    let flow = flow_on(&steering, 1);
    let delay = Impairments {
        delay_ns: 1_000,
        ..Impairments::none()
    };
    let (mut a, mut b) = multi_pair(
        delay,
        Impairments::none(),
        9,
        1,
        2,
        Steer::AllToZero,
        Steer::Hash(steering),
    );
    let (clock, now) = MemClock::manual();
    a[0].set_clock(clock);
    assert!(a[0].tx().transmit(LEN, |buf| flow_frame(buf, flow, 0)));
    a[0].tx().flush();
    // Queue 1 looks before the frame is due, and learns when it will be.
    assert_eq!(b[1].rx_burst(8, |_, _| {}), 0);
    assert_eq!(b[1].next_rx_due_ns(), Some(1_000));
    now.store(1_000, Ordering::Release);
    // Queue 0 takes it off the wire into queue 1's ring.
    assert_eq!(b[0].rx_burst(8, |_, _| {}), 0);
    assert_eq!(b[1].next_rx_due_ns(), Some(1_000));
    assert_eq!(b[0].next_rx_due_ns(), None);
    let mut got = vec![];
    assert_eq!(b[1].rx_burst(8, |f, _| got.push(flow_seq(f))), 1);
    assert_eq!(got, [(flow, 0)]);
    assert_eq!(b[1].rx_burst(8, |_, _| {}), 0);
    assert_eq!((b[0].rx_queue_frames(), b[1].rx_queue_frames()), (0, 1));
}

#[test]
fn a_queue_that_does_not_read_fills_its_rx_ring_and_counts_the_drops() {
    let steering = Arc::new(Steering::new(2));
    let flow = flow_on(&steering, 1);
    let (mut a, mut b) = multi_pair(
        Impairments::none(),
        Impairments::none(),
        10,
        1,
        2,
        Steer::AllToZero,
        Steer::Hash(steering),
    );
    let total = 2 * MEM_WIRE_FRAMES as u32;
    for seq in 0..total {
        assert!(a[0].tx().transmit(LEN, |buf| flow_frame(buf, flow, seq)));
        if a[0].tx().room() == 0 {
            a[0].tx().flush();
            assert_eq!(b[0].rx_burst(usize::MAX, |_, _| {}), 0);
        }
    }
    assert_eq!(
        b[1].rx_drops().ring_full,
        u64::from(total) - MEM_WIRE_FRAMES as u64
    );
    assert_eq!(b[0].rx_drops(), RxDrops::default());
    let mut seqs = vec![];
    // In bursts: the ring keeps the rest for the next call.
    while b[1].rx_burst(100, |f, _| seqs.push(flow_seq(f).1)) > 0 {}
    assert_eq!(seqs, (0..MEM_WIRE_FRAMES as u32).collect::<Vec<_>>());
    assert_eq!(a[0].tx_stats().delivered, u64::from(total));
}

#[test]
fn every_queue_of_an_end_sends_over_the_one_link_with_the_end_mac() {
    let (mut a, mut b) = multi_pair(
        Impairments::none(),
        Impairments::none(),
        11,
        2,
        4,
        Steer::RandomPerFrame,
        Steer::AllToZero,
    );
    assert!(a.iter().all(|p| p.mac() == MAC_A));
    assert!(b.iter().all(|p| p.mac() == MAC_B));
    for (q, port) in b.iter_mut().enumerate() {
        assert!(port.tx().transmit(LEN, |buf| flow_frame(buf, q as u32, 0)));
        port.tx().flush();
    }
    assert_eq!(b[2].tx_stats().pushed, 4);
    let mut got = vec![];
    for port in &mut a {
        port.rx_burst(64, |f, _| got.push(flow_seq(f).0));
    }
    got.sort_unstable();
    assert_eq!(got, [0, 1, 2, 3]);
    assert_eq!(a[0].rx_queue_frames() + a[1].rx_queue_frames(), 4);
}
