//! Two Tcbs on a simulated link with seeded loss, reordering and
//! duplication: bulk transfers both ways must arrive byte-exact and both
//! ends must close normally. Every run prints its seed.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rand::{Rng, RngCore, SeedableRng};
use rand_pcg::Pcg64;

use super::*;
use crate::tcp::{CcKind, CloseReason, State, Tcb, TcbStats, TcpConfig};

/// Egress impairments; probabilities per segment.
#[derive(Debug, Clone, Copy)]
struct Impairments {
    loss: f64,
    duplicate: f64,
    /// Probability of an extra random delay of up to 3 ms (reordering).
    reorder: f64,
    /// Bottleneck rate in bytes per second each way (0: unlimited); segments
    /// queue behind each other, so bursts spread out as on a real link.
    rate: u64,
    /// Probability that an ECT segment arrives marked CE (RFC 3168).
    ce: f64,
}

impl Impairments {
    /// A clean link of unlimited rate.
    const NONE: Impairments = Impairments {
        loss: 0.0,
        duplicate: 0.0,
        reorder: 0.0,
        rate: 0,
        ce: 0.0,
    };
}

/// 100 Mbit/s, in bytes per second.
const RATE_100M: u64 = 100_000_000 / 8;
/// 1% loss, 1% duplication, 2% reordering at 100 Mbit/s.
const ONE_PERCENT: Impairments = Impairments {
    loss: 0.01,
    duplicate: 0.01,
    reorder: 0.02,
    rate: RATE_100M,
    ce: 0.0,
};
/// 5% loss, 2% duplication, 5% reordering at 100 Mbit/s.
const FIVE_PERCENT: Impairments = Impairments {
    loss: 0.05,
    duplicate: 0.02,
    reorder: 0.05,
    rate: RATE_100M,
    ce: 0.0,
};

struct InFlight {
    at: Instant,
    order: u64,
    to_b: bool,
    ce: bool,
    wire: Wire,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InFlight {
    /// Reversed: the earliest delivery is the heap's maximum.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.order).cmp(&(self.at, self.order))
    }
}

/// One end: its Tcb (b has none until the SYN arrives), the bytes its
/// application will send, and what it has received.
struct Peer {
    host: Option<Host>,
    src: Vec<u8>,
    written: usize,
    closed_app: bool,
    got: Vec<u8>,
    closed: Option<CloseReason>,
    connected: bool,
}

impl Peer {
    fn new(host: Option<Host>, src: Vec<u8>) -> Peer {
        Peer {
            host,
            src,
            written: 0,
            closed_app: false,
            got: Vec::new(),
            closed: None,
            connected: false,
        }
    }

    fn note(&mut self, ev: Events) {
        self.connected |= ev.connected;
        if self.closed.is_none() {
            self.closed = ev.closed;
        }
    }

    /// The application: writes what fits, closes after the last byte, reads everything.
    fn app(&mut self) {
        let Some(h) = self.host.as_mut() else { return };
        if !self.connected {
            return;
        }
        self.written += h.write(&self.src[self.written..]);
        if self.written == self.src.len() && !self.closed_app {
            self.closed_app = true;
            h.tcb.close();
        }
        let got = h.rx.take();
        if !got.is_empty() {
            self.got.extend(got);
            let free = h.rx.free();
            h.tcb.on_app_read(free);
        }
    }
}

struct Outcome {
    a_stats: TcbStats,
    b_stats: TcbStats,
    elapsed: core::time::Duration,
}

const ONE_WAY: core::time::Duration = core::time::Duration::from_millis(2);

