//! SO_REUSEPORT through the shim: two TCP sockets of this process that set
//! it listen on one address and port, a third without it is refused, and
//! the peer's connections are split between the two.

use super::*;

#[test]
fn two_so_reuseport_listeners_share_a_port_and_its_connections() {
    let _g = serial();
    const PORT: u16 = 7300;
    let open = |reuseport: bool| {
        let l = socket(libc::SOCK_STREAM);
        if reuseport {
            assert_eq!(set_int(l.0, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1), 0);
        }
        let r = match bind(l.0, OURS, PORT) {
            0 => listen(l.0, 64),
            r => r,
        };
        (l, r)
    };
    let (a, ra) = open(true);
    let (b, rb) = open(true);
    assert_eq!(
        (ra, rb),
        (0, 0),
        "SO_REUSEPORT listeners: errno {}",
        errno()
    );
    let (_plain, r) = open(false);
    assert_eq!(
        (r, errno()),
        (-1, libc::EADDRINUSE),
        "a listener without it"
    );
    assert_eq!(get_int(a.0, libc::SOL_SOCKET, libc::SO_REUSEPORT), Ok(1));
    let peer = PEER_STACK.get().expect("the peer stack runs");
    let n = 32;
    let conns: Vec<TcpStream> = (0..n)
        .map(|i| {
            TcpStream::connect(peer, SocketAddrV4::new(OURS, PORT))
                .unwrap_or_else(|e| panic!("connection {i}: {e}"))
        })
        .collect();
    let mut taken = [Vec::new(), Vec::new()];
    let deadline = Instant::now() + Duration::from_secs(10);
    while taken[0].len() + taken[1].len() < n {
        assert!(
            Instant::now() < deadline,
            "accepted {:?} of {n}",
            taken.each_ref().map(Vec::len)
        );
        for (l, t) in [&a, &b].into_iter().zip(taken.iter_mut()) {
            if poll1(l.0, libc::POLLIN, 10).0 == 1 {
                // SAFETY: null address pointers: the peer's address is not asked for.
                let fd = unsafe {
                    crate::ffi::conn::accept(l.0, core::ptr::null_mut(), core::ptr::null_mut())
                };
                assert!(fd >= 0, "accept: errno {}", errno());
                t.push(Fd(fd));
            }
        }
    }
    assert!(
        taken.iter().all(|t| t.len() >= 4),
        "the connections were not split: {:?}",
        taken.each_ref().map(Vec::len)
    );
    drop(conns);
}
