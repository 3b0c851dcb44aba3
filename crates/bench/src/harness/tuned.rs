//! The "Linux tuned" rows: the same server on the kernel stack with busy polling switched on
//! as a Linux user would, so that corestack is compared with the best the kernel offers on
//! the same CPUs, not only with its default.
//!
//! - For every server: `net.core.busy_poll` (poll, select and epoll_wait poll the sockets'
//!   NAPI queues this many µs before they sleep) and `net.core.busy_read` (the default
//!   `SO_BUSY_POLL` of every new socket: a read that finds nothing polls first) set to
//!   [`BUSY_POLL_US`] while the row runs. Both are global, not per namespace:
//!   [`BusyPollSysctls`] saves the old values and puts them back when dropped, on error and
//!   Ctrl-C too (the benchmarks unwind to it).
//! - For the servers the benchmarks start themselves (conn-sweep's `bench conn-echo`):
//!   `SO_BUSY_POLL` on their sockets and busy polling on their epoll set (`EPIOCSPARAMS`,
//!   Linux 6.9 and later; quietly left out where the kernel lacks it).
//!
//! Caveat: busy polling polls a NAPI instance. A veth has one only with GRO on or an XDP
//! program attached; the benchmarks' veths have offloads off, so their sockets carry no NAPI
//! id and the kernel has nothing to busy-poll: the settings may change nothing. The rows say
//! so ([`napi_note`]) and show their figures anyway.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use netns::Netns;

/// The busy-poll time of the tuned rows, µs (the value the kernel's documentation suggests).
pub const BUSY_POLL_US: u32 = 50;

/// Where the kernel's `net.core` settings are.
const SYSCTL_DIR: &str = "/proc/sys/net/core";

/// `net.core.busy_poll` and `net.core.busy_read` switched on while it lives; the old values
/// are written back when it is dropped.
#[derive(Debug)]
pub struct BusyPollSysctls {
    /// Each setting's file and its value before, in the order they were set.
    saved: Vec<(PathBuf, String)>,
    /// The value set, µs.
    us: u32,
}

impl BusyPollSysctls {
    /// Sets both to [`BUSY_POLL_US`] µs. Errors: not root, or the kernel lacks them.
    pub fn switch_on() -> Result<BusyPollSysctls> {
        BusyPollSysctls::switch_on_in(Path::new(SYSCTL_DIR), BUSY_POLL_US)
    }

    /// Sets `busy_poll` and `busy_read` in the directory `dir` to `us` µs (a settings
    /// directory other than the kernel's for tests). Errors: a file cannot be read or
    /// written (what was set already is put back).
    pub fn switch_on_in(dir: &Path, us: u32) -> Result<BusyPollSysctls> {
        let mut guard = BusyPollSysctls {
            saved: Vec::new(),
            us,
        };
        for name in ["busy_poll", "busy_read"] {
            let path = dir.join(name);
            let old = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            std::fs::write(&path, format!("{us}\n"))
                .with_context(|| format!("setting {} to {us}", path.display()))?;
            guard.saved.push((path, old.trim().to_string()));
        }
        Ok(guard)
    }

    /// What it set, for tables: `net.core.busy_poll=50, busy_read=50 (were 0, 0)`.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self
            .saved
            .iter()
            .map(|(p, _)| {
                p.file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into())
            })
            .collect();
        let was: Vec<&str> = self.saved.iter().map(|(_, v)| v.as_str()).collect();
        let us = self.us;
        format!(
            "net.core.{}={us} µs (were {})",
            names.join(&format!("={us}, ")),
            was.join(", ")
        )
    }
}

impl Drop for BusyPollSysctls {
    fn drop(&mut self) {
        for (path, old) in self.saved.iter().rev() {
            if let Err(e) = std::fs::write(path, format!("{old}\n")) {
                eprintln!(
                    "warning: could not put {} back to {old}: {e}; set it by hand",
                    path.display()
                );
            }
        }
    }
}

/// Whether the veth `iface` in `ns` has a NAPI instance (GRO on, or an XDP program
/// attached), so that its sockets carry a NAPI id that busy polling can poll; None when
/// `ethtool -k` or `ip -d link` could not tell.
pub fn veth_has_napi(ns: &Netns, iface: &str) -> Option<bool> {
    let features = ns.run("ethtool", &["-k", iface]).ok()?;
    let gro = features
        .lines()
        .any(|l| l.trim() == "generic-receive-offload: on");
    let link = ns.run("ip", &["-d", "link", "show", iface]).ok()?;
    Some(gro || link.contains("xdp"))
}

/// One line on whether busy polling can do anything on `iface` in `ns` (see the module's
/// caveat).
pub fn napi_note(ns: &Netns, iface: &str) -> String {
    match veth_has_napi(ns, iface) {
        Some(false) => format!(
            "{iface} is a veth without NAPI (GRO off, no XDP program): its sockets carry no \
             NAPI id, so the kernel has nothing to busy-poll; the figures show what the \
             settings change anyway"
        ),
        Some(true) => format!("{iface} has NAPI (GRO or XDP on): busy polling can poll it"),
        None => format!("could not tell whether {iface} has NAPI (ethtool -k, ip -d link)"),
    }
}

/// Whether the running kernel is at least `major.minor` (/proc/sys/kernel/osrelease).
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    release_at_least(&release, major, minor)
}

/// Whether the kernel release `release` (`6.18.44-fc-v1098`) is at least `major.minor`.
pub fn release_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// Busy polling for `us` µs on the epoll set `epfd` (`EPIOCSPARAMS`) where the kernel has it
/// (6.9 and later); false, quietly, where it has not or refuses.
pub fn epoll_busy_poll(epfd: std::os::fd::RawFd, us: u32) -> bool {
    kernel_at_least(6, 9) && super::sys::set_epoll_busy_poll(epfd, us).is_ok()
}

pub use super::sys::{incoming_napi_id, set_busy_poll};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_poll_sysctls_set_both_and_put_the_old_values_back_on_drop() {
        let dir = std::env::temp_dir().join(format!("busy-poll-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("busy_poll"), "0\n").unwrap();
        std::fs::write(dir.join("busy_read"), "7\n").unwrap();
        let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
        {
            let guard = BusyPollSysctls::switch_on_in(&dir, 50).unwrap();
            assert_eq!(
                (read("busy_poll"), read("busy_read")),
                ("50\n".into(), "50\n".into())
            );
            assert_eq!(
                guard.describe(),
                "net.core.busy_poll=50, busy_read=50 µs (were 0, 7)"
            );
        }
        assert_eq!(
            (read("busy_poll"), read("busy_read")),
            ("0\n".into(), "7\n".into())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn busy_poll_sysctls_missing_setting_errs_and_restores_what_it_set() {
        let dir = std::env::temp_dir().join(format!("busy-poll-half-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("busy_poll"), "3\n").unwrap();
        let e = BusyPollSysctls::switch_on_in(&dir, 50).unwrap_err();
        assert!(format!("{e:#}").contains("busy_read"), "{e:#}");
        assert_eq!(
            std::fs::read_to_string(dir.join("busy_poll")).unwrap(),
            "3\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn kernel_release_compares_major_then_minor() {
        assert!(release_at_least("6.18.44-fc-v1098", 6, 9));
        assert!(release_at_least("6.9.0", 6, 9));
        assert!(!release_at_least("6.8.12-generic", 6, 9));
        assert!(!release_at_least("5.15.0", 6, 9));
        assert!(release_at_least("7.0", 6, 9));
        assert!(!release_at_least("", 6, 9));
    }
}
