//! `corestack bench memcached-load`: the open-loop ETC load generator that `bench memcached`
//! runs in the client namespace (kernel stack), one process per server row.
//!
//! It connects `--conns` connections (retrying for `--connect-secs` while the server starts),
//! sets every key of the key space once (closed loop, so that gets hit), then runs each rate
//! of `--rates` for `--seconds`: requests are due at Poisson arrival times and go, each to a
//! uniformly chosen connection, when due, whether or not earlier ones were answered (open
//! loop); a request's latency runs from its due time to the end of its response, so a late
//! send counts against the server's latency (no coordinated omission). One thread over
//! nonblocking sockets sends what is due, then sleeps in epoll_pwait2 (ns timeout) until the
//! next request is due or an answer arrives, and reads the connections that have one. It
//! sleeps rather than spins so that, on a machine shared with other work, the scheduler wakes
//! it promptly (a spinning thread is preempted for whole time slices). After a step's sending window, answers are awaited for `--drain-secs`; a
//! request still unanswered then counts as unanswered, and the sweep ends (the server is past
//! saturation). The sweep also ends after `--stop-after` consecutive overloaded steps: fewer
//! than 90 % of the offered requests answered per second, or p99 above `--give-up-us` (a
//! server that misses the objective at a low rate still runs the higher ones, so that its
//! throughput shows).
//!
//! Output: one JSON object per step on stdout ([`Step`]); the server's CPU time over the step
//! comes from `/proc/PID/stat` (utime + stime) of each `--cpu-pid`. With `--breakdown-rate`,
//! the step at that rate is also the cost breakdown's window ([`crate::harness::cost`]):
//! perf attached to the `--cpu-pid` processes from its start to its end, one more object
//! `{"breakdown": ...}` after the step's.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rustix::buffer::spare_capacity;
use rustix::event::{epoll, Timespec};
use serde::Serialize;

use super::etc::{self, Op, Parsed, Reply, Schedule};
use crate::harness::cost::{Probe, Window};
use crate::harness::cpu::{cpu_seconds, machine_busy_seconds};
use cmdline::{stop_flag, Interrupted};

/// `bench memcached-load` options.
#[derive(Args, Debug, Clone)]
pub struct Load {
    /// memcached's address.
    #[arg(long)]
    pub target: SocketAddr,
    /// Offered rates to step through, requests per second, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    pub rates: Vec<f64>,
    /// Seconds of sending per rate.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Seconds to wait for the answers after a step's sending window.
    #[arg(long, default_value_t = 1.0)]
    pub drain_secs: f64,
    /// Connections.
    #[arg(long, default_value_t = 32)]
    pub conns: usize,
    /// Keys in the key space (all set before the first step).
    #[arg(long, default_value_t = 10_000)]
    pub keys: usize,
    /// Seed of the workload's random draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Processes whose CPU time (utime + stime) over each step is reported (the server).
    #[arg(long)]
    pub cpu_pid: Vec<u32>,
    /// A step with p99 above this many µs counts as overloaded.
    #[arg(long, default_value_t = 20_000.0)]
    pub give_up_us: f64,
    /// End the sweep after this many consecutive overloaded steps.
    #[arg(long, default_value_t = 2)]
    pub stop_after: usize,
    /// How long to keep retrying the first connection, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub connect_secs: f64,
    /// The offered rate (requests per second) of the step that is the cost breakdown's
    /// window (perf and /proc on the --cpu-pid processes).
    #[arg(long, requires_all = ["breakdown_iface", "breakdown_dir"])]
    pub breakdown_rate: Option<f64>,
    /// The server's interface in its namespace, whose packets the breakdown counts.
    #[arg(long)]
    pub breakdown_iface: Option<String>,
    /// Where the breakdown's perf files go.
    #[arg(long)]
    pub breakdown_dir: Option<std::path::PathBuf>,
}

