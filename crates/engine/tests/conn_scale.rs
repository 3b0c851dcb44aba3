//! Engine work follows the live load, not the number of connections or the
//! socket table's capacity: two engines on the `mem` wire, A opens N
//! connections to B's echo listener and keeps one 64-byte message in flight
//! on each, round after round; the engine work per round trip at 20 000
//! connections must stay within 1.5× of the work at 100, and a table
//! configured for 1 000 000 sockets must cost what one for 25 000 costs.
//!
//! Work is counted, not timed: frames in and out, timer wheel entries
//! looked at, socket slots visited by housekeeping and by the publication
//! of the connection table (every pass over engine state that can grow with
//! the number of sockets counts what it visits). The engines run wrapped in
//! [`Published`], as every real engine loop runs them, so the periodic
//! publication for `corestack stat`/`ss` is part of the work.
//!
//! A manual clock moves 20 µs per busy iteration, so delayed ACKs,
//! housekeeping (every 100 ms) and publication (every 10 ms) all run during
//! the measured rounds.

mod common;

use common::echo::Echo;
use engine::stats::Stats;

/// The work the counters count: frames through the port, timer entries
/// looked at, slots visited by housekeeping and by publication.
fn work(s: &Stats) -> u64 {
    s.rx_frames + s.tx_frames + s.timer_entries_scanned + s.housekeeping_slots + s.published_slots
}

/// Engine work per round trip (both engines) over `rounds` rounds with
/// `n` connections in a table of `max_sockets`, and the retransmissions.
fn work_per_round_trip(n: usize, max_sockets: usize, round_trips: usize) -> (f64, u64) {
    let mut e = Echo::open(n, max_sockets);
    let before = work(&e.a.engine.stats()) + work(&e.b.engine.stats());
    let mut done = 0;
    while done < round_trips {
        done += e.round();
    }
    let (sa, sb) = (e.a.engine.stats(), e.b.engine.stats());
    let spent = work(&sa) + work(&sb) - before;
    (
        spent as f64 / done as f64,
        sa.tcp_retransmits + sb.tcp_retransmits,
    )
}

#[test]
fn engine_work_per_round_trip_follows_the_live_load() {
    let trips = 60_000;
    let (small, r_small) = work_per_round_trip(100, 25_000, trips);
    let (large, r_large) = work_per_round_trip(20_000, 25_000, trips);
    let (roomy, r_roomy) = work_per_round_trip(100, 1_000_000, trips);
    eprintln!(
        "work per round trip: 100 connections {small:.2}, 20 000 connections {large:.2}, \
         100 connections in a 1 000 000-socket table {roomy:.2}"
    );
    assert_eq!(
        r_small + r_large + r_roomy,
        0,
        "retransmissions on a clean wire"
    );
    assert!(
        large <= 1.5 * small,
        "20 000 connections cost {large:.2} per round trip, 100 cost {small:.2}"
    );
    assert!(
        roomy <= 1.1 * small,
        "a 1 000 000-socket table costs {roomy:.2} per round trip, a 25 000 one {small:.2}"
    );
}
