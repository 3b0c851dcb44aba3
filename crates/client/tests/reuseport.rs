//! SO_REUSEPORT listeners (`ListenOptions::reuseport`): several listeners
//! of one application on one port, each connection going to one of them.
//! Two stacks over a clean `mem` wire in embedded mode; the server has one
//! engine, or two whose NIC spreads frames at random.

use corestack::{Stack, TcpListener, TcpStream};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};
use testkit::mem_wire::{self, reuseport, stacks, stacks_with_engines, B};

const PORT: u16 = 80;

fn any() -> SocketAddrV4 {
    mem_wire::any(PORT)
}

/// Opens `n` connections from `a` to the port, takes them from whichever
/// of `listeners` each went to (within 10 s), echoes 64 bytes on each, and
/// returns, per listener, the engines of the connections it accepted.
fn spread(a: &Stack, listeners: &mut [TcpListener], n: usize) -> Vec<Vec<usize>> {
    let mut clients = Vec::with_capacity(n);
    for i in 0..n {
        let c = TcpStream::connect(a, SocketAddrV4::new(B, PORT))
            .unwrap_or_else(|e| panic!("connection {i}: {e}"));
        clients.push(c);
    }
    for l in listeners.iter_mut() {
        l.set_nonblocking(true).unwrap();
    }
    let mut got: Vec<Vec<TcpStream>> = listeners.iter().map(|_| Vec::new()).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.iter().map(Vec::len).sum::<usize>() < n {
        assert!(
            Instant::now() < deadline,
            "not every connection was accepted"
        );
        for (l, g) in listeners.iter_mut().zip(got.iter_mut()) {
            match l.accept() {
                Ok((s, _)) => g.push(s),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("accept: {e}"),
            }
        }
    }
    let mut servers: Vec<&mut TcpStream> = got.iter_mut().flatten().collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.write_all(&[i as u8; 64]).unwrap();
    }
    // Each server end echoes what it reads; each client reads its own back.
    for s in servers.iter_mut() {
        let mut buf = [0u8; 64];
        s.read_exact(&mut buf).unwrap();
        s.write_all(&buf).unwrap();
    }
    for (i, c) in clients.iter_mut().enumerate() {
        let mut buf = [0u8; 64];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(buf, [i as u8; 64], "connection {i} echoed another's bytes");
    }
    got.iter()
        .map(|g| g.iter().map(TcpStream::engine).collect())
        .collect()
}

#[test]
fn reuseport_listeners_share_a_port_and_split_its_connections() {
    let (a, b) = stacks(false);
    let first = TcpListener::bind_opts(&b, any(), reuseport()).expect("the first listener");
    let second = TcpListener::bind_opts(&b, any(), reuseport()).expect("a second, SO_REUSEPORT");
    // A listener without SO_REUSEPORT may not join them (Linux: EADDRINUSE).
    let e = TcpListener::bind(&b, any())
        .err()
        .expect("a plain listener is refused");
    assert_eq!(e.kind(), ErrorKind::AddrInUse);
    let mut ls = vec![first, second];
    let per = spread(&a, &mut ls, 64);
    for (k, p) in per.iter().enumerate() {
        assert!(
            p.len() >= 8,
            "listener {k} took {} of 64 connections",
            p.len()
        );
    }
    // One member goes: the other takes every new connection.
    ls.remove(0);
    let per = spread(&a, &mut ls, 16);
    assert_eq!(per[0].len(), 16);
}

#[test]
fn each_engines_connections_go_to_the_listener_its_thread_opened() {
    let (a, b) = stacks_with_engines(false, 1, 2);
    // Threads open listeners until each engine has one whose thread is on it.
    let mut by_engine: Vec<Option<TcpListener>> = vec![None, None];
    for _ in 0..16 {
        if by_engine.iter().all(Option::is_some) {
            break;
        }
        let b2 = b.clone();
        let (e, l) = std::thread::spawn(move || {
            let e = b2.current_engine();
            (
                e,
                TcpListener::bind_opts(&b2, any(), reuseport()).expect("a member"),
            )
        })
        .join()
        .unwrap();
        if by_engine[e].is_none() {
            by_engine[e] = Some(l);
        }
    }
    let mut ls: Vec<TcpListener> = by_engine
        .into_iter()
        .map(|l| l.expect("a listener per engine"))
        .collect();
    let per = spread(&a, &mut ls, 64);
    for (home, engines) in per.iter().enumerate() {
        assert!(
            !engines.is_empty(),
            "engine {home}'s listener took no connection"
        );
        assert!(
            engines.iter().all(|&e| e == home),
            "engine {home}'s listener took connections of engines {engines:?}"
        );
    }
    for (e, s) in b.engine_stats().iter().enumerate() {
        assert_eq!(s.owner_violations, 0, "engine {e}");
    }
}
