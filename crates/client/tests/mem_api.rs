//! The socket API end to end: two stacks joined by a clean `mem` wire, each
//! driven by its own thread in inline mode (and one test in embedded mode).

use corestack::{Stack, TcpListener, TcpStream, UdpSocket};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4};
use std::time::{Duration, Instant};
use testkit::mem_wire::{stacks, A, B};

fn addr(ip: Ipv4Addr, port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(ip, port)
}

/// Runs `server` on its own thread (it drives stack b) while the caller
/// drives stack a.
fn with_server<T: Send + 'static>(
    b: Stack,
    server: impl FnOnce(Stack) -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || server(b))
}

fn echo_round_trip(inline: bool) {
    let (a, b) = stacks(inline);
    let mut l = TcpListener::bind(&b, addr(Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    let srv = with_server(b, move |_b| {
        let (mut s, peer) = l.accept().unwrap();
        assert_eq!(peer.ip(), std::net::IpAddr::V4(A));
        let mut buf = vec![0u8; 65536];
        let mut total = 0;
        loop {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            s.write_all(&buf[..n]).unwrap();
            total += n;
        }
        s.shutdown(Shutdown::Write).unwrap();
        total
    });
    let mut c = TcpStream::connect(&a, addr(B, 7)).unwrap();
    assert_eq!(c.peer_addr().unwrap(), addr(B, 7).into());
    let data: Vec<u8> = (0..(1usize << 20)).map(|i| (i * 7 % 251) as u8).collect();
    let mut back = Vec::with_capacity(data.len());
    let mut sent = 0;
    let mut buf = vec![0u8; 65536];
    c.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while back.len() < data.len() {
        assert!(
            Instant::now() < deadline,
            "echo stalled at {} of {}",
            back.len(),
            data.len()
        );
        if sent < data.len() {
            match c.write(&data[sent..(sent + 16384).min(data.len())]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("write: {e}"),
            }
        }
        match c.read(&mut buf) {
            Ok(0) => panic!("early EOF"),
            Ok(n) => back.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => a.poll(Some(Duration::from_millis(1))),
            Err(e) => panic!("read: {e}"),
        }
    }
    assert!(back == data, "echoed bytes differ");
    c.set_nonblocking(false).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(c.read(&mut buf).unwrap(), 0, "EOF after the server's FIN");
    assert_eq!(srv.join().unwrap(), data.len());
}

#[test]
fn established_echo_1mib_inline_is_byte_exact() {
    echo_round_trip(true);
}

#[test]
fn established_echo_1mib_embedded_is_byte_exact() {
    echo_round_trip(false);
}

#[test]
fn connect_to_closed_port_gives_econnrefused() {
    let (a, b) = stacks(true);
    // Drive b so it answers the SYN with RST.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let t = std::thread::spawn(move || {
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            b.poll(Some(Duration::from_millis(1)));
        }
    });
    let e = TcpStream::connect(&a, addr(B, 9))
        .err()
        .expect("connect must fail");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    t.join().unwrap();
    assert_eq!(e.raw_os_error(), Some(appif::errno::ECONNREFUSED), "{e}");
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn listen_twice_on_one_port_gives_eaddrinuse() {
    let (_a, b) = stacks(true);
    let _l = TcpListener::bind(&b, addr(Ipv4Addr::UNSPECIFIED, 80)).unwrap();
    let e = TcpListener::bind(&b, addr(Ipv4Addr::UNSPECIFIED, 80))
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::AddrInUse);
    let _u = UdpSocket::bind(&b, addr(Ipv4Addr::UNSPECIFIED, 80)).unwrap();
    let e = UdpSocket::bind(&b, addr(Ipv4Addr::UNSPECIFIED, 80))
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::AddrInUse);
}

#[test]
fn nonblocking_accept_without_peer_would_block() {
    let (_a, b) = stacks(true);
    let mut l = TcpListener::bind(&b, addr(Ipv4Addr::UNSPECIFIED, 81)).unwrap();
    l.set_nonblocking(true).unwrap();
    assert_eq!(l.accept().err().unwrap().kind(), ErrorKind::WouldBlock);
}

