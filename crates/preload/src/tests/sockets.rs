//! Socket calls: TCP options (review finding 3), UDP connect on a wildcard
//! socket (6), a stale table entry (7), SO_RCVTIMEO and a nonblocking
//! connect.

use super::*;

/// Finding 3: TCP_CORK holds what is written until it is cleared, then
/// everything leaves at once (no echo within 100 ms while corked, all four
/// bytes back after); it reads back as set. Before the fix setsockopt
/// answered ENOPROTOOPT (nginx's `tcp_nopush on`).
#[test]
fn tcp_cork_holds_writes_until_it_is_cleared() {
    let _g = serial();
    let c = echo_conn();
    let tcp = libc::IPPROTO_TCP;
    assert_eq!(set_int(c.0, tcp, libc::TCP_CORK, 1), 0, "errno {}", errno());
    assert_eq!(get_int(c.0, tcp, libc::TCP_CORK), Ok(1));
    assert_eq!(send(c.0, b"ab"), 2);
    assert_eq!(send(c.0, b"cd"), 2);
    assert_eq!(
        poll1(c.0, libc::POLLIN, 100),
        (0, 0),
        "corked bytes left (their echo came back)"
    );
    let t0 = Instant::now();
    assert_eq!(set_int(c.0, tcp, libc::TCP_CORK, 0), 0);
    assert_eq!(get_int(c.0, tcp, libc::TCP_CORK), Ok(0));
    assert_eq!(recv_within(c.0, 4, Duration::from_secs(3)), b"abcd");
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "uncorked late: {:?}",
        t0.elapsed()
    );
}

/// Finding 3: TCP_QUICKACK (reads 1 until set to 0), TCP_USER_TIMEOUT
/// (milliseconds, EINVAL below 0) on a connection and TCP_DEFER_ACCEPT on
/// a listener (read back rounded up to Linux's retransmission steps: 5 s
/// reads 7) are accepted and read back as Linux does; before the fix each
/// answered ENOPROTOOPT.
#[test]
fn tcp_quickack_user_timeout_and_defer_accept_are_accepted_and_read_back() {
    let _g = serial();
    let tcp = libc::IPPROTO_TCP;
    let c = echo_conn();
    assert_eq!(get_int(c.0, tcp, libc::TCP_QUICKACK), Ok(1));
    assert_eq!(
        set_int(c.0, tcp, libc::TCP_QUICKACK, 0),
        0,
        "errno {}",
        errno()
    );
    assert_eq!(get_int(c.0, tcp, libc::TCP_QUICKACK), Ok(0));
    assert_eq!(
        set_int(c.0, tcp, libc::TCP_USER_TIMEOUT, 5000),
        0,
        "errno {}",
        errno()
    );
    assert_eq!(get_int(c.0, tcp, libc::TCP_USER_TIMEOUT), Ok(5000));
    assert_eq!(set_int(c.0, tcp, libc::TCP_USER_TIMEOUT, -1), -1);
    assert_eq!(errno(), libc::EINVAL);
    // The connection still works after the options.
    assert_eq!(send(c.0, b"q"), 1);
    assert_eq!(recv_within(c.0, 1, Duration::from_secs(3)), b"q");

    let l = socket(libc::SOCK_STREAM);
    assert_eq!(bind(l.0, OURS, 7101), 0, "bind: errno {}", errno());
    assert_eq!(listen(l.0, 8), 0, "listen: errno {}", errno());
    assert!(
        crate::table::get(l.0).is_some(),
        "the listener is not corestack's"
    );
    assert_eq!(
        set_int(l.0, tcp, libc::TCP_DEFER_ACCEPT, 5),
        0,
        "errno {}",
        errno()
    );
    assert_eq!(get_int(l.0, tcp, libc::TCP_DEFER_ACCEPT), Ok(7));
}

/// A UDP echo on loopback (the kernel's) for `n` datagrams at most, 5 s
/// at most: its port and its thread.
fn loopback_udp_echo(n: usize) -> (u16, std::thread::JoinHandle<()>) {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("a loopback UDP socket");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    let port = s.local_addr().expect("its address").port();
    let t = std::thread::spawn(move || {
        let mut b = [0u8; 256];
        for _ in 0..n {
            let Ok((len, from)) = s.recv_from(&mut b) else {
                return;
            };
            let _ = s.send_to(&b[..len], from);
        }
    });
    (port, t)
}

