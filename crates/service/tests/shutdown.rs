//! A stopping daemon (SIGTERM in `corestack run`; here its stop flag) resets every connection,
//! tells every application ECONNRESET in its segment and ends its control connection, sends its
//! peers RSTs, and removes its control socket. In this process over the `mem` port; no root,
//! no namespaces. End to end, with SIGTERM and SIGKILL: `crates/cli/tests/service_shutdown.rs`.

mod common;

use std::io::{ErrorKind, Write};

use common::*;
use corestack::{TcpListener, TcpStream};
use testkit::rogue::RogueApp;

#[test]
fn daemon_stop_tells_every_app_econnreset_and_peers_see_rst() {
    let mut d = Daemon::start("stop");
    // A well-behaved app with a connection the peer opened, one with a connection it opened.
    let (app, mut l) = d.app_listening(7007);
    let (mut from_peer, mut accepted, _) =
        d.connect_accept(&mut l, addr(DAEMON_IP, 7007), "the peer's connection");
    let mut pl = d.peer_listener(9001);
    let mut to_peer = TcpStream::connect(&app, addr(PEER_IP, 9001)).expect("connecting");
    to_peer.set_nonblocking(true).expect("nonblocking");
    let mut peer_side = d.accept(&mut pl, "the app's connection");
    to_peer.write_all(b"x").expect("a byte before the stop");
    // And a rogue one, which reads its segment directly.
    let mut rogue = RogueApp::join(&d.sock, "rogue");

    let log = d.stop();
    assert_eq!(log.matches("daemon stopping").count(), 2, "log:\n{log}");
    assert!(log.contains("corestack daemon stopped"), "log:\n{log}");
    assert!(!d.sock.exists(), "the control socket was left behind");
    if let Err(e) = rogue.dropped(BOUND) {
        panic!("the rogue app was not told: {e}");
    }
    assert_eq!(
        read_error(&mut accepted, "the app's accepted connection"),
        ErrorKind::ConnectionReset
    );
    assert_eq!(
        read_error(&mut to_peer, "the app's own connection"),
        ErrorKind::ConnectionReset
    );
    for (s, what) in [
        (&mut from_peer, "the peer's connection"),
        (&mut peer_side, "the peer's accepted connection"),
    ] {
        assert_eq!(read_error(s, what), ErrorKind::ConnectionReset, "{what}");
    }
}

/// A call blocked in the application when the daemon stops returns the stop's error instead of
/// waiting for data that can no longer come: a UDP receive, an accept.
#[test]
fn daemon_stop_ends_blocked_receives_and_accepts() {
    let mut d = Daemon::start("stop-blocked");
    let app = d.app();
    let mut udp = corestack::UdpSocket::bind(&app, any(7010)).expect("UDP 7010");
    let mut l = TcpListener::bind(&app, any(7011)).expect("the app's listen");
    let (done, ended) = std::sync::mpsc::channel();
    let udp_done = done.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let _ = udp_done.send(("recv_from", udp.recv_from(&mut buf).map(|_| ())));
    });
    std::thread::spawn(move || {
        let _ = done.send(("accept", l.accept().map(|_| ())));
    });
    // Both calls are blocked (past their spin) before the stop.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(ended.try_recv().is_err(), "a call returned before the stop");
    d.stop();
    for _ in 0..2 {
        let (what, r) = ended
            .recv_timeout(BOUND)
            .expect("a blocked call did not return after the stop");
        assert!(r.is_err(), "{what} succeeded after the stop");
    }
}