#[test]
fn udp_datagrams_echo_with_source_address() {
    let (a, b) = stacks(true);
    let mut su = UdpSocket::bind(&b, addr(Ipv4Addr::UNSPECIFIED, 53)).unwrap();
    let srv = with_server(b, move |_b| {
        let mut buf = [0u8; 2048];
        for _ in 0..10 {
            let (n, from) = su.recv_from(&mut buf).unwrap();
            su.send_to(&buf[..n], from).unwrap();
        }
    });
    let mut cu = UdpSocket::bind(&a, addr(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
    let local = cu.local_addr().unwrap();
    assert_eq!(local.ip(), std::net::IpAddr::V4(A));
    assert_ne!(local.port(), 0);
    let mut buf = [0u8; 2048];
    for i in 0..10u8 {
        let msg = vec![i; 100 + usize::from(i) * 100];
        cu.send_to(&msg, addr(B, 53)).unwrap();
        let (n, from) = cu.recv_from(&mut buf).unwrap();
        assert_eq!(from, addr(B, 53).into());
        assert_eq!(&buf[..n], &msg[..]);
    }
    srv.join().unwrap();
    let e = cu.send_to(&[0u8; 1500], addr(B, 53)).err().unwrap();
    assert_eq!(
        e.raw_os_error(),
        Some(90),
        "EMSGSIZE for a datagram over the MTU"
    );
}

#[test]
fn peer_closes_with_unread_data_reader_gets_econnreset() {
    let (a, b) = stacks(true);
    let mut l = TcpListener::bind(&b, addr(Ipv4Addr::UNSPECIFIED, 82)).unwrap();
    let srv = with_server(b, move |b| {
        let (s, _) = l.accept().unwrap();
        // Wait until the client's bytes arrived, then close without reading: RST.
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.available() == 0 && Instant::now() < deadline {
            b.poll(Some(Duration::from_millis(1)));
        }
        drop(s);
        for _ in 0..100 {
            b.poll(Some(Duration::from_millis(1)));
        }
    });
    let mut c = TcpStream::connect(&a, addr(B, 82)).unwrap();
    c.write_all(b"unread").unwrap();
    let mut buf = [0u8; 16];
    let e = c.read(&mut buf).expect_err("read must fail with a reset");
    assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
    srv.join().unwrap();
}

/// One server thread with a `Poller` serves `CONNS` clients at once: every
/// client's bytes come back, and the poller reports each socket only while
/// it is ready.
fn poller_serves_many(inline: bool) {
    let (a, b) = stacks(inline);
    poller_serves(a, b, 64);
}

/// A server on `b` serving `CONNS` connections from `a` with one thread and
/// a `Poller`, each echoing 32 KiB, checked byte by byte.
fn poller_serves(a: Stack, b: Stack, conns: usize) {
    use corestack::{Interest, Poller};
    use std::collections::HashMap;
    const BYTES: usize = 32 * 1024;
    #[allow(non_snake_case)]
    let CONNS = conns;
    let mut l = TcpListener::bind(&b, addr(Ipv4Addr::UNSPECIFIED, 9)).unwrap();
    l.set_nonblocking(true).unwrap();
    let srv = with_server(b.clone(), move |b| {
        let mut p = Poller::new(&b);
        p.register(&l, 0, Interest::READABLE).unwrap();
        assert!(
            p.register(&l, 0, Interest::READABLE).is_err(),
            "token 0 twice"
        );
        let mut conns: HashMap<u64, (TcpStream, Vec<u8>)> = HashMap::new();
        let mut events = Vec::new();
        let (mut next, mut closed) = (1u64, 0usize);
        let mut buf = vec![0u8; 16384];
        let deadline = Instant::now() + Duration::from_secs(60);
        while closed < CONNS {
            assert!(Instant::now() < deadline, "server stalled: {closed} closed");
            p.wait(&mut events, 256, Some(Duration::from_millis(100)))
                .unwrap();
            for ev in events.clone() {
                if ev.token == 0 {
                    while let Ok((mut s, _)) = l.accept() {
                        s.set_nonblocking(true).unwrap();
                        p.register(&s, next, Interest::READABLE).unwrap();
                        conns.insert(next, (s, Vec::new()));
                        next += 1;
                    }
                    continue;
                }
                let Some((s, pending)) = conns.get_mut(&ev.token) else {
                    panic!("event for unknown token {}", ev.token);
                };
                if ev.readable {
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) => {
                                p.deregister(ev.token).unwrap();
                                conns.remove(&ev.token);
                                closed += 1;
                                break;
                            }
                            Ok(n) => pending.extend_from_slice(&buf[..n]),
                            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                            Err(e) => panic!("server read: {e}"),
                        }
                    }
                }
                if let Some((s, pending)) = conns.get_mut(&ev.token) {
                    match s.write(pending) {
                        Ok(n) => drop(pending.drain(..n)),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(e) => panic!("server write: {e}"),
                    }
                    let want = if pending.is_empty() {
                        Interest::READABLE
                    } else {
                        Interest::BOTH
                    };
                    p.reregister(ev.token, want).unwrap();
                }
            }
        }
        assert!(p.deregister(12345).is_err(), "unknown token");
        assert_eq!(p.len(), 1, "only the listener is left");
        closed
    });
    let mut clients: Vec<(TcpStream, usize, Vec<u8>)> = (0..CONNS)
        .map(|_| {
            let mut c = TcpStream::connect(&a, addr(B, 9)).unwrap();
            c.set_nonblocking(true).unwrap();
            (c, 0, Vec::new())
        })
        .collect();
    let data = |i: usize, k: usize| ((i * 31 + k * 7) % 251) as u8;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut buf = vec![0u8; 16384];
    while clients.iter().any(|(_, _, got)| got.len() < BYTES) {
        assert!(Instant::now() < deadline, "clients stalled");
        for (i, (c, sent, got)) in clients.iter_mut().enumerate() {
            if *sent < BYTES {
                let chunk: Vec<u8> = (*sent..(*sent + 4096).min(BYTES))
                    .map(|k| data(i, k))
                    .collect();
                if let Ok(n) = c.write(&chunk) {
                    *sent += n;
                }
            }
            match c.read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("client read: {e}"),
            }
        }
        a.poll(Some(Duration::from_micros(200)));
    }
    for (i, (c, _, got)) in clients.iter_mut().enumerate() {
        assert_eq!(got.len(), BYTES);
        assert!(got.iter().enumerate().all(|(k, b)| *b == data(i, k)));
        c.shutdown(Shutdown::Write).unwrap();
    }
    // Inline mode: stack a runs only while this thread polls it.
    while !srv.is_finished() {
        a.poll(Some(Duration::from_millis(1)));
    }
    let closed = srv.join().unwrap();
    assert_eq!(closed, CONNS);
    drop(b);
}

