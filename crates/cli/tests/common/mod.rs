//! Helpers for the namespace tests: topologies built in private namespaces (removed on drop),
//! child processes with their stdin fed from seeded data and their stdout hashed, and a lock
//! that runs the tests one at a time (each one spins a core; the machine has two).
//!
//! These tests need root. Without it they FAIL with a message saying so; they never skip.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use netns::{veth_pair, ChildGuard, Netns};
use sha2::{Digest, Sha256};

pub mod daemon;
pub mod shim;

/// 100 MiB, the transfer size.
pub const TRANSFER_BYTES: u64 = 100 << 20;

/// The corestack binary under test. Its `bench` and `demo` exec `corestack-lab`, next to it,
/// which `cargo test --workspace` builds too (crate `bench` has integration tests); for
/// `cargo test -p corestack-cli` alone, build it first (`cargo build --release -p bench`).
pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_corestack"))
}

pub use testkit::serial::start;

pub use netns::Pair;

/// corestack's command-line options for a [`Pair`]'s core end.
pub trait CoreArgs {
    /// `--iface vc --ip 10.N.1.2/24 --driver af_xdp`.
    fn core_args(&self) -> Vec<String>;
}

impl CoreArgs for Pair {
    fn core_args(&self) -> Vec<String> {
        driver_args(self, "vc", "af_xdp")
    }
}

/// `--iface IFACE --ip 10.N.1.2/24 --driver DRIVER` for `pair`'s core end.
fn driver_args(pair: &Pair, iface: &str, driver: &str) -> Vec<String> {
    let ip = format!("{}/24", pair.core_ip);
    ["--iface", iface, "--ip", &ip, "--driver", driver]
        .map(String::from)
        .to_vec()
}

/// Like [`Pair`] with the impairment bridge between: linux `vl` <-> `ml` [mid] `mc` <-> `vc` core,
/// `corestack impair` running in `mid`.
pub struct Impaired {
    bridge: Option<Proc>,
    pub pair: Pair,
    pub mid: Netns,
}

impl Impaired {
    pub fn new(net: u8, impair_args: &[&str]) -> Impaired {
        Self::with_queues(net, impair_args, 1)
    }

    /// [`Impaired::new`] with `queues` rx and tx queues on both veth pairs (a multi-queue
    /// NIC on each side: the bridge's transmissions spread over the queues by flow hash).
    pub fn with_queues(net: u8, impair_args: &[&str], queues: u32) -> Impaired {
        let linux = Netns::new("tl").expect("creating a namespace");
        let mid = Netns::new("tm").expect("creating a namespace");
        let core = Netns::new("tc").expect("creating a namespace");
        let link = |a: &Netns, ia: &str, b: &Netns, ib: &str| match queues {
            1 => veth_pair(a, ia, b, ib),
            q => netns::veth_pair_queues(a, ia, b, ib, q),
        };
        link(&linux, "vl", &mid, "ml").expect("creating a veth pair");
        link(&mid, "mc", &core, "vc").expect("creating a veth pair");
        netns::addr_add(&linux, "vl", &format!("10.{net}.1.1/24")).expect("adding an address");
        let mut cmd = mid.exec(bin());
        cmd.args(["impair", "--a", "ml", "--b", "mc"])
            .args(impair_args)
            .stdin(Stdio::null());
        let mut bridge = Proc::spawn("corestack impair", cmd, None, Out::Text);
        bridge.wait_stderr("bridging", Duration::from_secs(10));
        let pair = Pair {
            linux,
            core,
            linux_ip: format!("10.{net}.1.1"),
            core_ip: format!("10.{net}.1.2"),
        };
        Impaired {
            bridge: Some(bridge),
            pair,
            mid,
        }
    }

    /// Stops the bridge and returns its totals line's counters: (lost, reordered).
    pub fn stop_bridge(&mut self) -> (u64, u64) {
        let c = self.stop_bridge_counts();
        (c.lost, c.reordered)
    }

