//! `corestack-lab`: the benchmarks and the demo, in a binary of their own so that the product
//! binary, `corestack`, carries neither them nor plotters and the font of their plots.
//!
//! Users do not run it by name: `corestack bench ...` and `corestack demo` exec it (it sits
//! next to `corestack`, as `cargo build --release` leaves both in `target/release/`), with the
//! same arguments and `corestack`'s own `argv[0]`, so that help and errors say `corestack`. It
//! starts `corestack`, next to itself, for the servers, daemons and shims it measures and, for
//! its hidden clients and servers (`bench conn-client` and the like), through the same
//! hand-over (see `harness::this_program`).
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use cmdline::exit_on_error;

/// corestack's benchmarks and demo (`corestack bench` and `corestack demo` run this binary).
#[derive(Parser, Debug)]
#[command(name = "corestack-lab", version, about, long_about = None)]
struct Lab {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Measure: ping-pong round-trip latency, or a checked echo transfer.
    Bench(Box<bench::BenchCmd>),
    /// Build two namespaces, compare Linux and corestack echo latency, check a 100 MiB transfer.
    Demo(bench::demo::Demo),
}

fn main() {
    let lab = Lab::parse();
    let result = match lab.command {
        Command::Bench(c) => c.run(),
        Command::Demo(c) => c.run(),
    };
    exit_on_error(result);
}
