//! What the daemon allows each application: a port is one application's at a time
//! (EADDRINUSE), a port below 1024 needs root or a grant in `[ports]` (EACCES), `max_apps`
//! applications at most (EMFILE), and segments shaped by the configuration whatever the hello
//! asks. The applications are this process, so whether a privileged port without a grant
//! opens depends on who runs the tests (root always may); `translate`'s unit tests check the
//! refusal whoever runs them. In this process over the `mem` port; no root, no namespaces.

mod common;

use std::os::unix::fs::MetadataExt;

use appif::ctl::Hello;
use common::*;
use corestack::TcpListener;
use testkit::rogue::{self, RogueApp};

#[test]
fn port_listened_on_by_another_app_is_eaddrinuse() {
    let d = Daemon::start("inuse");
    let first = d.app();
    let mut l = TcpListener::bind(&first, any(8080)).expect("the first app's listen");
    let second = d.app();
    let e = TcpListener::bind(&second, any(8080))
        .err()
        .expect("a second listen on 8080");
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
    d.assert_echo(&mut l, 8080, 64 << 10, "the first app after the refusal");
}

/// This process's effective user id.
fn uid() -> u32 {
    std::fs::metadata("/proc/self").expect("/proc/self").uid()
}

#[test]
fn privileged_port_without_a_grant_opens_for_root_only() {
    let d = Daemon::start("nogrant");
    let app = d.app();
    match (uid(), TcpListener::bind(&app, any(80))) {
        (0, Ok(mut l)) => d.assert_echo(&mut l, 80, 4096, "root's app on port 80"),
        (0, Err(e)) => panic!("root was refused port 80: {e}"),
        (_, Ok(_)) => panic!("an application not root opened port 80 without a grant"),
        (_, Err(e)) => assert_eq!(e.raw_os_error(), Some(appif::errno::EACCES), "{e}"),
    }
}

#[test]
fn privileged_port_with_a_grant_for_the_apps_uid_opens() {
    let uid = uid();
    let d = Daemon::with("grant", |c| c.ports.privileged_uids = vec![uid]);
    let app = d.app();
    let mut l = TcpListener::bind(&app, any(80)).expect("a granted listen on port 80");
    d.assert_echo(&mut l, 80, 64 << 10, "the granted app on port 80");
    d.expect_line(&["application joined", &format!("uid={uid} ")], "the app");
}

#[test]
fn apps_beyond_max_apps_are_refused_with_emfile() {
    let d = Daemon::with("maxapps", |c| c.max_apps = 1);
    let _first = RogueApp::join(&d.sock, "first");
    let hello = Hello {
        nslots: 4,
        ring_bytes: 4096,
        name: "second".into(),
        parent: 0,
        ticket: 0,
    };
    let (_ctl, w, fds) = rogue::hello(&d.sock, &hello.encode());
    assert_eq!(w.status, appif::errno::EMFILE, "{w:?}");
    assert!(fds.is_empty(), "a refusal came with fds");
    d.expect_line(
        &["refused an application", "second", "too many applications"],
        "the second app",
    );
}

#[test]
fn hello_claiming_a_parent_that_is_not_its_parent_process_is_refused_with_eperm() {
    let d = Daemon::start("notchild");
    let first = RogueApp::join(&d.sock, "first");
    // This process is the first app's process, not its child; and no association 999 lives.
    for parent in [first.assoc(), 999] {
        let hello = Hello {
            nslots: 4,
            ring_bytes: 4096,
            name: "claimer".into(),
            parent,
            ticket: 0,
        };
        let (_ctl, w, fds) = rogue::hello(&d.sock, &hello.encode());
        assert_eq!(w.status, appif::errno::EPERM, "parent {parent}: {w:?}");
        assert!(fds.is_empty(), "a refusal came with fds");
        d.expect_line(
            &[
                "refused an application",
                "claimer",
                &format!("not a child of association {parent}"),
            ],
            "the claim",
        );
    }
}

#[test]
fn hello_asking_for_too_much_gets_the_configured_limits() {
    let d = Daemon::with("limits", |c| c.max_sockets_per_app = 8);
    let hello = Hello {
        nslots: 1000,
        ring_bytes: 5000,
        name: "greedy".into(),
        parent: 0,
        ticket: 0,
    };
    let (_ctl, w, fds) = rogue::hello(&d.sock, &hello.encode());
    assert_eq!(w.status, 0, "{w:?}");
    assert_eq!(fds.len(), 2, "a segment and a doorbell");
    assert_eq!((w.nslots, w.ring_bytes), (8, 8192));
}