    /// Stops the bridge and returns every counter of its totals line.
    pub fn stop_bridge_counts(&mut self) -> BridgeCounts {
        let bridge = self.bridge.take().expect("bridge running");
        let f = bridge
            .terminate()
            .assert_success("corestack impair", String::new);
        let line = f
            .stdout
            .lines()
            .find(|l| l.starts_with("impaired:"))
            .unwrap_or_else(|| panic!("no totals: {}", f.stdout));
        let count = |key: &str| -> u64 {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in {line:?}"))
        };
        BridgeCounts {
            lost: count("lost="),
            reordered: count("reordered="),
            duplicated: count("duplicated="),
            corrupted: count("corrupted="),
        }
    }
}

/// What the impairment bridge did, both directions together (frames).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeCounts {
    pub lost: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub corrupted: u64,
}

/// Like [`Pair`], but corestack uses a persistent tap device `tap0` in `core`, bridged (`br0`)
/// with `vc`.
pub fn tap_pair(net: u8) -> Pair {
    tap_pair_with(net, false)
}

/// [`tap_pair`] with `tap0` made multi-queue (`multi_queue`: a queue per engine) or not.
pub fn tap_pair_with(net: u8, multi_queue: bool) -> Pair {
    let pair = Pair::new("t", net).expect("creating the namespaces");
    let ns = &pair.core;
    let ip = |args: &[&str]| {
        ns.run("ip", args)
            .unwrap_or_else(|e| panic!("ip {args:?}: {e}"))
    };
    let mut add = vec!["tuntap", "add", "dev", "tap0", "mode", "tap"];
    if multi_queue {
        add.push("multi_queue");
    }
    ip(&add);
    ip(&["link", "add", "br0", "type", "bridge", "forward_delay", "0"]);
    ip(&["link", "set", "vc", "master", "br0"]);
    ip(&["link", "set", "tap0", "master", "br0"]);
    ip(&["link", "set", "br0", "up"]);
    ip(&["link", "set", "tap0", "up"]);
    pair
}

/// `--iface tap0 --ip 10.N.1.2/24 --driver tap`.
pub fn tap_args(pair: &Pair) -> Vec<String> {
    driver_args(pair, "tap0", "tap")
}

/// Bytes and sha256 of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digested {
    pub bytes: u64,
    pub sha256: [u8; 32],
}

/// What a child did.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stderr: String,
    /// stdout, if it was kept as text.
    pub stdout: String,
    /// What was written to its stdin, if fed.
    pub fed: Option<Digested>,
    /// What came out of its stdout, if hashed.
    pub out: Option<Digested>,
}

/// What to do with a child's stdout.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Out {
    Text,
    Hash,
}

impl Finished {
    /// Asserts that the child exited with success; the panic says `what` failed, with its
    /// exit status, stdout (if kept as text) and stderr, then what `context` gives (another
    /// process's stderr, a daemon's log; `String::new` for nothing). Returns the child's outcome
    /// for further checks.
    pub fn assert_success(self, what: &str, context: impl FnOnce() -> String) -> Finished {
        if !self.status.success() {
            panic!(
                "{what} failed ({}): {}{}{}",
                self.status,
                self.stdout,
                self.stderr,
                context()
            );
        }
        self
    }

    /// Asserts that the child exited with success and said `needle` on stdout; the panic says
    /// what `what` did instead, as [`Finished::assert_success`] does. Returns the child's
    /// outcome for further checks.
    pub fn assert_said(
        self,
        needle: &str,
        what: &str,
        context: impl FnOnce() -> String,
    ) -> Finished {
        if !self.stdout.contains(needle) {
            panic!(
                "{what} did not say {needle:?} ({}): {}{}{}",
                self.status,
                self.stdout,
                self.stderr,
                context()
            );
        }
        self.assert_success(what, context)
    }
}

