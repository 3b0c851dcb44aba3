//! The sockets shim (`libcorestack_preload.so`, `corestack exec`): C test programs, a
//! conformance script compared call by call with the kernel, and real Debian programs on
//! corestack driven by Linux peers in the other namespace, their results checked; the real
//! programs both in embedded mode (the program's own engine) and in service mode (an
//! application of a `corestack run` daemon, one daemon per test).
//!
//! Needs root (namespaces, XDP: fails saying so), `cc`, and the programs scripts/setup.sh
//! installs (memcached, iperf3, sockperf, curl, netcat-openbsd, python3): a missing one fails
//! naming it. Addresses: 10.N.1.1 is Linux, 10.N.1.2 is corestack, N differs per test. Every
//! process is started by the test and killed through a guard; every wait is bounded.

mod common;

use common::daemon::{tail_of, Daemon, SocketPath};
use common::shim::{
    self, assert_memcached_served, memcached_args, memcached_client, need, payload, plain, preload,
    profile_dir, script, served,
};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest a step (a program's run) may take.
const STEP: Duration = Duration::from_secs(60);

/// Compiles `tests/shim/NAME.c` (once per run).
fn cc(name: &str) -> PathBuf {
    need("cc");
    testkit::cc::once(name, || {
        let out_dir = profile_dir().join("shim-c");
        std::fs::create_dir_all(&out_dir).expect("creating the C programs' directory");
        let src = script(&format!("{name}.c"));
        let out = out_dir.join(name);
        testkit::cc::compile(
            Command::new("cc")
                .args(["-O2", "-Wall", "-Wextra", "-Werror", "-pthread"])
                .arg(&src)
                .arg("-o")
                .arg(&out),
            &src,
            "",
        );
        out
    })
}

/// `corestack exec --iface vc --ip CORE/24 -- program args` in the core namespace.
fn shimmed(pair: &Pair, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
    shimmed_mode(pair, false, program, args)
}

/// As [`shimmed`], in inline mode (`--inline`) when `inline`.
fn shimmed_mode(
    pair: &Pair,
    inline: bool,
    program: impl AsRef<std::ffi::OsStr>,
    args: &[&str],
) -> Command {
    shim::shimmed(
        pair,
        &[format!("{}/24", pair.core_ip)],
        inline,
        program,
        args,
    )
}

/// How a test runs a program under the shim: `(program, args) -> command`.
type Sh<'a> = dyn Fn(&str, &[&str]) -> Command + 'a;

/// A `corestack run` daemon on the pair's core side (service-mode tests), its socket
/// `/tmp/corestack-svctest-<pid>-<tag>.sock`.
fn daemon(pair: &Pair, tag: &str) -> (Daemon, SocketPath) {
    let sock = SocketPath::new(tag);
    let d = Daemon::start(pair, &sock, &[]);
    (d, sock)
}

/// Runs `drive` in embedded mode (`corestack exec --iface`, [`shimmed`]) on a fresh pair
/// of namespaces `ns` (prefix, net).
fn in_embedded(ns: (&str, u8), drive: impl FnOnce(&Pair, &Sh)) {
    let _lock = start();
    let pair = Pair::new(ns.0, ns.1).expect("creating the namespaces");
    drive(&pair, &|p, a| shimmed(&pair, p, a));
}

/// Runs `drive` in service mode on a fresh pair of namespaces `ns` (prefix, net): its
/// programs are applications of a daemon on the pair's core side (socket tag `tag`);
/// afterwards the daemon must have logged an application joining and no panic.
fn in_service(ns: (&str, u8), tag: &str, drive: impl FnOnce(&Pair, &Sh)) {
    let _lock = start();
    let pair = Pair::new(ns.0, ns.1).expect("creating the namespaces");
    let (d, sock) = daemon(&pair, tag);
    drive(&pair, &|p, a| served(&pair, &sock, p, a));
    d.expect_line(
        &["application joined"],
        STEP,
        "the programs joined the daemon",
    );
    d.assert_no_panic();
}

/// `tests/shim/NAME.c` passes ("ALL PASSED") on the kernel with `kernel_args`, then under
/// the shim in embedded and inline mode with `shim_args` and the environment `env`; the
/// failures of both modes are reported together.
fn passes_on_the_kernel_and_the_shim(
    pair: &Pair,
    name: &str,
    kernel_args: &[&str],
    shim_args: &[&str],
    env: &[(&str, &str)],
) {
    let prog = cc(name);
    all_passed(
        &format!("{name} (kernel)"),
        plain(&pair.linux, &prog, kernel_args),
        STEP,
        "",
    );
    let failed: Vec<String> = [false, true]
        .into_iter()
        .filter_map(|inline| {
            let mut cmd = shimmed_mode(pair, inline, &prog, shim_args);
            cmd.envs(env.iter().copied());
            let f = run(&format!("{name} (shim, inline {inline})"), cmd, STEP);
            let ok = f.status.success() && f.stdout.contains("ALL PASSED");
            (!ok).then(|| format!("inline {inline}:\n{}{}", f.stdout, f.stderr))
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Runs `cmd` to its end (at most `timeout`) and returns what it did.
fn run(name: &str, cmd: Command, timeout: Duration) -> Finished {
    Proc::spawn(name, cmd, None, Out::Text).finish(timeout)
}

/// Runs `cmd` and asserts it succeeded; returns stdout.
fn run_ok(name: &str, cmd: Command, timeout: Duration) -> String {
    run(name, cmd, timeout)
        .assert_success(name, String::new)
        .stdout
}

/// Runs `cmd`, a `tests/shim` C program (`name` in messages), to its end (at most `timeout`)
/// and asserts it exited 0 saying "ALL PASSED"; `context` (a daemon's log, or empty) ends
/// the failure message.
fn all_passed(name: &str, cmd: Command, timeout: Duration, context: &str) {
    run(name, cmd, timeout).assert_said("ALL PASSED", name, || context.to_string());
}

/// A kernel TCP and UDP echo server on port 7 in the Linux namespace.
fn linux_echo(pair: &Pair) -> Proc {
    let mut cmd = plain(
        &pair.linux,
        bin(),
        &["serve", "echo", "--kernel", "--port", "7"],
    );
    cmd.env_remove("CORESTACK_IFACE");
    let mut p = Proc::spawn("linux echo server", cmd, None, Out::Text);
    p.wait_stdout("listening on", STEP);
    p
}

/// Sends SIGTERM to `pid` (a process this test started).
fn sigterm(pid: u32) {
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}

/// Retries `attempt` every 100 ms until it returns true, at most `timeout`.
fn until(timeout: Duration, mut attempt: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if attempt() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

// ---------------------------------------------------------------------------
// C programs
// ---------------------------------------------------------------------------

#[test]
fn shim_epoll_poll_select_over_pipe_kernel_udp_and_corestack_sockets_report_exactly_what_is_ready()
{
    let _lock = start();
    let prog = cc("mixed");
    let pair = Pair::new("p", 150).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    for inline in [false, true] {
        all_passed(
            &format!("mixed (shim, inline {inline})"),
            shimmed_mode(&pair, inline, &prog, &[&pair.linux_ip, "7"]),
            STEP,
            "",
        );
    }
}

#[test]
fn shim_sigterm_interrupts_blocked_accept_recv_and_epoll_wait_as_on_linux() {
    let _lock = start();
    let prog = cc("signals");
    let pair = Pair::new("p", 151).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    let mut outputs = Vec::new();
    for (label, cmd) in [
        (
            "kernel",
            plain(&pair.linux, &prog, &[&pair.linux_ip, "7", "7100"]),
        ),
        (
            "shim",
            shimmed(&pair, &prog, &[&pair.linux_ip, "7", "7101"]),
        ),
    ] {
        let mut p = Proc::spawn(&format!("signals ({label})"), cmd, None, Out::Text);
        p.wait_stdout("waiting for SIGTERM in epoll_wait", STEP);
        std::thread::sleep(Duration::from_millis(100));
        sigterm(p.pid());
        let f = p.finish(Duration::from_secs(10));
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&f.status),
            Some(15),
            "{label}: SIGTERM while blocked in epoll_wait did not end the process ({}): {}\n{}",
            f.status,
            f.stdout,
            f.stderr
        );
        outputs.push(f.stdout);
    }
    assert_eq!(outputs[0], outputs[1], "the shim differs from the kernel");
    let expect = [
        ("accept, handler without SA_RESTART", "EINTR"),
        ("recv, handler without SA_RESTART", "EINTR"),
        ("epoll_wait, handler with SA_RESTART", "EINTR"),
        ("poll, handler with SA_RESTART", "EINTR"),
        ("select, handler with SA_RESTART", "EINTR"),
        ("recv, handler with SA_RESTART (restarts)", "ok"),
        ("accept, handler with SA_RESTART (restarts)", "ok"),
        ("recv with SO_RCVTIMEO, handler with SA_RESTART", "EINTR"),
        ("recv with SO_RCVTIMEO 200 ms, no data", "EAGAIN"),
    ];
    for (case, result) in expect {
        let line = outputs[1]
            .lines()
            .find(|l| l.starts_with(case))
            .unwrap_or_else(|| panic!("no line for {case:?}:\n{}", outputs[1]));
        assert!(line.contains(&format!("-> {result} ")), "{line}");
    }
}

#[test]
fn shim_threads_share_sockets_and_a_close_from_another_thread_ends_calls_as_on_linux() {
    let _lock = start();
    need("python3");
    let prog = cc("threads");
    let pair = Pair::new("p", 152).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    let mut outputs = Vec::new();
    for (label, cmd, ip, port) in [
        (
            "kernel",
            plain(&pair.linux, &prog, &[&pair.linux_ip, "7", "7200", "8"]),
            pair.linux_ip.clone(),
            "7200",
        ),
        (
            "shim",
            shimmed(&pair, &prog, &[&pair.linux_ip, "7", "7201", "8"]),
            pair.core_ip.clone(),
            "7201",
        ),
    ] {
        let mut p = Proc::spawn(&format!("threads ({label})"), cmd, None, Out::Text);
        p.wait_stdout("listening", STEP);
        let client = plain(
            &pair.linux,
            "python3",
            &[
                script("threads_client.py").to_str().unwrap(),
                &ip,
                port,
                "8",
            ],
        );
        let c = run(&format!("threads client ({label})"), client, STEP);
        let f = p.finish(STEP);
        assert!(
            c.status.success() && f.status.success(),
            "{label}: client {} {}{}; program {}:\n{}{}",
            c.status,
            c.stdout,
            c.stderr,
            f.status,
            f.stdout,
            f.stderr
        );
        outputs.push(f.stdout);
    }
    assert_eq!(outputs[0], outputs[1], "the shim differs from the kernel");
}

/// Asserts that conform's output under the shim (`what`, in the message) is the kernel's,
/// line by line and as many lines; `context` ends the failure message.
fn assert_conforms(kernel: &str, shim: &str, what: &str, context: &str) {
    let diff: Vec<String> = kernel
        .lines()
        .zip(shim.lines())
        .filter(|(k, s)| k != s)
        .map(|(k, s)| format!("kernel: {k}\n  shim: {s}"))
        .collect();
    assert!(
        diff.is_empty() && kernel.lines().count() == shim.lines().count(),
        "{what} differs from the kernel:\n{}\n(full shim output:\n{shim}){context}",
        diff.join("\n")
    );
}

#[test]
fn shim_conformance_script_matches_the_kernel_call_by_call() {
    let _lock = start();
    let prog = cc("conform");
    let pair = Pair::new("p", 153).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    let kernel = run_ok(
        "conform (kernel)",
        plain(&pair.linux, &prog, &[&pair.linux_ip, "7", "7300"]),
        STEP,
    );
    assert!(
        kernel.ends_with("done\n") && kernel.lines().count() > 100,
        "{kernel}"
    );
    for inline in [false, true] {
        let shim = run_ok(
            &format!("conform (shim, inline {inline})"),
            shimmed_mode(&pair, inline, &prog, &[&pair.linux_ip, "7", "7301"]),
            STEP,
        );
        assert_conforms(&kernel, &shim, &format!("the shim (inline {inline})"), "");
    }
}

#[test]
fn shim_service_conformance_script_matches_the_kernel_call_by_call() {
    let _lock = start();
    let prog = cc("conform");
    let pair = Pair::new("shm2", 178).expect("creating the namespaces");
    let (d, sock) = daemon(&pair, "conform");
    let _echo = linux_echo(&pair);
    let kernel = run_ok(
        "conform (kernel)",
        plain(&pair.linux, &prog, &[&pair.linux_ip, "7", "7300"]),
        STEP,
    );
    let shim = run_ok(
        "conform (shim, service mode)",
        served(
            &pair,
            &sock,
            prog.to_str().unwrap(),
            &[&pair.linux_ip, "7", "7301"],
        ),
        STEP,
    );
    assert_conforms(
        &kernel,
        &shim,
        "the shim in service mode",
        &format!("\ndaemon:\n{}", d.tail()),
    );
}

// ---------------------------------------------------------------------------
// Real programs
// ---------------------------------------------------------------------------

#[test]
fn shim_memcached_t1_and_t4_serve_sets_and_gets_of_concurrent_linux_clients() {
    in_embedded(("p", 154), memcached_t1_t4);
}

#[test]
fn shim_service_memcached_t1_and_t4_serve_sets_and_gets_of_concurrent_linux_clients() {
    in_service(("shm2", 170), "memcached", memcached_t1_t4);
}

/// memcached -t 1, then -t 4, under the shim; a Linux client sets and gets (8 connections, 200
/// keys each) and checks every value.
fn memcached_t1_t4(pair: &Pair, sh: &Sh) {
    need("memcached");
    need("python3");
    for threads in ["1", "4"] {
        let server = Proc::spawn(
            &format!("memcached -t {threads}"),
            sh(
                "memcached",
                &[&memcached_args(threads)[..], &["-c", "256"]].concat(),
            ),
            None,
            Out::Text,
        );
        let c = memcached_client(&pair.linux, &pair.core_ip, STEP);
        let s = server.terminate();
        assert_memcached_served(&c, &s, &format!("\n(memcached -t {threads})"));
    }
}

/// True when `corestack ss` output `out` has a line of process `pid` named `name` listening
/// on TCP `port` (ss lines: pid process app "tcp LISTEN" local ...).
fn ss_listening(out: &str, pid: u32, name: &str, port: &str) -> bool {
    out.lines().any(|l| {
        let c: Vec<&str> = l.split_whitespace().collect();
        c.len() > 6
            && c[0] == pid.to_string()
            && c[1] == name
            && c[3..5] == ["tcp", "LISTEN"]
            && c[5].ends_with(&format!(":{port}"))
    })
}

#[test]
fn shim_ss_and_stat_show_the_programs_name_and_pid_in_embedded_and_service_mode() {
    let _lock = start();
    need("memcached");
    // One interface per engine: the daemon drives one pair, the embedded engine the other.
    let pair = Pair::new("shm2", 175).expect("creating the namespaces");
    let other = Pair::new("shm2", 176).expect("creating the namespaces");
    let (d, sock) = daemon(&pair, "ss");
    let args = ["-u", "root", "-t", "1", "-p", "11311", "-U", "0"];
    let embedded = Proc::spawn(
        "memcached (embedded)",
        shimmed(&other, "memcached", &args),
        None,
        Out::Text,
    );
    let args = ["-u", "root", "-t", "1", "-p", "11312", "-U", "0"];
    let mut served_mc = Proc::spawn(
        "memcached (service)",
        served(&pair, &sock, "memcached", &args),
        None,
        Out::Text,
    );
    // `ip netns exec` execs the program: the pid we spawned is memcached's own.
    let mut embedded = embedded;
    let (pe, ps) = (embedded.pid(), served_mc.pid());
    let listening = |out: &str, pid: u32, port: &str| ss_listening(out, pid, "memcached", port);
    let mut out = String::new();
    let seen = until(STEP, || {
        out = corestack_out(&["ss"]);
        listening(&out, pe, "11311") && listening(&out, ps, "11312")
    });
    assert!(
        seen,
        "corestack ss shows no LISTEN line of memcached with pid {pe} (embedded) and {ps} \
         (service):\n{out}\nembedded stderr: {}\nservice stderr: {}\ndaemon:\n{}",
        embedded.stderr(),
        served_mc.stderr(),
        d.tail()
    );
    let stat = corestack_out(&["stat", "--pid", &pe.to_string()]);
    assert!(
        stat.lines()
            .next()
            .is_some_and(|l| l.starts_with(&format!("pid {pe} memcached "))),
        "corestack stat of the embedded engine:\n{stat}"
    );
    let stat = corestack_out(&["stat"]);
    assert!(
        stat.lines().any(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            c.len() > 5
                && c[1] == ps.to_string()
                && c[3] == "memcached"
                && c[4..6] == ["1", "LISTEN"]
        }),
        "corestack stat shows no application line for memcached (pid {ps}, 1 LISTEN):\n{stat}"
    );
    drop(embedded.terminate());
    drop(served_mc.terminate());
}

/// (bytes sent, bytes received) from iperf3's JSON.
fn iperf3_bytes(json: &str) -> (f64, f64) {
    let v: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("bad iperf3 JSON ({e}): {json}"));
    assert!(v["error"].is_null(), "iperf3 error: {}", v["error"]);
    let e = &v["end"];
    (
        e["sum_sent"]["bytes"].as_f64().unwrap_or(0.0),
        e["sum_received"]["bytes"].as_f64().unwrap_or(0.0),
    )
}

fn check_transfer(what: &str, (sent, received): (f64, f64)) {
    assert!(
        received > 1e6 && received <= sent && received >= 0.98 * sent,
        "{what}: sent {sent} bytes, received {received}"
    );
}

#[test]
fn shim_iperf3_server_and_client_both_directions_byte_counts_agree() {
    in_embedded(("p", 155), iperf3_both_ways);
}

#[test]
fn shim_service_iperf3_server_and_client_both_directions_byte_counts_agree() {
    in_service(("shm2", 171), "iperf3", iperf3_both_ways);
}

/// iperf3 server under the shim with Linux clients, then Linux server with clients under the
/// shim, each direction (-R): the byte counts agree.
fn iperf3_both_ways(pair: &Pair, sh: &Sh) {
    need("iperf3");
    let linux = |p: &str, a: &[&str]| plain(&pair.linux, p, a);
    // (the server's side, the client's side, the server's address, port, what): first the
    // server on corestack (dual-stack `::`, select() loop) with Linux clients, then the
    // client on corestack with a Linux server.
    let sides: [(&Sh, &Sh, &str, &str, &str); 2] = [
        (
            sh,
            &linux,
            &pair.core_ip,
            "5201",
            "linux client -> shim server",
        ),
        (
            &linux,
            sh,
            &pair.linux_ip,
            "5202",
            "shim client -> linux server",
        ),
    ];
    for (server_side, client_side, server_ip, port, what) in sides {
        for reverse in [false, true] {
            let mut server = Proc::spawn(
                &format!("iperf3 -s ({what})"),
                server_side("iperf3", &["-s", "-1", "-p", port, "--forceflush"]),
                None,
                Out::Text,
            );
            server.wait_stdout("Server listening", STEP);
            let mut args = vec!["-c", server_ip, "-p", port, "-t", "2", "-J"];
            if reverse {
                args.push("-R");
            }
            let out = run_ok(
                &format!("iperf3 -c ({what})"),
                client_side("iperf3", &args),
                STEP,
            );
            check_transfer(&format!("{what}, reverse {reverse}"), iperf3_bytes(&out));
            let s = server.finish(STEP);
            assert!(s.status.success(), "iperf3 -s: {}", s.stderr);
        }
    }
}

/// sockperf's valid round trips (ping-pong) or message rate (throughput) from its output.
fn sockperf_result(out: &str, key: &str) -> f64 {
    out.lines()
        .find_map(|l| {
            let rest = l.split(key).nth(1)?;
            rest.trim()
                .trim_end_matches(|c: char| !c.is_ascii_digit())
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}

fn sockperf_checks(what: &str, pp: &str, tp: &str) {
    let valid = sockperf_result(pp, "ReceivedMessages=");
    assert!(
        valid >= 100.0,
        "{what}: ping-pong got {valid} replies:\n{pp}"
    );
    assert!(pp.contains("Summary: Latency is"), "{what}: {pp}");
    // A waiter that missed its wake-up sleeps in naps of 1 ms: each round trip would take
    // at least that long.
    let latency = sockperf_result(pp, "Summary: Latency is");
    assert!(
        latency < 800.0,
        "{what}: mean latency {latency} µs (waiters not woken by the engine?):\n{pp}"
    );
    let rate = sockperf_result(tp, "Message Rate is");
    assert!(rate >= 1000.0, "{what}: throughput {rate} msg/s:\n{tp}");
}

#[test]
fn shim_sockperf_server_and_client_pingpong_and_throughput_tcp_udp_each_iomux() {
    in_embedded(("p", 156), sockperf_each_iomux);
}

#[test]
fn shim_service_sockperf_server_and_client_pingpong_and_throughput_tcp_udp_each_iomux() {
    in_service(("shm2", 172), "sockperf", sockperf_each_iomux);
}

/// sockperf server under the shim in each -F mode with Linux clients, and clients under the
/// shim in each -F mode against a Linux server: ping-pong and throughput, TCP and UDP.
fn sockperf_each_iomux(pair: &Pair, sh: &Sh) {
    need("sockperf");
    let dir = profile_dir().join("shim-c");
    std::fs::create_dir_all(&dir).expect("creating a directory for feed files");
    let feed = |name: &str, ip: &str| {
        let p = dir.join(name);
        std::fs::write(&p, format!("T:{ip}:11111\nU:{ip}:11112\n")).expect("writing a feed file");
        p
    };
    let core_feed = feed("feed-core", &pair.core_ip);
    let linux_feed = feed("feed-linux", &pair.linux_ip);
    // sockperf ping-pong, then throughput, with the same `args` (`side` runs it), checked.
    let pingpong_and_throughput = |side: &Sh, args: &[&str], what: &str, udp: bool| {
        let test = |test: &str| {
            let cmd = side("sockperf", &[&[test], args].concat());
            run_ok(&format!("sockperf {test} ({what})"), cmd, STEP)
        };
        let mut pp = test("ping-pong");
        // UDP ping-pong resends nothing: one datagram lost anywhere on the path (a veth's
        // ring or a socket's, under the load of the tests running beside this one) stops
        // sockperf's round trips for good, and sockperf 3.7 then reports no observation at
        // all when the loss came in its first 450 ms (seen once in CI: 50 445 round trips,
        // then none). Run it once more: a stack that loses datagrams fails the second run.
        if udp && !pp.contains("Summary: Latency is") {
            eprintln!("{what}: UDP ping-pong stalled (a lost datagram?), once more:\n{pp}");
            pp = test("ping-pong");
        }
        sockperf_checks(what, &pp, &test("throughput"));
    };
    let linux = |p: &str, a: &[&str]| plain(&pair.linux, p, a);
    for mode in ["select", "poll", "epoll"] {
        // Server on corestack, Linux clients.
        let mut server = Proc::spawn(
            &format!("sockperf server -F {mode} (shim)"),
            sh(
                "sockperf",
                &["server", "-f", core_feed.to_str().unwrap(), "-F", mode],
            ),
            None,
            Out::Text,
        );
        server.wait_stdout("to block on socket", STEP);
        for (proto, port) in [("--tcp", "11111"), ("", "11112")] {
            let mut base = vec!["-i", pair.core_ip.as_str(), "-p", port, "-t", "1"];
            if !proto.is_empty() {
                base.push(proto);
            }
            let what = format!("shim server -F {mode} {proto}");
            pingpong_and_throughput(&linux, &base, &what, proto.is_empty());
        }
        drop(server.terminate());
    }
    // Linux server, clients on corestack in each -F mode.
    let mut server = Proc::spawn(
        "sockperf server (linux)",
        plain(
            &pair.linux,
            "sockperf",
            &["server", "-f", linux_feed.to_str().unwrap()],
        ),
        None,
        Out::Text,
    );
    server.wait_stdout("to block on socket", STEP);
    for mode in ["select", "poll", "epoll"] {
        for (label, line) in [("tcp", 1), ("udp", 2)] {
            let one = dir.join(format!("feed-linux-{label}"));
            let all = std::fs::read_to_string(&linux_feed).unwrap_or_default();
            std::fs::write(
                &one,
                format!("{}\n", all.lines().nth(line - 1).unwrap_or_default()),
            )
            .expect("writing a feed file");
            let f = one.to_str().unwrap();
            pingpong_and_throughput(
                sh,
                &["-f", f, "-F", mode, "-t", "1"],
                &format!("shim client -F {mode} {label}"),
                label == "udp",
            );
        }
    }
    drop(server.terminate());
}

#[test]
fn shim_python_http_server_serves_linux_curl_and_shimmed_curl_fetches_from_linux() {
    in_embedded(("p", 157), http_server_and_curl);
}

#[test]
fn shim_service_python_http_server_serves_linux_curl_and_shimmed_curl_fetches_from_linux() {
    in_service(("shm2", 173), "http", http_server_and_curl);
}

/// A Python asyncio echo server under the shim (embedded mode) serves 20 Linux clients at
/// once, 256 KiB each, byte-exact.
#[test]
fn shim_python_asyncio_echo_server_serves_20_linux_clients_at_once() {
    in_embedded(("p", 161), asyncio_echo);
}

/// The same asyncio server in service mode (through `corestack run`).
#[test]
fn shim_service_python_asyncio_echo_server_serves_20_linux_clients_at_once() {
    in_service(("shm3", 162), "asyncio", asyncio_echo);
}

/// Starts `cmd`, a server under the shim (`name` in messages), and waits until it prints
/// `serving` and corestack answers Linux's ping.
fn start_serving(pair: &Pair, name: &str, cmd: Command) -> Proc {
    let mut server = Proc::spawn(name, cmd, None, Out::Text);
    server.wait_stdout("serving", STEP);
    ping_until_up(&pair.linux, &pair.core_ip, 10);
    server
}

fn asyncio_echo(pair: &Pair, sh: &Sh) {
    need("python3");
    let server_py = script("asyncio_echo.py");
    let server = start_serving(
        pair,
        "asyncio_echo.py (shim)",
        sh(
            "python3",
            &["-u", server_py.to_str().unwrap(), "7400", "30"],
        ),
    );
    let clients_py = script("asyncio_clients.py");
    let cmd = plain(
        &pair.linux,
        "python3",
        &[clients_py.to_str().unwrap(), &pair.core_ip, "7400", "20"],
    );
    let out = run_ok("asyncio clients (linux)", cmd, STEP);
    assert_eq!(
        out.trim(),
        "equal 20 of 20",
        "server:\n{}{}",
        server.stdout(),
        server.stderr()
    );
    drop(server.terminate());
}

/// A Node.js http server under the shim (embedded mode) answers Linux curl: four requests at
/// once, 1 MiB each, complete.
#[test]
fn shim_node_http_server_serves_linux_curl() {
    in_embedded(("p", 163), node_http);
}

/// The same Node.js server in service mode.
#[test]
fn shim_service_node_http_server_serves_linux_curl() {
    in_service(("shm4", 164), "node", node_http);
}

fn node_http(pair: &Pair, sh: &Sh) {
    need("node");
    need("curl");
    let js = script("node_http.js");
    let server = start_serving(
        pair,
        "node node_http.js (shim)",
        sh("node", &[js.to_str().unwrap(), "7401", "30"]),
    );
    curls_get_1mib(pair, (7401, "/"), 4, &|| server.stdout() + &server.stderr());
    drop(server.terminate());
}

/// Node.js `http` with `cluster` (2 workers) in service mode: the primary accepts and hands
/// each connection to a worker with SCM_RIGHTS (Node's round-robin on Linux), which takes it
/// over (`Desc::Lend`, `ctl::Borrow`, `Desc::Adopt`). 8 concurrent Linux curls of 1 MiB come
/// back complete, and both workers served.
#[test]
fn shim_service_node_cluster_with_two_workers_serves_linux_curl() {
    let _lock = start();
    need("node");
    need("curl");
    let pair = Pair::new("shm8", 239).expect("creating the namespaces");
    let (d, sock) = daemon(&pair, "cluster");
    let js = script("node_cluster.js");
    let server = start_serving(
        &pair,
        "node node_cluster.js (service)",
        served(&pair, &sock, "node", &[js.to_str().unwrap(), "7403", "30"]),
    );
    let what = || {
        format!(
            "{}{}\ndaemon:\n{}",
            server.stdout(),
            server.stderr(),
            d.tail()
        )
    };
    curls_get_1mib(&pair, (7403, "/"), 8, &what);
    let workers: std::collections::HashSet<String> = server
        .stdout()
        .lines()
        .filter_map(|l| l.strip_prefix("worker ")?.strip_suffix(" served"))
        .map(str::to_string)
        .collect();
    assert_eq!(workers.len(), 2, "not both workers served:\n{}", what());
    drop(server.terminate());
    d.assert_no_panic();
}

/// A hyper HTTP server on Tokio's multi-thread runtime (4 workers; `tests/shim/tokio_http`,
/// built here) under the shim in embedded mode answers eight concurrent Linux `curl`
/// requests of 1 MiB, complete: the workers' epoll waits, wakes and re-arms across threads.
#[test]
fn shim_tokio_multi_thread_hyper_server_serves_eight_concurrent_curls() {
    let _lock = start();
    need("curl");
    let exe = tokio_http();
    let pair = Pair::new("p", 165).expect("creating the namespaces");
    let server = start_serving(
        &pair,
        "tokio-http (shim)",
        shimmed(&pair, &exe, &["7402", "30"]),
    );
    curls_get_1mib(&pair, (7402, "/"), 8, &|| {
        server.stdout() + &server.stderr()
    });
    drop(server.terminate());
}

/// Builds `tests/shim/tokio_http` (its own Cargo project and lock file, not a workspace
/// member) into the profile directory, once per run; returns the binary.
fn tokio_http() -> PathBuf {
    static BUILT: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.as_ref() {
        return p.clone();
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shim/tokio_http");
    let target = profile_dir().join("shim-tokio");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .args(["build", "--release", "--locked", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target);
    stdout_of(&mut build, "cargo build of tests/shim/tokio_http");
    let exe = target.join("release/tokio-http");
    *built = Some(exe.clone());
    exe
}

/// `count` concurrent `curl` requests from Linux for `path` on corestack's port `port`, each
/// of which must return 1 MiB of `x`; `server()` says what the server printed.
fn curls_get_1mib(
    pair: &Pair,
    (port, path): (u16, &str),
    count: usize,
    server: &dyn Fn() -> String,
) {
    let url = format!("http://{}:{port}{path}", pair.core_ip);
    let gets: Vec<Proc> = (0..count)
        .map(|_| {
            let cmd = plain(&pair.linux, "curl", &["-s", "-S", "-m", "20", &url]);
            Proc::spawn("curl (linux)", cmd, None, Out::Text)
        })
        .collect();
    for g in gets {
        let f = g.finish(STEP);
        assert!(
            f.status.success() && f.stdout.len() == 1 << 20 && f.stdout.bytes().all(|b| b == b'x'),
            "curl got {} bytes ({}): {}; server:\n{}",
            f.stdout.len(),
            f.status,
            f.stderr,
            server()
        );
    }
}

/// python's http.server under the shim serves 3 MiB to Linux curl (and to kernel curl over
/// loopback); curl under the shim fetches it from a Linux http.server and is refused by a
/// closed port.
fn http_server_and_curl(pair: &Pair, sh: &Sh) {
    need("python3");
    need("curl");
    let www = profile_dir().join("shim-www");
    std::fs::create_dir_all(&www).expect("creating the web root");
    let data = payload(3 << 20, 0x9e37_79b9_7f4a_7c15);
    std::fs::write(www.join("data.bin"), &data).expect("writing the file to serve");
    let www_s = www.to_str().unwrap();
    // `python3 -m http.server` serving the web root on `port` at `bind`, up.
    let http_server = |what: &str, sh: &Sh, port: &str, bind: &str| {
        let args = [
            "-u",
            "-m",
            "http.server",
            port,
            "--bind",
            bind,
            "--directory",
            www_s,
        ];
        let mut server = Proc::spawn(what, sh("python3", &args), None, Out::Text);
        server.wait_stdout("Serving HTTP", STEP);
        server
    };
    // curl (as `sh` runs it) fetching `url` with status 200 into `out` ("/dev/null": only the
    // status is checked).
    let fetch = |what: &str, sh: &Sh, url: &str, out: &str| {
        let args = ["-sS", "-o", out, "-w", "%{http_code} %{size_download}", url];
        let said = run_ok(what, sh("curl", &args), STEP);
        assert!(said.starts_with("200"), "{what}: {said}");
    };
    let on_linux = |p: &str, a: &[&str]| plain(&pair.linux, p, a);
    let on_core_kernel = |p: &str, a: &[&str]| plain(&pair.core, p, a);
    // python on corestack (bound to the wildcard, so loopback works too), curl from Linux.
    let server = http_server("python3 -m http.server (shim)", sh, "8080", "0.0.0.0");
    let got = www.join("got-linux.bin");
    let url = format!("http://{}:8080/data.bin", pair.core_ip);
    fetch("linux curl", &on_linux, &url, got.to_str().unwrap());
    assert!(
        std::fs::read(&got).ok() == Some(data.clone()),
        "linux curl got different bytes"
    );
    fetch(
        "kernel curl over loopback to the wildcard server",
        &on_core_kernel,
        "http://127.0.0.1:8080/data.bin",
        "/dev/null",
    );
    drop(server.terminate());
    // python on Linux, curl on corestack.
    let server = http_server(
        "python3 -m http.server (linux)",
        &on_linux,
        "8081",
        &pair.linux_ip,
    );
    let got = www.join("got-shim.bin");
    let url = format!("http://{}:8081/data.bin", pair.linux_ip);
    fetch("shimmed curl", sh, &url, got.to_str().unwrap());
    assert!(
        std::fs::read(&got).ok() == Some(data),
        "shimmed curl got different bytes"
    );
    let refused = run(
        "shimmed curl to a closed port",
        sh(
            "curl",
            &["-sS", "-m", "5", &format!("http://{}:9/", pair.linux_ip)],
        ),
        STEP,
    );
    assert!(
        refused.stderr.contains("Connection refused")
            || refused.stderr.contains("Couldn't connect"),
        "curl to a closed port: {}",
        refused.stderr
    );
    drop(server.terminate());
}

#[test]
fn shim_nc_both_directions_one_mib_sha256_equal() {
    in_embedded(("p", 158), nc_both_ways);
}

#[test]
fn shim_service_nc_both_directions_one_mib_sha256_equal() {
    in_service(("shm2", 174), "nc", nc_both_ways);
}

/// nc -l under the shim receives 1 MiB from Linux nc; nc under the shim sends 1 MiB to Linux
/// nc -l; sha256 equal both ways.
fn nc_both_ways(pair: &Pair, sh: &Sh) {
    need("nc");
    const BYTES: u64 = 1 << 20;
    // nc -l on corestack, Linux nc sends (retried while the listener starts).
    let server = Proc::spawn(
        "nc -l (shim)",
        sh("nc", &["-l", "-p", "5000"]),
        None,
        Out::Hash,
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut sent = None;
    let reached = until(STEP, || {
        let cli = plain(&pair.linux, "nc", &["-N", &pair.core_ip, "5000"]);
        let c = Proc::spawn("linux nc", cli, Some(BYTES), Out::Hash).finish(STEP);
        sent = c.fed;
        c.status.success()
    });
    let s = server.finish(STEP);
    assert!(
        reached,
        "linux nc never reached the shimmed nc -l: {}",
        s.stderr
    );
    assert!(s.status.success(), "nc -l (shim): {}", s.stderr);
    assert_eq!(s.out, sent, "nc -l on corestack received different bytes");
    // Linux nc -l, nc on corestack sends.
    let linux = Proc::spawn(
        "nc -l (linux)",
        plain(&pair.linux, "nc", &["-l", "-p", "5001"]),
        None,
        Out::Hash,
    );
    wait_kernel_listen(&pair.linux, 5001);
    let c = Proc::spawn(
        "nc (shim)",
        sh("nc", &["-N", &pair.linux_ip, "5001"]),
        Some(BYTES),
        Out::Hash,
    )
    .finish(STEP);
    assert!(c.status.success(), "nc (shim): {}", c.stderr);
    let l = linux.finish(STEP);
    assert_eq!(
        l.out, c.fed,
        "Linux nc -l received different bytes from corestack"
    );
}

#[test]
fn shim_fork_child_gets_enetdown_on_inherited_sockets_and_the_parent_keeps_working() {
    let _lock = start();
    let pair = Pair::new("p", 159).expect("creating the namespaces");
    fork_child_enetdown(
        &pair,
        &|p, a| shimmed(&pair, p, a),
        &[
            "child recv -1 ENETDOWN",
            "child send -1 ENETDOWN",
            "child poll 1 revents 0x19",
            "child close 0",
            "child new socket connect -1 ENETUNREACH",
            "parent recv 2",
            "helper exec exit 0",
            "parent still works 2",
        ],
    );
}

#[test]
fn shim_service_fork_child_takes_over_the_inherited_connection_and_leaves_the_parent_enetdown() {
    let _lock = start();
    let pair = Pair::new("shm2", 177).expect("creating the namespaces");
    let (d, sock) = daemon(&pair, "fork");
    // Service mode: the child takes the connection over (the echo of the parent's "hi", then
    // of its own "x", as on Linux) and its new socket goes to corestack through an association
    // of its own; the parent's copy answers ENETDOWN from then on (one process at a time).
    fork_child_enetdown(
        &pair,
        &|p, a| served(&pair, &sock, p, a),
        &[
            "child recv 2 ",
            "child send 1 ",
            "child poll 1 revents 0x1",
            "child close 0",
            "child new socket connect 0 ",
            "parent recv -1",
            "helper exec exit 0",
            "parent still works -1",
        ],
    );
    let ended = Instant::now();
    d.expect_line(
        &["application joined"],
        STEP,
        "the program joined the daemon",
    );
    // Its last child lives 3 s longer; the association ends when the parent exits.
    d.expect_line(
        &["application left"],
        Duration::from_millis(2000),
        "the parent's association ended while its child lived on",
    );
    assert!(
        ended.elapsed() < Duration::from_millis(2500),
        "the daemon saw the parent leave only after its child exited"
    );
}

/// tests/shim/fork.c: what a forked child gets from its inherited corestack connection (in
/// embedded mode ENETDOWN, and it closes cleanly; in service mode the connection itself),
/// how its new socket's connect ends (the kernel's ENETUNREACH in embedded mode; corestack
/// in service mode), that a helper that execs costs nothing, and what the parent's connection
/// does afterwards: `lines`, each printed exactly so.
fn fork_child_enetdown(pair: &Pair, sh: &Sh, lines: &[&str]) {
    let prog = cc("fork");
    let _echo = linux_echo(pair);
    let out = run_ok(
        "fork (shim)",
        sh(prog.to_str().unwrap(), &[&pair.linux_ip, "7"]),
        STEP,
    );
    for line in lines {
        assert!(out.lines().any(|l| l == *line), "no {line:?} in:\n{out}");
    }
}

/// Python's `socketserver.ForkingTCPServer` (a child per connection; the parent closes its
/// copy at once, the child serves and `_exit`s) in service mode: 20 Linux clients at once,
/// 256 KiB each, byte-exact; a child served each connection.
#[test]
fn shim_service_python_forking_tcp_server_serves_20_linux_clients_at_once() {
    let _lock = start();
    let pair = Pair::new("shm4", 166).expect("creating the namespaces");
    let (d, sock) = daemon(&pair, "forking");
    need("python3");
    let server_py = script("forking_echo.py");
    let mut server = Proc::spawn(
        "forking_echo.py (service)",
        served(
            &pair,
            &sock,
            "python3",
            &["-u", server_py.to_str().unwrap(), "7401", "30"],
        ),
        None,
        Out::Text,
    );
    server.wait_stdout("serving", STEP);
    let served = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("child ") && l.ends_with(" served 262144"))
            .count()
    };
    let (out, ok) = twenty_echo_clients(&pair, 7401, || served(&server.stdout()));
    assert_twenty_echoed(&out, ok, &server, &d);
    drop(server.terminate());
    d.assert_no_panic();
}

/// A file this test put in place, removed on drop.
struct Placed(PathBuf);

impl Drop for Placed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Stops the nginx whose master has process id `.0` (SIGTERM, as `nginx -s stop` does) and
/// waits until its pid file is gone.
struct NginxRunning(u32);

impl Drop for NginxRunning {
    fn drop(&mut self) {
        sigterm(self.0);
        until(Duration::from_secs(5), || !Path::new(NGINX_PID).exists());
    }
}

/// Where Debian's stock nginx.conf has nginx write its master's pid.
const NGINX_PID: &str = "/run/nginx.pid";

/// Starts nginx with `args` under the shim in service mode (`d` at `sock`), as its service
/// starts it (it forks and exits); returns its master's pid, read from `pid_file`. Panics
/// (with the daemon's log) when it does not start or writes no pid.
fn start_nginx(
    pair: &Pair,
    (d, sock): (&Daemon, &SocketPath),
    args: &[&str],
    pid_file: &Path,
) -> u32 {
    let started = run("nginx (service)", served(pair, sock, "nginx", args), STEP);
    assert!(
        started.status.success(),
        "nginx did not start ({}):\n{}{}\ndaemon:\n{}",
        started.status,
        started.stdout,
        started.stderr,
        d.tail()
    );
    let mut master = 0;
    until(STEP, || {
        master = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(0);
        master != 0
    });
    assert!(master != 0, "nginx wrote no {}", pid_file.display());
    master
}

/// nginx as Debian ships it, in service mode: its stock `/etc/nginx/nginx.conf` (daemon on,
/// `worker_processes auto`, `user www-data`, `sendfile on`, `tcp_nopush on`) and default
/// site, started as its service starts it (`nginx`, which forks and exits: the master is its
/// child, the workers its grandchildren, at uid www-data). 8 concurrent Linux curls get a
/// 1 MiB static file from the stock document root, complete, and the default page answers;
/// the master and every worker joined the daemon.
#[test]
fn shim_service_nginx_with_the_stock_configuration_serves_linux_curl() {
    let _lock = start();
    need("curl");
    assert!(
        Path::new("/usr/sbin/nginx").exists() && Path::new("/etc/nginx/nginx.conf").exists(),
        "nginx is not installed: run scripts/setup.sh (as root)"
    );
    assert!(
        !Path::new(NGINX_PID).exists(),
        "an nginx already runs on this machine ({NGINX_PID}): stop it first"
    );
    let pair = Pair::new("shm7", 169).expect("creating the namespaces");
    let (d, sock) = daemon(&pair, "nginx");
    let name = format!("corestack-{}.txt", std::process::id());
    let file = Placed(Path::new("/var/www/html").join(&name));
    std::fs::write(&file.0, vec![b'x'; 1 << 20]).expect("placing a file in /var/www/html");
    let master = start_nginx(&pair, (&d, &sock), &[], Path::new(NGINX_PID));
    let _running = NginxRunning(master);
    let log = || {
        let errors = std::fs::read_to_string("/var/log/nginx/error.log").unwrap_or_default();
        format!(
            "error.log:\n{}\ndaemon:\n{}",
            tail_of(&errors, 20),
            d.tail()
        )
    };
    ping_until_up(&pair.linux, &pair.core_ip, 10);
    curls_get_1mib(&pair, (80, &format!("/{name}")), 8, &log);
    let url = format!("http://{}/", pair.core_ip);
    let cmd = plain(&pair.linux, "curl", &["-s", "-S", "-m", "20", &url]);
    let page = run("curl / (linux)", cmd, STEP);
    assert!(
        page.stdout.contains("Welcome to nginx!"),
        "the default page: {}{}\n{}",
        page.stdout,
        page.stderr,
        log()
    );
    let joined = d
        .log()
        .lines()
        .filter(|l| l.contains("application joined") && l.contains("app=nginx"))
        .count();
    assert!(
        joined >= 3,
        "{joined} nginx processes joined the daemon\n{}",
        log()
    );
    d.assert_no_panic();
}

/// nginx with `listen 80 reuseport` and two workers, in service mode: the master opens a
/// SO_REUSEPORT listener per worker (one group in the daemon's engine), each worker inherits
/// both and polls its own. 16 Linux curls of a 1 MiB file complete, and both workers served
/// some (their pids in the access log).
/// An nginx test's directory, `/tmp/corestack-nginx-TAG-PID`, removed on drop; nginx stopped
/// first (SIGTERM to its master, whose pid the test puts in `.1` once it knows it).
struct Scratch(PathBuf, u32);

impl Scratch {
    /// Makes the directory with a document root holding `big.txt` (1 MiB); returns both.
    fn new(tag: &str) -> (Scratch, PathBuf) {
        let dir = Scratch(
            PathBuf::from(format!("/tmp/corestack-nginx-{tag}-{}", std::process::id())),
            0,
        );
        let root = dir.0.join("www");
        std::fs::create_dir_all(&root).expect("the document root");
        std::fs::write(root.join("big.txt"), vec![b'x'; 1 << 20]).expect("the file");
        (dir, root)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.1 != 0 {
            sigterm(self.1);
            until(Duration::from_secs(5), || {
                !self.0.join("nginx.pid").exists()
            });
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn shim_service_nginx_with_reuseport_serves_from_both_workers() {
    let _lock = start();
    need("curl");
    assert!(
        Path::new("/usr/sbin/nginx").exists(),
        "nginx is not installed: run scripts/setup.sh (as root)"
    );
    let pair = Pair::new("shm8", 171).expect("creating the namespaces");
    let (d, sock) = daemon(&pair, "nginx-rp");
    let (mut dir, root) = Scratch::new("rp");
    let pid_file = dir.0.join("nginx.pid");
    let access = dir.0.join("access.log");
    let conf = dir.0.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes 2;\npid {};\nerror_log {} warn;\nevents {{ worker_connections 256; }}\n\
             http {{ log_format p '$pid'; access_log {} p; server {{ listen 80 reuseport; \
             root {}; }} }}\n",
            pid_file.display(),
            dir.0.join("error.log").display(),
            access.display(),
            root.display()
        ),
    )
    .expect("the configuration");
    let conf_arg = conf.display().to_string();
    dir.1 = start_nginx(&pair, (&d, &sock), &["-c", &conf_arg], &pid_file);
    let errors_at = dir.0.join("error.log");
    let log = || {
        let errors = std::fs::read_to_string(&errors_at).unwrap_or_default();
        format!(
            "error.log:\n{}\ndaemon:\n{}",
            tail_of(&errors, 20),
            d.tail()
        )
    };
    ping_until_up(&pair.linux, &pair.core_ip, 10);
    for _ in 0..2 {
        curls_get_1mib(&pair, (80, "/big.txt"), 8, &log);
    }
    let pids: std::collections::BTreeSet<String> = std::fs::read_to_string(&access)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    assert!(
        pids.len() >= 2,
        "the requests were served by workers {pids:?}, not both\n{}",
        log()
    );
    assert!(!d.log().contains("panicked"), "{}", d.tail());
}

/// `/usr/lib/postgresql/<newest>/bin/NAME` (Debian's layout).
fn pg_bin(name: &str) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    versions.sort();
    let bin = versions.last().map(|v| v.join("bin").join(name));
    match bin.filter(|b| b.exists()) {
        Some(b) => b,
        None => panic!("PostgreSQL's {name} is not installed: run scripts/setup.sh (as root)"),
    }
}

/// A PostgreSQL data directory for this test (owned by `postgres`), removed on drop.
struct PgDir(PathBuf);

impl Drop for PgDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// PostgreSQL in service mode, started as its packages start it (the postmaster as user
/// `postgres`, forking a backend per connection, which takes the connection over): pgbench
/// from the Linux side initializes its tables and runs its TPC-B-like script with 4 clients
/// for 10 s over TCP. No transaction fails, and the backends ran on corestack (each joined
/// the daemon).
#[test]
fn shim_service_postgresql_postmaster_forks_backends_that_serve_pgbench_for_10_s() {
    let _lock = start();
    need("pgbench");
    let (postgres, initdb) = (pg_bin("postgres"), pg_bin("initdb"));
    let pair = Pair::new("shm6", 168).expect("creating the namespaces");
    let (d, sock) = daemon(&pair, "postgres");
    let dir = PgDir(PathBuf::from(format!(
        "/tmp/corestack-pg-{}",
        std::process::id()
    )));
    let data = dir.0.to_str().expect("a UTF-8 path").to_string();
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir(&dir.0).expect("creating the data directory");
    let mut chown = Command::new("chown");
    chown.args(["postgres:postgres", &data]);
    run_ok("chown", chown, STEP);
    let as_postgres = |mut cmd: Command| {
        cmd.env_remove("LD_PRELOAD");
        cmd
    };
    let mut init = Command::new("setpriv");
    init.args(["--reuid=postgres", "--regid=postgres", "--init-groups"])
        .arg(&initdb)
        .args(["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"]);
    run_ok("initdb", as_postgres(init), Duration::from_secs(120));
    // Trust the Linux side's clients too (initdb trusts only local ones).
    let hba = dir.0.join("pg_hba.conf");
    let mut conf = std::fs::read_to_string(&hba).expect("pg_hba.conf");
    conf.push_str("host all all 0.0.0.0/0 trust\n");
    std::fs::write(&hba, conf).expect("writing pg_hba.conf");
    let mut cmd = pair.core.exec("setpriv");
    cmd.args(["--reuid=postgres", "--regid=postgres", "--init-groups"])
        .arg(bin())
        .args(["exec", "--socket", &sock.arg(), "--"])
        .arg(&postgres)
        .args(["-D", &data, "-p", "5433", "-c", "listen_addresses=*"])
        .args(["-c", &format!("unix_socket_directories={data}")])
        .args(["-c", "fsync=off", "-c", "max_connections=20"])
        .env_remove("CORESTACK_IFACE");
    preload();
    let mut server = Proc::spawn("postgres (service)", as_postgres(cmd), None, Out::Text);
    server.wait_stderr("ready to accept connections", STEP);
    let pgbench = |args: &[&str]| {
        let mut c = pair.linux.exec("pgbench");
        c.args(args)
            .args([
                "-h",
                &pair.core_ip,
                "-p",
                "5433",
                "-U",
                "postgres",
                "postgres",
            ])
            .env_remove("LD_PRELOAD");
        c
    };
    let init = run(
        "pgbench -i",
        pgbench(&["-i", "-s", "1", "-q"]),
        Duration::from_secs(120),
    );
    assert!(
        init.status.success(),
        "pgbench -i failed:\n{}{}\nserver:\n{}\ndaemon:\n{}",
        init.stdout,
        init.stderr,
        tail_of(&server.stderr(), 20),
        d.tail()
    );
    let bench = run(
        "pgbench",
        pgbench(&["-c", "4", "-j", "2", "-T", "10"]),
        Duration::from_secs(60),
    );
    let field = |key: &str| {
        bench
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let processed = field("number of transactions actually processed: ").unwrap_or(0.0);
    let failed = field("number of failed transactions: ");
    let joined = d
        .log()
        .lines()
        .filter(|l| l.contains("application joined") && l.contains("app=postgres"))
        .count();
    println!(
        "pgbench over corestack: {processed} transactions in 10 s, {} joined the daemon",
        joined
    );
    drop(server.terminate());
    assert!(
        bench.status.success() && processed > 0.0 && failed.is_none_or(|f| f == 0.0),
        "pgbench:\n{}{}",
        bench.stdout,
        bench.stderr
    );
    // The postmaster, and a backend per connection of pgbench -i and pgbench (4).
    assert!(
        joined >= 6,
        "{joined} postgres processes joined:\n{}",
        d.tail()
    );
    d.assert_no_panic();
}

/// tests/shim/daemonize_echo.py in service mode, a server started as `daemon on` servers
/// start: it listens, forks and exits at once; its child (a new session) forks two workers,
/// grandchildren of the first process, which accept on the listener they inherited. 20 Linux
/// clients at once, 256 KiB each, byte-exact, and the workers served them all.
#[test]
fn shim_service_daemonizing_server_with_grandchild_workers_serves_20_linux_clients() {
    let _lock = start();
    let pair = Pair::new("shm5", 167).expect("creating the namespaces");
    let (d, sock) = daemon(&pair, "daemonize");
    need("python3");
    let server_py = script("daemonize_echo.py");
    let server = Proc::spawn(
        "daemonize_echo.py (service)",
        served(
            &pair,
            &sock,
            "python3",
            &["-u", server_py.to_str().unwrap(), "7402", "2", "30"],
        ),
        None,
        Out::Text,
    );
    let (pids, ready) = daemonized_workers(&server);
    if !ready {
        sigterm_all(&pids);
        panic!(
            "the workers never got ready:\n{}{}; daemon:\n{}",
            server.stdout(),
            server.stderr(),
            d.tail()
        );
    }
    let (out, served) = twenty_echo_clients(&pair, 7402, || {
        server.stdout().matches(" served 262144").count()
    });
    sigterm_all(&pids);
    assert_twenty_echoed(&out, served, &server, &d);
    d.assert_no_panic();
}

/// Waits (bounded) for tests/shim/daemonize_echo.py's two workers to say they are ready (its
/// first process exits at once: their lines, not its exit, tell); returns the pids it printed
/// (its master's and its workers') and whether both workers got ready.
fn daemonized_workers(server: &Proc) -> (Vec<u32>, bool) {
    let ready = until(STEP, || server.stdout().matches(" ready").count() == 2);
    let pids = server
        .stdout()
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                ["master", pid] | ["worker", _, pid, "ready"] => pid.parse().ok(),
                _ => None,
            }
        })
        .collect();
    (pids, ready)
}

/// SIGTERM to each of `pids` (processes this test started).
fn sigterm_all(pids: &[u32]) {
    for &pid in pids {
        sigterm(pid);
    }
}

/// 20 asyncio clients on the Linux side at once, 256 KiB each to corestack's `port` and the
/// echo back: their output, and whether `served()` (the server's count of connections served
/// whole) reached 20 within 5 s after.
fn twenty_echo_clients(pair: &Pair, port: u16, served: impl Fn() -> usize) -> (Finished, bool) {
    let clients_py = script("asyncio_clients.py");
    let port = port.to_string();
    let cmd = plain(
        &pair.linux,
        "python3",
        &[clients_py.to_str().unwrap(), &pair.core_ip, &port, "20"],
    );
    let out = run("asyncio clients (linux)", cmd, STEP);
    let ok = until(Duration::from_secs(5), || served() == 20);
    (out, ok)
}

/// Asserts what [`twenty_echo_clients`] returned: every client byte-exact, every connection
/// served whole; else panics with the clients', the server's and the daemon's output.
fn assert_twenty_echoed(out: &Finished, served: bool, server: &Proc, d: &Daemon) {
    assert!(
        out.stdout.trim() == "equal 20 of 20" && served,
        "clients: {}{}; server:\n{}{}; daemon:\n{}",
        out.stdout,
        tail_of(&out.stderr, 5),
        server.stdout(),
        server.stderr(),
        d.tail()
    );
}

/// (worker, pid) of each "worker W pid P uid U ready" line of prefork.c, checking U.
fn prefork_workers(out: &str) -> Vec<(String, u32)> {
    out.lines()
        .filter_map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            (c.len() == 7 && c[0] == "worker" && c[2] == "pid" && c[6] == "ready").then(|| {
                assert_eq!(
                    c[5], "65534",
                    "worker {} did not drop its privileges: {l}",
                    c[1]
                );
                (c[1].to_string(), c[3].parse().expect("a pid"))
            })
        })
        .collect()
}

