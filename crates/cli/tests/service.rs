//! Service mode (issue 4) end to end: one `corestack run` daemon owns the veth end `vc` of a
//! namespace pair; applications (`corestack serve echo`, `corestack nc`, and this test itself
//! acting as a broken application through `appif`) join it over its control socket; their peers
//! are Rust `std::net` clients and servers (`corestack nc` / `bench pingpong` without `--iface`,
//! i.e. on the kernel stack) in the Linux namespace.
//!
//! What is checked: several applications transfer at once, byte-exact; an application killed
//! (SIGKILL) or breaking the shared-memory protocol loses its own connections (its peers see
//! ECONNRESET), its memory and its ports, and nobody else notices; a stopping daemon (SIGTERM or
//! SIGKILL) gives its applications an error, never a hang; ports below 1024 need root or a grant
//! in the configuration; a port is one application's at a time; `corestack run`'s setup errors.
//!
//! Needs root (namespaces, AF_XDP, `setpriv`). Runs one test at a time (the lock in `common`).
//! Every child is killed by PID on drop, every namespace is deleted on drop, and every wait is
//! bounded. Addresses 10.N.1.1 (Linux) and 10.N.1.2 (the daemon), N = 140..=147; control
//! sockets are `/tmp/corestack-svctest-<pid>-<test>.sock`, removed on drop.

mod common;

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use appif::ctl::{self, Hello, Welcome};
use appif::region::Region;
use appif::seg::{CmdProducer, Desc, Segment};
use common::*;
use netns::Netns;

const MIB: u64 = 1 << 20;
/// ECONNRESET, the errno a dropped association leaves in its segment.
const ECONNRESET: u32 = 104;

// ---------------------------------------------------------------------------
// The daemon and its applications
// ---------------------------------------------------------------------------

/// A control socket path of this test, removed on drop (a daemon killed by the test leaves it).
struct SocketPath(PathBuf);

