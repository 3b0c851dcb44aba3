//! Service mode (issue 4) end to end, isolation: one `corestack run` daemon owns the veth end
//! `vc` of a namespace pair; applications (`corestack serve echo`, and this test itself acting
//! as a broken application through `appif`, see `testkit::rogue`) join it over its control
//! socket; their peers are Rust `std::net` clients (`corestack nc` / `bench pingpong` without
//! `--iface`, i.e. on the kernel stack) in the Linux namespace.
//!
//! What is checked: several applications transfer at once, byte-exact; an application killed
//! (SIGKILL) or breaking the shared-memory protocol loses its own connections (its peers see
//! ECONNRESET), its memory and its ports, and nobody else notices. The same rules without
//! namespaces or root, over the `mem` port: `crates/service/tests`.
//!
//! Needs root (namespaces, AF_XDP). Runs one test at a time (the lock in `common`). Every
//! child is killed by PID on drop, every namespace is deleted on drop, and every wait is
//! bounded. Addresses 10.N.1.1 (Linux) and 10.N.1.2 (the daemon), N = 140..=142.

mod common;

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

use appif::ctl::{self, Welcome};
use appif::seg::{layout, Desc};
use common::daemon::*;
use common::*;
use testkit::rogue::RogueApp;

#[test]
fn two_apps_each_transfer_64mib_with_linux_peers() {
    let (_lock, pair, sock, mut daemon) = daemon_test(140, "two");
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
    let (_lock, pair, sock, mut daemon) = daemon_test(141, "kill");
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
    let (_lock, pair, sock, mut daemon) = daemon_test(142, "garbage");
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
                    v6only: false,
                    reuseport: None,
                })
            },
            "descriptor names slot 1000 out of range",
        ),
        (
            "bad opcode",
            |r| {
                let mut d = [0u8; 64];
                d[0] = 0xee;
                r.poke(layout::CMD_RING, &d);
                r.poke(layout::CMD_HEAD, &1u64.to_le_bytes());
            },
            "bad descriptor: BadOpcode(238)",
        ),
        (
            "command ring head far ahead",
            |r| r.poke(layout::CMD_HEAD, &(1u64 << 40).to_le_bytes()),
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
                    v6only: false,
                });
                thread::sleep(Duration::from_millis(50));
                r.poke(
                    r.slot_off(0) + layout::SLOT_TX_HEAD,
                    &(1u64 << 40).to_le_bytes(),
                );
                r.push(Desc::Send { slot: 0 });
            },
            "impossible index in a socket ring",
        ),
    ];
    for (what, breaker, reason) in cases {
        let mut rogue = RogueApp::join(sock.path(), "rogue");
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
    let rogue = RogueApp::join(sock.path(), "rogue");
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
    let f = pingpong.finish(Duration::from_secs(20)).assert_success(
        "the legit client's ping-pong (while garbage was written)",
        || format!("\nlog:\n{}", daemon.tail()),
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
