//! What the matrix benchmarks (`bench stream-matrix`, `bench echo-matrix`) share: their path
//! through namespaces of their own, and the impairment bridge on it.
//!
//! ```text
//!  namespace client (CPU 0)                mid                  namespace server (CPU 1)
//!  ck 10.78.1.1 (kernel) ─┐                                     ┌─ sk 10.78.1.2 (kernel)
//!  cc 10.78.1.3 (corestack)┤ br0 ── cd ═══════ direct ═══════ sd ── br0 ├ sc 10.78.1.4 (corestack)
//!                          └──── cm ══ ml [corestack impair] mr ══ sm ──┘
//! ```
//!
//! Each endpoint has its own veth (corestack drives `cc` or `sc` with AF_XDP; the kernel owns
//! `ck` and `sk`; `cc` only when asked for); a Linux bridge in each namespace joins them to the
//! path, so every pairing crosses the same links. [`Topology::use_impaired`] joins the bridges
//! either with the direct veth `cd`-`sd` or with `cm`-`sm`, through `corestack impair` in `mid`
//! ([`ImpairBridge`]). Offloads (tx checksum, TSO, GSO, GRO) are off on every veth end; IPv6 is off
//! in the three namespaces, so no router solicitation or MLD report crosses the bridge, until
//! [`Topology::enable_ipv6`] turns it on for the kernel's two ends (`--family 6` or `both`). Dropping
//! the [`Topology`] kills what still runs in its namespaces and deletes them with their links.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use netns::{veth_pair, ChildGuard, Netns};
use serde::Serialize;

use crate::harness::children::{spawn, wait_ready, LogDir};

pub use crate::harness::{CLIENT_CPU, SERVER_CPU};
/// The servers' TCP port.
pub const PORT: &str = "5201";
/// The kernel client's address (on `ck`).
pub const LINUX_CLIENT: &str = "10.78.1.1/24";
/// The kernel server's address (on `sk`).
pub const LINUX_SERVER: &str = "10.78.1.2";
/// corestack's client address (on `cc`).
pub const CORE_CLIENT: &str = "10.78.1.3/24";
/// corestack's server address (on `sc`).
pub const CORE_SERVER: &str = "10.78.1.4";
/// The kernel client's IPv6 address (on `ck`; unique local, RFC 4193, only inside these
/// namespaces), after [`Topology::enable_ipv6`].
pub const LINUX_CLIENT6: &str = "fd00:78::1/64";
/// The kernel server's IPv6 address (on `sk`).
pub const LINUX_SERVER6: &str = "fd00:78::2";
/// corestack's client IPv6 address (on `cc`).
pub const CORE_CLIENT6: &str = "fd00:78::3/64";
/// corestack's server IPv6 address (on `sc`).
pub const CORE_SERVER6: &str = "fd00:78::4";

/// An address family of the matrix runs (`--family`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum Family {
    /// IPv4 only.
    #[value(name = "4")]
    #[serde(rename = "ipv4")]
    V4,
    /// IPv6 only.
    #[value(name = "6")]
    #[serde(rename = "ipv6")]
    V6,
    /// IPv4, then IPv6, in one run (one table).
    #[value(name = "both")]
    #[serde(rename = "both")]
    Both,
}

impl Family {
    /// The single families this choice runs, IPv4 first.
    pub fn each(self) -> &'static [Family] {
        match self {
            Family::V4 => &[Family::V4],
            Family::V6 => &[Family::V6],
            Family::Both => &[Family::V4, Family::V6],
        }
    }

    /// "IPv4" or "IPv6" ("IPv4+IPv6" for both).
    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
            Family::Both => "IPv4+IPv6",
        }
    }

    /// Whether IPv6 is among the families.
    pub fn has_v6(self) -> bool {
        self != Family::V4
    }

    /// `ip:port` of a socket address on `ip` (brackets around IPv6).
    pub fn target(ip: &str, port: &str) -> String {
        if ip.contains(':') {
            format!("[{ip}]:{port}")
        } else {
            format!("{ip}:{port}")
        }
    }

    /// The kernel server's address in this family.
    pub fn linux_server(self) -> &'static str {
        if self == Family::V6 {
            LINUX_SERVER6
        } else {
            LINUX_SERVER
        }
    }

    /// corestack's server address in this family.
    pub fn core_server(self) -> &'static str {
        if self == Family::V6 {
            CORE_SERVER6
        } else {
            CORE_SERVER
        }
    }

    /// The `--ip` options of a corestack end: its IPv4 address (the stack needs one), and in
    /// IPv6 its IPv6 address too (then `serve echo` and `serve sink` listen on `[::]`).
    pub fn core_ips(self, v4: &str, v6: &str) -> Vec<String> {
        let mut v = vec!["--ip".to_string(), v4.to_string()];
        if self == Family::V6 {
            v.extend(["--ip".to_string(), v6.to_string()]);
        }
        v
    }
}

