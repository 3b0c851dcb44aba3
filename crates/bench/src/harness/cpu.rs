//! CPU time as /proc counts it: the utime + stime of a set of processes
//! (`/proc/PID/stat`) and the busy time of the whole machine (`/proc/stat`), in seconds.
//! What the server rows of `bench memcached`, `bench sockperf`, `bench service` and the
//! cost breakdown's window charge to the server.

use anyhow::{anyhow, Context, Result};

/// Clock ticks per second of /proc's CPU times (USER_HZ: 100 on Linux).
const USER_HZ: f64 = 100.0;

/// Sum of utime + stime of `pids`, seconds.
pub fn cpu_seconds(pids: &[u32]) -> Result<f64> {
    let mut total = 0.0;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .with_context(|| format!("reading /proc/{pid}/stat"))?;
        let rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .ok_or_else(|| anyhow!("unexpected /proc/{pid}/stat"))?;
        let f: Vec<&str> = rest.split_whitespace().collect();
        for i in [11, 12] {
            total += f
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| anyhow!("unexpected /proc/{pid}/stat"))?;
        }
    }
    Ok(total / USER_HZ)
}

/// Busy time of all CPUs together (user, nice, system, irq, softirq, steal from the
/// `cpu` line of /proc/stat), seconds: wherever the kernel did a request's work (a
/// veth hands a frame to the receiving stack on the sender's CPU), it is in here.
pub fn machine_busy_seconds() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .ok_or_else(|| anyhow!("no cpu line in /proc/stat"))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let busy: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum();
    Ok(busy as f64 / USER_HZ)
}