/// "served W PID" lines of prefork.c per server W ("master" for the parent).
fn prefork_served(out: &str, who: &str) -> usize {
    out.lines()
        .filter(|l| l.split_whitespace().nth(1) == Some(who) && l.starts_with("served "))
        .count()
}

/// tests/shim/prefork.c in service mode: a parent listens on port 80 and forks three workers
/// that drop to uid 65534 and accept on the inherited listener, each with its own epoll. 60
/// connections of a Linux client all echo their message; at least two workers serve some;
/// the parent, which never waits in accept (it tries every 50 ms), gets none; `corestack ss`
/// shows the parent and each worker listening on :80 under its own pid. Then the parent is
/// killed: the workers keep the port and serve 12 more connections, then exit on their own.
#[test]
fn shim_service_prefork_workers_share_the_listener_and_outlive_their_master() {
    let _lock = start();
    need("python3");
    let pair = Pair::new("pf", 190).expect("creating the namespaces");
    let (d, sock) = daemon(&pair, "prefork");
    let prog = cc("prefork");
    let mut server = Proc::spawn(
        "prefork (service)",
        served(&pair, &sock, prog.to_str().unwrap(), &["80"]),
        None,
        Out::Text,
    );
    let master = server.pid();
    for w in 0..3 {
        server.wait_stdout(&format!("worker {w} pid "), STEP);
    }
    server.wait_stdout("listening", STEP);
    let workers = prefork_workers(&server.stdout());
    assert_eq!(
        workers.len(),
        3,
        "three workers ready:\n{}",
        server.stdout()
    );
    let on_80 = |out: &str, pid: u32| ss_listening(out, pid, "prefork", "80");
    let mut ss = String::new();
    let pids: Vec<u32> = workers.iter().map(|w| w.1).chain([master]).collect();
    let seen = until(STEP, || {
        ss = corestack_out(&["ss"]);
        pids.iter().all(|&p| on_80(&ss, p))
    });
    assert!(
        seen,
        "corestack ss does not show the master ({master}) and every worker {workers:?} \
         listening on :80:\n{ss}\ndaemon:\n{}",
        d.tail()
    );
    let client = |n: &str, tag: &str| {
        let py = script("prefork_client.py");
        let args = [py.to_str().unwrap(), pair.core_ip.as_str(), "80", n, tag];
        run_ok("prefork client", plain(&pair.linux, "python3", &args), STEP)
    };
    let out = client("60", "first");
    assert!(out.contains("ok 60 of 60"), "client: {out}");
    let stdout = server.stdout();
    let counts: Vec<(String, usize)> = workers
        .iter()
        .map(|(w, _)| (w.clone(), prefork_served(&stdout, w)))
        .collect();
    println!("prefork: connections served per worker: {counts:?}");
    assert_eq!(
        counts.iter().map(|c| c.1).sum::<usize>(),
        60,
        "every connection served once by a worker:\n{stdout}"
    );
    assert!(
        counts.iter().filter(|c| c.1 > 0).count() >= 2,
        "the connections did not spread over the workers: {counts:?}"
    );
    assert_eq!(
        prefork_served(&stdout, "master"),
        0,
        "the master, which never waits in accept, was given connections:\n{stdout}"
    );
    // The master dies: the workers keep the port.
    let _ = Command::new("kill")
        .args(["-KILL", &master.to_string()])
        .status();
    d.expect_line(
        &["application left", &format!("pid={master}")],
        STEP,
        "the master's association ended",
    );
    let out = client("12", "second");
    assert!(
        out.contains("ok 12 of 12"),
        "client after the master died: {out}"
    );
    // The workers exit after 5 s without connections; stdout ends with the last.
    let f = server.finish(Duration::from_secs(30));
    let exits: usize = f
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("worker ")?.split_once(" exits served "))
        .map(|(_, n)| n.trim().parse::<usize>().expect("a count"))
        .sum();
    assert_eq!(exits, 72, "the workers' own counts:\n{}", f.stdout);
}