/// A server on two engines (b) whose NIC cannot steer (random queue per
/// frame), so its engines hand frames to each other, and a client on one
/// engine (a): every connection echoes byte-exact, both of b's engines own
/// some, and no TCP input runs off its owner.
fn two_engines_serve(inline: bool) {
    let (a, b) = testkit::mem_wire::stacks_with_engines(inline, 1, 2);
    assert_eq!(b.engines(), 2);
    poller_serves(a.clone(), b.clone(), 256);
    let st = b.engine_stats();
    assert_eq!(st.len(), 2);
    for (e, s) in st.iter().enumerate() {
        assert_eq!(s.owner_violations, 0, "engine {e}");
        assert_eq!(s.handoff_dropped, 0, "engine {e}");
        assert!(s.tcp_passive_opens > 0, "engine {e} owns no connection");
    }
    let b_total = b.stats();
    assert!(b_total.rx_foreign > 0 && b_total.handoff_rx > 0);
}

#[test]
fn two_engines_serve_256_connections_inline() {
    two_engines_serve(true);
}

#[test]
fn two_engines_serve_256_connections_embedded() {
    two_engines_serve(false);
}

#[test]
fn poller_one_thread_serves_64_connections_inline() {
    poller_serves_many(true);
}

#[test]
fn poller_one_thread_serves_64_connections_embedded() {
    poller_serves_many(false);
}

/// A wait looks at the sockets that changed, not at every registered one:
/// with 1000 idle connections registered (200 inline, where each blocking
/// connect waits for the server thread to run its engine), each wait that
/// reports the one connection that received a byte looks at a handful of
/// sockets (it looked at all of them on every wait before the ready list).
fn poller_looks_only_at_sockets_that_changed(inline: bool) {
    use corestack::{Interest, Poller};
    let conns: usize = if inline { 200 } else { 1000 };
    let (a, b) = stacks(inline);
    let mut l = TcpListener::bind(&b, addr(Ipv4Addr::UNSPECIFIED, 9)).unwrap();
    let srv = with_server(b.clone(), move |_| {
        (0..conns)
            .map(|_| l.accept().unwrap().0)
            .collect::<Vec<_>>()
    });
    let mut clients: Vec<TcpStream> = (0..conns)
        .map(|_| TcpStream::connect(&a, addr(B, 9)).unwrap())
        .collect();
    // Inline mode: stack a runs only while a thread polls it.
    while !srv.is_finished() {
        a.poll(Some(Duration::from_millis(1)));
    }
    let mut servers = srv.join().unwrap();
    let mut p = Poller::new(&b);
    for (i, s) in servers.iter_mut().enumerate() {
        s.set_nonblocking(true).unwrap();
        p.register(s, i as u64, Interest::READABLE).unwrap();
    }
    let mut events = Vec::new();
    assert_eq!(p.wait(&mut events, 64, Some(Duration::ZERO)).unwrap(), 0);
    let before = p.looks();
    let mut buf = [0u8; 16];
    const ROUNDS: usize = 50;
    for r in 0..ROUNDS {
        let k = (r * 37) % conns;
        clients[k].write_all(&[r as u8]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(Instant::now() < deadline, "round {r}: no event");
            a.poll(Some(Duration::ZERO));
            if p.wait(&mut events, 64, Some(Duration::from_millis(1)))
                .unwrap()
                > 0
            {
                break;
            }
        }
        assert_eq!(events.len(), 1, "round {r}: {events:?}");
        assert_eq!(events[0].token, k as u64);
        assert_eq!(servers[k].read(&mut buf).unwrap(), 1);
        assert_eq!(buf[0], r as u8);
    }
    let per_wait = (p.looks() - before) as f64 / ROUNDS as f64;
    assert!(
        per_wait <= 4.0,
        "{per_wait} sockets looked at per reported event, of {conns} registered"
    );
}

#[test]
fn poller_looks_only_at_sockets_that_changed_inline() {
    poller_looks_only_at_sockets_that_changed(true);
}

#[test]
fn poller_looks_only_at_sockets_that_changed_embedded() {
    poller_looks_only_at_sockets_that_changed(false);
}
