//! The engine's clock when a caller hands it a stale time: an inline-mode
//! thread reads the clock, then waits for the engine's lock (or loses its
//! CPU) while another thread runs an iteration at a later time. The engine
//! must neither go back in time nor take the ACKs it then reads for
//! zero-RTT samples: one such sample set BBR's min_rtt to 0, which held
//! cwnd at its 4-segment floor for the 10 s of the min_rtt window (the
//! echo matrix's 2 ms + reorder 5 % case ran at 0.1x of Linux on some runs).

mod common;

use common::{dump, Wire, STEP_NS};
use engine::tcp::CcKind;
use engine::time::Instant;
use engine::EngineConfig;
use nic::impair::Impairments;

const PORT: u16 = 11;
/// One-way delay of the wire, ns.
const DELAY_NS: u64 = 2_000_000;

fn bbr_min_rtt(w: &Wire) -> Option<std::time::Duration> {
    let mut m = None;
    w.a.for_each_tcb(|t| m = t.bbr_model().and_then(|(_, rtt, _)| rtt));
    m
}

#[test]
fn a_stale_time_neither_turns_the_clock_back_nor_gives_a_zero_rtt() {
    let mut cfg = EngineConfig::default();
    cfg.tcp.cc = CcKind::Bbr;
    let imp = Impairments {
        delay_ns: DELAY_NS,
        ..Impairments::default()
    };
    let mut w = Wire::connect(imp, 1, 4096, cfg, PORT, (0, 0), |_| {});
    let mut sent = 0;
    let in_flight = |w: &Wire| {
        let mut f = 0;
        w.a.for_each_tcb(|c| f = c.bytes_in_flight());
        f
    };
    // A first exchange until everything is acknowledged: BBR's min_rtt is
    // the path's (4 ms).
    while sent == 0 || in_flight(&w) > 0 {
        w.end_a.send_stream(&mut sent, 64 << 10, &mut w.ca);
        w.poll();
        assert!(w.t - w.start < 1_000_000_000, "{}", dump(&w.a, &w.b));
        w.t += STEP_NS;
    }
    let path = bbr_min_rtt(&w).expect("a min_rtt sample");
    assert!(
        path >= std::time::Duration::from_nanos(2 * DELAY_NS),
        "{path:?}"
    );
    // A sends a flight at `t` (its last iteration), then is not polled
    // until the flight's ACKs have come back; B runs on.
    w.end_a.send_stream(&mut sent, 128 << 10, &mut w.ca);
    let t = w.t;
    w.a.poll(Instant(t));
    let flight = in_flight(&w);
    assert!(flight > 0, "a flight is out");
    let mut u = t;
    while u < t + 3 * DELAY_NS {
        u += STEP_NS;
        w.clock.store(u, std::sync::atomic::Ordering::Release);
        w.b.poll(Instant(u));
    }
    // Then it runs at a time read before its last iteration.
    let backwards = w.a.stats().clock_backwards;
    w.a.poll(Instant(t - 1_000_000));
    assert_eq!(w.a.stats().clock_backwards, backwards + 1);
    assert!(
        in_flight(&w) < flight,
        "the flight's ACKs were read\n{}",
        dump(&w.a, &w.b)
    );
    assert_eq!(bbr_min_rtt(&w), Some(path), "no zero-RTT sample");
    // Time goes on from the last iteration's, not from the stale one.
    assert!(
        w.a.next_deadline() >= Instant(t),
        "{:?}",
        w.a.next_deadline()
    );
}
