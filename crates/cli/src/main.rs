//! `corestack`: run echo servers, benchmarks, a netcat, an impairment bridge and the demo on the
//! corestack user-space TCP/IP stack (and, for comparison, on the Linux kernel stack).
//!
//! One file per subcommand under `cmd/`; what the observing commands read and serve (published
//! tables, Prometheus rendering, the metrics HTTP server) under `observe/`. The daemon (`run`) is
//! crate `service`'s. The benchmarks and the demo are crate `bench`'s and live in its own binary,
//! `corestack-lab`, next to this one: `bench` and `demo` exec it (`cmd/lab.rs`), so that this
//! binary carries neither them nor plotters. What the commands share (stack options, the socket
//! traits that let one loop drive both stacks, the stop flag, one-line errors) is crate
//! `cmdline`'s, which `bench` uses too. Errors are `anyhow` here (and in `bench`) only, printed as
//! one line `error: ...` that says what to do, with a non-zero exit.
#![forbid(unsafe_code)]

mod cmd;
mod observe;

use cmdline::exit_on_error;

use clap::{Parser, Subcommand};

/// corestack: a user-space TCP/IP stack for Linux (AF_XDP or TAP), and tools around it.
#[derive(Parser, Debug)]
#[command(name = "corestack", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the corestack daemon: own an interface, serve applications through shared memory.
    Run(cmd::run::Run),
    /// Run a server (TCP and UDP echo) on corestack or on the kernel stack.
    #[command(subcommand)]
    Serve(cmd::serve::Serve),
    /// Measure: ping-pong round-trip latency, or a checked echo transfer.
    Bench,
    /// A minimal netcat: stdin -> socket, socket -> stdout.
    Nc(cmd::nc::Nc),
    /// Bridge two interfaces, dropping/reordering/duplicating/corrupting/delaying frames.
    Impair(cmd::impair::Impair),
    /// Run a program on corestack through the LD_PRELOAD sockets shim.
    Exec(cmd::exec::Exec),
    /// Build two namespaces, compare Linux and corestack echo latency, check a 100 MiB transfer.
    Demo,
    /// Counters of running corestack engines (packets, bytes, drops by reason, retransmissions).
    Stat(cmd::stat::Stat),
    /// Sockets of running corestack engines, like `ss -ti`: 4-tuple, state, rtt, cwnd, in flight.
    Ss(cmd::ss::Ss),
    /// Frames running corestack engines receive and send, filtered in the engine, as pcap.
    Capture(cmd::capture::Capture),
    /// Per-stage latency of running corestack engines and applications (p50/p99/mean ns).
    Trace(cmd::trace::Trace),
}

fn main() {
    let args: Vec<_> = std::env::args_os().collect();
    // `bench` and `demo` are the lab's (`cmd/lab.rs`): handed over as typed, before parsing.
    if let Some(lab_args) = cmd::lab::lab_args(&args) {
        exit_on_error(Err(cmd::lab::exec_lab(lab_args)));
    }
    let cli = Cli::parse_from(&args);
    let result = match cli.command {
        Command::Run(c) => c.run(),
        Command::Serve(c) => c.run(),
        Command::Nc(c) => c.run(),
        Command::Impair(c) => c.run(),
        Command::Exec(c) => c.run(),
        Command::Stat(c) => c.run(),
        Command::Ss(c) => c.run(),
        Command::Trace(c) => c.run(),
        Command::Capture(c) => c.run(),
        // Taken by `lab_args` above; the same hand-over if clap ever gets them.
        Command::Bench | Command::Demo => Err(cmd::lab::exec_lab(&args[1..])),
    };
    exit_on_error(result);
}
