//! The C echo server (examples/c/echo.c), compiled with `cc` against the
//! libcorestack.so of this build, serving Linux clients across a veth
//! pair between two namespaces (removed on drop, also on failure).
//!
//! Needs root (fails saying so) and `cc` (skipped with a message without).
//! Addresses: 10.N.1.1 is Linux, 10.N.1.2 is the C server on corestack.

mod common;

use common::*;
use std::net::SocketAddr;
use std::time::Duration;

const CONNS: usize = 8;
const BYTES: usize = 1 << 20;
const STEP: Duration = Duration::from_secs(60);

#[test]
fn afxdp_c_echo_server_echoes_concurrent_1mib_connections_byte_exact() {
    echo_concurrent_connections(96, &[]);
}

#[test]
fn afxdp_inline_c_echo_server_echoes_concurrent_1mib_connections_byte_exact() {
    echo_concurrent_connections(98, &[("CORESTACK_INLINE", "1")]);
}

#[test]
fn service_mode_c_echo_server_echoes_concurrent_1mib_connections_byte_exact() {
    echo_concurrent_connections(99, &[("SERVICE", "1")]);
}

/// The `corestack` binary of this build (the daemon), built with cargo into
/// this test's target directory and profile.
fn corestack_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile = exe.parent().and_then(|d| d.parent()).expect("profile dir");
    let target = profile.parent().expect("target dir");
    let mut build = std::process::Command::new(env!("CARGO"));
    build
        .args(["build", "-p", "corestack-cli", "--bin", "corestack"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(root());
    if profile.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    assert!(
        build.status().expect("running cargo").success(),
        "building the corestack binary failed"
    );
    profile.join("corestack")
}

/// Runs the echo server on port 7 with the embedded-mode environment plus
/// `extra` (or, with `SERVICE` in `extra`, as an application of a
/// `corestack run` daemon driving the interface), echoes [`CONNS`]
/// concurrent connections of [`BYTES`] each, then stops it with SIGTERM and
/// checks its clean exit and totals.
fn echo_concurrent_connections(net: u8, extra: &[(&str, &str)]) {
    let _lock = start();
    let Some(echo) = build_example("echo") else {
        return;
    };
    let pair = Pair::new("c", net).expect("creating the namespaces");
    let service = extra.iter().any(|(k, _)| *k == "SERVICE");
    let socket = std::env::temp_dir().join(format!("capi-{}-{net}.sock", std::process::id()));
    let mut daemon = None;
    let mut env = if service {
        let ip = format!("{}/24", pair.core_ip);
        let args = ["run", "--iface", "vc", "--ip", &ip, "--socket"];
        let mut args: Vec<&str> = args.to_vec();
        let sock = socket.to_str().expect("utf-8 temp path");
        args.push(sock);
        daemon = Some(Program::spawn(&pair.core, &corestack_bin(), &args, &[]));
        let deadline = std::time::Instant::now() + STEP;
        while !socket.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the daemon did not create {sock}: {}",
                daemon.as_ref().map(Program::stderr).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        vec![("CORESTACK_SOCKET".to_string(), sock.to_string())]
    } else {
        let mut env = pair.embedded_env();
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env
    };
    if service {
        env.push(("CORESTACK_SPIN_US".into(), "0".into()));
    }
    let mut server = Program::spawn(&pair.core, &echo, &["7"], &env);
    let line = server.wait_line("listening", STEP);
    assert!(line.ends_with("0.0.0.0:7"), "{line}");

    let addr: SocketAddr = format!("{}:7", pair.core_ip).parse().unwrap();
    let clients: Vec<_> = (0..CONNS)
        .map(|k| {
            let ns = pair.linux.name().to_string();
            std::thread::spawn(move || {
                let data = seeded(k as u64 + 1, BYTES);
                let back = echo_exchange(&ns, addr, data.clone(), STEP);
                (k, data, back)
            })
        })
        .collect();
    for c in clients {
        let (k, data, back) = c.join().expect("a client thread panicked");
        let back = back
            .unwrap_or_else(|e| panic!("connection {k}: {e}; server stderr:\n{}", server.stderr()));
        assert_eq!(back.len(), data.len(), "connection {k}: echoed length");
        assert!(back == data, "connection {k}: echoed bytes differ");
    }

    let exit = server.terminate(Duration::from_secs(15));
    let lines = server.assert_exited_ok(exit, "the echo server ignored SIGTERM and was killed");
    let done = format!(
        "echo: done: {CONNS} connections closed, {} bytes echoed",
        CONNS * BYTES
    );
    assert!(
        lines.iter().any(|l| l == &done),
        "expected {done:?}, got {lines:?}"
    );
    if let Some(mut d) = daemon {
        let log = d.stderr();
        assert!(log.contains("application joined"), "daemon log:\n{log}");
        let (status, _) = d.terminate(Duration::from_secs(15));
        assert!(
            status.is_some_and(|s| s.success()),
            "the daemon did not stop cleanly on SIGTERM: {}",
            d.stderr()
        );
        assert!(!socket.exists(), "the daemon left its socket behind");
    }
}

#[test]
fn afxdp_c_echo_server_with_echo_max_conns_exits_by_itself() {
    let _lock = start();
    let Some(echo) = build_example("echo") else {
        return;
    };
    let pair = Pair::new("c", 97).expect("creating the namespaces");
    let mut env = pair.embedded_env();
    env.push(("ECHO_MAX_CONNS".into(), "3".into()));
    let mut server = Program::spawn(&pair.core, &echo, &["0"], &env);
    let line = server.wait_line("listening", STEP);
    let port: u16 = line
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    assert_ne!(port, 0, "port 0 is replaced by the ephemeral port chosen");

    let addr: SocketAddr = format!("{}:{port}", pair.core_ip).parse().unwrap();
    let ns = pair.linux.name().to_string();
    let client = std::thread::spawn(move || {
        (0..3u64)
            .map(|k| {
                let data = seeded(100 + k, 4096 * (k as usize + 1));
                echo_exchange(&ns, addr, data.clone(), STEP).map(|b| b == data)
            })
            .collect::<Vec<_>>()
    });
    let results = client.join().expect("the client thread panicked");
    for (k, r) in results.into_iter().enumerate() {
        match r {
            Ok(same) => assert!(same, "connection {k}: echoed bytes differ"),
            Err(e) => panic!("connection {k}: {e}; server stderr:\n{}", server.stderr()),
        }
    }
    let exit = server.wait_exit(Duration::from_secs(15));
    let lines = server.assert_exited_ok(exit, "echo still runs after ECHO_MAX_CONNS connections");
    let bytes: usize = (1..=3).map(|k| 4096 * k).sum();
    let done = format!("echo: done: 3 connections closed, {bytes} bytes echoed");
    assert!(
        lines.iter().any(|l| l == &done),
        "expected {done:?}, got {lines:?}"
    );
}