/// The three namespaces, the links and the bridges; removed on drop (after the children).
pub struct Topology {
    /// The client namespace: `ck` (and `cc`), `br0`, `cd`, `cm`.
    pub client: Netns,
    /// The server namespace: `sk`, `sc`, `br0`, `sd`, `sm`.
    pub server: Netns,
    /// The impairment bridge's namespace: `ml`, `mr`.
    pub mid: Netns,
}

fn ip(ns: &Netns, args: &[&str]) -> Result<()> {
    ns.run("ip", args)
        .map(drop)
        .with_context(|| format!("ip {} in {}", args.join(" "), ns.name()))
}

fn sysctl(ns: &Netns, setting: &str) -> Result<()> {
    ns.run("sysctl", &["-qw", setting])
        .map(drop)
        .with_context(|| format!("sysctl {setting} in {}", ns.name()))
}

/// The MAC address of `ifname` in `ns`.
fn mac(ns: &Netns, ifname: &str) -> Result<String> {
    let path = format!("/sys/class/net/{ifname}/address");
    Ok(ns
        .run("cat", &[&path])
        .with_context(|| format!("reading the MAC address of {ifname} in {}", ns.name()))?
        .trim()
        .to_string())
}

impl Topology {
    /// Builds it; the namespaces are named `{prefix}c`, `{prefix}s` and `{prefix}m` (plus the
    /// pid and a counter). `core_client`: give the client namespace corestack's end `cc` too.
    pub fn build(prefix: &str, core_client: bool) -> Result<Topology> {
        let client = Netns::new(&format!("{prefix}c"))?;
        let server = Netns::new(&format!("{prefix}s"))?;
        let mid = Netns::new(&format!("{prefix}m"))?;
        for ns in [&client, &server, &mid] {
            for scope in ["all", "default"] {
                sysctl(ns, &format!("net.ipv6.conf.{scope}.disable_ipv6=1"))?;
            }
        }
        let client_ends: &[&str] = if core_client { &["ck", "cc"] } else { &["ck"] };
        for (ns, ends) in [(&client, client_ends), (&server, &["sk", "sc"][..])] {
            // Answer ARP only on the interface that has the address: else br0 answers for sk's
            // address too (the default, arp_ignore=0), and a peer that takes br0's MAC loses the
            // path.
            sysctl(ns, "net.ipv4.conf.all.arp_ignore=1")?;
            // No multicast snooping: Neighbor Solicitations (to solicited-node groups) are
            // flooded like broadcast ARP, whether or not an MLD report was seen.
            ip(
                ns,
                &[
                    "link",
                    "add",
                    "br0",
                    "type",
                    "bridge",
                    "forward_delay",
                    "0",
                    "mcast_snooping",
                    "0",
                ],
            )?;
            ip(ns, &["link", "set", "br0", "up"])?;
            for end in ends {
                let port = format!("{end}b");
                veth_pair(ns, end, ns, &port)?;
                ip(ns, &["link", "set", &port, "master", "br0"])?;
            }
        }
        veth_pair(&client, "cd", &server, "sd")?;
        veth_pair(&client, "cm", &mid, "ml")?;
        veth_pair(&mid, "mr", &server, "sm")?;
        netns::addr_add(&client, "ck", LINUX_CLIENT)?;
        netns::addr_add(&server, "sk", &format!("{LINUX_SERVER}/24"))?;
        Ok(Topology {
            client,
            server,
            mid,
        })
    }

    /// Permanent neighbour entries for the kernel's ends: the client's for both servers, the
    /// kernel server's for the client. The kernel then sends no ARP through the path (corestack
    /// still resolves the client itself, once per start).
    pub fn static_neighbours(&self) -> Result<()> {
        self.permanent_neighbours(&[], LINUX_CLIENT, LINUX_SERVER, CORE_SERVER)
    }

    /// `ip FAMILY neigh replace ... nud permanent` for the kernel's ends: the client's
    /// (`client`, `ADDR/PREFIX`) entries for both servers, the kernel server's for the client.
    fn permanent_neighbours(
        &self,
        family: &[&str],
        client: &str,
        linux_server: &str,
        core_server: &str,
    ) -> Result<()> {
        let client_ip = client.split('/').next().unwrap_or(client);
        for (ns, addr, lladdr, dev) in [
            (&self.client, linux_server, mac(&self.server, "sk")?, "ck"),
            (&self.client, core_server, mac(&self.server, "sc")?, "ck"),
            (&self.server, client_ip, mac(&self.client, "ck")?, "sk"),
        ] {
            let neigh = [
                "neigh",
                "replace",
                addr,
                "lladdr",
                &lladdr,
                "dev",
                dev,
                "nud",
                "permanent",
            ];
            ip(ns, &[family, &neigh[..]].concat())?;
        }
        Ok(())
    }

