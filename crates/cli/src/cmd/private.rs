//! `corestack run --private-for PID`: the private daemon of one program that `corestack
//! exec` started in embedded or inline mode and the shim moved to service mode because it
//! forks with corestack sockets open (the shim's `switch` module).
//!
//! The shim starts it just before it execs the program again in place, with the program's
//! interface and addresses and a control socket in a private directory, and a socket pair's
//! end as stdin whose other end the exec closes. Here:
//!
//! 1. The first process (the launcher) starts the daemon again in its own process group and
//!    exits at once, so the daemon is no child of the program (whose `wait` would wait for
//!    it, or reap it) and a Ctrl-C on the program's terminal reaches the program only.
//! 2. The daemon waits (at most 10 s) for EOF on stdin: the program's old image is gone, and
//!    with it the embedded engine's AF_XDP sockets and XDP link; then it opens the interface
//!    (an open that fails is tried again for 5 s: the kernel releases an AF_XDP socket's
//!    UMEM asynchronously).
//! 3. It serves until the program and every process of it the daemon has seen are gone: it
//!    watches `PID`, every application in its table and their children (from `/proc`), each
//!    by its pid and start time, every 50 ms; once none has been alive for 1 s it stops as
//!    on SIGTERM and removes its directory.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// Set in the daemon's environment by its launcher.
const DETACHED: &str = "CORESTACK_PRIVATE_DETACHED";

/// The launcher's part: true when this process is the launcher and has started the
/// detached daemon (then it exits 0 at once).
pub fn launched() -> Result<bool> {
    if std::env::var_os(DETACHED).is_some() {
        return Ok(false);
    }
    let me = std::env::current_exe().context("finding the corestack executable")?;
    std::process::Command::new(me)
        .args(std::env::args_os().skip(1))
        .env(DETACHED, "1")
        .stdout(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .context("starting the private daemon")?;
    Ok(true)
}

/// Waits until stdin reaches EOF (the program's old image is gone), at most 10 s.
pub fn wait_for_release() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(Duration::from_secs(10));
}

/// How long an open of the interface is tried again.
pub const OPEN_RETRY: Duration = Duration::from_secs(5);

/// Starts the thread that sets `stop` once `root`, every application of this daemon and
/// their children are gone (see the module's notes).
pub fn watch(root: u32, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let apps = observe::stats_shm::segment_path(std::process::id(), observe::stats_shm::APPS);
        let mut reader: Option<observe::stats_shm::StatsReader> = None;
        let mut tracked: HashMap<u32, u64> = HashMap::new();
        if let Some(t) = start_time(root) {
            tracked.insert(root, t);
        }
        let mut empty_since: Option<Instant> = None;
        while !stop.load(Ordering::Relaxed) {
            if reader.is_none() {
                reader = observe::stats_shm::StatsReader::open(&apps).ok();
            }
            if let Some(words) = reader.as_ref().and_then(|r| r.read()) {
                for row in observe::stats_shm::table_rows(&words, observe::stats_shm::APP_WORDS)
                    .map(observe::stats_shm::AppRow::decode)
                {
                    if let Ok(pid) = u32::try_from(row.pid) {
                        add(&mut tracked, pid);
                    }
                }
            }
            let parents: Vec<u32> = tracked.keys().copied().collect();
            for p in parents {
                for c in children(p) {
                    add(&mut tracked, c);
                }
            }
            tracked.retain(|&pid, &mut t| start_time(pid) == Some(t));
            if tracked.is_empty() {
                let since = *empty_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= Duration::from_secs(1) {
                    stop.store(true, Ordering::Relaxed);
                    return;
                }
            } else {
                empty_since = None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
}

fn add(tracked: &mut HashMap<u32, u64>, pid: u32) {
    if let std::collections::hash_map::Entry::Vacant(e) = tracked.entry(pid) {
        if let Some(t) = start_time(pid) {
            e.insert(t);
        }
    }
}

/// The start time of live process `pid` (field 22 of /proc/PID/stat); None when it is
/// gone or a zombie.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// The children of every thread of `pid` (/proc/PID/task/*/children).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Removes the private directory holding `socket` (`/tmp/corestack-exec-*`, made by the
/// shim), with what is left in it.
pub fn remove_dir(socket: &Path) {
    if let Some(dir) = socket.parent() {
        let named = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("corestack-exec-"));
        if named {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{children, start_time};

    #[test]
    fn a_live_process_has_a_start_time_and_its_children_are_found() {
        let me = std::process::id();
        let t = start_time(me).expect("this process is alive");
        assert_eq!(start_time(me), Some(t), "the start time does not change");
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawning sleep");
        let pid = child.id();
        assert!(
            children(me).contains(&pid),
            "sleep is a child of this process"
        );
        assert!(start_time(pid).is_some());
        child.kill().expect("killing sleep");
        // Killed but not reaped: a zombie counts as gone.
        let gone = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            start_time(pid).is_none()
        });
        assert!(gone, "a killed child still reads as alive");
        child.wait().expect("reaping sleep");
        assert_eq!(start_time(pid), None);
    }
}
