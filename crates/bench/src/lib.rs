//! Benchmarks and the demo of `corestack`, kept out of the product binary: they are the
//! `corestack-lab` binary (`src/main.rs`), which `corestack bench ...` and `corestack demo`
//! exec, next to `corestack`; it runs [`BenchCmd::run`] and [`demo::Demo`]. The product crate
//! `corestack-cli` does not depend on this one, so plotters and the plots' font stay here.
//!
//! ```text
//!  pingpong       bench pingpong: round-trip latency (HDR histogram)
//!  floor          bench floor: the ping-pong's tail against raw AF_XDP frames (and their
//!                 hidden echo and ping)
//!  plot           --plot FILE.svg|png and --json FILE of every benchmark (plotters)
//!  report         what the reports share: median (written once), padded columns, indent
//!  transfer       bench transfer: echo N bytes, compare sha256
//!  stream         bench stream: one-way goodput to a sink
//!  stream_matrix  bench stream-matrix: goodput, Linux vs corestack, clean and lossy
//!  echo_matrix/   bench echo-matrix: echo through the impairment bridge, case by case
//!                 (cases: the impairments; run: one run watched; report: table, JSON, plot)
//!  sweep          bench size-sweep, conn-sweep: Linux vs corestack over message sizes and
//!                 over concurrent connections (and their hidden client and Linux server)
//!  service        bench service: service mode vs embedded mode vs Linux
//!  memcached/     bench memcached: unmodified memcached, Linux vs the shim, ETC workload
//!                 (etc: the workload model and protocol; load: the open-loop generator)
//!  sockperf       bench sockperf: sockperf's TCP ping-pong, Linux server vs the shimmed one
//!  demo           demo: Linux vs corestack echo latency, a checked 100 MiB transfer
//!  harness/       children (`corestack`, next to this binary, in a namespace, pinned,
//!                 logged), the matrix path, and shim: unmodified servers on Linux and under
//!                 `corestack exec`, row by row
//!  trace          bench pingpong --trace: the stage table while the ping-pong runs
//! ```
//!
//! The stack options, the socket traits that let one loop drive corestack or the kernel stack,
//! the stop flag and the one-line errors are crate `cmdline`'s, shared with the product's
//! commands; `bench` depends on the product, never the reverse.
//!
//! Every benchmark that builds namespaces removes them, and every process it started, when it
//! ends, also on error and Ctrl-C. Errors are `anyhow`, as in the rest of the command line.
#![deny(unsafe_code)]

pub mod conn_rate;
pub mod demo;
pub mod echo_matrix;
pub mod floor;
mod harness;
pub mod memcached;
pub mod pingpong;
pub mod plot;
pub mod report;
pub mod scale;
pub mod service;
pub mod sockperf;
pub mod stream;
pub mod stream_matrix;
pub mod sweep;
pub mod trace;
pub mod transfer;

use anyhow::Result;
use clap::Subcommand;

/// Benchmarks.
#[derive(Subcommand, Debug)]
pub enum Bench {
    /// Ping-pong round-trip latency against an echo server.
    Pingpong(pingpong::Pingpong),
    /// The 64-byte TCP ping-pong's p50/p99/p99.9, Linux and corestack (adaptive and busy
    /// polling), against raw AF_XDP frames bounced between the same veth ends (the floor), in
    /// own namespaces.
    Floor(floor::Floor),
    /// The floor's server: bounces raw frames back through an AF_XDP socket.
    #[command(hide = true)]
    XdpEcho(floor::XdpEcho),
    /// The floor's client: raw frames through an AF_XDP socket, one in flight (JSON line).
    #[command(hide = true)]
    XdpPing(floor::XdpPing),
    /// Send N bytes to an echo server, read them back, compare sha256.
    Transfer(transfer::Transfer),
    /// One-way TCP goodput to a sink server (`serve sink`).
    Stream(stream::StreamBench),
    /// Goodput Linux vs corestack, both directions, clean and lossy path, in own namespaces.
    StreamMatrix(stream_matrix::StreamMatrix),
    /// Echo of N MiB (both directions at once), Linux vs corestack server, through the
    /// impairment bridge per case and seed; reports stalls with both sides' TCP state.
    EchoMatrix(echo_matrix::EchoMatrix),
    /// Service mode next to embedded mode and Linux: latency, polling policies' CPU use,
    /// 64-byte messages per second, in own namespaces.
    Service(service::ServiceBench),
    /// Unmodified memcached on Linux and under `corestack exec` (embedded, inline, service),
    /// Facebook's ETC workload, open-loop, a sweep of rates; in own namespaces.
    Memcached(memcached::MemcachedBench),
    /// The open-loop ETC generator `bench memcached` runs per row (one server, a rate sweep,
    /// one JSON line per rate).
    #[command(hide = true)]
    MemcachedLoad(memcached::load::Load),
    /// sockperf's 64-byte TCP ping-pong: its server on Linux and under `corestack exec`, its
    /// client on Linux; in own namespaces.
    Sockperf(sockperf::SockperfBench),
    /// TCP ping-pong over message sizes (64 B to 64 KiB), Linux vs corestack server, in own
    /// namespaces: p50/p99 and round trips/s per size.
    SizeSweep(sweep::SizeSweep),
    /// 1 to 10 000 concurrent connections each doing ping-pong, Linux vs corestack server, in
    /// own namespaces: round trips/s and p99 per connection count.
    ConnSweep(sweep::ConnSweep),
    /// conn-sweep's client: N kernel connections with one message in flight each (epoll).
    #[command(hide = true)]
    ConnClient(sweep::ConnClient),
    /// conn-sweep's Linux server: TCP echo, one thread, epoll polled without sleeping.
    #[command(hide = true)]
    ConnEcho(sweep::ConnEcho),
    /// Short connections at rate (connect, request, echo, close), Linux vs corestack server
    /// and a corestack client, in own namespaces: connections/s, p50/p99, failures.
    ConnRate(conn_rate::ConnRate),
    /// conn-rate's client: K clients looping over connect, request, echo, close.
    #[command(hide = true)]
    RateClient(conn_rate::RateClient),
    /// 1 to N engines next to Linux with as many queues and threads: CPU work per request
    /// (one thread, mem wire and loopback), messages/s and memcached -t N's peak ETC QPS at
    /// the SLA on an N-queue veth, with QPS(N)/(N·QPS(1)).
    Scale(scale::ScaleBench),
}