/// A running child: stdin fed (optional), stdout hashed or kept, stderr kept.
pub struct Proc {
    name: String,
    guard: ChildGuard,
    stderr: Arc<Mutex<String>>,
    stdout_text: Arc<Mutex<String>>,
    stdout: Option<JoinHandle<Digested>>,
    stdin: Option<JoinHandle<Digested>>,
    err_thread: Option<JoinHandle<()>>,
}

impl Proc {
    /// The child's process id.
    pub fn pid(&mut self) -> u32 {
        self.guard.child_mut().id()
    }

    /// Spawns `cmd`; with `feed = Some(n)`, writes `n` seeded bytes to its stdin then closes it
    /// (else stdin is /dev/null).
    pub fn spawn(name: &str, mut cmd: Command, feed: Option<u64>, out: Out) -> Proc {
        cmd.stdin(if feed.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut guard =
            ChildGuard::spawn(&mut cmd).unwrap_or_else(|e| panic!("starting {name}: {e}"));
        let child = guard.child_mut();
        let stdin = child.stdin.take().map(|mut w| {
            let n = feed.unwrap_or(0);
            thread::spawn(move || {
                let mut gen = bench::transfer::DataGen::new(0x1234_5678_9abc_def1);
                let mut buf = vec![0u8; 64 * 1024];
                let mut h = Sha256::new();
                let mut sent = 0u64;
                while sent < n {
                    let len = (n - sent).min(buf.len() as u64) as usize;
                    gen.fill(&mut buf[..len]);
                    if w.write_all(&buf[..len]).is_err() {
                        break;
                    }
                    h.update(&buf[..len]);
                    sent += len as u64;
                }
                Digested {
                    bytes: sent,
                    sha256: h.finalize().into(),
                }
            })
        });
        let mut so = child.stdout.take().expect("stdout is piped");
        let stdout_text = Arc::new(Mutex::new(String::new()));
        let text_sink = Arc::clone(&stdout_text);
        let stdout = Some(thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            let mut h = Sha256::new();
            let mut n = 0u64;
            while let Ok(k) = so.read(&mut buf) {
                if k == 0 {
                    break;
                }
                n += k as u64;
                match out {
                    Out::Hash => h.update(&buf[..k]),
                    Out::Text => {
                        if let Ok(mut t) = text_sink.lock() {
                            t.push_str(&String::from_utf8_lossy(&buf[..k]));
                        }
                    }
                }
            }
            Digested {
                bytes: n,
                sha256: h.finalize().into(),
            }
        }));
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut se = child.stderr.take().expect("stderr is piped");
        let sink = Arc::clone(&stderr);
        let err_thread = Some(thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(k) = se.read(&mut buf) {
                if k == 0 {
                    break;
                }
                if let Ok(mut s) = sink.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..k]));
                }
            }
        }));
        Proc {
            name: name.to_string(),
            guard,
            stderr,
            stdout_text,
            stdout,
            stdin,
            err_thread,
        }
    }

    /// Everything the child wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// stdout so far (with [`Out::Text`]).
    pub fn stdout(&self) -> String {
        self.stdout_text
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Waits until stderr contains `needle`; panics (with stderr) on timeout or exit.
    pub fn wait_stderr(&mut self, needle: &str, timeout: Duration) {
        self.wait_for(needle, timeout, false)
    }

    /// Waits until stdout (with [`Out::Text`]) contains `needle`; panics on timeout or exit.
    pub fn wait_stdout(&mut self, needle: &str, timeout: Duration) {
        self.wait_for(needle, timeout, true)
    }

    fn wait_for(&mut self, needle: &str, timeout: Duration, on_stdout: bool) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let text = if on_stdout {
                self.stdout()
            } else {
                self.stderr()
            };
            if text.contains(needle) {
                return;
            }
            if let Ok(Some(status)) = self.guard.wait_timeout(Duration::from_millis(20)) {
                thread::sleep(Duration::from_millis(50));
                panic!(
                    "{} exited ({status}) before printing {needle:?}; stderr:\n{}",
                    self.name,
                    self.stderr()
                );
            }
        }
        panic!(
            "{} did not print {needle:?} within {timeout:?}; stderr:\n{}",
            self.name,
            self.stderr()
        );
    }

    /// Sends SIGTERM and collects what it printed.
    pub fn terminate(mut self) -> Finished {
        let _ = self.guard.terminate(Duration::from_secs(5));
        self.finish(Duration::from_secs(5))
    }

    /// Waits up to `timeout` for exit; panics with stderr if it does not exit in time.
    pub fn finish(mut self, timeout: Duration) -> Finished {
        let status = match self.guard.wait_timeout(timeout) {
            Ok(Some(s)) => s,
            _ => {
                let err = self.stderr();
                drop(self.guard);
                panic!(
                    "{} did not finish within {timeout:?} (its time bound): killed; stderr:\n{err}",
                    self.name
                );
            }
        };
        let fed = self
            .stdin
            .take()
            .map(|h| h.join().expect("stdin feeder panicked"));
        let out = self
            .stdout
            .take()
            .map(|h| h.join().expect("stdout reader panicked"));
        if let Some(h) = self.err_thread.take() {
            let _ = h.join();
        }
        Finished {
            status,
            stderr: self.stderr(),
            stdout: self.stdout(),
            fed,
            out,
        }
    }
}

