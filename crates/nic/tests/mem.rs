//! The mem wire: determinism for a seed, and each impairment at its rate.

use std::sync::atomic::Ordering;

use nic::impair::Impairments;
use nic::mem::{self, MemClock, MemPort};
use nic::{Port, TxQueue};

const FRAME_LEN: usize = 100;

fn frame(buf: &mut [u8], seq: u32) -> usize {
    buf[..6].copy_from_slice(&mem::MAC_B);
    buf[6..12].copy_from_slice(&mem::MAC_A);
    buf[12..14].copy_from_slice(&[0x88, 0xb5]);
    buf[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in buf[18..FRAME_LEN].iter_mut().enumerate() {
        *b = (i as u32 ^ seq) as u8;
    }
    FRAME_LEN
}

fn intact(f: &[u8]) -> bool {
    if f.len() != FRAME_LEN {
        return false;
    }
    let mut expect = [0u8; FRAME_LEN];
    let seq = u32::from_be_bytes([f[14], f[15], f[16], f[17]]);
    frame(&mut expect, seq);
    f == expect
}

/// Sends `n` frames a -> b in bursts of 64, advancing a manual clock by
/// 10 µs per burst, and returns everything b received, in order.
fn run(imp: Impairments, seed: u64, n: u32) -> Vec<Vec<u8>> {
    println!("seed {seed}, impairments {imp:?}");
    let (mut a, mut b) = mem::pair(imp, Impairments::none(), seed);
    let (clock, now) = MemClock::manual();
    a.set_clock(clock);
    let mut out = Vec::new();
    let mut drain = |b: &mut MemPort| {
        b.rx_burst(usize::MAX, |f, _| out.push(f.to_vec()));
    };
    let mut seq = 0;
    while seq < n {
        for _ in 0..64.min(n - seq) {
            assert!(a.tx().transmit(FRAME_LEN, |buf| frame(buf, seq)));
            seq += 1;
        }
        a.tx().flush();
        now.fetch_add(10_000, Ordering::Release);
        drain(&mut b);
    }
    // Let every delayed or held-back frame out.
    now.fetch_add(10_000_000_000, Ordering::Release);
    drain(&mut b);
    out
}

/// [`run`] of `N` frames over a wire with only what `set` sets.
fn run_with(set: impl FnOnce(&mut Impairments), seed: u64) -> Vec<Vec<u8>> {
    let mut imp = Impairments::none();
    set(&mut imp);
    run(imp, seed, N)
}

fn seq_of(f: &[u8]) -> u32 {
    u32::from_be_bytes([f[14], f[15], f[16], f[17]])
}

fn all() -> Impairments {
    Impairments {
        loss: 0.1,
        duplicate: 0.05,
        corrupt: 0.05,
        reorder: 0.1,
        delay_ns: 30_000,
        jitter_ns: 20_000,
    }
}

#[test]
fn same_seed_same_delivered_sequence() {
    let first = run(all(), 42, 2000);
    let second = run(all(), 42, 2000);
    assert!(first.len() > 1500);
    assert_eq!(first, second);
}

#[test]
fn different_seed_different_delivered_sequence() {
    assert_ne!(run(all(), 42, 2000), run(all(), 43, 2000));
}

const N: u32 = 20_000;

/// |observed/N - p| within 20% of p (p = 0.1, N = 20000: about 6 sigma).
fn assert_rate(what: &str, count: usize, p: f64) {
    let rate = count as f64 / f64::from(N);
    assert!(
        (rate - p).abs() <= p * 0.2,
        "{what}: observed rate {rate:.4}, configured {p}"
    );
}

#[test]
fn loss_tenth_drops_about_tenth() {
    let got = run(Impairments::loss(0.1), 7, N);
    assert_rate("loss", N as usize - got.len(), 0.1);
    assert!(got.iter().all(|f| intact(f)));
}

#[test]
fn duplicate_tenth_repeats_about_tenth() {
    let got = run_with(|i| i.duplicate = 0.1, 8);
    assert_rate("duplicate", got.len() - N as usize, 0.1);
    let mut seen = vec![0u8; N as usize];
    for f in &got {
        seen[seq_of(f) as usize] += 1;
    }
    assert!(seen.iter().all(|&c| c == 1 || c == 2));
}

#[test]
fn corrupt_tenth_damages_about_tenth() {
    let got = run_with(|i| i.corrupt = 0.1, 9);
    assert_eq!(got.len(), N as usize);
    // A flipped bit may hit the sequence number: count damaged frames by
    // comparing with the frame sent at that position.
    let damaged = got
        .iter()
        .enumerate()
        .filter(|(i, f)| {
            let mut expect = [0u8; FRAME_LEN];
            frame(&mut expect, *i as u32);
            f.as_slice() != expect
        })
        .count();
    assert_rate("corrupt", damaged, 0.1);
}

#[test]
fn reorder_tenth_swaps_about_tenth() {
    let got = run_with(|i| i.reorder = 0.1, 10);
    assert_eq!(got.len(), N as usize);
    let mut max = 0;
    let mut late = 0;
    for f in &got {
        let s = seq_of(f);
        if s < max {
            late += 1;
        }
        max = max.max(s);
    }
    // A frame drawn to be held while another is held goes out in order, so
    // the observed rate is slightly below p.
    assert!(
        (0.07..=0.11).contains(&(f64::from(late) / f64::from(N))),
        "late frames: {late} of {N}"
    );
}

#[test]
fn delay_frame_arrives_only_after_delay() {
    let (mut a, mut b) = mem::pair(
        Impairments {
            delay_ns: 5_000_000,
            ..Impairments::none()
        },
        Impairments::none(),
        11,
    );
    let (clock, now) = MemClock::manual();
    b.set_clock(clock);
    now.store(1_000, Ordering::Release);
    a.tx().transmit(FRAME_LEN, |buf| frame(buf, 0));
    a.tx().flush();
    now.store(5_000_999, Ordering::Release);
    assert_eq!(b.rx_burst(8, |_, _| {}), 0);
    assert_eq!(b.next_rx_due_ns(), Some(5_001_000));
    now.store(5_001_000, Ordering::Release);
    assert_eq!(b.rx_burst(8, |_, _| {}), 1);
}

#[test]
fn two_threads_every_frame_delivered_in_order_or_counted_as_queue_full() {
    let (mut a, mut b) = mem::pair(Impairments::none(), Impairments::none(), 12);
    let sender = std::thread::spawn(move || {
        let mut seq = 0;
        let start = std::time::Instant::now();
        while seq < 5000 && start.elapsed().as_secs() < 10 {
            if a.tx().transmit(FRAME_LEN, |buf| frame(buf, seq)) {
                seq += 1;
            } else {
                a.tx().flush();
            }
        }
        a.tx().flush();
        (seq, a)
    });
    let mut got = 0u64;
    let mut next = 0u32;
    let start = std::time::Instant::now();
    while next < 5000 && start.elapsed().as_secs() < 10 {
        let finished = sender.is_finished();
        let n = b.rx_burst(256, |f, _| {
            assert!(intact(f));
            assert!(seq_of(f) >= next, "frame {} after {next}", seq_of(f));
            next = seq_of(f) + 1;
            got += 1;
        });
        if finished && n == 0 {
            break;
        }
    }
    let (sent, a) = sender.join().expect("sender");
    assert_eq!(sent, 5000);
    let stats = a.tx_stats();
    assert_eq!(stats.pushed, 5000);
    assert_eq!(got + stats.queue_full, 5000, "{stats:?}");
}
