//! Service mode over IPv6 (issue 25), without root: a dual-stack daemon (10.0.0.2/24 and
//! fd00:77::2/64) over the `mem` port, its peer at 10.0.0.1 and fd00:77::1, applications in
//! service mode. A listener on `[::]` serves IPv6 and IPv4 peers (the latter seen as
//! `::ffff:a.b.c.d`), V6ONLY keeps IPv4 out and lets an IPv4 socket take the port, UDP echoes
//! over IPv6, an application opens a connection to an IPv6 peer, and one application's IPv6
//! port is EADDRINUSE for another. The same against Linux in namespaces:
//! `crates/cli/tests/service_ipv6.rs`.

mod common;

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, SocketAddrV6};

use common::*;
use corestack::{TcpListener, TcpStream, UdpSocket};

fn v6(ip: std::net::Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0))
}

fn any6(port: u16) -> SocketAddr {
    v6(std::net::Ipv6Addr::UNSPECIFIED, port)
}

#[test]
fn app_on_dual_stack_listener_serves_ipv6_and_ipv4_peers() {
    let d = Daemon::dual_stack("v6dual");
    let app = d.app();
    assert_eq!(
        app.ip6(),
        Some(DAEMON_IP6),
        "the segment names the daemon's IPv6 address"
    );
    let mut l = TcpListener::bind(&app, any6(7100)).expect("listening on [::]:7100");
    assert_eq!(l.local_addr().expect("local"), any6(7100));
    let seen = d.assert_echo_to(&mut l, v6(DAEMON_IP6, 7100), 256 << 10, "over IPv6");
    assert_eq!(seen.ip(), IpAddr::V6(PEER_IP6), "the IPv6 peer");
    let seen = d.assert_echo_to(&mut l, addr(DAEMON_IP, 7100).into(), 256 << 10, "over IPv4");
    assert_eq!(
        seen.ip(),
        IpAddr::V6(PEER_IP.to_ipv6_mapped()),
        "an IPv4 peer of a [::] listener is ::ffff:10.0.0.1"
    );
}

#[test]
fn v6only_listener_refuses_ipv4_and_shares_its_port_with_an_ipv4_listener() {
    let d = Daemon::dual_stack("v6only");
    let app = d.app();
    let mut l6 = TcpListener::bind_with(&app, any6(7101), 128, true).expect("[::]:7101 V6ONLY");
    let mut l4 = TcpListener::bind(&app, any(7101)).expect("0.0.0.0:7101 beside a V6ONLY one");
    let seen = d.assert_echo_to(&mut l6, v6(DAEMON_IP6, 7101), 4096, "V6ONLY over IPv6");
    assert_eq!(seen.ip(), IpAddr::V6(PEER_IP6));
    let seen = d.assert_echo_to(&mut l4, addr(DAEMON_IP, 7101).into(), 4096, "IPv4 listener");
    assert_eq!(seen.ip(), IpAddr::V4(PEER_IP));
    // Without the IPv4 listener, IPv4 finds nothing on the port.
    drop(l4);
    let refused = within(
        || "an IPv4 connect to a V6ONLY-only port still succeeds".to_string(),
        || TcpStream::connect(&d.peer, addr(DAEMON_IP, 7101)).err(),
    );
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "{refused}");
    l6.set_nonblocking(true).expect("nonblocking");
    assert_eq!(
        l6.accept().err().map(|e| e.kind()),
        Some(ErrorKind::WouldBlock)
    );
}

