//! The `corestack run` daemon as the service-mode tests drive it: started in a pair's core
//! namespace with its log (stderr) collected and searched, its mapped segments read from
//! /proc, and applications (`corestack serve echo`, `nc`, as root, `nobody` or another uid)
//! joined to it, with Linux peers in the other namespace checking what they get back.
//!
//! Control sockets are `/tmp/corestack-svctest-<pid>-<test>.sock`, removed on drop; every
//! process is killed by PID on drop.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use appif::ctl;
use netns::Netns;

use std::sync::MutexGuard;

use super::{bin, linux_ipv6, start, Finished, Out, Pair, Proc};

pub const MIB: u64 = 1 << 20;

/// A control socket path of this test, removed on drop (a daemon killed by the test leaves it).
pub struct SocketPath(pub PathBuf);

impl SocketPath {
    pub fn new(tag: &str) -> SocketPath {
        let p = PathBuf::from(format!(
            "/tmp/corestack-svctest-{}-{tag}.sock",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&p);
        SocketPath(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn arg(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for SocketPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A running `corestack run` in `pair.core`, its log (stderr) collected.
pub struct Daemon {
    proc: Option<Proc>,
    pid: u32,
}

impl Daemon {
    /// Starts the daemon on `vc` with the pair's address, the given socket and extra arguments,
    /// and waits for "corestack daemon ready".
    pub fn start(pair: &Pair, sock: &SocketPath, extra: &[&str]) -> Daemon {
        Daemon::start_on(pair, "vc", sock, extra)
    }

    /// Like [`Daemon::start`], on interface `iface` of the core namespace.
    pub fn start_on(pair: &Pair, iface: &str, sock: &SocketPath, extra: &[&str]) -> Daemon {
        let mut cmd = pair.core.exec(bin());
        cmd.args([
            "run",
            "--iface",
            iface,
            "--ip",
            &format!("{}/24", pair.core_ip),
        ])
        .args(["--socket", &sock.arg()])
        .args(extra)
        .env_remove("RUST_LOG")
        .env_remove(ctl::SOCKET_ENV);
        let mut proc = Proc::spawn("corestack run", cmd, None, Out::Text);
        proc.wait_stderr("corestack daemon ready", Duration::from_secs(20));
        let pid = proc.pid();
        Daemon {
            proc: Some(proc),
            pid,
        }
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn proc(&self) -> &Proc {
        self.proc.as_ref().expect("daemon not yet collected")
    }

    /// Everything the daemon logged so far.
    pub fn log(&self) -> String {
        self.proc().stderr()
    }

    /// The last lines of the log, for failure messages.
    pub fn tail(&self) -> String {
        tail_of(&self.log(), 25)
    }

    /// Panics with the log's tail if the daemon logged a panic.
    pub fn assert_no_panic(&self) {
        assert!(
            !self.log().contains("panicked"),
            "the daemon panicked:\n{}",
            self.tail()
        );
    }

    /// Waits up to `bound` for a log line containing every one of `needles`; returns the line.
    pub fn wait_line(&self, needles: &[&str], bound: Duration) -> Option<String> {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(l) = self
                .log()
                .lines()
                .find(|l| needles.iter().all(|n| l.contains(n)))
            {
                return Some(l.to_string());
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Like [`Daemon::wait_line`], panicking with the log's tail (and `what`) when none came.
    pub fn expect_line(&self, needles: &[&str], bound: Duration, what: &str) -> String {
        self.wait_line(needles, bound).unwrap_or_else(|| {
            panic!(
                "{what}: the daemon logged no line with {needles:?} within {bound:?}; its log:\n{}",
                self.tail()
            )
        })
    }

    /// The association the daemon gave the application with process id `pid` (from its
    /// "application joined" line).
    pub fn assoc_of(&self, pid: u32) -> u32 {
        let pid_field = format!(" pid={pid} ");
        let line = self.expect_line(
            &["application joined", &pid_field],
            Duration::from_secs(5),
            "an application joined",
        );
        field(&line, "assoc").unwrap_or_else(|| panic!("no assoc= in {line:?}"))
    }

    /// Associations whose segment (memfd "corestack-app-N") the daemon still maps.
    pub fn mapped_segments(&self) -> Vec<u32> {
        mapped_segments(self.pid)
    }

    /// Waits up to `bound` until the daemon no longer maps association `assoc`'s segment.
    pub fn segment_released(&self, assoc: u32, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        while self.mapped_segments().contains(&assoc) {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
        true
    }

    /// Sends `sig` to the daemon (by its PID).
    pub fn signal(&self, sig: &str) {
        signal(sig, self.pid);
    }

    /// Waits up to `bound` for the daemon to exit and collects it.
    pub fn finish(&mut self, bound: Duration) -> Finished {
        self.proc
            .take()
            .expect("daemon collected once")
            .finish(bound)
    }

    /// SIGTERM, then its log; asserts a clean exit that logged no panic.
    pub fn stop_cleanly(&mut self) -> String {
        self.signal("TERM");
        let f = self.finish(Duration::from_secs(10));
        assert!(
            f.status.success() && !f.stderr.contains("panicked"),
            "the daemon did not stop cleanly on SIGTERM ({}); its log:\n{}",
            f.status,
            tail_of(&f.stderr, 25)
        );
        f.stderr
    }
}

/// The usual start of a daemon test: the suite's lock, a namespace pair (10.`net`.1.0/24), a
/// control socket named after `tag`, and a daemon on the pair's core end. Bind them in this
/// order, so that they go in the reverse one: the daemon, its socket, the namespaces, the lock.
pub fn daemon_test(net: u8, tag: &str) -> (MutexGuard<'static, ()>, Pair, SocketPath, Daemon) {
    let lock = start();
    let pair = Pair::new("t", net).expect("creating the namespaces");
    let sock = SocketPath::new(tag);
    let daemon = Daemon::start(&pair, &sock, &[]);
    (lock, pair, sock, daemon)
}

/// Turns IPv6 on in `pair`'s Linux namespace with fd00:`net`::1/64 on `vl` (no DAD), and
/// starts the daemon with both families; returns it, its socket and its IPv6 address.
pub fn dual_stack_daemon(pair: &Pair, net: u8, tag: &str) -> (SocketPath, Daemon, String) {
    let (_, core6) = linux_ipv6(pair, net);
    let sock = SocketPath::new(tag);
    let daemon = Daemon::start(pair, &sock, &["--ip", &format!("{core6}/64")]);
    let ready = daemon.expect_line(&["corestack daemon ready"], Duration::from_secs(1), "ready");
    assert!(ready.contains(&format!("ip6={core6}/64")), "{ready}");
    (sock, daemon, core6)
}

/// Runs an application to its end (at most 10 s) and returns how it ended.
pub fn app_outcome(what: &str, cmd: Command) -> Finished {
    Proc::spawn(what, cmd, None, Out::Text).finish(Duration::from_secs(10))
}

/// The last `n` lines of `text`.
pub fn tail_of(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The value of ` key=N` in a log line.
pub fn field(line: &str, key: &str) -> Option<u32> {
    let prefix = format!("{key}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
}

/// Associations whose segment process `pid` maps ("/memfd:corestack-app-N (deleted)").
pub fn mapped_segments(pid: u32) -> Vec<u32> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut out: Vec<u32> = maps
        .lines()
        .filter_map(|l| l.split("/memfd:corestack-app-").nth(1))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// `kill -SIG pid`: only processes this test started.
pub fn signal(sig: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{sig} {pid} failed");
}

/// True while process `pid` exists and is not a zombie.
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s
            .rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next());
        !matches!(state, Some("Z" | "X" | "x"))
    })
}

/// Bytes process `pid` read and wrote so far through system calls (pipes, kernel sockets; not
/// shared memory), from /proc/PID/io.
pub fn moved(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    io.lines()
        .filter_map(|l| {
            l.strip_prefix("rchar:")
                .or_else(|| l.strip_prefix("wchar:"))
        })
        .filter_map(|v| v.trim().parse::<u64>().ok())
        .sum()
}

/// Waits up to `bound` until process `pid` moved `bytes` (see [`moved`]); false if it did not
/// (or exited).
pub fn wait_moved(pid: u32, bytes: u64, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if moved(pid) >= bytes {
            return true;
        }
        if !running(pid) {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
    false
}

/// How long after `t0` process `pid` had exited, polled until `bound` after `t0`; None when it
/// still runs then.
pub fn exited_after(pid: u32, t0: Instant, bound: Duration) -> Option<Duration> {
    while running(pid) {
        if t0.elapsed() >= bound {
            return None;
        }
        thread::sleep(Duration::from_millis(2));
    }
    Some(t0.elapsed())
}

/// `corestack ARGS` as an application of the daemon at `sock`, in `ns`.
pub fn app(ns: &Netns, sock: &SocketPath, args: &[&str]) -> Command {
    let mut cmd = ns.exec(bin());
    cmd.args(args).env(ctl::SOCKET_ENV, sock.path());
    cmd
}

/// `corestack ARGS` as an application of the daemon at `sock`, in `ns`, run as `nobody`
/// (uid and gid 65534, no supplementary groups).
pub fn app_as_nobody(ns: &Netns, sock: &SocketPath, args: &[&str]) -> Command {
    app_as(65534, ns, sock, args)
}

/// `corestack ARGS` as an application of the daemon at `sock`, in `ns`, run with uid and gid
/// `id` and no supplementary groups.
pub fn app_as(id: u32, ns: &Netns, sock: &SocketPath, args: &[&str]) -> Command {
    let mut cmd = ns.exec("setpriv");
    cmd.args([
        format!("--reuid={id}"),
        format!("--regid={id}"),
        "--clear-groups".to_string(),
    ])
    .arg(bin())
    .args(args)
    .env(ctl::SOCKET_ENV, sock.path());
    cmd
}

/// `corestack serve echo --port PORT` as an application; waits for "listening on".
pub fn echo_app(pair: &Pair, sock: &SocketPath, port: u16, daemon: &Daemon) -> Proc {
    let cmd = app(
        &pair.core,
        sock,
        &["serve", "echo", "--port", &port.to_string()],
    );
    spawn_listening(cmd, &format!("echo app on port {port}"), daemon)
}

/// Spawns a `serve echo` and waits for "listening on", with the daemon's log on failure.
pub fn spawn_listening(cmd: Command, name: &str, daemon: &Daemon) -> Proc {
    let p = Proc::spawn(name, cmd, None, Out::Text);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !p.stdout().contains("listening on") {
        assert!(
            Instant::now() < deadline && !p.stderr().contains("error"),
            "{name} did not start listening: {}\ndaemon log:\n{}",
            p.stderr(),
            daemon.tail()
        );
        thread::sleep(Duration::from_millis(5));
    }
    p
}

/// A Rust std::net program in the Linux namespace: `corestack ARGS` without `--iface` and
/// without CORESTACK_SOCKET, i.e. on the kernel stack.
pub fn linux(pair: &Pair, args: &[&str]) -> Command {
    let mut cmd = pair.linux.exec(bin());
    cmd.args(args).env_remove(ctl::SOCKET_ENV);
    cmd
}

/// A Linux client streaming `bytes` seeded bytes to the echo on `port` (reading the echo back
/// and hashing it) — started, not waited for.
pub fn echo_client(pair: &Pair, port: u16, bytes: u64) -> Proc {
    let cmd = linux(pair, &["nc", &pair.core_ip, &port.to_string()]);
    Proc::spawn(
        &format!("Linux client of the echo on port {port}"),
        cmd,
        Some(bytes),
        Out::Hash,
    )
}

/// Waits for an [`echo_client`] and asserts that every byte came back, byte-exact.
pub fn assert_echoed(client: Proc, bytes: u64, bound: Duration, what: &str, daemon: &Daemon) {
    let f = client
        .finish(bound)
        .assert_success(&format!("{what}: the Linux client"), || {
            format!("\ndaemon log:\n{}", daemon.tail())
        });
    let fed = f.fed.expect("client fed");
    let out = f.out.expect("client hashed");
    assert_eq!(
        fed.bytes, bytes,
        "{what}: the client took only {} bytes",
        fed.bytes
    );
    assert_eq!(
        out, fed,
        "{what}: the echo differs from what was sent (bytes {} vs {})",
        out.bytes, fed.bytes
    );
}

/// A quick byte-exact echo of 256 KiB through `port`.
pub fn echo_works(pair: &Pair, port: u16, what: &str, daemon: &Daemon) {
    let n = 256 << 10;
    assert_echoed(
        echo_client(pair, port, n),
        n,
        Duration::from_secs(15),
        what,
        daemon,
    );
}

/// Asserts that `f` failed with a message containing one of `needles` (case-insensitive).
pub fn assert_failed_with(f: &Finished, needles: &[&str], what: &str, daemon: &Daemon) {
    let err = f.stderr.to_lowercase();
    assert!(
        !f.status.success() && needles.iter().any(|n| err.contains(n)),
        "{what}: expected a failure mentioning one of {needles:?}, got ({}): {}\ndaemon log:\n{}",
        f.status,
        f.stderr,
        daemon.tail()
    );
}

/// The port policy on a running daemon: nobody's application on port 80 is refused (EACCES)
/// though it joined; root's on 80 and nobody's on 8080 are served (`echo(port, what)`
/// checks one); a second application on either port is refused and the first ones carry
/// on. `on` prefixes a port in the messages (`"port "`, `"[::]:"`). Returns the two apps.
pub fn ports_need_root_and_belong_to_one_app(
    pair: &Pair,
    sock: &SocketPath,
    daemon: &Daemon,
    on: &str,
    echo: impl Fn(u16, &str),
) -> (Proc, Proc) {
    let f = app_outcome(
        &format!("nobody's app on {on}80"),
        app_as_nobody(&pair.core, sock, &["serve", "echo", "--port", "80"]),
    );
    assert_failed_with(
        &f,
        &["permission denied", "os error 13"],
        &format!("nobody binding {on}80"),
        daemon,
    );
    daemon.expect_line(
        &["application joined", "uid=65534"],
        Duration::from_secs(1),
        "nobody's app",
    );
    let root80 = echo_app(pair, sock, 80, daemon);
    echo(80, &format!("root's app on {on}80"));
    let nobody8080 = spawn_listening(
        app_as_nobody(&pair.core, sock, &["serve", "echo", "--port", "8080"]),
        &format!("nobody's app on {on}8080"),
        daemon,
    );
    echo(8080, &format!("nobody's app on {on}8080"));
    // A port is one application's: a second app (root's, even) is refused.
    for port in [8080u16, 80] {
        let f = app_outcome(
            &format!("a second app on {on}{port}"),
            app(
                &pair.core,
                sock,
                &["serve", "echo", "--port", &port.to_string()],
            ),
        );
        assert_failed_with(
            &f,
            &["already in use"],
            &format!("a second app on {on}{port}"),
            daemon,
        );
        echo(
            port,
            &format!("the first app on {on}{port} after the second was refused"),
        );
    }
    (root80, nobody8080)
}