/// One rate step's figures.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Step {
    /// Requests per second offered (the schedule's rate).
    pub offered_qps: f64,
    /// Requests due in the step.
    pub requests: u64,
    /// Answers received within the step and its drain.
    pub completed: u64,
    /// Requests not answered by the end of the drain.
    pub unanswered: u64,
    /// Answers per second: completed / seconds from the start to the last answer.
    pub achieved_qps: f64,
    /// Latency from due time to answer, µs (unanswered requests count with their wait so far).
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// How late the generator sent, p99, µs (large: the generator, not the server, lagged).
    pub send_lag_p99_us: f64,
    pub hits: u64,
    pub misses: u64,
    pub stored: u64,
    pub errors: u64,
    /// CPU seconds (user + system) of the `--cpu-pid` processes over the step and its drain.
    pub server_cpu_s: f64,
    /// server_cpu_s / completed, µs.
    pub cpu_us_per_req: f64,
    /// Busy time of every CPU (the generator, the server, the kernel's work on either)
    /// over the step / completed, µs: the same generator in every row, so the
    /// difference between rows is the server side's, wherever it ran.
    #[serde(default)]
    pub machine_cpu_us_per_req: f64,
    /// The generator's kernel (its namespace) over the step: TCP segments retransmitted,
    /// tail loss probes sent, and retransmission timeouts (/proc/net/snmp RetransSegs,
    /// /proc/net/netstat TCPLossProbes and TCPTimeouts); what the client had to repair.
    #[serde(default)]
    pub client_retrans: u64,
    #[serde(default)]
    pub client_loss_probes: u64,
    #[serde(default)]
    pub client_timeouts: u64,
}

/// One counter of a /proc/net/snmp-style file: a header line `Group: names...` followed by
/// a line `Group: values...`.
pub fn proc_net_counter(text: &str, group: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(group));
    while let (Some(head), Some(vals)) = (lines.next(), lines.next()) {
        let i = head.split_whitespace().position(|n| n == name);
        if let Some(i) = i {
            return vals.split_whitespace().nth(i)?.parse().ok();
        }
    }
    None
}

/// (RetransSegs, TCPLossProbes, TCPTimeouts) of this network namespace; zeros if unreadable.
fn client_tcp_counters() -> (u64, u64, u64) {
    let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let ext = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    (
        proc_net_counter(&snmp, "Tcp:", "RetransSegs").unwrap_or(0),
        proc_net_counter(&ext, "TcpExt:", "TCPLossProbes").unwrap_or(0),
        proc_net_counter(&ext, "TcpExt:", "TCPTimeouts").unwrap_or(0),
    )
}

/// A request sent and not yet answered.
struct Pending {
    due_ns: u64,
    op: Op,
    key: usize,
    /// The step it belongs to (answers to an earlier step's requests are discarded).
    step: usize,
}

struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
    out_pos: usize,
    inbuf: Vec<u8>,
    pending: VecDeque<Pending>,
}

/// Counts of one step.
struct Tally {
    lat: Histogram<u64>,
    lag: Histogram<u64>,
    completed: u64,
    hits: u64,
    misses: u64,
    stored: u64,
    errors: u64,
    last_answer_ns: u64,
}

impl Tally {
    fn new() -> Result<Tally> {
        let h = || Histogram::new_with_bounds(1, 120_000_000_000, 3).context("histogram");
        Ok(Tally {
            lat: h()?,
            lag: h()?,
            completed: 0,
            hits: 0,
            misses: 0,
            stored: 0,
            errors: 0,
            last_answer_ns: 0,
        })
    }
}

/// The memcached ETC generator over connections to one server.
pub struct Generator {
    conns: Vec<Conn>,
    keys: Vec<Vec<u8>>,
    rng: Pcg64,
    scratch: Vec<u8>,
    epoll: OwnedFd,
    events: Vec<epoll::Event>,
}

/// The longest one wait sleeps (so that the loop sees its deadlines).
const MAX_WAIT: Duration = Duration::from_millis(10);

