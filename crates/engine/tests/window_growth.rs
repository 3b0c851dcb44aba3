//! Buffer auto-tuning on the `mem` wire: one bulk transfer over a path of
//! 10 ms one way (20 ms RTT), no loss. Rings that start at 256 KiB cap a
//! connection at 256 KiB per RTT (13 MB/s); with auto-tuning the receiver's
//! RX ring and window follow the bandwidth-delay product (dynamic
//! right-sizing) and the sender's TX ring follows cwnd, so one connection
//! fills the path. An application's rings grow no further than its budget.

mod common;

use common::{dump, Wire};
use engine::EngineConfig;
use nic::impair::Impairments;

const PORT: u16 = 9;
/// One-way delay, ns.
const DELAY_NS: u64 = 10_000_000;

/// What one transfer measured.
struct Outcome {
    /// Goodput, bytes per virtual second.
    rate: f64,
    /// The ring capacities at the end: A's TX, B's RX (bytes).
    a_tx: usize,
    b_rx: usize,
    /// The largest receive window B advertised, bytes.
    b_window: usize,
}

/// A sends `total` bytes to B, which reads everything at once; rings start
/// at `init` bytes and may grow to `max`, within `budget` per application.
fn transfer(total: usize, init: usize, max: usize, budget: usize) -> Outcome {
    transfer_with(total, init, max, budget, (0, 0))
}

/// [`transfer`], with SO_RCVBUF / SO_SNDBUF `bufs` (0: unset) set on B's
/// listener before A connects.
fn transfer_with(
    total: usize,
    init: usize,
    max: usize,
    budget: usize,
    bufs: (usize, usize),
) -> Outcome {
    let imp = Impairments {
        delay_ns: DELAY_NS,
        ..Impairments::default()
    };
    let cfg = EngineConfig {
        ring_bytes: init,
        ring_max_bytes: max,
        buffer_growth_limit: budget,
        ..EngineConfig::default()
    };
    // Room for a 6 MiB window in flight (4300 frames) each way.
    let mut w = Wire::connect(imp, 1, 8192, cfg, PORT, bufs, |_| {});
    let (mut sent, mut got) = (0usize, 0usize);
    let mut b_window = 0;
    for _ in 0..50_000_000u64 {
        let busy = w.poll();
        let moved = w
            .stream_one_way(&mut sent, &mut got, total)
            .unwrap_or_else(|at| panic!("byte {at} differs"));
        w.b.for_each_tcb(|tcb| b_window = b_window.max(tcb.rcv_wnd()));
        if got == total {
            let (qa, qb) = (w.a.port().tx_stats(), w.b.port().tx_stats());
            assert_eq!(qa.queue_full + qb.queue_full, 0, "the wire dropped frames");
            let secs = (w.t - w.opened.unwrap_or(w.start)) as f64 / 1e9;
            return Outcome {
                rate: total as f64 / secs,
                a_tx: w.end_a.tx.capacity(),
                b_rx: w.end_b.as_ref().map_or(0, |b| b.rx.capacity()),
                b_window,
            };
        }
        w.advance(busy || moved);
    }
    panic!(
        "transfer did not finish: sent {sent} received {got}\n{}",
        dump(&w.a, &w.b)
    );
}

#[test]
fn bulk_over_20ms_rtt_rings_and_window_grow_and_fill_the_path() {
    let total = 128 << 20;
    let rtt = 2.0 * DELAY_NS as f64 / 1e9;
    let init = 256 << 10;
    let cap_rate = init as f64 / rtt;
    let fixed = transfer(total, init, init, 256 << 20);
    let grown = transfer(total, init, 8 << 20, 256 << 20);
    println!(
        "256 KiB rings: {:.1} MB/s (window-limited at {:.1}); growing rings: {:.1} MB/s, \
         A's TX ring {} KiB, B's RX ring {} KiB, B's largest window {} KiB",
        fixed.rate / 1e6,
        cap_rate / 1e6,
        grown.rate / 1e6,
        grown.a_tx >> 10,
        grown.b_rx >> 10,
        grown.b_window >> 10
    );
    assert!(
        fixed.rate <= cap_rate * 1.01,
        "a fixed window caps the rate"
    );
    assert_eq!((fixed.a_tx, fixed.b_rx), (init, init));
    assert!(
        grown.rate > 8.0 * cap_rate,
        "auto-tuning: {:.1} MB/s is not 8 x {:.1}",
        grown.rate / 1e6,
        cap_rate / 1e6
    );
    assert!(grown.b_rx >= 4 << 20, "B's RX ring grew");
    assert!(grown.a_tx >= 4 << 20, "A's TX ring grew");
    assert!(grown.b_window > 4 << 20, "the advertised window grew");
    assert!(
        grown.b_window <= 6 << 20,
        "the window stops at rcv_buf_max (6 MiB)"
    );
}

#[test]
fn bulk_rings_grow_no_further_than_the_application_budget() {
    let init = 256 << 10;
    let budget = 1 << 20;
    let o = transfer(32 << 20, init, 8 << 20, budget);
    println!(
        "budget 1 MiB: {:.1} MB/s, A's TX ring {} KiB, B's RX ring {} KiB",
        o.rate / 1e6,
        o.a_tx >> 10,
        o.b_rx >> 10
    );
    // Each engine serves one application here: its rings grew by at most
    // the budget (and did grow: the path wants more).
    assert!(o.b_rx > init && o.b_rx - init <= budget, "B: {}", o.b_rx);
    assert!(o.a_tx > init && o.a_tx - init <= budget, "A: {}", o.a_tx);
}

#[test]
fn bulk_to_a_listener_with_so_rcvbuf_keeps_its_window() {
    let rcvbuf = 512 << 10;
    let o = transfer_with(32 << 20, 256 << 10, 8 << 20, 256 << 20, (rcvbuf, 0));
    println!(
        "SO_RCVBUF 512 KiB: {:.1} MB/s, B's RX ring {} KiB, largest window {} KiB",
        o.rate / 1e6,
        o.b_rx >> 10,
        o.b_window >> 10
    );
    assert!(o.b_window <= rcvbuf, "window {} over SO_RCVBUF", o.b_window);
    assert_eq!(o.b_rx, rcvbuf, "the ring grew to hold the window, no more");
    let rtt = 2.0 * DELAY_NS as f64 / 1e9;
    assert!(o.rate <= rcvbuf as f64 / rtt * 1.01);
}
