//! Socket calls: TCP options (review finding 3), SCM_RIGHTS (5), UDP
//! connect on a wildcard socket (6), a stale table entry (7), splice (11),
//! SO_RCVTIMEO and a nonblocking connect.

use super::*;

/// Finding 3: TCP_CORK holds what is written until it is cleared, then
/// everything leaves at once (no echo within 100 ms while corked, all four
/// bytes back after); it reads back as set. Before the fix setsockopt
/// answered ENOPROTOOPT (nginx's `tcp_nopush on`).
#[test]
fn tcp_cork_holds_writes_until_it_is_cleared() {
    let _g = serial();
    let c = echo_conn();
    // One echo first, then the delayed ACK of it: the peer has accepted,
    // and no output of the connection is due (the engine takes corked bytes
    // with any segment it sends, such as the ACK of received data).
    assert_eq!(send(c.0, b"x"), 1);
    assert_eq!(recv_within(c.0, 1, Duration::from_secs(3)), b"x");
    assert_eq!(
        poll1(c.0, libc::POLLIN, 300),
        (0, 0),
        "nothing more arrives"
    );
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
        crate::obj::get(l.0).is_some(),
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

/// Finding 6: a UDP socket bound to 0.0.0.0 connects to the corestack
/// peer and exchanges datagrams with it, then connects to a loopback peer,
/// which corestack does not route (before the fix: ENETUNREACH), and goes
/// through the kernel; an auto-bound socket (its first sendto to the
/// corestack peer) can sendto loopback too.
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
    // Finding 3's dual-socket case: an option for the kernel side only.
    assert_eq!(
        set_int(u.0, libc::SOL_SOCKET, libc::SO_BROADCAST, 1),
        0,
        "errno {}",
        errno()
    );
    assert_eq!(get_int(u.0, libc::SOL_SOCKET, libc::SO_BROADCAST), Ok(1));
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

/// Closes `fd` the way `how` names: a raw system call the shim cannot
/// see, `fclose` of an `fdopen`'d stream (glibc closes the fd inside), or
/// `close_range`.
fn close_as(how: &str, fd: c_int) {
    match how {
        "syscall" => {
            // SAFETY: closes our own fd without the shim (as a program's
            // raw system call would); nothing uses the number until reused.
            assert_eq!(unsafe { libc::syscall(libc::SYS_close, fd) }, 0);
        }
        "fclose" => {
            // SAFETY: a NUL-terminated mode; the stream takes over `fd`.
            let f = unsafe { libc::fdopen(fd, c"r+".as_ptr()) };
            assert!(!f.is_null(), "fdopen: errno {}", errno());
            // SAFETY: `f` is the stream just opened, closed once.
            assert_eq!(unsafe { crate::ffi::lifecycle::fclose(f) }, 0);
        }
        _ => {
            let n = fd as libc::c_uint;
            // SAFETY: no pointers.
            assert_eq!(unsafe { crate::ffi::lifecycle::close_range(n, n, 0) }, 0);
        }
    }
}

/// Finding 7: a corestack socket closed where the shim cannot see it (a
/// raw `syscall(SYS_close)`), or where glibc closes it inside (`fclose`
/// of an `fdopen`'d socket), or with `close_range`: the pipe, or the
/// file, that the kernel then gives the same number is what it is: poll
/// and read go to it, not to the dead socket, and no entry is left.
#[test]
fn a_number_closed_behind_the_shims_back_then_reused_by_pipe_or_open_is_the_new_file() {
    let _g = serial();
    let cases = [
        ("syscall", "pipe"),
        ("syscall", "open"),
        ("fclose", "pipe"),
        ("close_range", "pipe"),
    ];
    for (how, reuse) in cases {
        let c = echo_conn();
        let fd = c.0;
        core::mem::forget(c);
        close_as(how, fd);
        let mut b = [0u8; 8];
        let reused = if reuse == "pipe" {
            let mut p = [-1 as c_int; 2];
            // SAFETY: `p` has room for two fds.
            assert_eq!(unsafe { crate::ffi::lifecycle::pipe(p.as_mut_ptr()) }, 0);
            let (r, w) = (Fd(p[0]), Fd(p[1]));
            assert_eq!(write(w.0, b"a"), 1);
            assert_eq!(
                poll1(r.0, libc::POLLIN, 1000),
                (1, libc::POLLIN),
                "{how}, {reuse}"
            );
            assert_eq!(read(r.0, &mut b), 1, "{how}, {reuse}: errno {}", errno());
            assert_eq!(b[0], b'a');
            r
        } else {
            let path = c"/proc/self/stat";
            // SAFETY: a NUL-terminated path; no mode needed.
            let f = Fd(unsafe { crate::ffi::lifecycle::open(path.as_ptr(), libc::O_RDONLY, 0) });
            assert!(f.0 >= 0, "open: errno {}", errno());
            assert_eq!(
                poll1(f.0, libc::POLLIN, 1000),
                (1, libc::POLLIN),
                "{how}, {reuse}"
            );
            assert!(read(f.0, &mut b) > 0, "{how}, {reuse}: errno {}", errno());
            assert!(
                b[0].is_ascii_digit(),
                "/proc/self/stat starts with the pid: {b:?}"
            );
            f
        };
        assert_eq!(
            reused.0, fd,
            "{how}, {reuse}: the socket's number was not reused"
        );
        assert!(
            crate::obj::get(fd).is_none(),
            "{how}, {reuse}: the stale entry is still there"
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
    set_rcvtimeo(c.0, 0, 150_000);
    let mut back = libc::timeval {
        tv_sec: 9,
        tv_usec: 9,
    };
    let mut len = core::mem::size_of::<libc::timeval>() as libc::socklen_t;
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

/// Sends one byte on AF_UNIX socket `fd` with `passed` in SCM_RIGHTS
/// (sendmsg through the shim).
fn send_fd(fd: c_int, passed: c_int) -> isize {
    let mut byte = *b"f";
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; all zero is an empty message.
    let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE computes a size only.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(core::mem::size_of::<c_int>() as u32) } as _;
    // SAFETY: `msg` describes `control` (64 bytes, 8-aligned, room for one
    // header and one int): CMSG_FIRSTHDR and CMSG_DATA point inside it.
    unsafe {
        let h = libc::CMSG_FIRSTHDR(&msg);
        (*h).cmsg_level = libc::SOL_SOCKET;
        (*h).cmsg_type = libc::SCM_RIGHTS;
        (*h).cmsg_len = libc::CMSG_LEN(core::mem::size_of::<c_int>() as u32) as _;
        libc::CMSG_DATA(h).cast::<c_int>().write_unaligned(passed);
    }
    // SAFETY: `msg` and everything it points to are live.
    unsafe { crate::ffi::data::sendmsg(fd, &msg, 0) }
}

/// Finding 5, embedded mode: a corestack socket put in SCM_RIGHTS on an
/// ordinary AF_UNIX socket is refused with EOPNOTSUPP and nothing is sent
/// (before the fix the receiver got a bare placeholder eventfd and hung on
/// it); a kernel fd (a pipe's) still passes. Passing connections between
/// processes in service mode is checked by the namespace tests (scm.c).
#[test]
fn a_corestack_socket_in_scm_rights_is_refused_in_embedded_mode() {
    let _g = serial();
    let c = echo_conn();
    let mut sv = [-1 as c_int; 2];
    // SAFETY: `sv` has room for two fds.
    let r = unsafe {
        crate::ffi::lifecycle::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr())
    };
    assert_eq!(r, 0, "socketpair: errno {}", errno());
    let (a, b) = (Fd(sv[0]), Fd(sv[1]));
    assert_eq!(send_fd(a.0, c.0), -1);
    assert_eq!(errno(), libc::EOPNOTSUPP);
    let mut buf = [0u8; 4];
    assert_eq!(
        recv(b.0, &mut buf, libc::MSG_DONTWAIT),
        -1,
        "something was sent"
    );
    assert_eq!(errno(), libc::EAGAIN);

    let mut p = [-1 as c_int; 2];
    // SAFETY: `p` has room for two fds.
    assert_eq!(unsafe { crate::ffi::lifecycle::pipe(p.as_mut_ptr()) }, 0);
    let (pr, _pw) = (Fd(p[0]), Fd(p[1]));
    assert_eq!(send_fd(a.0, pr.0), 1, "a pipe's fd: errno {}", errno());
    assert_eq!(recv(b.0, &mut buf, libc::MSG_DONTWAIT), 1);
}

/// splice(2) through the shim.
fn splice(from: c_int, to: c_int, len: usize) -> isize {
    let null = core::ptr::null_mut();
    // SAFETY: no offsets (null), no other pointers.
    unsafe { crate::ffi::splice::splice(from, null, to, null, len, 0) }
}

/// Finding 11, splice: bytes go from a pipe into a corestack connection
/// and, echoed back, from the connection into another pipe, byte for
/// byte (before the fix splice went to the kernel, which has no
/// connection behind the fd, and failed: HAProxy's `option splice-*`).
#[test]
fn splice_moves_bytes_between_a_pipe_and_a_corestack_connection() {
    let _g = serial();
    let c = echo_conn();
    let mut p = [-1 as c_int; 2];
    let mut q = [-1 as c_int; 2];
    // SAFETY: `p` and `q` have room for two fds each.
    unsafe {
        assert_eq!(crate::ffi::lifecycle::pipe(p.as_mut_ptr()), 0);
        assert_eq!(crate::ffi::lifecycle::pipe(q.as_mut_ptr()), 0);
    }
    let (in_r, in_w, out_r, out_w) = (Fd(p[0]), Fd(p[1]), Fd(q[0]), Fd(q[1]));
    let msg = b"spliced through corestack";
    assert_eq!(write(in_w.0, msg), msg.len() as isize);
    assert_eq!(
        splice(in_r.0, c.0, 4096),
        msg.len() as isize,
        "errno {}",
        errno()
    );
    let mut moved = 0;
    let end = Instant::now() + Duration::from_secs(3);
    while moved < msg.len() && Instant::now() < end {
        assert_eq!(poll1(c.0, libc::POLLIN, 3000).0, 1, "no echo");
        let n = splice(c.0, out_w.0, 4096);
        assert!(n > 0, "splice to the pipe: {n}, errno {}", errno());
        moved += n as usize;
    }
    let mut b = [0u8; 64];
    assert_eq!(read(out_r.0, &mut b), msg.len() as isize);
    assert_eq!(&b[..msg.len()], msg);
}