    /// Turns IPv6 on for the kernel's ends only (`ck`, `sk`: the rest stays IPv6-off, so only
    /// they send IPv6 of their own), without Duplicate Address Detection or router
    /// solicitations, and gives them [`LINUX_CLIENT6`] and [`LINUX_SERVER6`] (`nodad`), with
    /// permanent neighbour entries like [`Topology::static_neighbours`]'s: the client's for both
    /// servers, the kernel server's for the client. corestack resolves the client itself with
    /// Neighbor Discovery (RFC 4861), which `ck` answers.
    pub fn enable_ipv6(&self) -> Result<()> {
        for (ns, end, addr) in [
            (&self.client, "ck", LINUX_CLIENT6.to_string()),
            (&self.server, "sk", format!("{LINUX_SERVER6}/64")),
        ] {
            for setting in ["accept_dad=0", "router_solicitations=0", "disable_ipv6=0"] {
                sysctl(ns, &format!("net.ipv6.conf.{end}.{setting}"))?;
            }
            ip(ns, &["-6", "addr", "add", &addr, "dev", end, "nodad"])?;
        }
        self.permanent_neighbours(&["-6"], LINUX_CLIENT6, LINUX_SERVER6, CORE_SERVER6)
    }

    /// Joins the bridges through the direct link (false) or through the impairment bridge, and
    /// checks that the kernel client reaches the kernel server (ping: 10 tries, 1 s each).
    pub fn use_impaired(&self, impaired: bool) -> Result<()> {
        let (off, on) = if impaired {
            (("cd", "sd"), ("cm", "sm"))
        } else {
            (("cm", "sm"), ("cd", "sd"))
        };
        ip(&self.client, &["link", "set", off.0, "nomaster"])?;
        ip(&self.server, &["link", "set", off.1, "nomaster"])?;
        ip(&self.client, &["link", "set", on.0, "master", "br0"])?;
        ip(&self.server, &["link", "set", on.1, "master", "br0"])?;
        for _ in 0..10 {
            if self
                .client
                .run("ping", &["-c", "1", "-W", "1", LINUX_SERVER])
                .is_ok()
            {
                return Ok(());
            }
        }
        bail!("{LINUX_SERVER} does not answer ping through the bridges: the path is down")
    }

    /// [`Topology::use_impaired`]`(true)` with `bridge` running; an error says what became of
    /// the bridge.
    pub fn through(&self, bridge: &mut ImpairBridge) -> Result<()> {
        self.use_impaired(true)
            .map_err(|e| e.context(format!("corestack impair {}", bridge.describe())))
    }
}

/// Starts this program in the namespaces: clients pinned to [`CLIENT_CPU`], servers to
/// [`SERVER_CPU`] (when there are 2 CPUs or more), the bridge not pinned; each child's stderr
/// in a log of `logs`.
pub struct Lab<'a> {
    /// Where the children run.
    pub topo: &'a Topology,
    /// This program.
    pub exe: &'a Path,
    /// The children's logs.
    pub logs: &'a LogDir,
    /// Set by SIGINT/SIGTERM: waiting for a child stops.
    pub stop: &'a AtomicBool,
    /// Whether clients and servers are pinned.
    pub pinned: bool,
    /// Whether the impairment bridge is pinned to the clients' CPU (when pinned at all), so
    /// that the wire never takes the server's CPU; else the scheduler places it.
    pub bridge_on_client_cpu: bool,
}