/// `corestack bench`: the CPUs every benchmark pins its parties to, and the benchmark.
#[derive(clap::Args, Debug)]
pub struct BenchCmd {
    /// CPUs of the clients and load generators, a `taskset -c` list (e.g. `0` or `8-15`);
    /// default CPU 0. Benchmarks that pin (on machines of 2 CPUs or more) use it.
    #[arg(long, global = true, value_name = "LIST")]
    client_cpus: Option<String>,
    /// CPUs of the servers (the program, its engine threads, the daemon), a `taskset -c` list;
    /// default CPU 1.
    #[arg(long, global = true, value_name = "LIST")]
    server_cpus: Option<String>,
    /// CPUs of corestack's engine threads in the servers the benchmarks start (`--cpus` of
    /// `serve`, `exec` and `run`: engine i on the i-th, cycling), a `taskset -c` list; default
    /// the server CPUs. A benchmark that runs corestack in its own process takes `--cpus`.
    #[arg(long, global = true, value_name = "LIST", value_parser = engine_cpu_list)]
    engine_cpus: Option<String>,
    #[command(subcommand)]
    bench: Bench,
}

/// Checks `--engine-cpus` and writes it back as a plain comma list.
fn engine_cpu_list(text: &str) -> std::result::Result<String, String> {
    let cpus = cmdline::cpu_list(text)?.0;
    Ok(cpus
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(","))
}

impl BenchCmd {
    /// Runs the benchmark with these CPUs.
    pub fn run(self) -> Result<()> {
        harness::set_cpus(self.client_cpus, self.server_cpus, self.engine_cpus);
        self.bench.run()
    }
}

impl Bench {
    /// Runs the benchmark.
    pub fn run(self) -> Result<()> {
        match self {
            Bench::Pingpong(p) => p.run(),
            Bench::Floor(f) => f.run(),
            Bench::XdpEcho(e) => e.run(),
            Bench::XdpPing(p) => p.run(),
            Bench::Transfer(t) => t.run(),
            Bench::Stream(s) => s.run(),
            Bench::StreamMatrix(m) => m.run(),
            Bench::EchoMatrix(m) => m.run(),
            Bench::Service(s) => s.run(),
            Bench::Memcached(m) => m.run(),
            Bench::MemcachedLoad(l) => l.run(),
            Bench::Sockperf(s) => s.run(),
            Bench::SizeSweep(s) => s.run(),
            Bench::ConnSweep(s) => s.run(),
            Bench::ConnClient(c) => c.run(),
            Bench::ConnEcho(e) => e.run(),
            Bench::ConnRate(r) => r.run(),
            Bench::RateClient(c) => c.run(),
            Bench::Scale(s) => s.run(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchCmd,
    }

    #[test]
    fn engine_cpus_is_a_taskset_list_written_back_plainly_and_others_are_refused() {
        assert_eq!(engine_cpu_list("2-3,6").as_deref(), Ok("2,3,6"));
        assert_eq!(engine_cpu_list("5").as_deref(), Ok("5"));
        for bad in ["", "x", "3-1"] {
            assert!(engine_cpu_list(bad).is_err(), "{bad:?} is refused");
        }
        let cli = Cli::try_parse_from(["bench", "floor", "--engine-cpus", "4-5"]).unwrap();
        assert_eq!(cli.bench.engine_cpus.as_deref(), Some("4,5"));
        assert!(Cli::try_parse_from(["bench", "floor", "--engine-cpus", "four"]).is_err());
    }
}