#[test]
fn app_udp_echo_over_ipv6_and_ipv4_on_one_socket() {
    let d = Daemon::dual_stack("v6udp");
    let app = d.app();
    let mut srv = UdpSocket::bind(&app, any6(7200)).expect("UDP [::]:7200");
    srv.set_nonblocking(true).expect("nonblocking");
    for (peer_local, target) in [
        (v6(PEER_IP6, 0), v6(DAEMON_IP6, 7200)),
        (addr(PEER_IP, 0).into(), addr(DAEMON_IP, 7200).into()),
    ] {
        let mut cli = UdpSocket::bind(&d.peer, peer_local).expect("the peer's UDP socket");
        cli.set_nonblocking(true).expect("nonblocking");
        let mut buf = [0u8; 2048];
        for i in 0..20u32 {
            let msg = format!("corestack-{i}-{target}");
            cli.send_to(msg.as_bytes(), target)
                .expect("the peer's send");
            let (n, from) = within(
                || {
                    format!(
                        "datagram {i} to {target} never reached the app; log:\n{}",
                        d.log()
                    )
                },
                || srv.recv_from(&mut buf).ok(),
            );
            assert_eq!(&buf[..n], msg.as_bytes());
            match target {
                SocketAddr::V6(_) => assert_eq!(from.ip(), IpAddr::V6(PEER_IP6)),
                SocketAddr::V4(_) => assert_eq!(from.ip(), IpAddr::V6(PEER_IP.to_ipv6_mapped())),
            }
            srv.send_to(&buf[..n], from).expect("the app's send");
            let (m, back_from) = within(
                || format!("echo {i} from {target} never came back; log:\n{}", d.log()),
                || cli.recv_from(&mut buf).ok(),
            );
            assert_eq!(&buf[..m], msg.as_bytes());
            assert_eq!(back_from, target, "the echo comes from the address sent to");
        }
    }
}

#[test]
fn app_connects_to_an_ipv6_peer_and_exchanges_bytes() {
    let d = Daemon::dual_stack("v6open");
    let app = d.app();
    let mut peer_l = TcpListener::bind(&d.peer, v6(PEER_IP6, 7300)).expect("the peer's listener");
    peer_l.set_nonblocking(true).expect("nonblocking");
    let mut c = TcpStream::connect(&app, v6(PEER_IP6, 7300)).expect("the app's connect");
    assert_eq!(c.peer_addr().expect("peer"), v6(PEER_IP6, 7300));
    assert_eq!(c.local_addr().expect("local").ip(), IpAddr::V6(DAEMON_IP6));
    let (mut s, from) = within(
        || "the peer accepted nothing".to_string(),
        || peer_l.accept().ok(),
    );
    assert_eq!(from, c.local_addr().expect("local"));
    c.set_nonblocking(true).expect("nonblocking");
    s.set_nonblocking(true).expect("nonblocking");
    // 1 MiB from the app, echoed by the peer, byte-exact.
    d.assert_echoes(&mut c, &mut s, 1 << 20, "the app's connection");
}

#[test]
fn one_apps_ipv6_port_is_eaddrinuse_for_another() {
    let d = Daemon::dual_stack("v6iso");
    let (a, b) = (d.app(), d.app());
    assert_ne!(a.association(), b.association());
    let mut la = TcpListener::bind(&a, any6(7400)).expect("A on [::]:7400");
    for (addr, what) in [
        (any6(7400), "[::]:7400"),
        (v6(DAEMON_IP6, 7400), "[fd00:77::2]:7400"),
        (any(7400).into(), "0.0.0.0:7400 (A's [::] holds IPv4 too)"),
    ] {
        let e = TcpListener::bind(&b, addr).err();
        assert_eq!(
            e.map(|e| e.raw_os_error()),
            Some(Some(libc::EADDRINUSE)),
            "B on {what}"
        );
    }
    let u = UdpSocket::bind(&a, v6(DAEMON_IP6, 7401)).expect("A's UDP [fd00:77::2]:7401");
    let e = UdpSocket::bind(&b, any6(7401)).err();
    assert_eq!(
        e.map(|e| e.raw_os_error()),
        Some(Some(libc::EADDRINUSE)),
        "B's UDP [::]:7401"
    );
    drop(u);
    // A is unaffected.
    let seen = d.assert_echo_to(&mut la, v6(DAEMON_IP6, 7400), 4096, "A after B's refusals");
    assert_eq!(seen.ip(), IpAddr::V6(PEER_IP6));
}