/// linger_and_keepalive in embedded mode, then in service mode (a pair each: the test cuts
/// the link).
#[test]
fn shim_linger_zero_resets_and_keepalive_timing_ends_a_dead_connection_in_both_modes() {
    let _lock = start();
    let embedded = Pair::new("pf", 191).expect("creating the namespaces");
    linger_and_keepalive(&embedded, &|p, a| shimmed(&embedded, p, a));
    drop(embedded);
    let service = Pair::new("pf", 192).expect("creating the namespaces");
    let (_d, sock) = daemon(&service, "linger");
    linger_and_keepalive(&service, &|p, a| served(&service, &sock, p, a));
}

/// tests/shim/linger.c against linger_peer.py: SO_LINGER {1, 0} makes close reset the
/// connection (the peer's recv says ECONNRESET) where a plain close sends FIN; with
/// TCP_KEEPIDLE 1, TCP_KEEPINTVL 1 and TCP_KEEPCNT 2 a connection whose peer vanished (the
/// link cut under it) ends with ETIMEDOUT after about 3 s, not at the 15 s receive timeout.
fn linger_and_keepalive(pair: &Pair, sh: &Sh) {
    need("python3");
    let prog = cc("linger");
    let py = script("linger_peer.py");
    let mut peer = Proc::spawn(
        "linger peer (linux)",
        plain(&pair.linux, "python3", &[py.to_str().unwrap(), "7070"]),
        None,
        Out::Text,
    );
    peer.wait_stdout("listening", STEP);
    let mut client = Proc::spawn(
        "linger (shim)",
        sh(prog.to_str().unwrap(), &[&pair.linux_ip, "7070"]),
        None,
        Out::Text,
    );
    client.wait_stdout("keepalive ready", STEP);
    peer.wait_stdout("conn 3 open", STEP);
    let seen = peer.stdout();
    for line in ["conn 1 reset", "conn 2 fin"] {
        assert!(
            seen.lines().any(|l| l == line),
            "the peer saw no {line:?}:\n{seen}\nclient:\n{}",
            client.stdout()
        );
    }
    let cut = Command::new("ip")
        .args(["-n", pair.linux.name(), "link", "set", "vl", "down"])
        .status()
        .expect("running ip");
    assert!(cut.success(), "ip link set vl down failed");
    let f = client.finish(Duration::from_secs(30));
    let line = f
        .stdout
        .lines()
        .find(|l| l.starts_with("keepalive recv"))
        .unwrap_or_else(|| panic!("no keepalive line:\n{}\n{}", f.stdout, f.stderr))
        .to_string();
    let ms: u64 = line
        .split_whitespace()
        .nth(5)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no time in {line:?}"));
    assert!(
        line.starts_with("keepalive recv -1 ETIMEDOUT") && (1500..10_000).contains(&ms),
        "the keepalive probes did not end the connection in about 3 s: {line}"
    );
    drop(peer);
}