/// Sends `msg` on `fd` (to `to`, or connected) and returns the echo and
/// where it came from, waiting 2 s at most.
fn udp_echo(fd: c_int, msg: &[u8], to: Option<(Ipv4Addr, u16)>) -> Option<(Vec<u8>, SocketAddrV4)> {
    let sent = match to {
        Some((ip, port)) => {
            let a = sin(ip, port);
            // SAFETY: `msg` and `a` are live for the lengths passed.
            unsafe {
                crate::ffi::data::sendto(
                    fd,
                    msg.as_ptr().cast(),
                    msg.len(),
                    0,
                    (&a as *const libc::sockaddr_in).cast(),
                    SIN_LEN,
                )
            }
        }
        None => send(fd, msg),
    };
    assert_eq!(sent, msg.len() as isize, "send: errno {}", errno());
    if poll1(fd, libc::POLLIN, 2000).0 != 1 {
        return None;
    }
    let mut b = [0u8; 256];
    let (n, from) = recvfrom(fd, &mut b, libc::MSG_DONTWAIT);
    (n >= 0).then(|| (b[..n as usize].to_vec(), from))
}

/// Finding 6: a UDP socket bound to 0.0.0.0 connects to a peer corestack
/// routes (before the fix: ENETUNREACH) and exchanges datagrams with it,
/// then connects to a loopback peer and goes through the kernel; an
/// auto-bound socket (its first sendto to the corestack peer) can sendto
/// loopback too.
#[test]
fn udp_connect_on_a_wildcard_socket_reaches_the_corestack_peer_and_loopback() {
    let _g = serial();
    let (lport, echo) = loopback_udp_echo(2);
    let peer = SocketAddrV4::new(PEER, ECHO_PORT);

    let u = socket(libc::SOCK_DGRAM);
    assert_eq!(
        bind(u.0, Ipv4Addr::UNSPECIFIED, 7201),
        0,
        "bind: errno {}",
        errno()
    );
    assert_eq!(
        connect(u.0, PEER, ECHO_PORT),
        0,
        "connect: errno {}",
        errno()
    );
    assert_eq!(peer_of(u.0), Some(peer));
    assert_eq!(
        udp_echo(u.0, b"to corestack", None),
        Some((b"to corestack".to_vec(), peer))
    );
    assert_eq!(
        connect(u.0, Ipv4Addr::LOCALHOST, lport),
        0,
        "connect lo: errno {}",
        errno()
    );
    let lo = SocketAddrV4::new(Ipv4Addr::LOCALHOST, lport);
    assert_eq!(
        udp_echo(u.0, b"to loopback", None),
        Some((b"to loopback".to_vec(), lo))
    );

    let a = socket(libc::SOCK_DGRAM);
    let first = udp_echo(a.0, b"auto", Some((PEER, ECHO_PORT)));
    assert_eq!(first, Some((b"auto".to_vec(), peer)));
    let second = udp_echo(a.0, b"auto lo", Some((Ipv4Addr::LOCALHOST, lport)));
    assert_eq!(second, Some((b"auto lo".to_vec(), lo)));
    echo.join().expect("the loopback echo");
}

/// Finding 7: a corestack socket closed behind the shim's back (a raw
/// `syscall(SYS_close)`) leaves a stale table entry; the pipe, then the
/// file, that the kernel gives the same number must be what they are:
/// poll and read go to them, not to the dead socket.
#[test]
fn a_number_closed_by_a_raw_syscall_then_reused_by_pipe_or_open_is_the_new_file() {
    let _g = serial();
    for how in ["pipe", "open"] {
        let c = echo_conn();
        let fd = c.0;
        core::mem::forget(c);
        // SAFETY: closes our own fd without the shim (as a program's raw
        // system call would); nothing uses the number until it is reused.
        assert_eq!(unsafe { libc::syscall(libc::SYS_close, fd) }, 0);
        let mut b = [0u8; 8];
        let reused = if how == "pipe" {
            let mut p = [-1 as c_int; 2];
            // SAFETY: `p` has room for two fds.
            assert_eq!(unsafe { crate::ffi::lifecycle::pipe(p.as_mut_ptr()) }, 0);
            let (r, w) = (Fd(p[0]), Fd(p[1]));
            assert_eq!(write(w.0, b"a"), 1);
            assert_eq!(poll1(r.0, libc::POLLIN, 1000), (1, libc::POLLIN), "{how}");
            assert_eq!(read(r.0, &mut b), 1);
            assert_eq!(b[0], b'a');
            r
        } else {
            let path = c"/proc/self/stat";
            // SAFETY: a NUL-terminated path; no mode needed.
            let f = Fd(unsafe { crate::ffi::lifecycle::open(path.as_ptr(), libc::O_RDONLY, 0) });
            assert!(f.0 >= 0, "open: errno {}", errno());
            assert_eq!(poll1(f.0, libc::POLLIN, 1000), (1, libc::POLLIN), "{how}");
            assert!(read(f.0, &mut b) > 0, "read: errno {}", errno());
            assert!(
                b[0].is_ascii_digit(),
                "/proc/self/stat starts with the pid: {b:?}"
            );
            f
        };
        assert_eq!(reused.0, fd, "{how} did not reuse the socket's number");
        assert!(
            crate::table::get(fd).is_none(),
            "{how}: the stale entry is still there"
        );
    }
}

