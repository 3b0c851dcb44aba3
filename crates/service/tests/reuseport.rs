//! SO_REUSEPORT in service mode: an application's listeners that set it
//! share a port and split its connections; another application may not
//! join them (its listener is refused with EADDRINUSE, as Linux refuses a
//! socket of another user).

mod common;

use common::*;
use corestack::{ListenOptions, TcpListener, TcpStream};
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

#[test]
fn one_applications_reuseport_listeners_share_a_port_and_others_are_refused() {
    let d = Daemon::start("reuseport");
    let app = d.app();
    let port = 7200;
    let opts = ListenOptions {
        reuseport: true,
        ..ListenOptions::default()
    };
    let mut ls = [
        TcpListener::bind_opts(&app, any(port), opts).expect("the first listener"),
        TcpListener::bind_opts(&app, any(port), opts).expect("a second, SO_REUSEPORT"),
    ];
    let other = d.app();
    let e = TcpListener::bind_opts(&other, any(port), opts)
        .err()
        .expect("another application's listener is refused");
    assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
    let n = 32;
    let conns: Vec<TcpStream> = (0..n)
        .map(|i| {
            TcpStream::connect(&d.peer, SocketAddr::from(addr(DAEMON_IP, port)))
                .unwrap_or_else(|e| panic!("connection {i}: {e}"))
        })
        .collect();
    for l in ls.iter_mut() {
        l.set_nonblocking(true).unwrap();
    }
    let mut taken = [0usize; 2];
    let deadline = Instant::now() + Duration::from_secs(10);
    while taken.iter().sum::<usize>() < n {
        assert!(
            Instant::now() < deadline,
            "accepted {taken:?} of {n}; log:\n{}",
            d.log()
        );
        for (l, t) in ls.iter_mut().zip(taken.iter_mut()) {
            match l.accept() {
                Ok(_) => *t += 1,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("accept: {e}"),
            }
        }
    }
    assert!(taken.iter().all(|&t| t >= 4), "not split: {taken:?}");
    drop(conns);
}
