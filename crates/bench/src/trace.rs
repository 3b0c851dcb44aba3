//! `bench pingpong --trace`: the stage table of `corestack trace`, collected by a thread of
//! the benchmark from every corestack process on this machine (this one included when it runs
//! corestack) while the ping-pong runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Result};
use observe::observer_shm::find_segments;
use observe::trace::{TraceControl, TRACE};
use observe::trace_report::{collect, Breakdown, Collected};

/// A collection under way.
pub struct Tracing {
    stop: Arc<AtomicBool>,
    pids: Vec<u32>,
    thread: JoinHandle<Collected>,
}

impl Tracing {
    /// Switches tracing on (every message) in every corestack process found and collects
    /// until [`Tracing::finish`].
    ///
    /// Errors: no corestack process to trace.
    pub fn start() -> Result<Tracing> {
        let mut pids = Vec::new();
        let mut controls = Vec::new();
        for (pid, path) in find_segments(TRACE) {
            if let Ok(c) = TraceControl::open(&path) {
                pids.push(pid);
                controls.push(c);
            }
        }
        if controls.is_empty() {
            bail!("--trace: no corestack process to trace (a corestack server or --iface here)");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("trace-collector".into())
            .spawn(move || {
                collect(&controls, 1, |_| {
                    std::thread::sleep(Duration::from_millis(10));
                    !flag.load(Ordering::Acquire)
                })
            })?;
        Ok(Tracing { stop, pids, thread })
    }

    /// Switches tracing off and prints the stage table, and the wire and peer's share of the
    /// measured median round trip `rtt_p50_us` (the round trip minus the traced stages).
    pub fn finish(self, rtt_p50_us: f64) -> Result<()> {
        self.stop.store(true, Ordering::Release);
        let Ok(got) = self.thread.join() else {
            bail!("--trace: the collector thread failed");
        };
        println!(
            "\ntrace of corestack pid {:?}: {} records, {} dropped (ring full)",
            self.pids,
            got.records.len(),
            got.dropped
        );
        let b = Breakdown::of(&got.records, got.ticks_per_ns, |_| true);
        print!("{}", b.render());
        let stack_us = b.stack_p50_ns() as f64 / 1000.0;
        println!(
            "measured RTT p50 {rtt_p50_us:.2} µs = traced stages (sum of p50s) {stack_us:.2} µs + the rest (wire, untraced peer, client) {:.2} µs",
            rtt_p50_us - stack_us
        );
        Ok(())
    }
}
