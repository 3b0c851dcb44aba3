//! `corestack impair`: a user-space bridge between two interfaces that drops, reorders,
//! duplicates, corrupts and delays frames with seeded randomness (the same seed gives the same
//! decisions), in both directions alike, until SIGINT/SIGTERM. Run it in a namespace between two
//! veth pairs to test a stack over a bad link. The bridge itself is `nic::bridge`.

use anyhow::{bail, Context, Result};
use clap::Args;
use nic::impair::Impairments;

use cmdline::stop_flag;

/// `impair` options. Percentages are per frame, 0 to 100.
#[derive(Args, Debug)]
pub struct Impair {
    /// First interface.
    #[arg(long = "a", value_name = "IF")]
    if_a: String,
    /// Second interface.
    #[arg(long = "b", value_name = "IF")]
    if_b: String,
    /// Frames dropped, percent.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Frames held back and sent after a later one, percent.
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// Frames sent twice, percent.
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// Frames with one byte flipped, percent.
    #[arg(long, default_value_t = 0.0)]
    corrupt: f64,
    /// Added delay, µs, in each direction (one way: a round trip through the bridge gains
    /// twice this).
    #[arg(long, default_value_t = 0)]
    delay_us: u64,
    /// Random extra delay up to this, µs.
    #[arg(long, default_value_t = 0)]
    jitter_us: u64,
    /// Seed of the random decisions.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn probability(name: &str, pct: f64) -> Result<f64> {
    if !(0.0..=100.0).contains(&pct) {
        bail!("--{name} is a percentage: 0 to 100, not {pct}");
    }
    Ok(pct / 100.0)
}

impl Impair {
    pub fn run(self) -> Result<()> {
        let stop = stop_flag()?;
        let imp = Impairments {
            loss: probability("loss", self.loss)?,
            reorder: probability("reorder", self.reorder)?,
            duplicate: probability("duplicate", self.duplicate)?,
            corrupt: probability("corrupt", self.corrupt)?,
            delay_ns: self.delay_us.saturating_mul(1000),
            jitter_ns: self.jitter_us.saturating_mul(1000),
        };
        for iface in [&self.if_a, &self.if_b] {
            if !std::path::Path::new("/sys/class/net").join(iface).exists() {
                bail!("interface {iface} not found in this network namespace (check `ip link`)");
            }
        }
        // Open first, then say "bridging": from that line on no frame is missed.
        let bridge = nic::bridge::Bridge::open(&self.if_a, &self.if_b)
            .with_context(|| format!("bridging {} and {}", self.if_a, self.if_b))?;
        eprintln!(
            "bridging {} <-> {}: loss {}%, reorder {}%, duplicate {}%, corrupt {}%, delay {} µs (+{} µs), seed {}",
            self.if_a,
            self.if_b,
            self.loss,
            self.reorder,
            self.duplicate,
            self.corrupt,
            self.delay_us,
            self.jitter_us,
            self.seed
        );
        let stats = bridge
            .run(imp, imp, self.seed, &stop)
            .with_context(|| format!("bridging {} and {}", self.if_a, self.if_b))?;
        println!("stopped");
        for (dir, d) in [
            (format!("{} -> {}", self.if_a, self.if_b), &stats.a_to_b),
            (format!("{} -> {}", self.if_b, self.if_a), &stats.b_to_a),
        ] {
            println!(
                "{dir}: pushed {}, delivered {}, lost {}, reordered {}, duplicated {}, corrupted {}, queue full {}, oversize {}",
                d.pushed, d.delivered, d.lost, d.reordered, d.duplicated, d.corrupted, d.queue_full, d.oversize
            );
        }
        let total = |f: fn(&nic::impair::ImpairStats) -> u64| f(&stats.a_to_b) + f(&stats.b_to_a);
        println!(
            "impaired: lost={} reordered={} duplicated={} corrupted={} queue_full={} send_errors={} recv_errors={} socket_drops={}",
            total(|d| d.lost),
            total(|d| d.reordered),
            total(|d| d.duplicated),
            total(|d| d.corrupted),
            total(|d| d.queue_full),
            stats.send_errors,
            stats.recv_errors,
            stats.socket_drops
        );
        Ok(())
    }
}
