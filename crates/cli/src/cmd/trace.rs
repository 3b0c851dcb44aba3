//! `corestack trace`: switches per-stage tracing on in running corestack
//! processes (engines, the daemon, applications), collects for a while,
//! switches it off, and prints where the time of a message goes, stage by
//! stage (`observe::trace`, `observe::trace_report`).

use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use observe::observer_shm::find_segments;
use observe::trace::{TraceControl, TRACE};
use observe::trace_report::{collect, Breakdown};

/// `trace` options.
#[derive(Args, Debug)]
pub struct Trace {
    /// Only this process (repeat for several, e.g. a daemon and its application; default: every
    /// running corestack process).
    #[arg(long)]
    pid: Vec<u32>,
    /// Sample every Nth message (received segment, send).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    every: u64,
    /// How long to collect, seconds.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
}

impl Trace {
    pub fn run(self) -> Result<()> {
        if !(self.seconds > 0.0 && self.seconds <= 3600.0) {
            bail!("--seconds must be between 0 and 3600");
        }
        let mut pids = Vec::new();
        let mut controls = Vec::new();
        for (pid, path) in find_segments(TRACE) {
            if !self.pid.is_empty() && !self.pid.contains(&pid) {
                continue;
            }
            match TraceControl::open(&path) {
                Ok(c) => {
                    pids.push(pid);
                    controls.push(c);
                }
                Err(e) if !self.pid.is_empty() => {
                    bail!(
                        "cannot trace pid {pid} ({}: {e}); run as its user or root",
                        path.display()
                    )
                }
                Err(_) => {}
            }
        }
        if controls.is_empty() {
            match self.pid.as_slice() {
                [] => bail!("no running corestack process to trace (start an engine, daemon or application first)"),
                p => bail!("no corestack process with pid {p:?} to trace (is it running, on this machine's /dev/shm?)"),
            }
        }
        let period = Duration::from_secs_f64(self.seconds);
        // Drained every 2 ms: a ring of 32 768 records holds 16 ms at 2
        // million records/s (a ping-pong between two stacks in one process
        // traced at every message), so a late drain still finds room.
        let got = collect(&controls, self.every, |t| {
            std::thread::sleep(Duration::from_millis(2));
            t < period
        });
        println!(
            "corestack trace: pid {pids:?}, {:.1} s, every {} message(s): {} records, {} dropped (ring full)",
            self.seconds,
            self.every,
            got.records.len(),
            got.dropped
        );
        if got.records.is_empty() {
            println!("no traced traffic (was any TCP data sent or received meanwhile?)");
            return Ok(());
        }
        let b = Breakdown::of(&got.records, got.ticks_per_ns, |_| true);
        print!("{}", b.render());
        Ok(())
    }
}