// ---------------------------------------------------------------------------
// Socket options servers set (review finding 3)
// ---------------------------------------------------------------------------

/// tests/shim/cork.c: bytes written under TCP_CORK stay until it is cleared, then arrive at
/// once (same output as on the kernel, whose cork holds them 200 ms); an option set before
/// connect that corestack does not honour (SO_PRIORITY) is said on stderr when the socket goes
/// to corestack, in embedded and inline mode.
#[test]
fn shim_tcp_cork_holds_writes_until_cleared_and_an_unhonoured_option_before_connect_is_reported() {
    let _lock = start();
    let prog = cc("cork");
    let pair = Pair::new("p", 200).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    let kernel = run_ok(
        "cork (kernel)",
        plain(&pair.linux, &prog, &[&pair.linux_ip, "7"]),
        STEP,
    );
    for line in [
        "corked: echo within 100 ms none",
        "uncorked: echo abcd within 100 ms",
        "done",
    ] {
        assert!(
            kernel.lines().any(|l| l == line),
            "kernel: no {line:?} in:\n{kernel}"
        );
    }
    for inline in [false, true] {
        let f = run(
            &format!("cork (shim, inline {inline})"),
            shimmed_mode(&pair, inline, &prog, &[&pair.linux_ip, "7"]),
            STEP,
        );
        assert!(
            f.status.success() && f.stdout == kernel,
            "inline {inline}: the shim differs from the kernel:\nkernel:\n{kernel}\nshim:\n{}\nstderr:\n{}",
            f.stdout,
            f.stderr
        );
        let said = format!(
            "setsockopt level {} name {} made before connect is not supported on corestack sockets",
            libc::SOL_SOCKET,
            libc::SO_PRIORITY
        );
        assert!(
            f.stderr.contains(&said),
            "inline {inline}: no {said:?} on stderr:\n{}",
            f.stderr
        );
    }
}

