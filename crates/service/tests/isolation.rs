//! An application that breaks the shared-memory protocol loses its own association — its
//! connections are reset, its segment released, its control connection closed — and the
//! daemon and the other applications carry on. Also: what a well-behaved application gets, an
//! application that vanishes, and hellos that are not ones. The daemon runs in this process
//! over the `mem` port (see `common`); no root, no namespaces. The same rules end to end, as
//! root, in `crates/cli/tests/service_isolation.rs`.

mod common;

use std::time::Duration;

use appif::ctl;
use appif::seg::{layout, Desc};
use common::*;
use corestack::{TcpListener, TcpStream};
use testkit::rogue::{self, RogueApp};

/// A well-behaved application echoing on `port`, checked once.
fn echo_app(d: &Daemon, port: u16) -> (corestack::Stack, TcpListener) {
    let (app, mut l) = d.app_listening(port);
    d.assert_echo(&mut l, port, 64 << 10, "the well-behaved app at first");
    (app, l)
}

/// A rogue app joins, `breaker` breaks the protocol, and the daemon must drop it logging
/// `reason`, while the well-behaved app on port 7007 echoes before and after.
fn rogue_is_dropped_others_carry_on(tag: &str, breaker: impl FnOnce(&RogueApp), reason: &str) {
    let d = Daemon::start(tag);
    let (_app, mut l) = echo_app(&d, 7007);
    let mut rogue = RogueApp::join(&d.sock, "rogue");
    let assoc = rogue.assoc();
    breaker(&rogue);
    let line = d.expect_line(
        &[
            "application disconnected",
            reason,
            &format!("assoc={assoc} "),
        ],
        tag,
    );
    assert!(line.contains("app=rogue"), "{line}");
    if let Err(e) = rogue.dropped(BOUND) {
        panic!(
            "{tag}: the rogue application was not dropped: {e}\nlog:\n{}",
            d.log()
        );
    }
    d.assert_echo(
        &mut l,
        7007,
        64 << 10,
        "the well-behaved app after the rogue",
    );
}

#[test]
fn apps_two_at_once_each_echo_with_the_peer() {
    let d = Daemon::start("two");
    let (a, mut la) = echo_app(&d, 7001);
    let (b, mut lb) = echo_app(&d, 7002);
    assert_ne!(a.association(), b.association());
    d.assert_echo(&mut la, 7001, 256 << 10, "app A");
    d.assert_echo(&mut lb, 7002, 256 << 10, "app B");
    assert_eq!(d.log().matches("application joined").count(), 2);
}

#[test]
fn app_descriptor_with_bad_opcode_loses_its_association() {
    rogue_is_dropped_others_carry_on(
        "opcode",
        RogueApp::push_bad_opcode,
        "bad descriptor: BadOpcode(238)",
    );
}

#[test]
fn app_descriptor_with_bad_address_family_loses_its_association() {
    rogue_is_dropped_others_carry_on(
        "family",
        |r| r.push_bad_family(7298, 5),
        "bad descriptor: BadFamily(5)",
    );
}

#[test]
fn app_descriptor_naming_a_slot_out_of_range_loses_its_association() {
    rogue_is_dropped_others_carry_on(
        "slot",
        |r| {
            r.push(Desc::Listen {
                slot: 1000,
                local: any(7299).into(),
                backlog: 8,
                v6only: false,
                reuseport: None,
            })
        },
        "descriptor names slot 1000 out of range",
    );
}

#[test]
fn app_command_ring_head_far_ahead_loses_its_association() {
    rogue_is_dropped_others_carry_on(
        "head",
        RogueApp::push_head_far_ahead,
        "command ring head 1099511627776 impossible (tail 0)",
    );
}

/// The rogue binds a UDP socket, then overwrites word `word` of the socket's slot (a
/// `layout::SLOT_TX_*` offset) with `value` and tells the engine there is something to send.
fn break_tx_ring(r: &RogueApp, word: usize, value: u64) {
    let slot = r.udp_bind(any(7298));
    assert!(r.taken(BOUND), "the daemon did not take the bind");
    r.poke(r.slot_off(slot) + word, &value.to_le_bytes());
    r.push(Desc::Send { slot });
}

#[test]
fn app_socket_ring_head_impossible_loses_its_association() {
    rogue_is_dropped_others_carry_on(
        "txhead",
        |r| break_tx_ring(r, layout::SLOT_TX_HEAD, 1 << 40),
        "impossible index in a socket ring",
    );
}

#[test]
fn app_socket_ring_garbage_geometry_word_loses_its_association() {
    rogue_is_dropped_others_carry_on(
        "geometry",
        |r| break_tx_ring(r, layout::SLOT_TX_GEOMETRY, u64::MAX),
        "impossible index in a socket ring",
    );
}

#[test]
fn app_writing_on_the_control_socket_after_hello_loses_its_association() {
    rogue_is_dropped_others_carry_on(
        "ctl",
        |r| {
            use std::io::Write;
            (&r.ctl).write_all(b"junk").expect("writing junk");
        },
        "wrote on the control socket after its hello",
    );
}

#[test]
fn app_vanishing_with_a_connection_resets_it_and_the_peer_sees_rst() {
    let d = Daemon::start("vanish");
    let mut pl = d.peer_listener(9000);
    let rogue = RogueApp::join(&d.sock, "vanishing");
    let assoc = rogue.assoc();
    rogue.connect(addr(PEER_IP, 9000));
    let mut s: TcpStream = d.accept(&mut pl, "the rogue's connection");
    // Gone without a word: no Close, no Shutdown, just the end of its control connection.
    drop(rogue);
    let line = d.expect_line(
        &["application left", &format!("assoc={assoc} ")],
        "the app vanishing",
    );
    assert!(line.contains("sockets=1"), "{line}");
    assert_eq!(
        read_error(&mut s, "the peer of a vanished app"),
        std::io::ErrorKind::ConnectionReset
    );
}

#[test]
fn app_resizing_its_sealed_segment_is_refused() {
    let d = Daemon::start("seal");
    let rogue = RogueApp::join(&d.sock, "rogue");
    for len in [0, rogue.welcome.seg_len * 2] {
        assert!(
            rogue.mem.set_len(len).is_err(),
            "an application could resize its segment to {len} bytes"
        );
    }
}

#[test]
fn hello_that_is_not_one_is_refused_with_einval() {
    let d = Daemon::start("hello");
    let (_ctl, w, fds) = rogue::hello(&d.sock, &[0x5a; ctl::HELLO_LEN]);
    assert_eq!(w.status, appif::errno::EINVAL, "{w:?}");
    assert!(fds.is_empty(), "a refusal came with fds");
    d.expect_line(&["refused an application", "bad hello"], "a bad hello");
    // The daemon still welcomes the next one.
    let mut r = RogueApp::join(&d.sock, "next");
    assert!(
        r.dropped(Duration::from_millis(50)).is_err(),
        "a welcomed app stays"
    );
}
