//! `corestack bench stream-matrix`: one-way TCP goodput, Linux against corestack, on one path,
//! clean and lossy, in one run.
//!
//! ```text
//!  namespace client (CPU 0)                mid                  namespace server (CPU 1)
//!  ck 10.78.1.1 (kernel) ─┐                                     ┌─ sk 10.78.1.2 (kernel)
//!  cc 10.78.1.3 (corestack)┤ br0 ── cd ═══════ direct ═══════ sd ── br0 ├ sc 10.78.1.4 (corestack)
//!                          └──── cm ══ ml [corestack impair] mr ══ sm ──┘
//! ```
//!
//! Each endpoint has its own veth (corestack drives `cc` or `sc` with AF_XDP; the kernel owns
//! `ck` and `sk`); a Linux bridge in each namespace joins them to the path, so all three pairings
//! cross the same links. The clean phase joins the bridges with the direct veth `cd`-`sd`; the
//! lossy phase swaps in `cm`-`sm`, through `corestack impair --loss P` (each direction, seeded).
//! Offloads are off on every veth end, IPv6 is off in the namespaces (`matrix.rs` builds the
//! path, shared with `bench echo-matrix`) unless `--family 6` or `both` asks for it: then the
//! kernel's ends get fd00:78::1 and ::2, corestack's fd00:78::3 and ::4 beside their IPv4
//! addresses, and each phase runs its pairings over IPv6 (after IPv4, with `both`: one table,
//! a row per path, family and direction). In each phase, one at a time: Linux to Linux, a
//! kernel client to a corestack sink (corestack receives), a corestack client to a kernel sink
//! (corestack sends), each `bench stream --duration S` against `serve sink`. Everything goes on
//! exit, also on Ctrl-C (exit 130).

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use netns::ChildGuard;

use crate::harness::children::{json_f64, run_client, LogDir};
use crate::harness::matrix::{
    Family, Lab, Topology, CLIENT_CPU, CORE_CLIENT, CORE_CLIENT6, CORE_SERVER, CORE_SERVER6, PORT,
    SERVER_CPU,
};
use crate::report::median;
use cmdline::{core_cc_arg, stop_flag};
use corestack::CcKind;

/// How long a run may take past its duration (handshake, the tail under loss, the report).
const RUN_SLACK: Duration = Duration::from_secs(40);

/// `bench stream-matrix` options.
#[derive(Args, Debug)]
pub struct StreamMatrix {
    /// Seconds each client sends.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Loss of the lossy phase, percent of frames, each direction.
    #[arg(long, default_value_t = 1.0)]
    loss: f64,
    /// Seed of the impairment bridge.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// corestack's TCP congestion control (default: the Linux senders', `--linux-cc`).
    #[arg(long, value_enum, value_name = "NAME")]
    cc: Option<CcKind>,
    /// The Linux senders' congestion control (TCP_CONGESTION on their sockets); cubic by
    /// default, to compare like with like (this machine's default may be bbr).
    #[arg(long, default_value = "cubic", value_name = "NAME")]
    linux_cc: String,
    /// Rounds per path: each round runs every pairing once, one after the other, and the
    /// table shows the median (on a 2-core machine one run's goodput can differ from the next
    /// by 20 % and more, for Linux as for corestack).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Also write every round's goodput and the medians as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
    /// Draw the medians as bars per path and direction, Linux beside corestack, to FILE.svg
    /// or FILE.png.
    #[arg(long, value_name = "FILE")]
    plot: Option<std::path::PathBuf>,
    /// The address family of the streams: 4, 6 (to the sinks' IPv6 addresses, fd00:78::2 and
    /// fd00:78::4, from fd00:78::1 and fd00:78::3), or both (each path over IPv4, then IPv6;
    /// one table, a row per path, family and direction).
    #[arg(long, value_enum, default_value = "4")]
    family: Family,
}

/// One phase's three goodputs, Mbit/s.
#[derive(Debug, Clone, Default, serde::Serialize)]
struct Phase {
    linux: Vec<f64>,
    core_receives: Vec<f64>,
    core_sends: Vec<f64>,
    /// corestack sending through the AF_XDP tx ring instead of the packet socket.
    core_sends_xsk: Vec<f64>,
}

/// What a run needs to start children.
struct Ctx<'a> {
    lab: Lab<'a>,
    seconds: f64,
    /// `--cc NAME` for corestack, or nothing.
    cc: Vec<&'a str>,
    /// TCP_CONGESTION of the Linux senders.
    linux_cc: &'a str,
}

