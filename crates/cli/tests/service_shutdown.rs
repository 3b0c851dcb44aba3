//! Service mode (issue 4) end to end, shutdown: a `corestack run` daemon that stops (SIGTERM)
//! or dies (SIGKILL) while its applications transfer or wait gives each of them an error
//! (a reset or a broken pipe), never a hang; its Linux peers are reset too, and a new daemon
//! takes over a socket a killed one left behind.
//!
//! Needs root (namespaces, AF_XDP). Runs one test at a time (the lock in `common`). Addresses
//! 10.N.1.1 (Linux) and 10.N.1.2 (the daemon), N = 143, 144, 147.

mod common;

use std::time::{Duration, Instant};

use common::daemon::*;
use common::*;

#[test]
fn daemon_sigterm_mid_transfer_apps_get_an_error_not_a_hang() {
    let (_lock, pair, sock, mut daemon) = daemon_test(143, "term");
    let (mut apps, t0, took) = signalled_mid_transfer(&pair, &sock, &daemon, "TERM");
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
    let (_lock, pair, sock, mut daemon) = daemon_test(144, "sigkill");
    let (apps, _, took) = signalled_mid_transfer(&pair, &sock, &daemon, "KILL");
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
    let (_lock, pair, sock, mut daemon) = daemon_test(147, "echo-term");
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
    // An app `nc -l PORT`, once it listens.
    let listening_app = |name: &str, port: &str| {
        let cmd = app(&pair.core, sock, &["nc", "-l", port]);
        let mut p = Proc::spawn(name, cmd, None, Out::Hash);
        p.wait_stderr("listening on", Duration::from_secs(10));
        p
    };
    let receiver = listening_app("app nc -l receiving from Linux", "7402");
    let client = Proc::spawn(
        "Linux client sending to the app",
        linux(pair, &["nc", &pair.core_ip, "7402"]),
        Some(big),
        Out::Hash,
    );
    let waiting = listening_app("app nc -l waiting for a connection", "7403");
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

/// Catches apps mid-transfer ([`mid_transfer_apps`]), sends the daemon `signal` (`TERM`,
/// `KILL`) and asserts that they fail ([`assert_apps_fail`]); returns them, when the signal
/// was sent, and how long the slowest took to exit.
fn signalled_mid_transfer(
    pair: &Pair,
    sock: &SocketPath,
    daemon: &Daemon,
    signal: &str,
) -> (MidTransfer, Instant, Duration) {
    let mut apps = mid_transfer_apps(pair, sock, daemon);
    let t0 = Instant::now();
    daemon.signal(signal);
    let took = assert_apps_fail(&mut apps, t0, daemon);
    (apps, t0, took)
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