impl Generator {
    /// Connects `conns` connections to `target` (retrying until `connect` has passed) and draws
    /// the key space of `keys` keys from `seed`.
    pub fn connect(
        target: SocketAddr,
        conns: usize,
        keys: usize,
        seed: u64,
        connect: Duration,
    ) -> Result<Generator> {
        if conns == 0 || keys == 0 {
            bail!("--conns and --keys must be at least 1");
        }
        let mut rng = Pcg64::seed_from_u64(seed);
        let keys = etc::key_space(&mut rng, keys);
        let deadline = Instant::now() + connect;
        let mut v = Vec::with_capacity(conns);
        while v.len() < conns {
            match TcpStream::connect_timeout(&target, Duration::from_secs(1)) {
                Ok(s) => {
                    s.set_nodelay(true).context("TCP_NODELAY")?;
                    s.set_nonblocking(true).context("O_NONBLOCK")?;
                    v.push(Conn {
                        stream: s,
                        out: Vec::new(),
                        out_pos: 0,
                        inbuf: Vec::new(),
                        pending: VecDeque::new(),
                    });
                }
                Err(e) if v.is_empty() && Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("connecting to {target} (connection {})", v.len() + 1)
                    })
                }
            }
        }
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).context("epoll_create1")?;
        for (i, c) in v.iter().enumerate() {
            epoll::add(
                &epoll,
                &c.stream,
                epoll::EventData::new_u64(i as u64),
                epoll::EventFlags::IN,
            )
            .context("epoll_ctl")?;
        }
        Ok(Generator {
            events: Vec::with_capacity(v.len()),
            conns: v,
            keys,
            rng,
            scratch: vec![0; 256 * 1024],
            epoll,
        })
    }

    fn outstanding(&self) -> usize {
        self.conns.iter().map(|c| c.pending.len()).sum()
    }

    /// Queues a request on connection `c`.
    fn queue(&mut self, c: usize, op: Op, key: usize, value_len: usize, due_ns: u64, step: usize) {
        let conn = &mut self.conns[c];
        if conn.out_pos == conn.out.len() {
            conn.out.clear();
            conn.out_pos = 0;
        }
        etc::encode(&mut conn.out, op, &self.keys[key], value_len);
        conn.pending.push_back(Pending {
            due_ns,
            op,
            key,
            step,
        });
    }

    /// Writes what each connection has queued, sleeps up to `wait` (less when a write is
    /// left over) until a connection has something to read, reads those, and tallies the
    /// answers of step `step`.
    fn pump(
        &mut self,
        start: Instant,
        step: usize,
        tally: Option<&mut Tally>,
        wait: Duration,
    ) -> Result<()> {
        let mut tally = tally;
        let mut unwritten = false;
        for conn in &mut self.conns {
            while conn.out_pos < conn.out.len() {
                match conn.stream.write(&conn.out[conn.out_pos..]) {
                    Ok(0) => bail!("the server closed a connection"),
                    Ok(n) => conn.out_pos += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        unwritten = true;
                        break;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e).context("sending to memcached"),
                }
            }
        }
        let wait = if unwritten {
            wait.min(Duration::from_micros(20))
        } else {
            wait.min(MAX_WAIT)
        };
        let ts = Timespec {
            tv_sec: wait.as_secs() as _,
            tv_nsec: wait.subsec_nanos() as _,
        };
        self.events.clear();
        match epoll::wait(&self.epoll, spare_capacity(&mut self.events), Some(&ts)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(()),
            Err(e) => return Err(std::io::Error::from(e)).context("epoll_wait"),
        }
        for ev in &self.events {
            let Some(conn) = self.conns.get_mut(ev.data.u64() as usize) else {
                continue;
            };
            match conn.stream.read(&mut self.scratch) {
                Ok(0) => bail!("the server closed a connection"),
                Ok(n) => conn.inbuf.extend_from_slice(&self.scratch[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("reading from memcached"),
            }
            let now_ns = start.elapsed().as_nanos() as u64;
            let mut used = 0;
            while let Some(p) = conn.pending.front() {
                let key = &self.keys[p.key];
                match etc::parse(&conn.inbuf[used..], p.op, key)
                    .map_err(|e| anyhow!("memcached protocol: {e}"))?
                {
                    Parsed::Incomplete => break,
                    Parsed::Done { reply, len } => {
                        used += len;
                        if let Some(t) = tally.as_deref_mut().filter(|_| p.step == step) {
                            t.completed += 1;
                            t.last_answer_ns = now_ns;
                            let _ = t.lat.record(now_ns.saturating_sub(p.due_ns).max(1));
                            match reply {
                                Reply::Hit => t.hits += 1,
                                Reply::Miss => t.misses += 1,
                                Reply::Stored => t.stored += 1,
                                Reply::Error => t.errors += 1,
                            }
                        }
                        conn.pending.pop_front();
                    }
                }
            }
            if used > 0 && conn.pending.is_empty() && used < conn.inbuf.len() {
                bail!("memcached sent bytes nobody asked for");
            }
            conn.inbuf.drain(..used);
        }
        Ok(())
    }

    /// Sets every key once, at most `window` requests outstanding per connection; errors when
    /// a set is refused or it takes longer than `limit`.
    pub fn preload(&mut self, window: usize, limit: Duration) -> Result<()> {
        let start = Instant::now();
        let mut next = 0;
        let mut tally = Tally::new()?;
        while next < self.keys.len() || self.outstanding() > 0 {
            for c in 0..self.conns.len() {
                while next < self.keys.len() && self.conns[c].pending.len() < window {
                    let len = etc::value_size(&mut self.rng);
                    self.queue(c, Op::Set, next, len, 0, 0);
                    next += 1;
                }
            }
            self.pump(start, 0, Some(&mut tally), Duration::from_millis(1))?;
            if start.elapsed() > limit {
                bail!(
                    "setting the {} keys took longer than {} s",
                    self.keys.len(),
                    limit.as_secs()
                );
            }
        }
        if tally.errors > 0 {
            bail!("memcached refused {} of the preload's sets", tally.errors);
        }
        Ok(())
    }

    /// Runs one open-loop step at `rate` for `secs`, then waits up to `drain` for the answers;
    /// with `probe` (the server's interface, a directory for perf's files) the cost
    /// breakdown's window over the step and its drain.
    pub fn step(
        &mut self,
        index: usize,
        rate: f64,
        secs: f64,
        drain: f64,
        cpu_pids: &[u32],
        probe: Option<(&str, &std::path::Path)>,
    ) -> Result<(Step, Option<Window>)> {
        let probe = probe
            .map(|(iface, dir)| Probe::start(cpu_pids, iface, dir))
            .transpose()?;
        let mut tally = Tally::new()?;
        let mut schedule = Schedule::new(rate);
        let window_ns = (secs * 1e9) as u64;
        let drain_ns = window_ns + (drain * 1e9) as u64;
        let cpu0 = cpu_seconds(cpu_pids)?;
        let machine0 = machine_busy_seconds()?;
        let tcp0 = client_tcp_counters();
        let start = Instant::now();
        let mut next_ns = schedule.next(&mut self.rng);
        let mut requests = 0u64;
        let nconns = self.conns.len();
        loop {
            let now_ns = start.elapsed().as_nanos() as u64;
            while next_ns <= now_ns && next_ns < window_ns {
                let (op, key, len) = etc::next_request(&mut self.rng, self.keys.len());
                let c = self.rng.gen_range(0..nconns);
                self.queue(c, op, key, len, next_ns, index);
                let _ = tally.lag.record((now_ns - next_ns).max(1));
                requests += 1;
                next_ns = schedule.next(&mut self.rng);
            }
            let now_ns = start.elapsed().as_nanos() as u64;
            let until = if next_ns < window_ns {
                next_ns
            } else {
                drain_ns
            };
            let wait = Duration::from_nanos(until.saturating_sub(now_ns));
            self.pump(start, index, Some(&mut tally), wait)?;
            let now_ns = start.elapsed().as_nanos() as u64;
            // Only this step's requests are outstanding: the sweep quiesces between steps.
            if now_ns >= window_ns && (self.outstanding() == 0 || now_ns >= drain_ns) {
                break;
            }
        }
        let end_ns = start.elapsed().as_nanos() as u64;
        let cpu = cpu_seconds(cpu_pids)? - cpu0;
        let window = probe.map(|p| p.finish(tally.completed)).transpose()?;
        let machine = machine_busy_seconds()? - machine0;
        let tcp1 = client_tcp_counters();
        let mut unanswered = 0u64;
        for c in &self.conns {
            for p in c.pending.iter().filter(|p| p.step == index) {
                unanswered += 1;
                let _ = tally.lat.record(end_ns.saturating_sub(p.due_ns).max(1));
            }
        }
        let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;
        let secs_to_last = (tally.last_answer_ns.max(window_ns) as f64 / 1e9).max(1e-3);
        let step = Step {
            offered_qps: rate,
            requests,
            completed: tally.completed,
            unanswered,
            achieved_qps: tally.completed as f64 / secs_to_last,
            p50_us: us(&tally.lat, 0.5),
            p99_us: us(&tally.lat, 0.99),
            p999_us: us(&tally.lat, 0.999),
            max_us: tally.lat.max() as f64 / 1e3,
            send_lag_p99_us: us(&tally.lag, 0.99),
            hits: tally.hits,
            misses: tally.misses,
            stored: tally.stored,
            errors: tally.errors,
            server_cpu_s: cpu,
            cpu_us_per_req: if tally.completed > 0 {
                cpu * 1e6 / tally.completed as f64
            } else {
                0.0
            },
            machine_cpu_us_per_req: if tally.completed > 0 {
                machine * 1e6 / tally.completed as f64
            } else {
                0.0
            },
            client_retrans: tcp1.0.saturating_sub(tcp0.0),
            client_loss_probes: tcp1.1.saturating_sub(tcp0.1),
            client_timeouts: tcp1.2.saturating_sub(tcp0.2),
        };
        Ok((step, window))
    }

    /// Waits up to `limit` until no request is outstanding; false if some still are.
    pub fn quiesce(&mut self, limit: Duration) -> Result<bool> {
        let start = Instant::now();
        while self.outstanding() > 0 {
            if start.elapsed() > limit {
                return Ok(false);
            }
            self.pump(start, usize::MAX, None, Duration::from_millis(1))?;
        }
        Ok(true)
    }
}