/// Runs `cmd` (`what` names it in panics) to its end and returns its stdout; panics with its
/// stderr when it cannot be run or exits with failure.
pub fn stdout_of(cmd: &mut Command, what: &str) -> Vec<u8> {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `corestack ARGS` on the host, where the tools that read the engines' shared memory (`stat`,
/// `ss`) and `bench` run: how it ended. Panics only when it cannot be started.
pub fn corestack_output(args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running corestack {args:?}: {e}"))
}

/// [`corestack_output`]'s stdout, whether or not it succeeded (for a tool polled until it shows
/// something).
pub fn corestack_out(args: &[&str]) -> String {
    String::from_utf8_lossy(&corestack_output(args).stdout).into_owned()
}

/// [`corestack_output`]'s stdout; panics with its status, stdout and stderr unless it
/// succeeded.
pub fn corestack_ok(args: &[&str]) -> String {
    let out = corestack_output(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "corestack {args:?} failed ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// This binary with `args` in `ns`.
pub fn corestack(ns: &Netns, args: &[&str]) -> Command {
    let mut cmd = ns.exec(bin());
    cmd.args(args);
    cmd
}

/// Starts `corestack serve echo` in `ns` and waits for it to listen.
pub fn echo_server(ns: &Netns, stack_args: &[String], port: u16) -> Proc {
    let mut cmd = ns.exec(bin());
    cmd.args(["serve", "echo", "--port", &port.to_string()])
        .args(stack_args);
    let mut p = Proc::spawn("corestack serve echo", cmd, None, Out::Text);
    p.wait_stdout("listening on", Duration::from_secs(30));
    p
}

/// Pings `ip` from `ns` once a second until one reply, at most `tries` times.
pub fn ping_until_up(ns: &Netns, ip: &str, tries: u32) {
    for _ in 0..tries {
        if ns.run("ping", &["-c", "1", "-W", "1", ip]).is_ok() {
            return;
        }
    }
    panic!(
        "{ip} did not answer ping from {} within {tries} tries",
        ns.name()
    );
}

/// Turns IPv6 on in `pair`'s Linux namespace and gives `vl` fd00:`net`::1/64 (added with
/// `nodad`: Duplicate Address Detection would hold it back); returns Linux's and corestack's
/// IPv6 addresses (fd00:`net`::1, fd00:`net`::2).
pub fn linux_ipv6(pair: &Pair, net: u8) -> (String, String) {
    let l = &pair.linux;
    for key in ["all", "vl"] {
        l.run(
            "sysctl",
            &["-qw", &format!("net.ipv6.conf.{key}.disable_ipv6=0")],
        )
        .expect("sysctl");
    }
    let linux6 = format!("fd00:{net}::1");
    l.run(
        "ip",
        &[
            "-6",
            "addr",
            "add",
            &format!("{linux6}/64"),
            "dev",
            "vl",
            "nodad",
        ],
    )
    .expect("adding Linux's IPv6 address");
    (linux6, format!("fd00:{net}::2"))
}

/// [`linux_ipv6`]; returns the corestack options (`--ip` for both families) and corestack's
/// IPv6 address.
pub fn dual_stack(pair: &Pair, net: u8) -> (Vec<String>, String) {
    let (_, core6) = linux_ipv6(pair, net);
    let mut args = pair.core_args();
    args.extend(["--ip".to_string(), format!("{core6}/64")]);
    (args, core6)
}

/// Sends 20 UDP datagrams from `ns` (the kernel) to `target` port 7, IPv4 or IPv6, one at a
/// time with a 1 s wait each; returns how many came back equal and from `target`.
pub fn udp_echoes(ns: &Netns, target: &str) -> u32 {
    let script = "import socket,sys\n\
        fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET\n\
        s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(1)\n\
        ok = 0\n\
        for i in range(20):\n\
        \x20   m = b'corestack-%d' % i\n\
        \x20   s.sendto(m, (sys.argv[1], 7))\n\
        \x20   try:\n\
        \x20       d, a = s.recvfrom(2048)\n\
        \x20       ok += d == m and a[0] == sys.argv[1]\n\
        \x20   except socket.timeout:\n\
        \x20       pass\n\
        print(ok)\n";
    let out = ns
        .run("python3", &["-c", script, target])
        .unwrap_or_else(|e| panic!("UDP echo to {target}: {e}"));
    out.trim().parse().unwrap_or(0)
}

/// Python: 64 KiB echoed over TCP from argv[1]:argv[2]; prints True when byte-exact.
pub const TCP_ECHO_64K: &str = "import socket,sys\n\
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)\n\
    m = bytes(range(256)) * 256\n\
    c.sendall(m)\n\
    d = b''\n\
    while len(d) < len(m):\n\
    \x20   k = c.recv(65536)\n\
    \x20   if not k: break\n\
    \x20   d += k\n\
    print(d == m)\n";

/// `ping -6` until corestack answers (Neighbor Discovery first), at most `tries` seconds.
pub fn ping6_until_up(pair: &Pair, ip: &str, tries: u32) {
    for _ in 0..tries {
        if pair
            .linux
            .run("ping", &["-6", "-c", "1", "-W", "1", ip])
            .is_ok()
        {
            return;
        }
    }
    panic!("corestack at {ip} never answered ping -6");
}

/// Waits until a kernel TCP listener on `port` exists in `ns`.
pub fn wait_kernel_listen(ns: &Netns, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let out = ns
            .run("ss", &["-ltnH", &format!("sport = :{port}")])
            .unwrap_or_default();
        if !out.trim().is_empty() {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    panic!("no listener on port {port} in {}", ns.name());
}

/// Linux `nc` client in `pair.linux` -> `corestack nc -l` in `pair.core`: 100 MiB, sha256 equal.
pub fn transfer_linux_to_corestack(
    pair: &Pair,
    core_args: &[String],
    port: u16,
    timeout: Duration,
) {
    transfer_linux_to_corestack_bytes(pair, core_args, port, TRANSFER_BYTES, timeout);
}

/// Linux `nc` client in `pair.linux` -> `corestack nc -l` in `pair.core`: `bytes` of seeded data,
/// sha256 equal; panics when the client takes longer than `timeout`.
pub fn transfer_linux_to_corestack_bytes(
    pair: &Pair,
    core_args: &[String],
    port: u16,
    bytes: u64,
    timeout: Duration,
) {
    let mut srv = corestack(&pair.core, &["nc", "-l", &port.to_string()]);
    srv.args(core_args);
    let mut server = Proc::spawn("corestack nc -l", srv, None, Out::Hash);
    server.wait_stderr("listening on", Duration::from_secs(30));
    let mut cli = pair.linux.exec("nc");
    cli.args(["-N", &pair.core_ip, &port.to_string()]);
    let names = (["linux nc", "corestack nc -l"], "corestack");
    check_transfer(cli, server, bytes, timeout, names);
}

/// Runs `cli` (an `nc` client) fed with `bytes` of seeded data to `server` (an `nc -l` already
/// listening, its stdout hashed) and asserts that both succeed (the client within `timeout`), the
/// client took every byte and the server received the same bytes. `names`: (client, server) and
/// the receiving stack, for the messages.
pub fn check_transfer(
    cli: Command,
    server: Proc,
    bytes: u64,
    timeout: Duration,
    names: ([&str; 2], &str),
) {
    let ([client_name, server_name], receiver) = names;
    let client = Proc::spawn(
        &format!("{client_name} sending {bytes} bytes to {receiver}"),
        cli,
        Some(bytes),
        Out::Hash,
    );
    let c = client.finish(timeout);
    let s = server.finish(Duration::from_secs(20));
    let c = c.assert_success(client_name, || format!("\n{server_name}: {}", s.stderr));
    let s = s.assert_success(server_name, String::new);
    let fed = c.fed.expect("fed");
    assert_eq!(
        fed.bytes, bytes,
        "{client_name} took only {} bytes",
        fed.bytes
    );
    assert_eq!(
        s.out.expect("hashed"),
        fed,
        "{receiver} received different bytes"
    );
}

/// `corestack nc` client in `pair.core` -> Linux `nc -l` in `pair.linux`: 100 MiB, sha256 equal.
pub fn transfer_corestack_to_linux(
    pair: &Pair,
    core_args: &[String],
    port: u16,
    timeout: Duration,
) {
    transfer_corestack_to_linux_bytes(pair, core_args, port, TRANSFER_BYTES, timeout);
}

/// `corestack nc` client in `pair.core` -> Linux `nc -l` in `pair.linux`: `bytes` of seeded data,
/// sha256 equal; panics when the client takes longer than `timeout`.
pub fn transfer_corestack_to_linux_bytes(
    pair: &Pair,
    core_args: &[String],
    port: u16,
    bytes: u64,
    timeout: Duration,
) {
    let mut srv = pair.linux.exec("nc");
    srv.args(["-l", &port.to_string()]);
    let server = Proc::spawn("linux nc -l", srv, None, Out::Hash);
    wait_kernel_listen(&pair.linux, port);
    let mut cli = corestack(&pair.core, &["nc"]);
    cli.args(core_args)
        .args([pair.linux_ip.as_str(), &port.to_string()]);
    let names = (["corestack nc", "linux nc -l"], "Linux");
    check_transfer(cli, server, bytes, timeout, names);
}

/// Runs `corestack bench pingpong --json` (kernel stack) in `ns` and returns the JSON.
pub fn kernel_pingpong(
    ns: &Netns,
    proto: &str,
    target: &str,
    size: u32,
    secs: f64,
) -> serde_json::Value {
    let size = size.to_string();
    let secs = secs.to_string();
    let run = bench::pingpong::command_line(proto, target, &size, &secs);
    let cmd = corestack(ns, &[&run[..], &["--warmup", "0.2", "--json"]].concat());
    let f = Proc::spawn("bench pingpong", cmd, None, Out::Text).finish(Duration::from_secs(30));
    let f = f.assert_success("bench pingpong", String::new);
    serde_json::from_str(f.stdout.trim()).unwrap_or_else(|e| panic!("bad JSON {:?}: {e}", f.stdout))
}

/// The counters of the corestack engines in process `pid` by name, each engine's summed
/// (`corestack stat --pid`: the last column, the total when there are several engines).
pub fn engine_counters(pid: u32) -> std::collections::HashMap<String, u64> {
    stat_counters(&["stat", "--pid", &pid.to_string()])
}

/// After process `pid` (on `engines` engines) served 256 echo connections in `trips` round
/// trips: asserts that every connection opened, no TCP input ran off its owner, nothing handed
/// over was dropped, and every engine owns connections and read frames from its own queue
/// (`context()` is added to the first message). Returns the summed counters.
pub fn assert_256_on_engines(
    pid: u32,
    trips: u64,
    engines: usize,
    context: impl Fn() -> String,
) -> std::collections::HashMap<String, u64> {
    // Counters are published every 10 ms.
    thread::sleep(Duration::from_millis(50));
    let c = engine_counters(pid);
    let get = |k: &str| c.get(k).copied().unwrap_or(0);
    assert!(trips >= 256, "{trips} round trips over 256 connections");
    assert_eq!(get("tcp_passive_opens"), 256, "{c:?}\n{}", context());
    assert_eq!(get("owner_violations"), 0, "{c:?}");
    assert_eq!(get("handoff_dropped"), 0, "{c:?}");
    for e in 0..engines {
        let c = one_engine_counters(pid, e);
        let get = |k: &str| c.get(k).copied().unwrap_or(0);
        assert!(
            get("tcp_passive_opens") > 0,
            "engine {e} of {engines} owns no connection: {c:?}"
        );
        assert!(
            get("rx_frames") > 0,
            "engine {e}'s queue carried no frame: {c:?}"
        );
    }
    c
}

/// The counters of engine `engine` of process `pid` (`corestack stat --pid P --engine E`).
pub fn one_engine_counters(pid: u32, engine: usize) -> std::collections::HashMap<String, u64> {
    stat_counters(&[
        "stat",
        "--pid",
        &pid.to_string(),
        "--engine",
        &engine.to_string(),
    ])
}

/// `corestack ARGS` read as `name ... value` lines.
fn stat_counters(args: &[&str]) -> std::collections::HashMap<String, u64> {
    corestack_out(args)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?.to_string();
            Some((name, w.next_back()?.parse().ok()?))
        })
        .collect()
}

/// Runs `bench conn-client` processes in `ns` at once against `target` (`IP:PORT`), one per
/// entry of `sources` (its `--sources` address, or None for the namespace's own), each with
/// `conns` connections for `seconds`; asserts each succeeded with every connection open
/// (showing the server's counters, `server_pid`, when not) and returns their round trips.
pub fn conn_clients(
    ns: &Netns,
    target: &str,
    sources: &[Option<&str>],
    conns: u32,
    seconds: u32,
    server_pid: u32,
) -> u64 {
    let (conns_s, secs) = (conns.to_string(), seconds.to_string());
    let clients: Vec<_> = sources
        .iter()
        .map(|src| {
            let mut args = vec![
                "bench",
                "conn-client",
                "--target",
                target,
                "--conns",
                &conns_s,
                "--seconds",
                &secs,
            ];
            if let Some(src) = src {
                args.extend(["--sources", src]);
            }
            corestack(ns, &args).output()
        })
        .map(|o| thread::spawn(move || o))
        .collect();
    let mut trips = 0;
    for c in clients {
        let out = c.join().unwrap().expect("running conn-client");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "conn-client failed: {text}\n{}\nserver counters: {:?}",
            String::from_utf8_lossy(&out.stderr),
            engine_counters(server_pid)
        );
        let v: serde_json::Value = serde_json::from_str(text.trim()).expect("conn-client JSON");
        assert_eq!(v["connected"].as_u64(), Some(u64::from(conns)), "{v}");
        trips += v["round_trips"].as_u64().unwrap_or(0);
    }
    trips
}