impl Ctx<'_> {
    /// Starts a sink in the server namespace and waits until it listens.
    fn sink(&self, args: &[&str], log: &str) -> Result<ChildGuard> {
        let mut all = vec!["serve", "sink", "--port", PORT];
        all.extend_from_slice(args);
        self.lab.server(&all, &self.lab.logs.file(log))
    }

    /// Runs `bench stream` from the client namespace; returns its goodput, Mbit/s.
    fn stream(&self, target: &str, args: &[&str], log: &str) -> Result<f64> {
        let log = self.lab.logs.file(log);
        let secs = self.seconds.to_string();
        let target = Family::target(target, PORT);
        let mut all = vec![
            "bench",
            "stream",
            "--target",
            &target,
            "--duration",
            &secs,
            "--json",
        ];
        all.extend_from_slice(args);
        let timeout = Duration::from_secs_f64(self.seconds) + RUN_SLACK;
        let timeout_arg = timeout.as_secs().to_string();
        all.extend_from_slice(&["--timeout", &timeout_arg]);
        let child = self.lab.client(&all, &log)?;
        let v = run_client(child, &log, timeout + Duration::from_secs(5), self.lab.stop)?;
        json_f64(&v, "goodput_mbit_s")
    }

    /// Linux to Linux, corestack to Linux (packet socket, then AF_XDP tx ring), Linux to
    /// corestack, `rounds` times, over `family`.
    fn phase(&self, name: &str, family: Family, rounds: usize) -> Result<Phase> {
        let mut p = Phase::default();
        let name = match family {
            Family::V6 => format!("{name}-v6"),
            _ => name.to_string(),
        };
        for r in 1..=rounds {
            self.round(&name, family, r, &mut p)?;
        }
        Ok(p)
    }

    fn round(&self, name: &str, family: Family, r: usize, p: &mut Phase) -> Result<()> {
        let linux_server = family.linux_server();
        let mut kernel = self
            .sink(
                &["--kernel", "--ip", linux_server],
                &format!("{name}-{r}-sink-linux.log"),
            )
            .context("starting the kernel sink")?;
        eprintln!("{name} {r}: Linux -> Linux, {} s", self.seconds);
        let kernel_cc = ["--kernel-cc", self.linux_cc];
        p.linux.push(
            self.stream(
                linux_server,
                &kernel_cc,
                &format!("{name}-{r}-linux-linux.log"),
            )
            .with_context(|| format!("{name}: Linux -> Linux"))?,
        );
        for (tx, runs) in [
            ("packet", &mut p.core_sends),
            ("xsk", &mut p.core_sends_xsk),
        ] {
            eprintln!(
                "{name} {r}: corestack -> Linux ({tx} tx), {} s",
                self.seconds
            );
            let ips = family.core_ips(CORE_CLIENT, CORE_CLIENT6);
            let mut core_args = vec!["--iface", "cc", "--driver", "af_xdp"];
            core_args.extend(ips.iter().map(String::as_str));
            core_args.extend_from_slice(&["--af-xdp-tx", tx]);
            core_args.extend_from_slice(&self.cc);
            runs.push(
                self.stream(
                    linux_server,
                    &core_args,
                    &format!("{name}-{r}-core-linux-{tx}.log"),
                )
                .with_context(|| format!("{name}: corestack -> Linux ({tx} tx)"))?,
            );
        }
        kernel.terminate(Duration::from_secs(3))?;
        drop(kernel);
        let ips = family.core_ips(&format!("{CORE_SERVER}/24"), &format!("{CORE_SERVER6}/64"));
        let mut sink_args = vec!["--iface", "sc", "--driver", "af_xdp"];
        sink_args.extend(ips.iter().map(String::as_str));
        sink_args.extend_from_slice(&self.cc);
        let mut core = self
            .sink(&sink_args, &format!("{name}-{r}-sink-core.log"))
            .context("starting the corestack sink")?;
        eprintln!("{name} {r}: Linux -> corestack, {} s", self.seconds);
        p.core_receives.push(
            self.stream(
                family.core_server(),
                &kernel_cc,
                &format!("{name}-{r}-linux-core.log"),
            )
            .with_context(|| format!("{name}: Linux -> corestack"))?,
        );
        core.terminate(Duration::from_secs(3))?;
        Ok(())
    }
}