impl Load {
    pub fn run(self) -> Result<()> {
        let stop = stop_flag()?;
        if self.rates.iter().any(|r| !(*r > 0.0 && *r <= 10_000_000.0)) {
            bail!("--rates must be in (0, 10000000] requests per second");
        }
        let secs_ok = self.seconds > 0.0 && self.seconds <= 60.0;
        if !(secs_ok && (0.0..=10.0).contains(&self.drain_secs)) {
            bail!("--seconds must be in (0, 60] and --drain-secs in [0, 10]");
        }
        let mut g = Generator::connect(
            self.target,
            self.conns,
            self.keys,
            self.seed,
            Duration::from_secs_f64(self.connect_secs),
        )?;
        g.preload(16, Duration::from_secs(30))?;
        println!("preloaded {} keys", self.keys);
        let mut misses = 0;
        for (i, &rate) in self.rates.iter().enumerate() {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(Interrupted.into());
            }
            let probe = match (&self.breakdown_iface, &self.breakdown_dir) {
                (Some(iface), Some(dir)) if self.breakdown_rate == Some(rate) => {
                    Some((iface.as_str(), dir.as_path()))
                }
                _ => None,
            };
            let (s, window) =
                g.step(i, rate, self.seconds, self.drain_secs, &self.cpu_pid, probe)?;
            println!("{}", serde_json::to_string(&s)?);
            if let Some(w) = window {
                println!("{}", serde_json::json!({ "breakdown": w }));
            }
            if s.unanswered > 0 {
                break;
            }
            let overloaded = s.achieved_qps < 0.9 * s.offered_qps || s.p99_us > self.give_up_us;
            misses = if overloaded { misses + 1 } else { 0 };
            if misses >= self.stop_after {
                break;
            }
            if !g.quiesce(Duration::from_secs_f64(self.drain_secs.max(0.1)))? {
                break;
            }
        }
        Ok(())
    }
}
