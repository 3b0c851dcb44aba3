//! Sockets shared across fork in service mode (issue 21), without root: a daemon over the
//! `mem` port and its peer, applications in service mode. The fork is played in this process:
//! the "parent" association announces it (`Stack::forking`, `Stack::forked` with this
//! process's pid) and the "child" association joins with the fork's ticket, as the shim does
//! in a real fork (`crates/cli/tests/preload.rs` runs real forking servers).

mod common;

use std::io::{ErrorKind, Read, Write};

use common::*;
use corestack::{Stack, TcpListener, TcpStream};

/// The child of `parent`'s fork `ticket`, joined as the shim joins it.
fn child(d: &Daemon, parent: &Stack, ticket: u32) -> std::io::Result<Stack> {
    Stack::builder()
        .service(&d.sock)
        .child_of(parent.association().expect("service mode"))
        .fork_ticket(ticket)
        .start()
}

/// `parent` forks with this process as the child (as the shim does around fork): the ticket.
fn fork_here(parent: &Stack) -> u32 {
    let ticket = parent.forking().expect("service mode");
    parent.forked(ticket, std::process::id() as i32);
    ticket
}

/// `parent` forks (as [`fork_here`]) and its child joins with the fork's ticket.
fn forked_child(d: &Daemon, parent: &Stack) -> Stack {
    let ticket = fork_here(parent);
    child(d, parent, ticket).expect("the child of the fork joins")
}

/// Calls `f` until it returns true; panics with `what()` after [`BOUND`].
fn until(what: impl Fn() -> String, mut f: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + BOUND;
    while !f() {
        assert!(std::time::Instant::now() < end, "{}", what());
        std::thread::yield_now();
    }
}

/// Reads exactly `n` bytes from nonblocking `s` within [`BOUND`].
fn read_n(s: &mut TcpStream, n: usize, what: &str) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    until(
        || format!("{what}: fewer than {n} bytes"),
        || {
            match s.read(&mut buf) {
                Ok(0) => panic!("{what}: end of stream after {} bytes", got.len()),
                Ok(k) => got.extend_from_slice(&buf[..k]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("{what}: {e}"),
            }
            got.len() >= n
        },
    );
    got
}

/// Waits until the peer's nonblocking `s` sees the end of the stream; panics after [`BOUND`]
/// with "no end of stream after `after`".
fn assert_ends(s: &mut TcpStream, after: &str) {
    until(|| format!("no end of stream after {after}"), || at_eof(s));
}

/// True when the peer's nonblocking `s` sees the end of the stream now (after a short look).
fn at_eof(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    let until = std::time::Instant::now() + std::time::Duration::from_millis(200);
    while std::time::Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(k) => panic!("{k} unexpected bytes"),
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
    false
}

#[test]
fn a_forked_child_takes_over_a_connection_and_it_closes_with_the_last_reference() {
    let d = Daemon::start("fork-adopt");
    let (parent, mut l) = d.app_listening(7300);
    let (mut peer, mine, _) =
        d.connect_accept(&mut l, addr(DAEMON_IP, 7300), "the parent's accept");
    // Bytes that arrive before the fork wait, unread, in the parent's ring.
    peer.write_all(b"before the fork;").expect("peer writes");
    std::thread::sleep(std::time::Duration::from_millis(50));

    let kid = forked_child(&d, &parent);
    let mut theirs = TcpStream::adopt(&kid, &mine).expect("the child takes the connection");
    theirs.set_nonblocking(true).expect("nonblocking");
    assert_eq!(
        theirs.peer_addr().expect("peer"),
        peer.local_addr().expect("local")
    );

    // The parent's copy is the parent's no more.
    let mut buf = [0u8; 8];
    let mut parents = mine;
    let err = parents
        .read(&mut buf)
        .expect_err("the parent's copy still reads");
    assert_eq!(err.raw_os_error(), Some(libc::ENETDOWN), "{err}");

    // Both directions, through the child, byte-exact.
    assert_eq!(read_n(&mut theirs, 16, "the child"), b"before the fork;");
    peer.write_all(b" after").expect("peer writes");
    assert_eq!(read_n(&mut theirs, 6, "the child"), b" after");
    theirs
        .write_all(b"from the child")
        .expect("the child writes");
    assert_eq!(read_n(&mut peer, 14, "the peer"), b"from the child");

    // The child's close is not the last: the parent still holds its copy.
    drop(theirs);
    assert!(
        !at_eof(&mut peer),
        "the connection closed with a reference left"
    );
    drop(parents);
    assert_ends(&mut peer, "the last close");
}

#[test]
fn a_child_holds_only_what_its_parent_held_at_the_fork() {
    let d = Daemon::start("fork-scope");
    let (parent, mut l) = d.app_listening(7301);
    let ticket = fork_here(&parent);
    // Opened after the fork: not the child's.
    let _peer = TcpStream::connect(&d.peer, addr(DAEMON_IP, 7301)).expect("peer connects");
    let later = d.accept(&mut l, "the parent's accept");
    let kid = child(&d, &parent, ticket).expect("the child joins");
    let Err(err) = TcpStream::adopt(&kid, &later) else {
        panic!("adopted a connection opened after the fork");
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENETDOWN), "{err}");

    // A ticket the parent never named this process for is refused.
    let other = parent.forking().expect("service mode");
    parent.forked(other, 1);
    let Err(refused) = child(&d, &parent, other) else {
        panic!("joined with a ticket for process 1");
    };
    assert_eq!(refused.raw_os_error(), Some(libc::EPERM), "{refused}");
}