/// Runs a transfer of `a_bytes` from a to b and `b_bytes` from b to a until
/// both Tcbs are CLOSED; asserts byte-exact delivery and normal closes.
fn run(
    seed: u64,
    imp: Impairments,
    cfg_a: TcpConfig,
    cfg_b: TcpConfig,
    a_bytes: usize,
    b_bytes: usize,
) -> Outcome {
    println!("tcp sim seed={seed} impairments={imp:?} a->b {a_bytes} B, b->a {b_bytes} B");
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut src_a = vec![0; a_bytes];
    rng.fill_bytes(&mut src_a);
    let mut src_b = vec![0; b_bytes];
    rng.fill_bytes(&mut src_b);
    let iss_a = SeqNum(rng.gen());
    let iss_b = SeqNum(rng.gen());
    let mut a = Peer::new(Some(Host::connect(&cfg_a, iss_a)), src_a);
    let mut b = Peer::new(None, src_b);
    let mut link: BinaryHeap<InFlight> = BinaryHeap::new();
    let mut order = 0u64;
    // When each direction's bottleneck is free again: [a->b, b->a].
    let mut link_free = [T0, T0];
    let mut now = T0;
    let deadline = T0 + core::time::Duration::from_secs(3600);
    let mut steps = 0u64;
    loop {
        steps += 1;
        assert!(
            steps < 5_000_000,
            "seed {seed}: no convergence after {steps} steps"
        );
        assert!(now < deadline, "seed {seed}: simulated hour exceeded");
        // Deliver what is due.
        while link.peek().is_some_and(|p| p.at <= now) {
            let p = link.pop().unwrap_or_else(|| unreachable!());
            let peer = if p.to_b { &mut b } else { &mut a };
            match peer.host.as_mut() {
                Some(h) => {
                    h.tcb.input_ecn(p.ce);
                    let ev = h.input(&p.wire, now);
                    peer.note(ev);
                }
                None => {
                    let tcb = Tcb::accept(&cfg_b, addr_b(), addr_a(), &p.wire.repr, iss_b, now);
                    peer.host = tcb.map(|t| Host::with_tcb(&cfg_b, t));
                }
            }
        }
        // Timers, applications, output.
        for (peer, to_b) in [(&mut a, true), (&mut b, false)] {
            if let Some(h) = peer.host.as_mut() {
                if h.tcb.next_timeout().is_some_and(|t| t <= now) {
                    let ev = h.timer(now);
                    peer.note(ev);
                }
            }
            peer.app();
            let Some(h) = peer.host.as_mut() else {
                continue;
            };
            for (w, ect) in h.output_ect(now) {
                let dir = usize::from(!to_b);
                let mut sent_at = now;
                let bytes = 40 + w.payload.len() as u64;
                if let Some(ns) = (bytes * 1_000_000_000).checked_div(imp.rate) {
                    let ser = core::time::Duration::from_nanos(ns);
                    sent_at = link_free[dir].max(now) + ser;
                    link_free[dir] = sent_at;
                }
                if rng.gen_bool(imp.loss) {
                    continue;
                }
                let ce = ect && rng.gen_bool(imp.ce);
                let copies = if rng.gen_bool(imp.duplicate) { 2 } else { 1 };
                for _ in 0..copies {
                    let mut at = sent_at + ONE_WAY;
                    if rng.gen_bool(imp.reorder) {
                        at = at + core::time::Duration::from_micros(rng.gen_range(0..3000));
                    }
                    order += 1;
                    link.push(InFlight {
                        at,
                        order,
                        to_b,
                        ce,
                        wire: w.clone(),
                    });
                }
            }
            assert!(
                !h.tcb.has_output() || h.tcb.state() == State::Closed,
                "seed {seed}: output left behind"
            );
        }
        let done = |p: &Peer| {
            p.host
                .as_ref()
                .is_some_and(|h| h.tcb.state() == State::Closed)
        };
        if done(&a) && done(&b) {
            break;
        }
        // Advance to the next event.
        let next = [
            link.peek().map(|p| p.at),
            a.host.as_ref().and_then(|h| h.tcb.next_timeout()),
            b.host.as_ref().and_then(|h| h.tcb.next_timeout()),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else {
            panic!(
                "seed {seed}: stalled at {:?}: a {:?} {:?} b {:?} {:?}; a {:?}; b {:?}",
                now,
                a.host.as_ref().map(|h| h.tcb.state()),
                a.closed,
                b.host.as_ref().map(|h| h.tcb.state()),
                b.closed,
                a.host.as_ref().map(|h| *h.tcb.stats()),
                b.host.as_ref().map(|h| *h.tcb.stats()),
            );
        };
        now = now.max(next);
    }
    let stats = |p: &Peer| p.host.as_ref().map(|h| *h.tcb.stats());
    assert_eq!(
        a.closed,
        Some(CloseReason::Normal),
        "seed {seed}: a {:?}",
        stats(&a)
    );
    assert_eq!(
        b.closed,
        Some(CloseReason::Normal),
        "seed {seed}: b {:?}",
        stats(&b)
    );
    assert!(
        a.got == b.src,
        "seed {seed}: b->a bytes differ ({} of {})",
        a.got.len(),
        b.src.len()
    );
    assert!(
        b.got == a.src,
        "seed {seed}: a->b bytes differ ({} of {})",
        b.got.len(),
        a.src.len()
    );
    let host = |p: &Peer| {
        *p.host
            .as_ref()
            .map(|h| *h.tcb.stats())
            .as_ref()
            .unwrap_or(&TcbStats::default())
    };
    let out = Outcome {
        a_stats: host(&a),
        b_stats: host(&b),
        elapsed: now - T0,
    };
    println!(
        "tcp sim seed={seed}: done in {:?} simulated, {steps} steps; a {:?}; b {:?}",
        out.elapsed, out.a_stats, out.b_stats
    );
    out
}

const MIB: usize = 1 << 20;

/// Runs `bytes` each way with default configs over `imp` once per seed,
/// passing each outcome to `check`.
fn both_ways_default(imp: Impairments, seeds: [u64; 2], bytes: usize, check: impl Fn(&Outcome)) {
    let cfg = TcpConfig::default();
    for seed in seeds {
        check(&run(seed, imp, cfg.clone(), cfg.clone(), bytes, bytes));
    }
}

#[test]
fn sim_lossless_link_transfers_both_ways() {
    let cfg = TcpConfig::default();
    let out = run(1, Impairments::NONE, cfg.clone(), cfg, 2 * MIB, 2 * MIB);
    assert_eq!(out.a_stats.retransmits + out.b_stats.retransmits, 0);
}

#[test]
fn sim_one_percent_loss_transfers_both_ways_byte_exact() {
    both_ways_default(ONE_PERCENT, [11, 12], 3 * MIB, |out| {
        assert!(out.a_stats.retransmits > 0 && out.b_stats.retransmits > 0);
    });
}

#[test]
fn sim_five_percent_loss_transfers_both_ways_byte_exact() {
    both_ways_default(FIVE_PERCENT, [21, 22], 2 * MIB, |out| {
        assert!(out.a_stats.fast_retransmits > 0 || out.a_stats.timeouts > 0);
    });
}

#[test]
fn sim_ooo_bound_of_two_drops_but_completes() {
    let imp = Impairments {
        loss: 0.05,
        reorder: 0.05,
        ..Impairments::NONE
    };
    let cfg = TcpConfig {
        ooo_max_segments: 2,
        ..TcpConfig::default()
    };
    let out = run(31, imp, cfg.clone(), cfg, MIB, MIB);
    assert!(
        out.a_stats.ooo_dropped_bytes + out.b_stats.ooo_dropped_bytes > 0,
        "the bound was never hit"
    );
}

#[test]
fn sim_without_options_small_buffers_transfers() {
    let imp = Impairments {
        loss: 0.02,
        duplicate: 0.01,
        reorder: 0.02,
        rate: 10_000_000 / 8,
        ..Impairments::NONE
    };
    let cfg = TcpConfig {
        window_scaling: false,
        timestamps: false,
        rcv_buf: 16 * 1024,
        mss: 536,
        ..TcpConfig::default()
    };
    run(41, imp, cfg.clone(), cfg, MIB / 2, MIB / 4);
}

/// Calls `f` with the index and kind of every congestion control, each
/// without and then with SACK.
fn every_cc_with_and_without_sack(mut f: impl FnMut(u64, CcKind, bool)) {
    let all = [CcKind::NewReno, CcKind::Cubic, CcKind::Dctcp, CcKind::Bbr];
    for (i, cc) in (0u64..).zip(all) {
        for sack in [false, true] {
            f(i, cc, sack);
        }
    }
}

fn cfg_for(cc: CcKind, sack: bool) -> TcpConfig {
    TcpConfig {
        cc,
        sack,
        ..TcpConfig::default()
    }
}

#[test]
fn sim_every_cc_with_and_without_sack_one_percent_loss_byte_exact() {
    every_cc_with_and_without_sack(|i, cc, sack| {
        let cfg = cfg_for(cc, sack);
        let out = run(50 + i, ONE_PERCENT, cfg.clone(), cfg, 2 * MIB, MIB);
        assert!(out.a_stats.retransmits > 0, "{cc:?} sack={sack}");
        if !sack {
            assert_eq!(out.a_stats.sack_recoveries, 0);
        }
    });
}

#[test]
fn sim_every_cc_with_and_without_sack_five_percent_loss_byte_exact() {
    every_cc_with_and_without_sack(|i, cc, sack| {
        let cfg = cfg_for(cc, sack);
        let out = run(60 + i, FIVE_PERCENT, cfg.clone(), cfg, MIB, MIB);
        if sack {
            assert!(out.a_stats.sack_recoveries > 0, "{cc:?}: no SACK recovery");
        } else {
            assert!(out.a_stats.fast_retransmits > 0 || out.a_stats.timeouts > 0);
        }
    });
}

#[test]
fn sim_dctcp_with_ce_marks_reduces_on_ecn_and_completes() {
    let imp = Impairments {
        rate: RATE_100M,
        ce: 0.05,
        ..Impairments::NONE
    };
    let cfg = cfg_for(CcKind::Dctcp, true);
    let out = run(71, imp, cfg.clone(), cfg, 2 * MIB, MIB);
    assert!(out.b_stats.ce_received > 0, "no CE reached b");
    assert!(out.a_stats.ecn_reductions > 0, "a never reduced on ECE");
    assert_eq!(out.a_stats.retransmits, 0, "ECN marks are not losses");
}

#[test]
fn sim_classic_ecn_cubic_with_ce_marks_reduces_and_completes() {
    let imp = Impairments {
        loss: 0.01,
        rate: RATE_100M,
        ce: 0.02,
        ..Impairments::NONE
    };
    let cfg = TcpConfig {
        ecn: true,
        ..TcpConfig::default()
    };
    let out = run(72, imp, cfg.clone(), cfg, 2 * MIB, MIB);
    assert!(out.a_stats.ecn_reductions > 0);
}

/// A sweep over many seeds and impairment mixes: 50 seeds by default (well
/// under a second); a longer sweep with
/// `TCP_SIM_SWEEP=<count> TCP_SIM_FROM=<first> cargo test -p engine sim_seed_sweep`.
#[test]
fn sim_seed_sweep_transfers_byte_exact() {
    let count: u64 = std::env::var("TCP_SIM_SWEEP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let from: u64 = std::env::var("TCP_SIM_FROM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    for seed in from..from + count {
        let mut rng = Pcg64::seed_from_u64(seed);
        let imp = Impairments {
            loss: rng.gen_range(0.0..0.08),
            duplicate: rng.gen_range(0.0..0.03),
            reorder: rng.gen_range(0.0..0.1),
            rate: [0, 1_250_000, 12_500_000][rng.gen_range(0..3)],
            ce: rng.gen_range(0.0..0.05),
        };
        let cfg = TcpConfig {
            cc: [CcKind::NewReno, CcKind::Cubic, CcKind::Dctcp, CcKind::Bbr][rng.gen_range(0..4)],
            sack: rng.gen_bool(0.7),
            ecn: rng.gen_bool(0.3),
            ooo_max_segments: rng.gen_range(0..8),
            rcv_buf: rng.gen_range(2_000..300_000),
            timestamps: rng.gen_bool(0.5),
            window_scaling: rng.gen_bool(0.7),
            nodelay: rng.gen_bool(0.5),
            ..TcpConfig::default()
        };
        println!("cfg {cfg:?}");
        let a_bytes = rng.gen_range(0..300_000);
        let b_bytes = rng.gen_range(0..300_000);
        run(seed, imp, cfg.clone(), cfg.clone(), a_bytes, b_bytes);
    }
}