impl StreamMatrix {
    pub fn run(self) -> Result<()> {
        crate::harness::check_seconds("--seconds", self.seconds, 600.0)?;
        if !(1..=20).contains(&self.rounds) {
            bail!("--rounds must be 1 to 20");
        }
        if !(0.0..=50.0).contains(&self.loss) {
            bail!(
                "--loss is a percentage of frames from 0 to 50, not {}",
                self.loss
            );
        }
        if let Some(p) = &self.plot {
            crate::plot::format_of(p)?;
        }
        let stop = stop_flag()?;
        netns::check_privileges()?;
        let exe = crate::harness::this_program()?;
        let logs = LogDir::new("matrix")?;
        eprintln!(
            "creating namespaces (client, mid, server), veth pairs and bridges (offloads off)"
        );
        let topo = Topology::build("sm", true)?;
        if self.family.has_v6() {
            topo.enable_ipv6()?;
        }
        topo.use_impaired(false)?;
        let ctx = Ctx {
            lab: Lab::new(&topo, &exe, &logs, &stop),
            seconds: self.seconds,
            linux_cc: &self.linux_cc,
            cc: match self.cc {
                None => match core_cc_arg(&self.linux_cc) {
                    Some(name) => vec!["--cc", name],
                    None => bail!(
                        "corestack has no congestion control {:?}: choose one with --cc",
                        self.linux_cc
                    ),
                },
                Some(cc) => vec!["--cc", cc.name()],
            },
        };
        let families = self.family.each();
        let mut clean = Vec::new();
        for &family in families {
            clean.push(ctx.phase("clean", family, self.rounds)?);
        }

        let loss = self.loss.to_string();
        let seed = self.seed.to_string();
        let mut bridge = ctx
            .lab
            .bridge(&["--loss", &loss, "--seed", &seed], "impair.log")?;
        topo.through(&mut bridge)?;
        let mut lossy = Vec::new();
        for &family in families {
            lossy.push(ctx.phase("lossy", family, self.rounds)?);
        }
        let totals = bridge.stop()?;
        let field = |f: fn(&crate::harness::matrix::BridgeTotals) -> u64| {
            totals
                .as_ref()
                .map_or("?".to_string(), |t| f(t).to_string())
        };
        let (lost, socket_drops) = (field(|t| t.lost), field(|t| t.socket_drops));

        println!();
        println!(
            "corestack bench stream-matrix: one TCP stream, goodput in Mbit/s, {} s per run, one run at a time, median of {} rounds",
            self.seconds, self.rounds
        );
        println!("path: veth + Linux bridge in each namespace; lossy: through corestack impair, {}% loss each direction (seed {}, {lost} frames lost, {socket_drops} more dropped by the bridge's full sockets)", self.loss, self.seed);
        println!(
            "Linux: blocking sockets, congestion control {}; corestack: inline engine on af_xdp, spinning, {}",
            self.linux_cc,
            self.cc.map_or_else(
                || core_cc_arg(&self.linux_cc).unwrap_or("?"),
                CcKind::name,
            )
        );
        if ctx.lab.pinned {
            println!("client pinned to CPU {CLIENT_CPU}, server to CPU {SERVER_CPU}; the impairment bridge is not pinned");
        }
        println!();
        println!("family: {}", self.family.name());
        println!();
        println!(
            "{:<18}{:<30}{:>10}{:>11}{:>17}   ratio per round",
            "path", "direction", "Linux", "corestack", "corestack/Linux"
        );
        let lossy_name = format!("{}% loss", self.loss);
        let mut cats = Vec::new();
        let (mut linux_bars, mut core_bars) = (Vec::new(), Vec::new());
        let mut phases = Vec::new();
        for (path, ps) in [("clean", &clean), (lossy_name.as_str(), &lossy)] {
            for (&family, p) in families.iter().zip(ps) {
                let name = if families.len() > 1 {
                    format!("{path}, {}", family.name())
                } else {
                    path.to_string()
                };
                phases.push((name, p));
            }
        }
        for (name, p) in &phases {
            let name = name.as_str();
            for (dir, short, core) in [
                ("corestack receives", "receives", &p.core_receives),
                ("corestack sends", "sends", &p.core_sends),
                ("corestack sends, xsk tx", "sends xsk", &p.core_sends_xsk),
            ] {
                row(name, dir, &p.linux, core);
                cats.push(format!("{name}: {short}"));
                linux_bars.push(median(&p.linux));
                core_bars.push(median(core));
            }
        }
        println!();
        println!(
            "Linux = Linux client to Linux server on the same path (the same figures in every row); \
             corestack sends through a packet socket with segmentation offload, or (xsk tx) through \
             the AF_XDP tx ring, one kernel buffer per frame in copy mode"
        );
        drop(topo);
        if let Some(path) = &self.json {
            let report = serde_json::json!({
                "bench": "stream-matrix",
                "unit": "Mbit/s",
                "seconds": self.seconds,
                "rounds": self.rounds,
                "loss_percent": self.loss,
                "seed": self.seed,
                "linux_cc": self.linux_cc,
                "family": self.family,
                "families": families,
                "clean": clean,
                "lossy": lossy,
                "medians": cats.iter().zip(linux_bars.iter().zip(&core_bars)).map(|(c, (l, k))| {
                    serde_json::json!({"case": c, "linux": l, "corestack": k})
                }).collect::<Vec<_>>(),
            });
            crate::plot::write_json(path, &report)?;
        }
        if let Some(path) = &self.plot {
            crate::plot::bars(
                path,
                &format!("stream-matrix: goodput, median of {} rounds", self.rounds),
                "goodput (Mbit/s)",
                &cats,
                &[
                    ("Linux".into(), linux_bars),
                    ("corestack".into(), core_bars),
                ],
            )?;
            println!("plot: {}", path.display());
        }
        Ok(())
    }
}

/// One table row: medians, their ratio, and each round's ratio.
fn row(path: &str, dir: &str, linux: &[f64], core: &[f64]) {
    let ratio = |c: f64, l: f64| {
        if l > 0.0 {
            format!("{:.2}", c / l)
        } else {
            "-".to_string()
        }
    };
    let (l, c) = (median(linux), median(core));
    let rounds: Vec<String> = core.iter().zip(linux).map(|(&c, &l)| ratio(c, l)).collect();
    println!(
        "{path:<18}{dir:<30}{l:>10.1}{c:>11.1}{:>17}   {}",
        ratio(c, l),
        rounds.join(" ")
    );
}