// ---------------------------------------------------------------------------
// epoll wake-ups and the shim's own fds (review findings 1 and 2)
// ---------------------------------------------------------------------------

/// tests/shim/wake.c: a thread asleep in `epoll_wait` (5 s) on a set with no corestack socket
/// returns within 1.5 s with the socket when another thread adds a ready corestack socket, and
/// when it re-arms one with EPOLL_CTL_MOD after EPOLLONESHOT; after EPOLL_CTL_DEL of the last
/// corestack socket, traffic on it and the shim's wake-ups never come out of `epoll_wait` with
/// data the application did not register. Embedded and inline mode.
#[test]
fn shim_epoll_ctl_add_and_mod_wake_a_sleeping_epoll_wait_and_the_shims_own_fds_never_leak() {
    let _lock = start();
    let pair = Pair::new("p", 201).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    let args = [pair.linux_ip.as_str(), "7"];
    passes_on_the_kernel_and_the_shim(&pair, "wake", &args, &args, &[]);
}

// ---------------------------------------------------------------------------
// Programs LD_PRELOAD cannot reach (review finding 10)
// ---------------------------------------------------------------------------

/// Compiles `tests/shim/NAME.c` with `flags` into `OUT` (beside the other C programs).
fn cc_as(name: &str, flags: &[&str], out: &str) -> PathBuf {
    need("cc");
    let out_dir = profile_dir().join("shim-c");
    std::fs::create_dir_all(&out_dir).expect("creating the C programs' directory");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/shim/{name}.c"));
    let out = out_dir.join(out);
    testkit::cc::compile(
        Command::new("cc")
            .args(["-O2", "-Wall", "-Werror"])
            .args(flags)
            .arg(&src)
            .arg("-o")
            .arg(&out),
        &src,
        &format!(" with {flags:?} (a static link needs libc.a: libc6-dev)"),
    );
    out
}

