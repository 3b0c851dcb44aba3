//! A listener on several engines lets go of its port on all of them: after
//! it is dropped, the port can be listened on again at once, and a
//! connection to a port nobody listens on is refused whichever engine owns
//! its flow (embedded mode, two engines whose NIC spreads frames at random,
//! against a one-engine client over a clean `mem` wire).

use corestack::{TcpListener, TcpStream};
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddrV4};

#[test]
fn a_dropped_listener_frees_its_port_on_every_engine() {
    let (a, b) = testkit::mem_wire::stacks_with_engines(false, 1, 2);
    assert_eq!(b.engines(), 2);
    let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80);
    let l = TcpListener::bind(&b, any).expect("the first listener");
    drop(l);
    // Taken again at once: no engine still holds the port.
    let l = TcpListener::bind(&b, any).expect("the port again, at once");
    drop(l);
    // Sixteen connections from as many source ports: their flows fall on
    // both engines, and every one is refused.
    for i in 0..16 {
        let e = TcpStream::connect(&a, SocketAddrV4::new(testkit::mem_wire::B, 80))
            .err()
            .unwrap_or_else(|| panic!("connection {i} to a closed port was accepted"));
        assert_eq!(
            e.kind(),
            ErrorKind::ConnectionRefused,
            "connection {i}: {e}"
        );
    }
}
