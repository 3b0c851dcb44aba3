//! Service mode (issue 4) end to end, administration: ports below 1024 need root or a grant
//! in the configuration (by uid or gid); a port is one application's at a time; `corestack
//! run`'s setup errors (no interface, a missing one, a socket another daemon answers on) are
//! one line each and leave the running daemon alone.
//!
//! Needs root (namespaces, AF_XDP, `setpriv`). Runs one test at a time (the lock in `common`).
//! Addresses 10.N.1.1 (Linux) and 10.N.1.2 (the daemon), N = 145, 146.

mod common;

use std::time::Duration;

use appif::ctl;
use common::daemon::*;
use common::*;

#[test]
fn privileged_port_needs_root_or_a_grant_and_ports_are_exclusive() {
    let (_lock, pair, sock, mut daemon) = daemon_test(145, "ports");
    // (a) root may bind 80; (b) nobody may not (and is told so), but may bind 8080; (d) a
    // port is one application's.
    let (root80, nobody8080) =
        ports_need_root_and_belong_to_one_app(&pair, &sock, &daemon, "port ", |port, what| {
            echo_works(&pair, port, what, &daemon)
        });
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
        let f = app_outcome(
            "uid 65533's app on port 444",
            app_as(
                65533,
                &pair.core,
                &sock,
                &["serve", "echo", "--port", "444"],
            ),
        );
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
