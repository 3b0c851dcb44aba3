//! The socket API over IPv6 end to end (issue 25): two dual-stack stacks on
//! a clean `mem` wire, `SocketAddr::V6` in and out, a `[::]` listener
//! serving IPv6 and IPv4 clients (the latter as `::ffff:a.b.c.d`), UDP.

use corestack::{Stack, TcpListener, TcpStream, UdpSocket};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv6Addr, Shutdown, SocketAddr};
use std::time::{Duration, Instant};
use testkit::mem_wire::{stacks_v6, A, A6, B, B6};

fn v6(ip: Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V6(ip), port)
}

/// Echoes every connection `l` accepts (`n` of them) until its peer's FIN;
/// returns their peers.
fn echo_server(b: Stack, mut l: TcpListener, n: usize) -> std::thread::JoinHandle<Vec<SocketAddr>> {
    std::thread::spawn(move || {
        let mut peers = Vec::new();
        for _ in 0..n {
            let (mut s, peer) = l.accept().unwrap();
            let stats = || b.stats().to_string();
            assert_eq!(s.peer_addr().unwrap(), peer);
            peers.push(peer);
            let mut buf = vec![0u8; 65536];
            loop {
                let k = s
                    .read(&mut buf)
                    .unwrap_or_else(|e| panic!("{e}: {}", stats()));
                if k == 0 {
                    break;
                }
                s.write_all(&buf[..k]).unwrap();
            }
            s.shutdown(Shutdown::Write).unwrap();
        }
        peers
    })
}

/// Sends `len` bytes over `c` and checks they come back.
fn round_trip(a: &Stack, c: &mut TcpStream, len: usize) {
    let data: Vec<u8> = (0..len).map(|i| (i * 13 % 251) as u8).collect();
    let mut back = Vec::with_capacity(len);
    let (mut sent, mut buf) = (0, vec![0u8; 65536]);
    c.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while back.len() < len {
        assert!(
            Instant::now() < deadline,
            "echo stalled at {} (sent {sent}): {}",
            back.len(),
            a.stats()
        );
        if sent < len {
            match c.write(&data[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => back.extend_from_slice(&buf[..n]),
            // Inline mode: the waiting thread runs the engine.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                a.poll(Some(Duration::from_millis(1)))
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(back == data, "echo differs");
    c.shutdown(Shutdown::Write).unwrap();
    // Blocking: the server's FIN (inline mode: this thread runs the engine).
    c.set_nonblocking(false).unwrap();
    assert_eq!(c.read(&mut buf).unwrap(), 0, "EOF after the server's FIN");
}

fn dual_stack_echo(inline: bool) {
    let (a, b) = stacks_v6(inline);
    let l = TcpListener::bind(&b, v6(Ipv6Addr::UNSPECIFIED, 7)).unwrap();
    assert_eq!(l.local_addr().unwrap(), v6(Ipv6Addr::UNSPECIFIED, 7));
    let srv = echo_server(b, l, 2);
    let mut c6 = TcpStream::connect(&a, v6(B6, 7)).unwrap();
    assert_eq!(c6.peer_addr().unwrap(), v6(B6, 7));
    assert_eq!(c6.local_addr().unwrap().ip(), IpAddr::V6(A6));
    round_trip(&a, &mut c6, 1 << 20);
    let mut c4 = TcpStream::connect(&a, SocketAddr::new(B.into(), 7)).unwrap();
    round_trip(&a, &mut c4, 64 * 1024);
    let peers = srv.join().unwrap();
    assert_eq!(peers[0].ip(), IpAddr::V6(A6));
    assert_eq!(
        peers[1].ip(),
        IpAddr::V6(A.to_ipv6_mapped()),
        "IPv4 peer as ::ffff:"
    );
}

#[test]
fn dual_stack_listener_echoes_v6_and_v4_inline() {
    dual_stack_echo(true);
}

#[test]
fn dual_stack_listener_echoes_v6_and_v4_embedded() {
    dual_stack_echo(false);
}

#[test]
fn v6only_listener_and_v4_listener_share_a_port() {
    let (a, b) = stacks_v6(false);
    let l6 = TcpListener::bind_with(&b, v6(Ipv6Addr::UNSPECIFIED, 9), 16, true).unwrap();
    let l4 = TcpListener::bind(&b, SocketAddr::new(B.into(), 9)).unwrap();
    assert!(TcpListener::bind(&b, v6(Ipv6Addr::UNSPECIFIED, 9)).is_err());
    let s6 = echo_server(b.clone(), l6, 1);
    let s4 = echo_server(b, l4, 1);
    let mut c6 = TcpStream::connect(&a, v6(B6, 9)).unwrap();
    round_trip(&a, &mut c6, 4096);
    let mut c4 = TcpStream::connect(&a, SocketAddr::new(B.into(), 9)).unwrap();
    round_trip(&a, &mut c4, 4096);
    assert_eq!(s6.join().unwrap()[0].ip(), IpAddr::V6(A6));
    assert_eq!(s4.join().unwrap()[0].ip(), IpAddr::V4(A));
}

#[test]
fn udp_over_ipv6_echo_and_max_payload() {
    let (a, b) = stacks_v6(false);
    let mut sb = UdpSocket::bind(&b, v6(Ipv6Addr::UNSPECIFIED, 53)).unwrap();
    let mut sa = UdpSocket::bind(&a, v6(Ipv6Addr::UNSPECIFIED, 0)).unwrap();
    assert_eq!(sa.max_payload(), 1500 - 48);
    let srv = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let (n, from) = sb.recv_from(&mut buf).unwrap();
        sb.send_to(&buf[..n], from).unwrap();
        from
    });
    sa.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(10);
    let (n, from) = loop {
        sa.send_to(b"over ipv6", v6(B6, 53)).unwrap();
        let t = Instant::now() + Duration::from_millis(100);
        let got = loop {
            match sa.recv_from(&mut buf) {
                Ok(r) => break Some(r),
                Err(_) if Instant::now() < t => std::thread::yield_now(),
                Err(_) => break None,
            }
        };
        if let Some(r) = got {
            break r;
        }
        assert!(Instant::now() < deadline, "no echo");
    };
    assert_eq!((&buf[..n], from), (&b"over ipv6"[..], v6(B6, 53)));
    assert_eq!(srv.join().unwrap().ip(), IpAddr::V6(A6));
}
