//! `corestack bench size-sweep`: TCP ping-pong over message sizes.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::*;

/// `bench size-sweep` options.
#[derive(Args, Debug)]
pub struct SizeSweep {
    /// Message sizes in bytes (TCP; at most 65536).
    #[arg(long, value_delimiter = ',', default_values_t = [64u32, 256, 1024, 4096, 16384, 65536])]
    sizes: Vec<u32>,
    /// Measured seconds per size and stack.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Also write the figures as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw p50/p99 against the message size, Linux and corestack, to FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

impl SizeSweep {
    /// Builds the namespaces, runs every size against each server, prints the table and
    /// writes `--json`/`--plot`. Errors: not root, a server that does not start, Ctrl-C
    /// (a failed point is shown in the table instead).
    pub fn run(self) -> Result<()> {
        let sizes_ok = !self.sizes.is_empty() && self.sizes.iter().all(|&s| s > 0 && s <= 65536);
        let sizes_rule = "--sizes must be 1..=65536 bytes each";
        check_options(self.seconds, sizes_ok, sizes_rule, self.plot.as_ref())?;
        let bed = Bed::new("size-sweep", 161)?;
        let secs = self.seconds.to_string();
        let mut points = Vec::new();
        for stack in STACKS {
            eprintln!("size-sweep: {stack} echo server");
            let mut server = bed.server(stack, &[])?;
            let target = bed.target(stack);
            for &size in &self.sizes {
                let size_s = size.to_string();
                let run = crate::pingpong::command_line("--tcp", &target, &size_s, &secs);
                let args = [&run[..], &["--warmup", "0.3", "--json", "--spin"]].concat();
                let log = format!("pingpong-{stack}-{size}.log");
                let timeout = Duration::from_secs_f64(self.seconds + 20.0);
                let point = match bed.client(&args, &log, timeout) {
                    Ok(v) => Point {
                        stack: stack.into(),
                        x: size,
                        connected: 1,
                        p50_us: f64_of(&v, "p50_us"),
                        p99_us: f64_of(&v, "p99_us"),
                        round_trips_per_s: f64_of(&v, "round_trips_per_s"),
                        note: None,
                        memory: None,
                    },
                    Err(e) if e.downcast_ref::<Interrupted>().is_some() => return Err(e),
                    Err(e) => Point {
                        note: Some(one_line(&e)),
                        ..Point::unmeasured(stack, size)
                    },
                };
                eprintln!(
                    "  {stack} {size} B: p50 {:.1} µs, p99 {:.1} µs, {:.0}/s",
                    point.p50_us, point.p99_us, point.round_trips_per_s
                );
                points.push(point);
            }
            server.terminate(Duration::from_secs(3))?;
        }
        drop(bed);
        let client = "bench pingpong, kernel stack, spins (nonblocking busy loop)";
        let servers = "Linux: serve echo --kernel --spin (one thread, nonblocking busy loop); \
                       corestack: serve echo, inline engine, --poll busy (spins), af_xdp";
        println!(
            "corestack bench size-sweep: TCP ping-pong, one connection, one message in flight"
        );
        println!("client: {client}");
        println!("servers: {servers}");
        println!(
            "{} s measured per size and stack; one server at a time\n",
            self.seconds
        );
        print_table("size (B)", &points, false);
        write_outputs(
            "size-sweep",
            "message size (B)",
            client,
            servers,
            self.seconds,
            &points,
            self.json.as_ref(),
            self.plot.as_ref(),
        )
    }
}