#[test]
fn a_connection_the_application_closed_still_delivers_after_it_leaves() {
    let d = Daemon::start("fork-exit");
    let (app, mut l) = d.app_listening(7302);
    let (mut peer, mut s, _) = d.connect_accept(&mut l, addr(DAEMON_IP, 7302), "accept");
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
    // The peer does not read yet: written until the rings and windows are full (no progress
    // for 100 ms), so that most of it is still unsent when the application leaves.
    let mut sent = 0;
    let mut stalled_since = std::time::Instant::now();
    until(
        || "the writes never stopped".to_string(),
        || match s.write(&data[sent..]) {
            Ok(k) => {
                sent += k;
                stalled_since = std::time::Instant::now();
                false
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                stalled_since.elapsed() > std::time::Duration::from_millis(100)
            }
            Err(e) => panic!("write: {e}"),
        },
    );
    // Close and leave at once (as `_exit` after close does).
    drop(s);
    drop(l);
    drop(app);
    d.expect_line(&["application left"], "the application leaving");
    // What was written still arrives, then the end of the stream, never a reset.
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    until(
        || format!("the peer got fewer than the {sent} bytes written"),
        || match peer.read(&mut buf) {
            Ok(0) => true,
            Ok(k) => {
                got.extend_from_slice(&buf[..k]);
                false
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(e) => panic!("the peer, after {} of {sent} bytes: {e}", got.len()),
        },
    );
    assert!(
        got[..] == data[..sent],
        "{} of {sent} bytes, not byte-exact",
        got.len()
    );
}

#[test]
fn a_connection_lent_to_another_application_is_its_and_closes_with_the_last_reference() {
    let d = Daemon::start("lend");
    let (primary, worker) = (d.app(), d.app());
    let mut l = TcpListener::bind(&primary, any(7303)).expect("listening on 7303");
    let (mut peer, lent, _) =
        d.connect_accept(&mut l, addr(DAEMON_IP, 7303), "the primary's accept");
    peer.write_all(b"request").expect("peer writes");
    // As the shim does around sendmsg(SCM_RIGHTS) and recvmsg: lend under the passed fd's
    // key, claim it as the fd received (here an eventfd this process holds stands for both).
    let passed = appif::ctl::eventfd().expect("an eventfd");
    let other = appif::ctl::eventfd().expect("another eventfd");
    let key = |fd: &std::os::fd::OwnedFd| {
        appif::ctl::fd_key("self", std::os::fd::AsRawFd::as_raw_fd(fd)).expect("an eventfd-id")
    };
    lent.lend(key(&passed));
    let raw = |fd: &std::os::fd::OwnedFd| std::os::fd::AsRawFd::as_raw_fd(fd);
    assert!(
        TcpStream::borrow(&worker, raw(&other))
            .expect("asking as another fd")
            .is_none(),
        "nothing was lent as the other eventfd"
    );
    let mut mine = TcpStream::borrow(&worker, raw(&passed))
        .expect("claiming the lent connection")
        .expect("lent as the passed eventfd");
    mine.set_nonblocking(true).expect("nonblocking");
    drop(lent);
    assert_eq!(read_n(&mut mine, 7, "the worker"), b"request");
    mine.write_all(b"response").expect("the worker writes");
    assert_eq!(read_n(&mut peer, 8, "the peer"), b"response");
    drop(mine);
    assert_ends(&mut peer, "the worker's close");
}

#[test]
fn a_forked_child_takes_over_an_inherited_udp_socket() {
    let d = Daemon::start("fork-udp");
    let parent = d.app();
    let mut mine = corestack::UdpSocket::bind(&parent, any(7304)).expect("UDP 7304");
    let mut peer = corestack::UdpSocket::bind(&d.peer, addr(PEER_IP, 7305)).expect("peer UDP");
    peer.set_nonblocking(true).expect("nonblocking");
    let kid = forked_child(&d, &parent);
    let mut theirs = corestack::UdpSocket::adopt(&kid, &mine).expect("the child takes it");
    theirs.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 64];
    let err = mine
        .recv_from(&mut buf)
        .expect_err("the parent's copy still reads");
    assert_eq!(err.raw_os_error(), Some(libc::ENETDOWN), "{err}");
    peer.send_to(b"to the child", addr(DAEMON_IP, 7304))
        .expect("peer sends");
    let mut got = None;
    until(
        || "no datagram reached the child".to_string(),
        || match theirs.recv_from(&mut buf) {
            Ok((n, from)) => {
                got = Some((buf[..n].to_vec(), from));
                true
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(e) => panic!("the child: {e}"),
        },
    );
    assert_eq!(
        got,
        Some((b"to the child".to_vec(), addr(PEER_IP, 7305).into()))
    );
    theirs
        .send_to(b"from the child", addr(PEER_IP, 7305))
        .expect("the child sends");
    until(
        || "no datagram from the child".to_string(),
        || match peer.recv_from(&mut buf) {
            Ok((n, _)) => {
                assert_eq!(&buf[..n], b"from the child");
                true
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(e) => panic!("the peer: {e}"),
        },
    );
}