/// `corestack exec` refuses a statically linked program (static and static-pie) and a Go
/// program (a dynamically linked C program carrying Go's `.note.go.buildid` section stands in
/// for a cgo Go binary, so no Go toolchain is needed) with one `error:` line and exit status
/// 1, before running it; a dynamically linked program still runs (exit status 0).
#[test]
fn exec_refuses_static_and_go_programs_that_ld_preload_cannot_reach() {
    preload();
    let exec = |prog: &Path| {
        let out = Command::new(bin())
            .args(["exec", "--iface", "vc", "--ip", "10.202.1.2/24", "--"])
            .arg(prog)
            .env_remove("CORESTACK_SOCKET")
            .env_remove("LD_PRELOAD")
            .output()
            .expect("running corestack exec");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let cases = [
        (
            cc_as("plain", &["-static"], "plain-static"),
            "is statically linked",
        ),
        (
            cc_as("plain", &["-static-pie"], "plain-static-pie"),
            "is statically linked",
        ),
        (cc_as("gonote", &[], "gonote"), "is a Go program"),
        (
            cc_as("gonote", &["-static"], "gonote-static"),
            "is a Go program",
        ),
    ];
    for (prog, why) in &cases {
        let (code, err) = exec(prog);
        assert_eq!(code, Some(1), "{}: not refused:\n{err}", prog.display());
        let lines: Vec<&str> = err.lines().collect();
        assert!(
            lines.len() == 1 && lines[0].starts_with("error: ") && lines[0].contains(why),
            "{}: want one `error: ... {why} ...` line, got:\n{err}",
            prog.display()
        );
    }
    let (code, err) = exec(&cc_as("plain", &[], "plain-dynamic"));
    assert_eq!(
        code,
        Some(0),
        "a dynamically linked program was not run:\n{err}"
    );
}

// ---------------------------------------------------------------------------
// SCM_RIGHTS of a corestack socket (review finding 5)
// ---------------------------------------------------------------------------

/// tests/shim/scm.c: in embedded mode `sendmsg` over an AF_UNIX socketpair with SCM_RIGHTS
/// carrying a corestack socket (alone, or among kernel fds) fails at once with EOPNOTSUPP,
/// sends nothing, and says so in one stderr line naming the fd; a pipe fd still travels and
/// the connection keeps echoing. In service mode a connection travels (the received fd is the
/// connection, the sender's copy answers ENETDOWN) and a listener is refused so.
#[test]
fn shim_scm_rights_of_a_corestack_socket_is_refused_or_lent_in_service_mode() {
    let _lock = start();
    let prog = cc("scm");
    let pair = Pair::new("p", 203).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    let prog = prog.to_string_lossy().into_owned();
    let args = [pair.linux_ip.as_str(), "7"];
    let mut failed = Vec::new();
    for label in ["embedded", "service"] {
        // The daemon drives vc: it starts once the embedded run is over.
        let f = if label == "embedded" {
            run("scm (embedded)", shimmed(&pair, &prog, &args), STEP)
        } else {
            let (_d, sock) = daemon(&pair, "scm");
            let lend = [args[0], args[1], "lend"];
            run("scm (service)", served(&pair, &sock, &prog, &lend), STEP)
        };
        let fd = f
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("corestack fd "))
            .unwrap_or("?")
            .to_string();
        let said = f
            .stderr
            .lines()
            .filter(|l| l.contains(&format!("fd {fd} ")) && l.contains("SCM_RIGHTS"))
            .count();
        // The refused sendmsg calls (two in embedded mode, one in service mode): a line each.
        let refused = if label == "embedded" { 2 } else { 1 };
        if !(f.status.success() && f.stdout.contains("ALL PASSED") && said == refused) {
            failed.push(format!(
                "{label} ({said} stderr lines naming fd {fd}):\n{}{}",
                f.stdout, f.stderr
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

// ---------------------------------------------------------------------------
// UDP connect and sendto across both sides (review finding 6)
// ---------------------------------------------------------------------------

/// tests/shim/udpconn.c: a UDP socket bound to 0.0.0.0 connects to the Linux peer (through
/// corestack) and then to a loopback echo (through the kernel), send/recv and getpeername
/// right each time; AF_UNSPEC dissolves it and sendto reaches both; a socket auto-bound by a
/// sendto to the peer can sendto loopback; an unbound socket connected to the peer can connect
/// to loopback. The same program passes on the kernel. Embedded and inline mode.
#[test]
fn shim_udp_connect_on_a_wildcard_or_auto_bound_socket_reaches_corestack_and_loopback_peers() {
    let _lock = start();
    let pair = Pair::new("p", 204).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    let args = [pair.linux_ip.as_str(), "7"];
    passes_on_the_kernel_and_the_shim(&pair, "udpconn", &args, &args, &[]);
}

// ---------------------------------------------------------------------------
// EINTR during the user-space spin (review finding 11)
// ---------------------------------------------------------------------------

/// tests/shim/eintr.c with a 1 s spin (`CORESTACK_SPIN_US=1000000`), so that SIGUSR1 (sent
/// to the waiting thread 200 ms into its wait) arrives while it spins: read, recv and accept
/// return EINTR within 500 ms after a handler without SA_RESTART, epoll_wait and poll after
/// one with or without it, read restarts after one with it. The program passes on the kernel
/// too. Embedded and inline mode.
#[test]
fn shim_a_signal_during_the_spin_interrupts_read_recv_accept_epoll_wait_and_poll_as_on_linux() {
    let _lock = start();
    let pair = Pair::new("p", 205).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    let ip = pair.linux_ip.as_str();
    passes_on_the_kernel_and_the_shim(
        &pair,
        "eintr",
        &[ip, "7", "7205"],
        &[ip, "7", "7206"],
        &[("CORESTACK_SPIN_US", "1000000")],
    );
}

// ---------------------------------------------------------------------------
// Stale table entries (review finding 7)
// ---------------------------------------------------------------------------

/// tests/shim/stale.c: a corestack socket closed by a raw `syscall(SYS_close)`, by `fclose`
/// of an `fdopen`'d FILE, by `closefrom` or `close_range`; a pipe (or `open`) that then gets
/// its number polls and reads as the pipe (the file), not as the dead socket. Embedded mode.
#[test]
fn shim_a_socket_closed_behind_the_shims_back_does_not_capture_the_next_fd_with_its_number() {
    let _lock = start();
    let prog = cc("stale");
    let pair = Pair::new("p", 206).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    all_passed(
        "stale (shim)",
        shimmed(&pair, &prog, &[&pair.linux_ip, "7"]),
        STEP,
        "",
    );
}

/// tests/shim/cancel.c: pthread_cancel of a thread blocked in recv, poll, epoll_wait (on a
/// corestack connection) and accept (on a corestack listener) ends the thread
/// (PTHREAD_CANCELED), as on Linux; the connection still echoes, the epoll and the listener
/// still answer, and a thread with cancellation disabled keeps waiting until it enables it
/// again; a cancel pending when a send begins acts there, and epoll_ctl (no cancellation
/// point) with one pending wakes a sleeping epoll_wait and returns without aborting the process.
/// Embedded, inline and service mode.
#[test]
fn shim_pthread_cancel_of_a_thread_blocked_in_recv_poll_epoll_wait_accept_ends_it_as_on_linux() {
    let _lock = start();
    let prog = cc("cancel");
    let prog = prog.to_str().unwrap();
    let pair = Pair::new("p", 250).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    let args = [pair.linux_ip.as_str(), "7", "7250"];
    for inline in [false, true] {
        all_passed(
            &format!("cancel (inline {inline})"),
            shimmed_mode(&pair, inline, prog, &args),
            Duration::from_secs(30),
            "",
        );
    }
    let (d, sock) = daemon(&pair, "cancel");
    all_passed(
        "cancel (service)",
        served(&pair, &sock, prog, &args),
        Duration::from_secs(30),
        &format!("\ndaemon:\n{}", d.tail()),
    );
}

// ---------------------------------------------------------------------------
// splice (review finding 11)
// ---------------------------------------------------------------------------

/// tests/shim/splice.c: 1 MiB relayed with splice(2) pipe -> socket and back socket -> pipe
/// (HAProxy's `option splice-*`) arrives byte-exact; SPLICE_F_NONBLOCK gives EAGAIN with
/// nothing to read (a nonblocking socket) and into a full pipe, losing no byte; an offset for
/// the socket and socket to socket are EINVAL. The program passes on the kernel first; then under the shim in
/// embedded and inline mode (before, splice was not interposed and a corestack socket
/// answered EINVAL).
#[test]
fn shim_splice_between_a_corestack_socket_and_pipes_relays_byte_exact_as_on_linux() {
    let _lock = start();
    let pair = Pair::new("p", 207).expect("creating the namespaces");
    let _echo = linux_echo(&pair);
    let args = [pair.linux_ip.as_str(), "7"];
    passes_on_the_kernel_and_the_shim(&pair, "splice", &args, &args, &[]);
}

// ---------------------------------------------------------------------------
// io_uring under the shim (review finding 9)
// ---------------------------------------------------------------------------

/// Compiles tests/shim/uring.c as `out`: alone (`lib` None), or with `-DWITH_LIBURING` and
/// `lib` as the link argument (`-luring`: the shared library; `-l:liburing.a`: liburing built
/// into the executable), stripped (`-s`) when `strip`. Fails naming liburing-dev when its
/// header is missing.
fn cc_uring(out: &str, lib: Option<&str>, strip: bool) -> PathBuf {
    need("cc");
    if lib.is_some() {
        assert!(
            Path::new("/usr/include/liburing.h").is_file(),
            "liburing-dev is not installed: run scripts/setup.sh (as root)"
        );
    }
    let out_dir = profile_dir().join("shim-c");
    std::fs::create_dir_all(&out_dir).expect("creating the C programs' directory");
    let src = script("uring.c");
    let out = out_dir.join(out);
    let mut cmd = Command::new("cc");
    cmd.args(["-O2", "-Wall", "-Wextra", "-Werror"]);
    if strip {
        cmd.arg("-s");
    }
    if lib.is_some() {
        cmd.arg("-DWITH_LIBURING");
    }
    cmd.arg(&src).arg("-o").arg(&out).args(lib);
    testkit::cc::compile(&mut cmd, &src, &format!(" (with {lib:?})"));
    out
}

/// The line the shim says when it refuses a ring.
const URING_SAID: &str = "io_uring is not served by corestack";

/// `corestack exec` of `prog` in embedded mode (`--iface vc`, in this namespace: the shim
/// serves the process, and starts no stack since the program opens no socket) or service
/// mode (`--socket` naming no daemon: the shim joins one only for a socket).
fn exec_uring(service: bool, prog: &Path, args: &[&str]) -> Command {
    preload();
    let mut cmd = Command::new(bin());
    if service {
        let sock = format!("/tmp/corestack-uring-{}.sock", std::process::id());
        cmd.args(["exec", "--socket", &sock, "--"]);
    } else {
        cmd.args(["exec", "--iface", "vc", "--ip", "10.205.1.2/24", "--"]);
    }
    cmd.arg(prog)
        .args(args)
        .env_remove("CORESTACK_SOCKET")
        .env_remove("CORESTACK_IFACE")
        .env_remove("LD_PRELOAD");
    cmd
}

/// tests/shim/uring.c: while the shim serves a process (embedded and service mode), making an
/// io_uring ring fails at once with ENOSYS, as on a kernel without io_uring, through glibc's
/// `syscall(SYS_io_uring_setup)` and through a shared liburing's `io_uring_queue_init`,
/// `io_uring_queue_init_params`, `io_uring_setup` (-ENOSYS) and `io_uring_get_probe` (NULL),
/// and stderr says so in exactly one line; other system call numbers pass through. Without the
/// shim, and under a shim that serves nothing (no CORESTACK_* variables), rings are made. A
/// kernel that refuses io_uring itself skips the test.
#[test]
fn shim_io_uring_fails_with_enosys_said_once_while_the_shim_serves_the_process() {
    let progs = [
        cc_uring("uring", None, false),
        cc_uring("uring-liburing", Some("-luring"), false),
    ];
    let mut probe = Command::new(&progs[0]);
    probe.arg("ring").env_remove("LD_PRELOAD");
    let bare = run("uring (no shim)", probe, STEP);
    if let Some(why) = bare.stdout.lines().find(|l| l.starts_with("SKIP")) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut failed = Vec::new();
    for prog in &progs {
        let name = prog.file_name().unwrap_or_default().to_string_lossy();
        let mut bare = Command::new(prog);
        bare.arg("ring").env_remove("LD_PRELOAD");
        let mut inert = Command::new(prog);
        inert
            .arg("ring")
            .env("LD_PRELOAD", preload())
            .env_remove("CORESTACK_SOCKET")
            .env_remove("CORESTACK_IFACE");
        let cases = [
            ("no shim", bare, 0),
            ("shim serving nothing", inert, 0),
            ("embedded", exec_uring(false, prog, &["refused"]), 1),
            ("service", exec_uring(true, prog, &["refused"]), 1),
        ];
        for (label, cmd, said_want) in cases {
            let f = run(&format!("{name} ({label})"), cmd, STEP);
            let said = f.stderr.lines().filter(|l| l.contains(URING_SAID)).count();
            if !(f.status.success() && f.stdout.contains("ALL PASSED") && said == said_want) {
                failed.push(format!(
                    "{name} ({label}): {} ({said} lines saying io_uring is refused, want {said_want}):\n{}{}",
                    f.status, f.stdout, f.stderr
                ));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// `corestack exec` refuses, with one `error:` line and exit status 1 before running it, a
/// program with liburing built into the executable (its inline system calls cannot be seen
/// by the shim), stripped or not; the same program linked with the shared liburing, and one
/// that makes its ring through `syscall()`, run (and find io_uring refused).
#[test]
fn exec_refuses_a_program_with_liburing_built_in() {
    let refused = [
        cc_uring("uring-static-liburing", Some("-l:liburing.a"), false),
        cc_uring(
            "uring-static-liburing-stripped",
            Some("-l:liburing.a"),
            true,
        ),
    ];
    for prog in &refused {
        let f = run(
            "uring (liburing built in)",
            exec_uring(false, prog, &["refused"]),
            STEP,
        );
        let lines: Vec<&str> = f.stderr.lines().collect();
        assert!(
            f.status.code() == Some(1)
                && lines.len() == 1
                && lines[0].starts_with("error: ")
                && lines[0].contains("makes io_uring system calls itself")
                && !f.stdout.contains("PASS"),
            "{}: want one `error: ... makes io_uring system calls itself ...` line and no run, got {}:\n{}{}",
            prog.display(),
            f.status,
            f.stdout,
            f.stderr
        );
    }
    for prog in [
        cc_uring("uring", None, false),
        cc_uring("uring-liburing", Some("-luring"), false),
    ] {
        let f = run("uring (runs)", exec_uring(false, &prog, &["refused"]), STEP);
        assert!(
            !f.stderr.contains("error: ") && f.stdout.contains("PASS"),
            "{}: was not run:\n{}{}",
            prog.display(),
            f.stdout,
            f.stderr
        );
    }
}

// ---------------------------------------------------------------------------
// Forking servers under plain `corestack exec` (embedded mode, no --socket): the shim moves
// them to service mode with a private daemon (crates/preload/src/switch.rs)
// ---------------------------------------------------------------------------

/// The line the shim writes when it moves a program to service mode.
const MOVED: &str = "moved to service mode, a private daemon at ";

/// The private daemon's directory named in `stderr` (the [`MOVED`] line), if any.
fn private_dir(stderr: &str) -> Option<PathBuf> {
    let line = stderr.lines().find(|l| l.contains(MOVED))?;
    let path = line.split(MOVED).nth(1)?.split(';').next()?;
    Path::new(path.trim()).parent().map(Path::to_path_buf)
}

/// Asserts that the private daemon whose directory `stderr` names has stopped (its
/// directory removed) within 10 s, now that its program is gone.
fn assert_private_daemon_gone(stderr: &str) {
    let dir = private_dir(stderr).unwrap_or_else(|| panic!("no {MOVED:?} line:\n{stderr}"));
    assert!(
        until(Duration::from_secs(10), || !dir.exists()),
        "the private daemon at {} did not stop after its program",
        dir.display()
    );
}

/// tests/shim/prefork.c under plain `corestack exec`, in embedded and then in inline mode
/// (`--inline`), each time on a private daemon of its own: the master listens,
/// then forks three workers; the shim moves it to service mode at that fork, before it
/// happens (one line on stderr), and the program starts again on a private daemon. Its
/// three workers (uid 65534) share the listener: 60 connections of a Linux client all echo
/// their message. Once the program is gone, the private daemon stops.
#[test]
fn shim_exec_prefork_server_is_moved_to_a_private_daemon_and_its_workers_serve() {
    let _lock = start();
    need("python3");
    let pair = Pair::new("fx1", 241).expect("creating the namespaces");
    for inline in [false, true] {
        prefork_moved(&pair, inline);
    }
}

/// One run of [`shim_exec_prefork_server_is_moved_to_a_private_daemon_and_its_workers_serve`],
/// inline mode when `inline`.
fn prefork_moved(pair: &Pair, inline: bool) {
    let prog = cc("prefork");
    let t0 = Instant::now();
    let mut server = Proc::spawn(
        "prefork (exec)",
        shimmed_mode(pair, inline, &prog, &["80"]),
        None,
        Out::Text,
    );
    let master = server.pid();
    server.wait_stderr(MOVED, STEP);
    for w in 0..3 {
        server.wait_stdout(&format!("worker {w} pid "), STEP);
    }
    server.wait_stdout("listening", STEP);
    println!(
        "prefork (inline {inline}): moved and three workers ready in {:?}",
        t0.elapsed()
    );
    let workers = prefork_workers(&server.stdout());
    assert_eq!(workers.len(), 3, "three workers:\n{}", server.stdout());
    let py = script("prefork_client.py");
    let args = [
        py.to_str().unwrap(),
        pair.core_ip.as_str(),
        "80",
        "60",
        "first",
    ];
    let out = run_ok("prefork client", plain(&pair.linux, "python3", &args), STEP);
    assert!(
        out.contains("ok 60 of 60"),
        "client: {out}\nserver:\n{}{}",
        server.stdout(),
        server.stderr()
    );
    let stdout = server.stdout();
    let served: usize = workers
        .iter()
        .map(|(w, _)| prefork_served(&stdout, w))
        .sum();
    assert_eq!(served, 60, "every connection served by a worker:\n{stdout}");
    // The workers exit after 5 s without connections; then the master.
    let _ = Command::new("kill")
        .args(["-TERM", &master.to_string()])
        .status();
    let f = server.finish(Duration::from_secs(30));
    assert_eq!(
        f.stderr.matches(MOVED).count(),
        1,
        "moved once:\n{}",
        f.stderr
    );
    assert_private_daemon_gone(&f.stderr);
}

/// Python's `socketserver.ForkingTCPServer` (tests/shim/forking_echo.py: a child per
/// connection) under plain `corestack exec`: its first connection's child finds the socket
/// it inherited dead, asks the program's engine process to move, and the program starts
/// again on a private daemon; that first client is reset (never left hanging). Then 20
/// Linux clients at once, 256 KiB each, byte-exact, a child per connection. In embedded,
/// then in inline mode.
#[test]
fn shim_exec_forking_tcp_server_is_moved_to_a_private_daemon_and_serves_20_clients() {
    let _lock = start();
    need("python3");
    let pair = Pair::new("fx2", 242).expect("creating the namespaces");
    for inline in [false, true] {
        forking_moved(&pair, inline);
    }
}

/// One run of [`shim_exec_forking_tcp_server_is_moved_to_a_private_daemon_and_serves_20_clients`],
/// inline mode when `inline`.
fn forking_moved(pair: &Pair, inline: bool) {
    let server_py = script("forking_echo.py");
    let mut server = Proc::spawn(
        "forking_echo.py (exec)",
        shimmed_mode(
            pair,
            inline,
            "python3",
            &["-u", server_py.to_str().unwrap(), "7401", "40"],
        ),
        None,
        Out::Text,
    );
    server.wait_stdout("serving", STEP);
    // The first connection: its child moves the program; the client is reset.
    let t0 = Instant::now();
    let first = run(
        "first client (linux)",
        plain(
            &pair.linux,
            "python3",
            &[
                "-c",
                "import socket,sys\n\
                 s=socket.create_connection((sys.argv[1],7401),timeout=10)\n\
                 s.sendall(b'hello')\n\
                 try:\n  print('got', s.recv(100))\n\
                 except Exception as e:\n  print('error', type(e).__name__)\n",
                &pair.core_ip,
            ],
        ),
        STEP,
    );
    println!(
        "forking (inline {inline}): first client after {:?}: {}",
        t0.elapsed(),
        first.stdout.trim()
    );
    assert!(
        first.stdout.contains("ConnectionResetError") || first.stdout.contains("b'hello'"),
        "the first client was neither answered nor reset: {}{}\nserver:\n{}",
        first.stdout,
        first.stderr,
        server.stderr()
    );
    server.wait_stderr(MOVED, STEP);
    let again = until(STEP, || server.stdout().matches("serving").count() == 2);
    assert!(
        again,
        "the program did not start again:\n{}{}",
        server.stdout(),
        server.stderr()
    );
    println!(
        "forking: serving again {:?} after the first client",
        t0.elapsed()
    );
    let served = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("child ") && l.ends_with(" served 262144"))
            .count()
    };
    let clients_py = script("asyncio_clients.py");
    let cmd = plain(
        &pair.linux,
        "python3",
        &[clients_py.to_str().unwrap(), &pair.core_ip, "7401", "20"],
    );
    let out = run("asyncio clients (linux)", cmd, STEP);
    let ok = until(Duration::from_secs(5), || served(&server.stdout()) == 20);
    assert!(
        out.stdout.trim() == "equal 20 of 20" && ok,
        "clients: {}{}; server:\n{}{}",
        out.stdout,
        tail_of(&out.stderr, 5),
        server.stdout(),
        server.stderr()
    );
    let f = server.terminate();
    assert_private_daemon_gone(&f.stderr);
}

/// tests/shim/daemonize_echo.py under plain `corestack exec`: it listens, forks and exits
/// at once (the shim moves it at that fork), its child forks two workers; 20 Linux clients
/// at once, 256 KiB each, byte-exact; the private daemon stops after the workers.
#[test]
fn shim_exec_daemonizing_server_is_moved_to_a_private_daemon_and_serves_20_clients() {
    let _lock = start();
    need("python3");
    let pair = Pair::new("fx3", 243).expect("creating the namespaces");
    let server_py = script("daemonize_echo.py");
    let server = Proc::spawn(
        "daemonize_echo.py (exec)",
        shimmed(
            &pair,
            "python3",
            &["-u", server_py.to_str().unwrap(), "7402", "2", "20"],
        ),
        None,
        Out::Text,
    );
    let (pids, ready) = daemonized_workers(&server);
    if !ready {
        sigterm_all(&pids);
        panic!(
            "the workers never got ready:\n{}{}",
            server.stdout(),
            server.stderr()
        );
    }
    let (out, ok) = twenty_echo_clients(&pair, 7402, || {
        server.stdout().matches(" served 262144").count()
    });
    sigterm_all(&pids);
    assert!(
        out.stdout.trim() == "equal 20 of 20" && ok,
        "clients: {}{}; server:\n{}{}",
        out.stdout,
        tail_of(&out.stderr, 5),
        server.stdout(),
        server.stderr()
    );
    let stderr = server.stderr();
    assert_eq!(stderr.matches(MOVED).count(), 1, "moved once:\n{stderr}");
    assert_private_daemon_gone(&stderr);
    drop(server);
}

/// nginx as Debian ships it (its stock configuration: daemon on, `worker_processes auto`,
/// `user www-data`), started as its service starts it but under plain `corestack exec`
/// (embedded mode): its first process listens and forks the master; the shim moves it to
/// service mode at that fork and nginx starts again on a private daemon. 8 concurrent Linux
/// curls get a 1 MiB static file complete, the default page answers, and once nginx is
/// stopped the private daemon stops.
#[test]
fn shim_exec_nginx_with_the_stock_configuration_is_moved_to_a_private_daemon_and_serves() {
    let _lock = start();
    need("curl");
    assert!(
        Path::new("/usr/sbin/nginx").exists() && Path::new("/etc/nginx/nginx.conf").exists(),
        "nginx is not installed: run scripts/setup.sh (as root)"
    );
    assert!(
        !Path::new(NGINX_PID).exists(),
        "an nginx already runs on this machine ({NGINX_PID}): stop it first"
    );
    let pair = Pair::new("fx4", 244).expect("creating the namespaces");
    let name = format!("corestack-exec-{}.txt", std::process::id());
    let file = Placed(Path::new("/var/www/html").join(&name));
    std::fs::write(&file.0, vec![b'x'; 1 << 20]).expect("placing a file in /var/www/html");
    let t0 = Instant::now();
    let started = run("nginx (exec)", shimmed(&pair, "nginx", &[]), STEP);
    assert!(
        started.status.success() && started.stderr.contains(MOVED),
        "nginx did not start, or was not moved ({}):\n{}{}",
        started.status,
        started.stdout,
        started.stderr
    );
    let mut master = 0;
    until(STEP, || {
        master = std::fs::read_to_string(NGINX_PID)
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(0);
        master != 0
    });
    assert!(master != 0, "nginx wrote no {NGINX_PID}");
    let running = NginxRunning(master);
    println!("nginx: moved and its master up in {:?}", t0.elapsed());
    let log = || {
        let errors = std::fs::read_to_string("/var/log/nginx/error.log").unwrap_or_default();
        format!(
            "error.log:\n{}\nexec: {}",
            tail_of(&errors, 20),
            started.stderr
        )
    };
    ping_until_up(&pair.linux, &pair.core_ip, 10);
    curls_get_1mib(&pair, (80, &format!("/{name}")), 8, &log);
    let url = format!("http://{}/", pair.core_ip);
    let cmd = plain(&pair.linux, "curl", &["-s", "-S", "-m", "20", &url]);
    let page = run("curl / (linux)", cmd, STEP);
    assert!(
        page.stdout.contains("Welcome to nginx!"),
        "the default page: {}{}\n{}",
        page.stdout,
        page.stderr,
        log()
    );
    drop(running);
    assert_private_daemon_gone(&started.stderr);
}

/// A JVM server under plain `corestack exec` (embedded mode): the JDK's
/// `com.sun.net.httpserver` (NIO: epoll, accept, read, write, all through libc, which the
/// shim interposes), run as a single source file (tests/shim/JvmHttp.java) on a pool of 4
/// threads. 8 concurrent Linux curls get 1 MiB each complete, 4 POSTs of 256 KiB come back
/// byte-exact, and `corestack ss` shows the java process listening on corestack.
#[test]
fn shim_exec_jvm_http_server_serves_concurrent_linux_curls_byte_exact() {
    let _lock = start();
    need("java");
    need("curl");
    let pair = Pair::new("fx5", 245).expect("creating the namespaces");
    let src = script("JvmHttp.java");
    let mut server = Proc::spawn(
        "java JvmHttp.java (exec)",
        shimmed(
            &pair,
            "java",
            &[
                "-Xmx128m",
                "-XX:+UseSerialGC",
                src.to_str().unwrap(),
                "8080",
                &(1 << 20).to_string(),
                "60",
            ],
        ),
        None,
        Out::Text,
    );
    let t0 = Instant::now();
    server.wait_stdout("serving 8080", STEP);
    println!("jvm: serving after {:?}", t0.elapsed());
    let pid = server.pid();
    let mut ss = String::new();
    let seen = until(Duration::from_secs(10), || {
        ss = corestack_out(&["ss"]);
        ss.lines()
            .any(|l| l.contains(&pid.to_string()) && l.contains(":8080"))
    });
    assert!(
        seen,
        "corestack ss does not show java ({pid}) on :8080:\n{ss}"
    );
    let log = || format!("{}{}", server.stdout(), tail_of(&server.stderr(), 20));
    curls_get_1mib(&pair, (8080, "/big"), 8, &log);
    // Letters, so that stdout can be kept as text; a lost or moved byte shows.
    let body: Vec<u8> = payload(256 << 10, 35)
        .iter()
        .map(|b| b'a' + b % 26)
        .collect();
    let file = std::env::temp_dir().join(format!("corestack-jvm-{}.bin", std::process::id()));
    std::fs::write(&file, &body).expect("writing the POST body");
    let _placed = Placed(file.clone());
    let url = format!("http://{}:8080/echo", pair.core_ip);
    let posts: Vec<Proc> = (0..4)
        .map(|_| {
            let data = format!("@{}", file.display());
            let cmd = plain(
                &pair.linux,
                "curl",
                &["-s", "-S", "-m", "20", "--data-binary", &data, &url],
            );
            Proc::spawn("curl POST (linux)", cmd, None, Out::Text)
        })
        .collect();
    for p in posts {
        let f = p.finish(STEP);
        assert!(
            f.status.success() && f.stdout.as_bytes() == body,
            "POST /echo came back with {} bytes ({}): {}\nserver:\n{}",
            f.stdout.len(),
            f.status,
            f.stderr,
            log()
        );
    }
    drop(server.terminate());
}

/// Where a forking server cannot be moved, it is refused, never left up and silent:
/// tests/shim/prefork.c under the shim with a private daemon that cannot start (the
/// variables set by hand, `CORESTACK_EXEC_BIN` naming no program) ends at its first fork
/// with exit status 1 and one line on stderr that says to run it in service mode, and leaves
/// no private directory behind.
#[test]
fn shim_exec_forking_server_that_cannot_be_moved_is_refused_with_one_line() {
    let _lock = start();
    let pair = Pair::new("fx6", 246).expect("creating the namespaces");
    let prog = cc("prefork");
    let mut cmd = pair.core.exec(&prog);
    cmd.arg("80")
        .env("LD_PRELOAD", preload())
        .env("CORESTACK_IFACE", "vc")
        .env("CORESTACK_IP", format!("{}/24", pair.core_ip))
        .env("CORESTACK_EXEC_BIN", "/nonexistent/corestack");
    let mut p = Proc::spawn("prefork (no daemon)", cmd, None, Out::Text);
    let pid = p.pid();
    let f = p.finish(STEP);
    let lines: Vec<&str> = f.stderr.lines().collect();
    assert!(
        f.status.code() == Some(1)
            && lines.len() == 1
            && lines[0].contains("cannot be served in embedded mode: run it in service mode: corestack run --iface vc")
            && lines[0].contains("corestack exec --socket PATH"),
        "refused with one line and status 1? {}:\n{}{}",
        f.status,
        f.stdout,
        f.stderr
    );
    assert!(
        !f.stdout.contains("worker"),
        "a worker started:\n{}",
        f.stdout
    );
    let prefix = format!("corestack-exec-{pid}-");
    let left: Vec<String> = std::fs::read_dir("/tmp")
        .expect("listing /tmp")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "private directories left behind: {left:?}");
}

/// nginx as a master-worker reverse proxy under plain `corestack exec`: its own
/// configuration (daemon on, 2 workers, `proxy_pass` to a Linux python http.server in the
/// other namespace). The shim moves it to service mode at its first fork; 8 concurrent Linux
/// curls get a 1 MiB file through it complete (the workers' upstream connections are
/// corestack's too), and once nginx is stopped the private daemon stops.
#[test]
fn shim_exec_nginx_reverse_proxy_is_moved_to_a_private_daemon_and_proxies_linux_curls() {
    let _lock = start();
    need("curl");
    need("python3");
    assert!(
        Path::new("/usr/sbin/nginx").exists(),
        "nginx is not installed: run scripts/setup.sh (as root)"
    );
    let pair = Pair::new("fx7", 247).expect("creating the namespaces");
    let (mut dir, root) = Scratch::new("px");
    let mut backend = Proc::spawn(
        "python http.server (linux backend)",
        plain(
            &pair.linux,
            "python3",
            &[
                "-u",
                "-m",
                "http.server",
                "8000",
                "--bind",
                &pair.linux_ip,
                "--directory",
                root.to_str().unwrap(),
            ],
        ),
        None,
        Out::Text,
    );
    backend.wait_stdout("Serving HTTP", STEP);
    let pid_file = dir.0.join("nginx.pid");
    let conf = dir.0.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes 2;\npid {};\nerror_log {} warn;\nevents {{ worker_connections 256; }}\n\
             http {{ access_log off; server {{ listen 8081; location / {{ \
             proxy_pass http://{}:8000; }} }} }}\n",
            pid_file.display(),
            dir.0.join("error.log").display(),
            pair.linux_ip
        ),
    )
    .expect("the configuration");
    let conf_arg = conf.display().to_string();
    let started = run(
        "nginx proxy (exec)",
        shimmed(&pair, "nginx", &["-c", &conf_arg]),
        STEP,
    );
    assert!(
        started.status.success() && started.stderr.contains(MOVED),
        "nginx did not start, or was not moved ({}):\n{}{}",
        started.status,
        started.stdout,
        started.stderr
    );
    until(STEP, || {
        dir.1 = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(0);
        dir.1 != 0
    });
    assert!(dir.1 != 0, "nginx wrote no {}", pid_file.display());
    let errors_at = dir.0.join("error.log");
    let log = || {
        let errors = std::fs::read_to_string(&errors_at).unwrap_or_default();
        format!(
            "error.log:\n{}\nbackend:\n{}",
            tail_of(&errors, 20),
            tail_of(&backend.stderr(), 10)
        )
    };
    ping_until_up(&pair.linux, &pair.core_ip, 10);
    curls_get_1mib(&pair, (8081, "/big.txt"), 8, &log);
    drop(dir);
    assert_private_daemon_gone(&started.stderr);
    drop(backend.terminate());
}

/// tests/shim/daemon3.c, a server that listens and then daemonizes with glibc's daemon(3)
/// (whose fork the shim sees only because it interposes daemon itself), in service mode and
/// under plain `corestack exec` (moved to a private daemon at daemon(3)'s fork): the
/// daemonized process takes the listener over and echoes 20 connections of a Linux client.
#[test]
fn shim_daemon3_server_serves_in_service_mode_and_under_plain_exec() {
    let _lock = start();
    need("python3");
    let pair = Pair::new("fx8", 248).expect("creating the namespaces");
    let prog = cc("daemon3");
    {
        let (d, sock) = daemon(&pair, "daemon3");
        let cmd = served(&pair, &sock, prog.to_str().unwrap(), &["7403", "3"]);
        daemon3_serves(&pair, "service", cmd, &|| d.tail());
        d.assert_no_panic();
    }
    // The test's daemon is gone: the interface is free for the program's own engine.
    let cmd = shimmed(&pair, &prog, &["7403", "3"]);
    let stderr = daemon3_serves(&pair, "exec", cmd, &String::new);
    assert_eq!(stderr.matches(MOVED).count(), 1, "moved once:\n{stderr}");
    assert_private_daemon_gone(&stderr);
}

/// Runs daemon3 as `cmd` (`mode` in messages) until its daemon says it is ready, has a Linux
/// client echo 20 connections through it, and waits for it to exit (3 s without
/// connections); returns its stderr. `context` ends a failure message.
fn daemon3_serves(pair: &Pair, mode: &str, cmd: Command, context: &dyn Fn() -> String) -> String {
    // The first process exits at once (daemon(3)'s parent): its daemon keeps stdout.
    let server = Proc::spawn(&format!("daemon3 ({mode})"), cmd, None, Out::Text);
    let ready = until(STEP, || server.stdout().contains(" ready"));
    assert!(
        ready,
        "daemon3 ({mode}) never got ready:\n{}{}\n{}",
        server.stdout(),
        server.stderr(),
        context()
    );
    let py = script("prefork_client.py");
    let args = [
        py.to_str().unwrap(),
        pair.core_ip.as_str(),
        "7403",
        "20",
        mode,
    ];
    let out = run("daemon3 client", plain(&pair.linux, "python3", &args), STEP);
    assert!(
        out.stdout.contains("ok 20 of 20"),
        "daemon3 ({mode}) client: {}\nserver:\n{}{}\n{}",
        out.stdout,
        server.stdout(),
        server.stderr(),
        context()
    );
    let exited = until(Duration::from_secs(10), || {
        server.stdout().contains(" exits")
    });
    assert!(
        exited,
        "daemon3 ({mode}) did not exit:\n{}",
        server.stdout()
    );
    server.stderr()
}