impl SocketPath {
    fn new(tag: &str) -> SocketPath {
        let p = PathBuf::from(format!(
            "/tmp/corestack-svctest-{}-{tag}.sock",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&p);
        SocketPath(p)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn arg(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for SocketPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A running `corestack run` in `pair.core`, its log (stderr) collected.
struct Daemon {
    proc: Option<Proc>,
    pid: u32,
}

impl Daemon {
    /// Starts the daemon on `vc` with the pair's address, the given socket and extra arguments,
    /// and waits for "corestack daemon ready".
    fn start(pair: &Pair, sock: &SocketPath, extra: &[&str]) -> Daemon {
        let mut cmd = pair.core.exec(bin());
        cmd.args([
            "run",
            "--iface",
            "vc",
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

    fn proc(&self) -> &Proc {
        self.proc.as_ref().expect("daemon not yet collected")
    }

    /// Everything the daemon logged so far.
    fn log(&self) -> String {
        self.proc().stderr()
    }

    /// The last lines of the log, for failure messages.
    fn tail(&self) -> String {
        tail_of(&self.log(), 25)
    }

    /// Waits up to `bound` for a log line containing every one of `needles`; returns the line.
    fn wait_line(&self, needles: &[&str], bound: Duration) -> Option<String> {
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
    fn expect_line(&self, needles: &[&str], bound: Duration, what: &str) -> String {
        self.wait_line(needles, bound).unwrap_or_else(|| {
            panic!(
                "{what}: the daemon logged no line with {needles:?} within {bound:?}; its log:\n{}",
                self.tail()
            )
        })
    }

    /// The association the daemon gave the application with process id `pid` (from its
    /// "application joined" line).
    fn assoc_of(&self, pid: u32) -> u32 {
        let pid_field = format!(" pid={pid} ");
        let line = self.expect_line(
            &["application joined", &pid_field],
            Duration::from_secs(5),
            "an application joined",
        );
        field(&line, "assoc").unwrap_or_else(|| panic!("no assoc= in {line:?}"))
    }

    /// Associations whose segment (memfd "corestack-app-N") the daemon still maps.
    fn mapped_segments(&self) -> Vec<u32> {
        mapped_segments(self.pid)
    }

    /// Waits up to `bound` until the daemon no longer maps association `assoc`'s segment.
    fn segment_released(&self, assoc: u32, bound: Duration) -> bool {
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
    fn signal(&self, sig: &str) {
        signal(sig, self.pid);
    }

    /// Waits up to `bound` for the daemon to exit and collects it.
    fn finish(&mut self, bound: Duration) -> Finished {
        self.proc
            .take()
            .expect("daemon collected once")
            .finish(bound)
    }

    /// SIGTERM, then its log; asserts a clean exit that logged no panic.
    fn stop_cleanly(&mut self) -> String {
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

/// The last `n` lines of `text`.
fn tail_of(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The value of ` key=N` in a log line.
fn field(line: &str, key: &str) -> Option<u32> {
    let prefix = format!("{key}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
}

/// Associations whose segment process `pid` maps ("/memfd:corestack-app-N (deleted)").
fn mapped_segments(pid: u32) -> Vec<u32> {
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
fn signal(sig: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{sig} {pid} failed");
}

/// True while process `pid` exists and is not a zombie.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s
            .rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next());
        !matches!(state, Some("Z" | "X" | "x"))
    })
}

/// Bytes process `pid` read and wrote so far through system calls (pipes, kernel sockets; not
/// shared memory), from /proc/PID/io.
fn moved(pid: u32) -> u64 {
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
fn wait_moved(pid: u32, bytes: u64, bound: Duration) -> bool {
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
fn exited_after(pid: u32, t0: Instant, bound: Duration) -> Option<Duration> {
    while running(pid) {
        if t0.elapsed() >= bound {
            return None;
        }
        thread::sleep(Duration::from_millis(2));
    }
    Some(t0.elapsed())
}

/// `corestack ARGS` as an application of the daemon at `sock`, in `ns`.
fn app(ns: &Netns, sock: &SocketPath, args: &[&str]) -> Command {
    let mut cmd = ns.exec(bin());
    cmd.args(args).env(ctl::SOCKET_ENV, sock.path());
    cmd
}

/// `corestack ARGS` as an application of the daemon at `sock`, in `ns`, run as `nobody`
/// (uid and gid 65534, no supplementary groups).
fn app_as_nobody(ns: &Netns, sock: &SocketPath, args: &[&str]) -> Command {
    app_as(65534, ns, sock, args)
}

/// `corestack ARGS` as an application of the daemon at `sock`, in `ns`, run with uid and gid
/// `id` and no supplementary groups.
fn app_as(id: u32, ns: &Netns, sock: &SocketPath, args: &[&str]) -> Command {
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
fn echo_app(pair: &Pair, sock: &SocketPath, port: u16, daemon: &Daemon) -> Proc {
    let cmd = app(
        &pair.core,
        sock,
        &["serve", "echo", "--port", &port.to_string()],
    );
    spawn_listening(cmd, &format!("echo app on port {port}"), daemon)
}

/// Spawns a `serve echo` and waits for "listening on", with the daemon's log on failure.
fn spawn_listening(cmd: Command, name: &str, daemon: &Daemon) -> Proc {
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
fn linux(pair: &Pair, args: &[&str]) -> Command {
    let mut cmd = pair.linux.exec(bin());
    cmd.args(args).env_remove(ctl::SOCKET_ENV);
    cmd
}

/// A Linux client streaming `bytes` seeded bytes to the echo on `port` (reading the echo back
/// and hashing it) — started, not waited for.
fn echo_client(pair: &Pair, port: u16, bytes: u64) -> Proc {
    let cmd = linux(pair, &["nc", &pair.core_ip, &port.to_string()]);
    Proc::spawn(
        &format!("Linux client of the echo on port {port}"),
        cmd,
        Some(bytes),
        Out::Hash,
    )
}

/// Waits for an [`echo_client`] and asserts that every byte came back, byte-exact.
fn assert_echoed(client: Proc, bytes: u64, bound: Duration, what: &str, daemon: &Daemon) {
    let f = client.finish(bound);
    assert!(
        f.status.success(),
        "{what}: the Linux client failed ({}): {}\ndaemon log:\n{}",
        f.status,
        f.stderr,
        daemon.tail()
    );
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
fn echo_works(pair: &Pair, port: u16, what: &str, daemon: &Daemon) {
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
fn assert_failed_with(f: &Finished, needles: &[&str], what: &str, daemon: &Daemon) {
    let err = f.stderr.to_lowercase();
    assert!(
        !f.status.success() && needles.iter().any(|n| err.contains(n)),
        "{what}: expected a failure mentioning one of {needles:?}, got ({}): {}\ndaemon log:\n{}",
        f.status,
        f.stderr,
        daemon.tail()
    );
}

// ---------------------------------------------------------------------------
// The test as a misbehaving application
// ---------------------------------------------------------------------------

/// Byte offsets in a segment (see appif::seg's layout).
const CMD_HEAD: u64 = 192;
const CMD_RING: u64 = 512;
const DESC_BYTES: u64 = 64;
const SLOT_BYTES: u64 = 512;
const SLOT_TX_HEAD: u64 = 128;
const PAGE: u64 = 4096;

/// This test as an application: the control connection, the mapped segment and the memfd
/// behind it (written with pwrite to break the protocol without `unsafe`).
struct RogueApp {
    ctl: UnixStream,
    mem: File,
    seg: Segment,
    welcome: Welcome,
    _doorbell: OwnedFd,
}

impl RogueApp {
    /// Says hello as `name`, asking for 4 slots of 4 KiB rings; panics unless welcomed.
    fn join(sock: &SocketPath, name: &str) -> RogueApp {
        let ctl = UnixStream::connect(sock.path()).expect("connecting to the control socket");
        ctl.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        let hello = Hello {
            nslots: 4,
            ring_bytes: 4096,
            name: name.to_string(),
        };
        ctl::send_msg(&ctl, &hello.encode(), &[]).expect("sending the hello");
        let mut buf = [0u8; ctl::WELCOME_LEN];
        let mut fds = Vec::new();
        let n = ctl::recv_msg(&ctl, &mut buf, &mut fds).expect("receiving the welcome");
        let welcome = Welcome::decode(&buf[..n]).expect("a well-formed welcome");
        assert_eq!(welcome.status, 0, "the daemon refused {name}: {welcome:?}");
        assert_eq!(
            fds.len(),
            2,
            "the welcome came with {} fds, not 2",
            fds.len()
        );
        let doorbell = fds.pop().expect("doorbell");
        let memfd = fds.pop().expect("memfd");
        let region = Region::map_fd(memfd.as_fd(), welcome.seg_len as usize).expect("mmap");
        let (seg, assoc) = Segment::open(Arc::new(region)).expect("a valid segment");
        assert_eq!(assoc, welcome.assoc);
        RogueApp {
            ctl,
            mem: File::from(memfd),
            seg,
            welcome,
            _doorbell: doorbell,
        }
    }

    fn assoc(&self) -> u32 {
        self.welcome.assoc
    }

    fn poke(&self, off: u64, bytes: &[u8]) {
        self.mem
            .write_all_at(bytes, off)
            .expect("writing into the segment");
    }

    /// Byte offset of socket slot `slot`'s header.
    fn slot_off(&self, slot: u64) -> u64 {
        let slots = CMD_RING + u64::from(self.welcome.cmd_slots) * DESC_BYTES;
        slots.div_ceil(PAGE) * PAGE + slot * SLOT_BYTES
    }

    fn push(&self, d: Desc) {
        let mut p = CmdProducer::new(self.seg.clone());
        assert!(p.push(&d), "command ring full");
    }

    /// Waits up to `bound` for the daemon to drop this association: ECONNRESET in the
    /// segment's closed word and end of file on the control socket.
    fn dropped(&mut self, bound: Duration) -> Result<(), String> {
        let deadline = Instant::now() + bound;
        while self.seg.closed().load(std::sync::atomic::Ordering::Acquire) == 0 {
            if Instant::now() >= deadline {
                return Err("the segment's closed word stayed 0".into());
            }
            thread::sleep(Duration::from_millis(5));
        }
        let closed = self.seg.closed().load(std::sync::atomic::Ordering::Acquire);
        if closed != ECONNRESET {
            return Err(format!("closed word {closed}, not ECONNRESET"));
        }
        let mut b = [0u8; 1];
        match self.ctl.read(&mut b) {
            // Reset: the daemon closed it with our junk unread.
            Ok(0) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(()),
            Ok(_) => Err("the daemon wrote on the control socket".into()),
            Err(e) => Err(format!("control socket still open: {e}")),
        }
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn two_apps_each_transfer_64mib_with_linux_peers() {
    let _lock = start();
    let pair = Pair::new("t", 140).expect("creating the namespaces");
    let sock = SocketPath::new("two");
    let mut daemon = Daemon::start(&pair, &sock, &[]);
    let a = echo_app(&pair, &sock, 7001, &daemon);
    let b = echo_app(&pair, &sock, 7002, &daemon);
    assert_eq!(
        daemon.mapped_segments().len(),
        2,
        "the daemon should map one segment per application; log:\n{}",
        daemon.tail()
    );
    // Each client sends 64 MiB and reads 64 MiB back, both at once.
    let bytes = 64 * MIB;
    let started = Instant::now();
    let ca = echo_client(&pair, 7001, bytes);
    let cb = echo_client(&pair, 7002, bytes);
    assert_echoed(
        ca,
        bytes,
        Duration::from_secs(60),
        "app A (port 7001)",
        &daemon,
    );
    assert_echoed(
        cb,
        bytes,
        Duration::from_secs(60),
        "app B (port 7002)",
        &daemon,
    );
    eprintln!(
        "2 x 64 MiB echoed (both directions) in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    drop((a, b));
    let log = daemon.stop_cleanly();
    assert_eq!(
        log.matches("application joined").count(),
        2,
        "expected exactly two applications; log:\n{log}"
    );
}

#[test]
fn sigkill_app_mid_transfer_resets_its_connections_only() {
    let _lock = start();
    let pair = Pair::new("t", 141).expect("creating the namespaces");
    let sock = SocketPath::new("kill");
    let mut daemon = Daemon::start(&pair, &sock, &[]);
    let mut a = echo_app(&pair, &sock, 7101, &daemon);
    let b = echo_app(&pair, &sock, 7102, &daemon);
    let a_pid = a.pid();
    let a_assoc = daemon.assoc_of(a_pid);
    assert!(
        daemon.mapped_segments().contains(&a_assoc),
        "A's segment corestack-app-{a_assoc} is not in the daemon's maps: {:?}",
        daemon.mapped_segments()
    );
    let b_bytes = 256 * MIB;
    let mut ca = echo_client(&pair, 7101, 4096 * MIB);
    let mut cb = echo_client(&pair, 7102, b_bytes);
    let (ca_pid, cb_pid) = (ca.pid(), cb.pid());
    for (pid, who) in [(ca_pid, "A"), (cb_pid, "B")] {
        assert!(
            wait_moved(pid, 8 * MIB, Duration::from_secs(10)),
            "{who}'s client did not get going (8 MiB through its pipes); its stderr: {}\ndaemon log:\n{}",
            if who == "A" { ca.stderr() } else { cb.stderr() },
            daemon.tail()
        );
    }
    assert!(running(cb_pid), "B's transfer ended before A was killed");
    let t0 = Instant::now();
    signal("KILL", a_pid);
    // A's peer must see the reset within 1 s.
    let took = exited_after(ca_pid, t0, Duration::from_secs(3));
    let fa = ca.finish(Duration::from_secs(5));
    let took = took.unwrap_or_else(|| {
        panic!(
            "A's Linux peer did not notice A's death within 3 s; its stderr: {}\ndaemon log:\n{}",
            fa.stderr,
            daemon.tail()
        )
    });
    assert!(
        !fa.status.success() && fa.stderr.contains("Connection reset by peer"),
        "A's Linux peer should fail with ECONNRESET, got ({}): {}\ndaemon log:\n{}",
        fa.status,
        fa.stderr,
        daemon.tail()
    );
    assert!(
        took <= Duration::from_secs(1),
        "A's Linux peer saw the reset {took:?} after the kill (limit 1 s)"
    );
    eprintln!(
        "A's peer saw ECONNRESET {:.1} ms after SIGKILL",
        took.as_secs_f64() * 1e3
    );
    let left = daemon.expect_line(
        &["application left", &format!("assoc={a_assoc} ")],
        Duration::from_secs(1),
        "A was killed",
    );
    assert!(left.contains(&format!("pid={a_pid}")), "{left}");
    assert!(
        daemon.segment_released(a_assoc, Duration::from_secs(1)),
        "the daemon still maps A's segment corestack-app-{a_assoc} after A's death: {:?}\nlog:\n{}",
        daemon.mapped_segments(),
        daemon.tail()
    );
    // B carries on, byte-exact, with its segment still mapped.
    assert!(
        running(cb_pid),
        "B's transfer ended right when A was killed: {}",
        cb.stderr()
    );
    assert_echoed(
        cb,
        b_bytes,
        Duration::from_secs(60),
        "app B after A's death",
        &daemon,
    );
    assert_eq!(
        daemon.mapped_segments().len(),
        1,
        "only B's segment should remain"
    );
    // A's port is free again: a new application takes it and echoes.
    let a2 = echo_app(&pair, &sock, 7101, &daemon);
    echo_works(&pair, 7101, "a new app on A's port", &daemon);
    drop((a, a2, b));
    daemon.stop_cleanly();
}

#[test]
fn garbage_app_is_disconnected_others_carry_on() {
    let _lock = start();
    let pair = Pair::new("t", 142).expect("creating the namespaces");
    let sock = SocketPath::new("garbage");
    let mut daemon = Daemon::start(&pair, &sock, &[]);
    let echo = echo_app(&pair, &sock, 7201, &daemon);
    // A Linux client ping-pongs with the echo for the whole test (a TCP round trip over 2 s,
    // or a reset, fails it).
    let target = format!("{}:7201", pair.core_ip);
    let pingpong = Proc::spawn(
        "Linux ping-pong with the echo app",
        linux(
            &pair,
            &[
                "bench",
                "pingpong",
                "--tcp",
                "--target",
                &target,
                "--duration",
                "4",
                "--warmup",
                "0.1",
                "--gap-us",
                "200",
                "--block",
                "--json",
            ],
        ),
        None,
        Out::Text,
    );
    // A connection that never says hello must not hold anybody up; it is dropped after 2 s.
    let mut silent = UnixStream::connect(sock.path()).expect("connecting");
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let garbage_started = Instant::now();

    type Breaker = fn(&RogueApp);
    let cases: [(&str, Breaker, &str); 5] = [
        (
            "slot out of range",
            |r| {
                r.push(Desc::Listen {
                    slot: 1000,
                    local: "0.0.0.0:7299".parse().expect("addr"),
                    backlog: 8,
                })
            },
            "descriptor names slot 1000 out of range",
        ),
        (
            "bad opcode",
            |r| {
                let mut d = [0u8; 64];
                d[0] = 0xee;
                r.poke(CMD_RING, &d);
                r.poke(CMD_HEAD, &1u64.to_le_bytes());
            },
            "bad descriptor: BadOpcode(238)",
        ),
        (
            "command ring head far ahead",
            |r| r.poke(CMD_HEAD, &(1u64 << 40).to_le_bytes()),
            "command ring head 1099511627776 impossible",
        ),
        (
            "bytes on the control socket after the hello",
            |r| {
                use std::io::Write;
                (&r.ctl).write_all(b"junk").expect("writing junk");
            },
            "wrote on the control socket after its hello",
        ),
        (
            "socket ring index",
            |r| {
                r.push(Desc::UdpBind {
                    slot: 0,
                    local: "0.0.0.0:7298".parse().expect("addr"),
                });
                thread::sleep(Duration::from_millis(50));
                r.poke(r.slot_off(0) + SLOT_TX_HEAD, &(1u64 << 40).to_le_bytes());
                r.push(Desc::Send { slot: 0 });
            },
            "impossible index in a socket ring",
        ),
    ];
    for (what, breaker, reason) in cases {
        let mut rogue = RogueApp::join(&sock, "rogue");
        let assoc = rogue.assoc();
        breaker(&rogue);
        let line = daemon.expect_line(
            &[
                "application disconnected",
                reason,
                &format!("assoc={assoc} "),
            ],
            Duration::from_secs(2),
            &format!("garbage: {what}"),
        );
        eprintln!("{what}: {}", line.trim());
        if let Err(e) = rogue.dropped(Duration::from_secs(2)) {
            panic!(
                "garbage: {what}: the rogue application was not dropped: {e}\nlog:\n{}",
                daemon.tail()
            );
        }
        assert!(
            daemon.segment_released(assoc, Duration::from_secs(1)),
            "garbage: {what}: the daemon still maps segment corestack-app-{assoc}: {:?}",
            daemon.mapped_segments()
        );
    }
    // The segment cannot be shrunk or grown under the daemon's mapping (which would SIGBUS it):
    // the memfd is sealed. An application that then just leaves is an ordinary departure.
    let rogue = RogueApp::join(&sock, "rogue");
    let assoc = rogue.assoc();
    for len in [0, rogue.welcome.seg_len * 2] {
        assert!(
            rogue.mem.set_len(len).is_err(),
            "an application could resize its segment to {len} bytes"
        );
    }
    drop(rogue);
    daemon.expect_line(
        &["application left", &format!("assoc={assoc} ")],
        Duration::from_secs(1),
        "the rogue application closed its control socket",
    );
    // A hello that is not one: refused with EINVAL, logged, connection closed.
    let bad = UnixStream::connect(sock.path()).expect("connecting");
    bad.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    ctl::send_msg(&bad, &[0x5a; ctl::HELLO_LEN], &[]).expect("sending a bad hello");
    let mut buf = [0u8; ctl::WELCOME_LEN];
    let mut fds = Vec::new();
    let n = ctl::recv_msg(&bad, &mut buf, &mut fds).expect("an answer to a bad hello");
    let w = Welcome::decode(&buf[..n]).expect("a well-formed refusal");
    assert_eq!(
        w.status, 22,
        "a bad hello should be refused with EINVAL: {w:?}"
    );
    assert!(fds.is_empty(), "a refusal came with fds");
    daemon.expect_line(
        &["refused an application", "bad hello"],
        Duration::from_secs(1),
        "a bad hello",
    );
    let garbage_took = garbage_started.elapsed();
    assert!(
        garbage_took < Duration::from_millis(2500),
        "the garbage phase took {garbage_took:?}: the ping-pong would not outlast it"
    );
    // The ping-pong spanned all of it and went on after it: every round trip came back.
    let f = pingpong.finish(Duration::from_secs(20));
    assert!(
        f.status.success(),
        "the legit client's ping-pong failed while garbage was written ({}): {}\nlog:\n{}",
        f.status,
        f.stderr,
        daemon.tail()
    );
    let r: serde_json::Value =
        serde_json::from_str(f.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", f.stdout));
    let trips = r["round_trips"].as_u64().unwrap_or(0);
    assert!(trips >= 1000, "only {trips} round trips in 4 s: {r}");
    let max_us = r["max_us"].as_f64().unwrap_or(f64::MAX);
    assert!(
        max_us < 500_000.0,
        "a round trip of the legit client took {max_us} µs while garbage was written"
    );
    eprintln!(
        "legit ping-pong through the garbage: {trips} round trips, max {} µs",
        r["max_us"]
    );
    echo_works(&pair, 7201, "the echo app after the garbage", &daemon);
    // The silent connection was dropped after its 2 s to say hello.
    let mut b = [0u8; 1];
    let deadline = Instant::now() + Duration::from_secs(5);
    let eof = loop {
        match silent.read(&mut b) {
            Ok(0) => break true,
            Ok(_) => break false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) if Instant::now() < deadline => {}
            Err(_) => break false,
        }
    };
    assert!(eof, "a connection that never said hello was kept open");
    assert_eq!(
        daemon.mapped_segments().len(),
        1,
        "only the echo app's segment should remain"
    );
    drop(echo);
    daemon.stop_cleanly();
}

#[test]
fn daemon_sigterm_mid_transfer_apps_get_an_error_not_a_hang() {
    let _lock = start();
    let pair = Pair::new("t", 143).expect("creating the namespaces");
    let sock = SocketPath::new("term");
    let mut daemon = Daemon::start(&pair, &sock, &[]);
    let mut apps = mid_transfer_apps(&pair, &sock, &daemon);
    let t0 = Instant::now();
    daemon.signal("TERM");
    let took = assert_apps_fail(&mut apps, t0, &daemon);
    let f = daemon.finish(Duration::from_secs(5));
    assert!(
        f.status.success(),
        "the daemon's exit on SIGTERM: {}; log:\n{}",
        f.status,
        tail_of(&f.stderr, 25)
    );
    for needle in ["daemon stopping", "corestack daemon stopped"] {
        assert!(
            f.stderr.contains(needle),
            "no {needle:?} in the log:\n{}",
            f.stderr
        );
    }
    assert!(
        !sock.path().exists(),
        "the daemon left its socket {} behind",
        sock.path().display()
    );
    // The Linux peers were reset too (the daemon's RSTs), not left hanging.
    for (name, mut p) in apps.peers.drain(..) {
        let pid = p.pid();
        let exited = exited_after(pid, t0, Duration::from_secs(3));
        let fp = p.finish(Duration::from_secs(5));
        assert!(
            exited.is_some()
                && !fp.status.success()
                && (fp.stderr.contains("reset") || fp.stderr.contains("Broken pipe")),
            "{name} should fail with ECONNRESET or EPIPE within 3 s ({:?}, {}): {}",
            exited,
            fp.status,
            fp.stderr
        );
    }
    eprintln!("apps failed {took:?} after SIGTERM at most");
}

#[test]
fn daemon_sigkill_mid_transfer_apps_get_an_error_and_a_new_daemon_takes_over_the_socket() {
    let _lock = start();
    let pair = Pair::new("t", 144).expect("creating the namespaces");
    let sock = SocketPath::new("sigkill");
    let mut daemon = Daemon::start(&pair, &sock, &[]);
    let mut apps = mid_transfer_apps(&pair, &sock, &daemon);
    let t0 = Instant::now();
    daemon.signal("KILL");
    let took = assert_apps_fail(&mut apps, t0, &daemon);
    eprintln!("apps failed {took:?} after the daemon's SIGKILL at most");
    let _ = daemon.finish(Duration::from_secs(5));
    drop(apps);
    // Its socket file stayed behind; a new daemon replaces it and serves.
    assert!(
        sock.path().exists(),
        "a SIGKILLed daemon cannot remove its socket"
    );
    let mut daemon = Daemon::start(&pair, &sock, &[]);
    let echo = echo_app(&pair, &sock, 7501, &daemon);
    echo_works(&pair, 7501, "an app of the new daemon", &daemon);
    drop(echo);
    daemon.stop_cleanly();
}

#[test]
fn daemon_sigterm_idle_serve_echo_app_exits_with_an_error() {
    let _lock = start();
    let pair = Pair::new("t", 147).expect("creating the namespaces");
    let sock = SocketPath::new("echo-term");
    let mut daemon = Daemon::start(&pair, &sock, &[]);
    let mut echo = echo_app(&pair, &sock, 7701, &daemon);
    echo_works(&pair, 7701, "the echo app before the daemon stops", &daemon);
    let t0 = Instant::now();
    daemon.signal("TERM");
    let took = exited_after(echo.pid(), t0, Duration::from_secs(2));
    let err = echo.stderr();
    assert!(
        took.is_some(),
        "serve echo still runs 2 s after its daemon stopped (it printed {} lines on stderr, \
         ending:\n{})",
        err.lines().count(),
        tail_of(&err, 3)
    );
    let f = echo.finish(Duration::from_secs(5));
    assert!(
        !f.status.success() && f.stderr.contains("error: "),
        "serve echo should exit non-zero with an error when its daemon stops ({}): {}",
        f.status,
        tail_of(&f.stderr, 3)
    );
    daemon.finish(Duration::from_secs(5));
}

/// Applications caught mid-transfer, and their Linux peers.
struct MidTransfer {
    /// (name, app) that must fail when the daemon goes.
    apps: Vec<(String, Proc)>,
    /// (name, Linux peer) of the transfers.
    peers: Vec<(String, Proc)>,
}

/// An app sending 4 GiB to a Linux sink, an app receiving 4 GiB from a Linux client (both well
/// under way when this returns), and an `nc -l` waiting for a connection.
fn mid_transfer_apps(pair: &Pair, sock: &SocketPath, daemon: &Daemon) -> MidTransfer {
    let big = 4096 * MIB;
    let sink = Proc::spawn(
        "Linux sink (nc -l 7401)",
        linux(pair, &["nc", "-l", "7401"]),
        None,
        Out::Hash,
    );
    wait_kernel_listen(&pair.linux, 7401);
    let sender = Proc::spawn(
        "app nc sending to Linux",
        app(&pair.core, sock, &["nc", &pair.linux_ip, "7401"]),
        Some(big),
        Out::Hash,
    );
    let mut receiver = Proc::spawn(
        "app nc -l receiving from Linux",
        app(&pair.core, sock, &["nc", "-l", "7402"]),
        None,
        Out::Hash,
    );
    receiver.wait_stderr("listening on", Duration::from_secs(10));
    let client = Proc::spawn(
        "Linux client sending to the app",
        linux(pair, &["nc", &pair.core_ip, "7402"]),
        Some(big),
        Out::Hash,
    );
    let mut waiting = Proc::spawn(
        "app nc -l waiting for a connection",
        app(&pair.core, sock, &["nc", "-l", "7403"]),
        None,
        Out::Hash,
    );
    waiting.wait_stderr("listening on", Duration::from_secs(10));
    let mut apps = vec![
        ("the app sending".to_string(), sender),
        ("the app receiving".to_string(), receiver),
        (
            "the nc -l app waiting for a connection".to_string(),
            waiting,
        ),
    ];
    for (name, p) in apps.iter_mut().take(2) {
        let pid = p.pid();
        assert!(
            wait_moved(pid, 16 * MIB, Duration::from_secs(10)),
            "{name} did not get going (16 MiB through its pipes): {}\ndaemon log:\n{}",
            p.stderr(),
            daemon.tail()
        );
    }
    MidTransfer {
        apps,
        peers: vec![
            ("the Linux sink".to_string(), sink),
            ("the Linux client".to_string(), client),
        ],
    }
}

/// Asserts that every app exits non-zero within 2 s of `t0` with an `error: ` line; the two
/// transferring ones must name a reset or a broken pipe. Returns the slowest exit time.
fn assert_apps_fail(apps: &mut MidTransfer, t0: Instant, daemon: &Daemon) -> Duration {
    let mut slowest = Duration::ZERO;
    let mut problems = Vec::new();
    let mut exited = Vec::new();
    for (name, p) in apps.apps.iter_mut() {
        match exited_after(p.pid(), t0, Duration::from_secs(2)) {
            Some(t) => {
                slowest = slowest.max(t);
                exited.push(true);
            }
            None => {
                exited.push(false);
                problems.push(format!(
                    "{name} still runs 2 s after the daemon went (a hang); its stderr ends:\n{}",
                    tail_of(&p.stderr(), 3)
                ));
            }
        }
    }
    for ((name, p), exited) in apps.apps.drain(..).zip(exited) {
        if !exited {
            continue; // reported above; killed on drop
        }
        let f = p.finish(Duration::from_secs(5));
        eprintln!("{name}: {}", f.stderr.trim().replace('\n', " | "));
        let err = f.stderr.to_lowercase();
        // Every app, transferring or waiting in accept, learns why: a reset or a broken pipe.
        let reason_ok = err.contains("reset") || err.contains("broken pipe");
        if f.status.success() || !err.contains("error: ") || !reason_ok {
            problems.push(format!(
                "{name} should exit non-zero with an error naming a reset or a broken pipe ({}): {}",
                f.status,
                f.stderr.trim()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "when the daemon went:\n{}\ndaemon log:\n{}",
        problems.join("\n"),
        daemon.tail()
    );
    slowest
}

#[test]
fn privileged_port_needs_root_or_a_grant_and_ports_are_exclusive() {
    let _lock = start();
    let pair = Pair::new("t", 145).expect("creating the namespaces");
    let sock = SocketPath::new("ports");
    let mut daemon = Daemon::start(&pair, &sock, &[]);
    // (b) nobody may not bind 80, and is told so.
    let f = Proc::spawn(
        "nobody's app on port 80",
        app_as_nobody(&pair.core, &sock, &["serve", "echo", "--port", "80"]),
        None,
        Out::Text,
    )
    .finish(Duration::from_secs(10));
    assert_failed_with(
        &f,
        &["permission denied", "os error 13"],
        "nobody binding port 80",
        &daemon,
    );
    daemon.expect_line(
        &["application joined", "uid=65534"],
        Duration::from_secs(1),
        "nobody's app",
    );
    // (a) root may.
    let root80 = echo_app(&pair, &sock, 80, &daemon);
    echo_works(&pair, 80, "root's app on port 80", &daemon);
    // (b) nobody may bind 8080.
    let nobody8080 = spawn_listening(
        app_as_nobody(&pair.core, &sock, &["serve", "echo", "--port", "8080"]),
        "nobody's app on port 8080",
        &daemon,
    );
    echo_works(&pair, 8080, "nobody's app on port 8080", &daemon);
    // (d) a port is one application's: a second app on 8080 (root, even) and on 80 is refused,
    // and the first ones keep working.
    for port in [8080u16, 80] {
        let f = Proc::spawn(
            &format!("a second app on port {port}"),
            app(
                &pair.core,
                &sock,
                &["serve", "echo", "--port", &port.to_string()],
            ),
            None,
            Out::Text,
        )
        .finish(Duration::from_secs(10));
        assert_failed_with(
            &f,
            &["already in use"],
            &format!("a second app on port {port}"),
            &daemon,
        );
    }
    echo_works(
        &pair,
        8080,
        "the first app on 8080 after the second was refused",
        &daemon,
    );
    echo_works(
        &pair,
        80,
        "the first app on 80 after the second was refused",
        &daemon,
    );
    drop((root80, nobody8080));
    daemon.stop_cleanly();
    // (c) a grant in the configuration: by uid, then by gid.
    let dir = std::env::temp_dir();
    for (grant, port) in [
        ("privileged_uids = [65534]", 80u16),
        ("privileged_gids = [65534]", 443),
    ] {
        let cfg = dir.join(format!(
            "corestack-svctest-{}-ports.toml",
            std::process::id()
        ));
        std::fs::write(&cfg, format!("[ports]\n{grant}\n")).expect("writing the config");
        let mut daemon = Daemon::start(&pair, &sock, &["--config", &cfg.display().to_string()]);
        let _ = std::fs::remove_file(&cfg);
        let granted = spawn_listening(
            app_as_nobody(
                &pair.core,
                &sock,
                &["serve", "echo", "--port", &port.to_string()],
            ),
            &format!("nobody's app on port {port} with {grant}"),
            &daemon,
        );
        echo_works(
            &pair,
            port,
            &format!("nobody on {port} with {grant}"),
            &daemon,
        );
        // The grant is for that uid or gid only.
        let f = Proc::spawn(
            "uid 65533's app on port 444",
            app_as(
                65533,
                &pair.core,
                &sock,
                &["serve", "echo", "--port", "444"],
            ),
            None,
            Out::Text,
        )
        .finish(Duration::from_secs(10));
        assert_failed_with(
            &f,
            &["permission denied", "os error 13"],
            &format!("uid 65533 binding port 444 with {grant}"),
            &daemon,
        );
        drop(granted);
        daemon.stop_cleanly();
    }
}

#[test]
fn run_without_interface_or_on_a_taken_socket_fails_in_one_line() {
    let _lock = start();
    let pair = Pair::new("t", 146).expect("creating the namespaces");
    let sock = SocketPath::new("errors");
    let one_line = |f: &Finished, needles: &[&str], what: &str| {
        let err = f.stderr.trim_end();
        assert!(
            !f.status.success()
                && err.starts_with("error: ")
                && err.lines().count() == 1
                && needles.iter().all(|n| err.contains(n)),
            "{what}: expected one line `error: ...` with {needles:?}, got ({}): {err}",
            f.status
        );
    };
    let run = |args: &[&str], what: &str| {
        let mut cmd = pair.core.exec(bin());
        cmd.arg("run")
            .args(args)
            .env_remove(ctl::SOCKET_ENV)
            .env_remove("RUST_LOG");
        Proc::spawn(what, cmd, None, Out::Text).finish(Duration::from_secs(10))
    };
    let ip = format!("{}/24", pair.core_ip);
    let f = run(
        &["--ip", &ip, "--socket", &sock.arg()],
        "run without --iface",
    );
    one_line(&f, &["iface"], "corestack run without --iface");
    let f = run(
        &["--iface", "nosuchif0", "--ip", &ip, "--socket", &sock.arg()],
        "run on a missing interface",
    );
    one_line(
        &f,
        &["nosuchif0", "ip link"],
        "corestack run --iface nosuchif0",
    );
    assert!(!sock.path().exists(), "a failed start left a socket file");
    // A second daemon (same socket, same interface: `corestack run` started twice) is refused
    // in one line, and the first one keeps its socket file, its interface and its applications.
    let mut daemon = Daemon::start(&pair, &sock, &[]);
    let echo = echo_app(&pair, &sock, 7601, &daemon);
    echo_works(&pair, 7601, "the first daemon's app", &daemon);
    let f = run(
        &["--iface", "vc", "--ip", &ip, "--socket", &sock.arg()],
        "a second daemon on the same socket and interface",
    );
    assert!(
        sock.path().exists(),
        "the second daemon removed the first one's socket"
    );
    echo_works(
        &pair,
        7601,
        "the first daemon's app after a second daemon was refused",
        &daemon,
    );
    let late = echo_app(&pair, &sock, 7602, &daemon);
    echo_works(&pair, 7602, "a new app after the refusals", &daemon);
    drop((echo, late));
    daemon.stop_cleanly();
    // Last, so that a wrong message does not hide the checks above: the refusal names the
    // socket (the daemon must look at the socket before it takes the interface).
    one_line(&f, &["already listens", &sock.arg()], "a second daemon");
}