/// SO_RCVTIMEO: a blocking recv with nothing to read fails with EAGAIN
/// once the timeout has passed (not before, and not much later); the
/// option reads back as set.
#[test]
fn so_rcvtimeo_gives_eagain_after_the_timeout() {
    let _g = serial();
    let c = echo_conn();
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 150_000,
    };
    let tv_len = core::mem::size_of::<libc::timeval>() as libc::socklen_t;
    // SAFETY: `tv` is a live timeval of the length passed.
    let r = unsafe {
        crate::ffi::conn::setsockopt(
            c.0,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            tv_len,
        )
    };
    assert_eq!(r, 0, "setsockopt: errno {}", errno());
    let mut back = libc::timeval {
        tv_sec: 9,
        tv_usec: 9,
    };
    let mut len = tv_len;
    // SAFETY: `back` is writable for `len` bytes.
    let r = unsafe {
        crate::ffi::conn::getsockopt(
            c.0,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&mut back as *mut libc::timeval).cast(),
            &mut len,
        )
    };
    assert_eq!((r, back.tv_sec, back.tv_usec), (0, 0, 150_000));
    let mut b = [0u8; 8];
    let t0 = Instant::now();
    let n = recv(c.0, &mut b, 0);
    let took = t0.elapsed();
    assert_eq!((n, errno()), (-1, libc::EAGAIN));
    assert!(
        took >= Duration::from_millis(150),
        "gave up early: {took:?}"
    );
    assert!(took < Duration::from_secs(1), "gave up late: {took:?}");
}

/// A nonblocking connect: EINPROGRESS, then POLLOUT, then SO_ERROR 0 and
/// a second connect EISCONN; to a port with no listener, POLLOUT with
/// POLLERR and SO_ERROR ECONNREFUSED.
#[test]
fn a_nonblocking_connect_goes_einprogress_pollout_so_error() {
    let _g = serial();
    let c = socket(libc::SOCK_STREAM | libc::SOCK_NONBLOCK);
    assert_eq!(connect(c.0, PEER, ECHO_PORT), -1);
    assert_eq!(errno(), libc::EINPROGRESS);
    let (n, rev) = poll1(c.0, libc::POLLOUT, 3000);
    assert_eq!((n, rev), (1, libc::POLLOUT));
    assert_eq!(get_int(c.0, libc::SOL_SOCKET, libc::SO_ERROR), Ok(0));
    assert_eq!(connect(c.0, PEER, ECHO_PORT), -1);
    assert_eq!(errno(), libc::EISCONN);
    assert_eq!(send(c.0, b"nb"), 2);
    assert_eq!(recv_within(c.0, 2, Duration::from_secs(3)), b"nb");

    let r = socket(libc::SOCK_STREAM | libc::SOCK_NONBLOCK);
    assert_eq!(connect(r.0, PEER, CLOSED_PORT), -1);
    assert_eq!(errno(), libc::EINPROGRESS);
    let (n, rev) = poll1(r.0, libc::POLLOUT, 3000);
    assert_eq!(n, 1);
    assert_ne!(rev & libc::POLLERR, 0, "revents {rev:#x}");
    assert_eq!(
        get_int(r.0, libc::SOL_SOCKET, libc::SO_ERROR),
        Ok(libc::ECONNREFUSED)
    );
}