impl<'a> Lab<'a> {
    /// Pins when this machine has 2 CPUs or more.
    pub fn new(
        topo: &'a Topology,
        exe: &'a Path,
        logs: &'a LogDir,
        stop: &'a AtomicBool,
    ) -> Lab<'a> {
        let pinned = crate::harness::can_pin();
        Lab {
            topo,
            exe,
            logs,
            stop,
            pinned,
            bridge_on_client_cpu: false,
        }
    }

    /// The clients' CPU, if pinned.
    pub fn client_cpu(&self) -> Option<&'static str> {
        self.pinned.then_some(CLIENT_CPU.as_str())
    }

    /// The servers' CPU, if pinned.
    pub fn server_cpu(&self) -> Option<&'static str> {
        self.pinned.then_some(SERVER_CPU.as_str())
    }

    /// Starts a server (`args`) in the server namespace and waits until it says "listening".
    pub fn server(&self, args: &[&str], log: &Path) -> Result<ChildGuard> {
        let mut child = spawn(&self.topo.server, self.server_cpu(), self.exe, args, log)?;
        wait_ready(&mut child, "listening", log, false, self.stop)?;
        Ok(child)
    }

    /// Starts a client (`args`) in the client namespace.
    pub fn client(&self, args: &[&str], log: &Path) -> Result<ChildGuard> {
        spawn(&self.topo.client, self.client_cpu(), self.exe, args, log)
    }

    /// Starts the impairment bridge with `args` (see [`ImpairBridge::start`]), its log `log`.
    pub fn bridge(&self, args: &[&str], log: &str) -> Result<ImpairBridge> {
        let cpu = self.client_cpu().filter(|_| self.bridge_on_client_cpu);
        ImpairBridge::start(
            self.topo,
            self.exe,
            self.logs.file(log),
            args,
            cpu,
            self.stop,
        )
    }
}

/// A `corestack impair` between `ml` and `mr` in the `mid` namespace; killed on drop.
pub struct ImpairBridge {
    child: ChildGuard,
    log: PathBuf,
}

impl ImpairBridge {
    /// Starts `corestack impair --a ml --b mr ARGS` (on `cpu`, or where the scheduler puts
    /// it) and waits until it bridges; its stderr goes to `log`.
    pub fn start(
        topo: &Topology,
        exe: &Path,
        log: PathBuf,
        args: &[&str],
        cpu: Option<&str>,
        stop: &AtomicBool,
    ) -> Result<ImpairBridge> {
        let mut all = vec!["impair", "--a", "ml", "--b", "mr"];
        all.extend_from_slice(args);
        let mut child = spawn(&topo.mid, cpu, exe, &all, &log)?;
        wait_ready(&mut child, "bridging", &log, true, stop)
            .context("starting corestack impair")?;
        Ok(ImpairBridge { child, log })
    }

    /// "running" or "exited (status)", and its log on one line.
    pub fn describe(&mut self) -> String {
        let state = match self.child.wait_timeout(Duration::ZERO) {
            Ok(Some(status)) => format!("exited ({status})"),
            Ok(None) => "running".to_string(),
            Err(e) => format!("unknown ({e})"),
        };
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        format!("{state}: {}", log.trim().replace('\n', " | "))
    }

    /// Stops it (SIGTERM, then SIGKILL after 3 s) and returns its totals, if it printed them.
    pub fn stop(mut self) -> Result<Option<BridgeTotals>> {
        self.child.terminate(Duration::from_secs(3))?;
        Ok(self
            .child
            .remaining_lines(Duration::from_secs(2))
            .iter()
            .find_map(|l| BridgeTotals::parse(l)))
    }
}

/// What the impairment bridge did, both directions together, in frames (its `impaired:` line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BridgeTotals {
    /// Dropped by the loss model.
    pub lost: u64,
    /// Held back behind a later frame.
    pub reordered: u64,
    /// Sent twice.
    pub duplicated: u64,
    /// One bit flipped.
    pub corrupted: u64,
    /// Dropped because the bridge's queue of a direction was full (loss beyond the model).
    pub queue_full: u64,
    /// Dropped by the kernel before the bridge read them, its socket buffer being full (loss
    /// beyond the model).
    pub socket_drops: u64,
}

impl BridgeTotals {
    /// Reads `impaired: lost=N reordered=N ...`; None for another line. A missing field is 0.
    pub fn parse(line: &str) -> Option<BridgeTotals> {
        let rest = line.strip_prefix("impaired:")?;
        let field = |key: &str| {
            rest.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        Some(BridgeTotals {
            lost: field("lost"),
            reordered: field("reordered"),
            duplicated: field("duplicated"),
            corrupted: field("corrupted"),
            queue_full: field("queue_full"),
            socket_drops: field("socket_drops"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bridge_totals_from_the_impaired_line() {
        let t = BridgeTotals::parse(
            "impaired: lost=12 reordered=3 duplicated=4 corrupted=1 queue_full=7 send_errors=0 recv_errors=0 socket_drops=2",
        )
        .unwrap();
        assert_eq!(
            t,
            BridgeTotals {
                lost: 12,
                reordered: 3,
                duplicated: 4,
                corrupted: 1,
                queue_full: 7,
                socket_drops: 2
            }
        );
        assert_eq!(BridgeTotals::parse("stopped"), None);
        // An older bridge without queue_full.
        assert_eq!(
            BridgeTotals::parse("impaired: lost=1 socket_drops=0").map(|t| t.queue_full),
            Some(0)
        );
    }
}
