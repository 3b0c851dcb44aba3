//! The C API from Rust, without a network: the library's stack runs on one
//! end of an in-memory wire (embedded mode), a Rust peer stack on the other
//! (inline mode, driven by the peer's thread). The tests share the
//! process's one stack, so they run one at a time (a lock).

use crate::*;
use corestack::{Stack, TcpStream, UdpSocket};
use nic::impair::Impairments;
use std::ffi::{c_int, c_void, CStr};
use std::io::{Read, Write};

use std::net::{Ipv4Addr, SocketAddrV4};
use std::ptr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the suite lock; stops the library's stack when dropped.
struct Lib {
    _lock: MutexGuard<'static, ()>,
}

impl Drop for Lib {
    fn drop(&mut self) {
        init::cs_fini();
    }
}

/// The library's stack on a fresh mem wire, and the peer's.
fn lib_and_peer() -> (Lib, Stack) {
    let lock = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    init::cs_fini();
    let (pa, pb) = nic::mem::pair(Impairments::none(), Impairments::none(), 1);
    let peer = Stack::builder()
        .mem_port(pa)
        .ip(PEER, 24)
        .inline(true)
        .start()
        .unwrap();
    let ours = Stack::builder().mem_port(pb).ip(OURS, 24).start().unwrap();
    table::install(ours);
    (Lib { _lock: lock }, peer)
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn last_error() -> String {
    // SAFETY: cs_last_error returns a NUL-terminated string that lives
    // until this thread's next failed call; it is copied at once.
    unsafe { CStr::from_ptr(init::cs_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: all-zero sockaddr_in is valid.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    // SAFETY: `sa` is a live, writable sockaddr_in.
    unsafe { ffi::write_addr(&mut sa, a.into()) };
    sa
}

fn listener(port: u16) -> c_int {
    let sd = socket::cs_socket(CS_SOCK_STREAM);
    assert!(sd >= 0, "cs_socket: {}", last_error());
    let a = sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port));
    // SAFETY: `a` is a live sockaddr_in.
    assert_eq!(unsafe { socket::cs_bind(sd, &a) }, 0, "{}", last_error());
    assert_eq!(socket::cs_listen(sd, 16), 0, "{}", last_error());
    sd
}

/// Connects to our port `port`, sends `data`, then FIN, and returns what
/// comes back until the server's FIN. Non-blocking, so one thread sends and
/// receives; the peer's inline engine runs when neither can go on.
fn exchange(peer: &Stack, port: u16, data: &[u8]) -> Vec<u8> {
    let mut c = TcpStream::connect(peer, SocketAddrV4::new(OURS, port)).unwrap();
    c.set_nonblocking(true).unwrap();
    let mut back = Vec::with_capacity(data.len());
    let mut buf = vec![0u8; 65536];
    let mut sent = 0;
    let mut fin = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "stalled: sent {sent}, back {}",
            back.len()
        );
        let mut progress = false;
        if sent < data.len() {
            match c.write(&data[sent..]) {
                Ok(n) => {
                    sent += n;
                    progress = n > 0;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("write: {e}"),
            }
        } else if !fin {
            c.shutdown(std::net::Shutdown::Write).unwrap();
            fin = true;
        }
        match c.read(&mut buf) {
            Ok(0) => return back,
            Ok(n) => {
                back.extend_from_slice(&buf[..n]);
                progress = true;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("read: {e}"),
        }
        if !progress {
            peer.poll(Some(Duration::from_millis(1)));
        }
    }
}

#[test]
fn unknown_descriptor_fails_with_ebadf() {
    let (_lib, _peer) = lib_and_peer();
    let mut buf = [0u8; 8];
    let mut evs = [CsEvent::default(); 4];
    for sd in [-1, 0, 7, 1 << 20] {
        // SAFETY: `buf` and `evs` are live buffers of the lengths given.
        unsafe {
            assert_eq!(socket::cs_send(sd, buf.as_ptr().cast(), 8, 0), -1);
            assert_eq!(errno(), libc::EBADF);
            assert_eq!(socket::cs_recv(sd, buf.as_mut_ptr().cast(), 8, 0), -1);
            assert_eq!(errno(), libc::EBADF);
            assert_eq!(poll::cs_poller_wait(sd, evs.as_mut_ptr(), 4, 0), -1);
            assert_eq!(errno(), libc::EBADF);
        }
        assert_eq!(socket::cs_close(sd), -1);
        assert_eq!(errno(), libc::EBADF);
        assert_eq!(socket::cs_listen(sd, 1), -1);
        assert_eq!(errno(), libc::EBADF);
    }
    let sd = socket::cs_socket(CS_SOCK_DGRAM);
    assert_eq!(socket::cs_close(sd), 0);
    assert_eq!(socket::cs_close(sd), -1, "closed twice");
    assert_eq!(errno(), libc::EBADF);
}

#[test]
fn calls_before_init_fail_with_enetdown_saying_so() {
    let _lock = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    init::cs_fini();
    assert_eq!(socket::cs_socket(CS_SOCK_STREAM), -1);
    assert_eq!(errno(), libc::ENETDOWN);
    assert!(last_error().contains("cs_init"), "{}", last_error());
    assert_eq!(poll::cs_poller_create(), -1);
    assert_eq!(errno(), libc::ENETDOWN);
}

#[test]
fn null_pointers_fail_with_efault_and_bad_arguments_with_einval() {
    let (_lib, _peer) = lib_and_peer();
    let sd = socket::cs_socket(CS_SOCK_STREAM);
    let pd = poll::cs_poller_create();
    assert!(sd >= 0 && pd >= 0);
    let mut evs = [CsEvent::default(); 2];
    // SAFETY: every non-null pointer below is a live buffer of the length
    // given; the null ones are what is tested.
    unsafe {
        assert_eq!(socket::cs_bind(sd, ptr::null()), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(socket::cs_connect(sd, ptr::null()), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(socket::cs_getsockname(sd, ptr::null_mut()), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(poll::cs_poller_wait(pd, ptr::null_mut(), 2, 0), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(poll::cs_poller_wait(pd, evs.as_mut_ptr(), 0, 0), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(poll::cs_poller_wait(sd, evs.as_mut_ptr(), 2, 0), -1);
        assert_eq!(errno(), libc::EINVAL, "a socket is not a poller");
        let l = listener(0);
        let mut a = sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        assert_eq!(socket::cs_getsockname(l, &mut a), 0);
        assert_ne!(a.sin_port, 0, "listen without a port picks one");
        let c = socket::cs_socket(CS_SOCK_STREAM);
        // A send of 0 bytes from null is fine on a connected socket; on
        // this one it is ENOTCONN, and null with a length is EFAULT.
        assert_eq!(socket::cs_send(c, ptr::null(), 4, 0), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(socket::cs_send(c, ptr::null(), 0, 0), -1);
        assert_eq!(errno(), libc::ENOTCONN);
        assert_eq!(socket::cs_recv(l, ptr::null_mut::<c_void>(), 4, 0), -1);
        assert_eq!(errno(), libc::EFAULT);
    }
    assert_eq!(socket::cs_socket(99), -1);
    assert_eq!(errno(), libc::EINVAL);
    assert_eq!(poll::cs_poller_ctl(pd, 99, sd, CS_POLLIN, 0), -1);
    assert_eq!(errno(), libc::EINVAL);
    assert_eq!(poll::cs_poller_ctl(pd, CS_POLL_ADD, sd, CS_POLLIN, 0), -1);
    assert_eq!(errno(), libc::EINVAL, "nothing to watch before listen");
    assert_eq!(poll::cs_poller_ctl(pd, CS_POLL_ADD, pd, CS_POLLIN, 0), -1);
    assert_eq!(errno(), libc::EINVAL);
    assert_eq!(poll::cs_poller_close(sd), -1);
    assert_eq!(errno(), libc::EINVAL);
    assert_eq!(poll::cs_poller_close(pd), 0);
}

#[test]
fn blocking_accept_recv_send_echo_peer_bytes() {
    let (_lib, peer) = lib_and_peer();
    let l = listener(7);
    let client = std::thread::spawn(move || {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let back = exchange(&peer, 7, &data);
        assert!(
            back == data,
            "echo differs: {} of {} bytes",
            back.len(),
            data.len()
        );
    });
    let mut peer_addr = sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
    // SAFETY: `peer_addr` is a live, writable sockaddr_in.
    let s = unsafe { socket::cs_accept(l, &mut peer_addr) };
    assert!(s >= 0, "cs_accept: {}", last_error());
    assert_eq!(u32::from_be(peer_addr.sin_addr.s_addr), u32::from(PEER));
    let mut buf = vec![0u8; 16384];
    loop {
        // SAFETY: `buf` is a live buffer of its length.
        let n = unsafe { socket::cs_recv(s, buf.as_mut_ptr().cast(), buf.len(), 0) };
        assert!(n >= 0, "cs_recv: {}", last_error());
        if n == 0 {
            break;
        }
        // SAFETY: the first `n` bytes of `buf` are live.
        let m = unsafe { socket::cs_send(s, buf.as_ptr().cast(), n as usize, 0) };
        assert_eq!(m, n, "a blocking send queues everything: {}", last_error());
    }
    assert_eq!(socket::cs_shutdown(s, CS_SHUT_WR), 0);
    // SAFETY: `buf` is a live buffer.
    assert_eq!(unsafe { socket::cs_send(s, buf.as_ptr().cast(), 1, 0) }, -1);
    assert_eq!(errno(), libc::EPIPE);
    client.join().unwrap();
    assert_eq!(socket::cs_close(s), 0);
    assert_eq!(socket::cs_close(l), 0);
}

/// A single-threaded poller-driven echo of `conns` peer connections.
#[test]
fn poller_echo_serves_concurrent_connections_byte_exact() {
    const CONNS: usize = 4;
    const BYTES: usize = 300_000;
    let (_lib, peer) = lib_and_peer();
    let l = listener(9);
    assert_eq!(socket::cs_set_nonblocking(l, 1), 0);
    let pd = poll::cs_poller_create();
    assert_eq!(
        poll::cs_poller_ctl(pd, CS_POLL_ADD, l, CS_POLLIN, u64::MAX),
        0
    );
    assert_eq!(poll::cs_poller_ctl(pd, CS_POLL_ADD, l, CS_POLLIN, 0), -1);
    assert_eq!(errno(), libc::EEXIST);
    let clients: Vec<_> = (0..CONNS)
        .map(|k| {
            let peer = peer.clone();
            std::thread::spawn(move || {
                let data: Vec<u8> = (0..BYTES).map(|i| ((i * 7 + k) % 253) as u8).collect();
                let back = exchange(&peer, 9, &data);
                assert!(
                    back == data,
                    "conn {k}: echo differs ({} bytes back)",
                    back.len()
                );
            })
        })
        .collect();
    let mut evs = [CsEvent::default(); 16];
    let mut buf = vec![0u8; 65536];
    let mut closed = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while closed < CONNS {
        assert!(Instant::now() < deadline, "echo stalled, {closed} closed");
        // SAFETY: `evs` is a live array of 16 records.
        let n = unsafe { poll::cs_poller_wait(pd, evs.as_mut_ptr(), 16, 100) };
        assert!(n >= 0, "cs_poller_wait: {}", last_error());
        for ev in &evs[..n as usize] {
            if ev.data == u64::MAX {
                loop {
                    // SAFETY: null peer is allowed.
                    let s = unsafe { socket::cs_accept(l, ptr::null_mut()) };
                    if s < 0 {
                        assert_eq!(errno(), libc::EAGAIN, "{}", last_error());
                        break;
                    }
                    assert_eq!(socket::cs_set_nonblocking(s, 0), 0);
                    assert_eq!(
                        poll::cs_poller_ctl(pd, CS_POLL_ADD, s, CS_POLLIN, s as u64),
                        0
                    );
                }
                continue;
            }
            let s = ev.data as c_int;
            // The socket is blocking: a read event means it will not wait.
            // SAFETY: `buf` is a live buffer of its length.
            let got = unsafe { socket::cs_recv(s, buf.as_mut_ptr().cast(), buf.len(), 0) };
            assert!(got >= 0, "cs_recv: {}", last_error());
            if got == 0 {
                assert_eq!(socket::cs_close(s), 0);
                closed += 1;
                continue;
            }
            // SAFETY: the first `got` bytes of `buf` are live.
            let sent = unsafe { socket::cs_send(s, buf.as_ptr().cast(), got as usize, 0) };
            assert_eq!(sent, got, "cs_send: {}", last_error());
        }
    }
    for c in clients {
        c.join().unwrap();
    }
    // SAFETY: `evs` is a live array of 16 events.
    let n = unsafe { poll::cs_poller_wait(pd, evs.as_mut_ptr(), 16, 0) };
    assert_eq!(n, 0);
    assert_eq!(poll::cs_poller_close(pd), 0);
}

#[test]
fn closed_descriptor_leaves_every_poller_and_its_number_is_reused() {
    let (_lib, peer) = lib_and_peer();
    let l = listener(11);
    let pd = poll::cs_poller_create();
    assert_eq!(poll::cs_poller_ctl(pd, CS_POLL_ADD, l, CS_POLLIN, 1), 0);
    let _c = TcpStream::connect(&peer, SocketAddrV4::new(OURS, 11)).unwrap();
    let mut evs = [CsEvent::default(); 4];
    // SAFETY: `evs` is a live array of 4 records.
    let n = unsafe { poll::cs_poller_wait(pd, evs.as_mut_ptr(), 4, 5000) };
    assert_eq!(n, 1, "{}", last_error());
    assert_eq!(evs[0].data, 1);
    assert_ne!(evs[0].events & CS_POLLIN, 0);
    assert_eq!(socket::cs_close(l), 0);
    let again = listener(12);
    assert_eq!(again, l, "the lowest free descriptor is reused");
    // SAFETY: `evs` is a live array of 4 records.
    let n = unsafe { poll::cs_poller_wait(pd, evs.as_mut_ptr(), 4, 50) };
    assert_eq!(n, 0, "an event for a closed descriptor: {:?}", &evs[..1]);
    assert_eq!(poll::cs_poller_ctl(pd, CS_POLL_DEL, again, 0, 0), -1);
    assert_eq!(errno(), libc::ENOENT);
}

#[test]
fn udp_sendto_recvfrom_round_trip_and_unbound_recv_is_einval() {
    let (_lib, peer) = lib_and_peer();
    let mut p = UdpSocket::bind(&peer, SocketAddrV4::new(PEER, 5000)).unwrap();
    let u = socket::cs_socket(CS_SOCK_DGRAM);
    let mut buf = [0u8; 64];
    // SAFETY: `buf` is a live buffer of 64 bytes.
    let n = unsafe { socket::cs_recv(u, buf.as_mut_ptr().cast(), 64, 0) };
    assert_eq!(n, -1);
    assert_eq!(errno(), libc::EINVAL);
    let to = sockaddr(SocketAddrV4::new(PEER, 5000));
    // SAFETY: the message and `to` are live.
    let n = unsafe { socket::cs_sendto(u, b"ping".as_ptr().cast(), 4, 0, &to) };
    assert_eq!(n, 4, "cs_sendto: {}", last_error());
    let (n, from) = p.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"ping");
    assert_eq!(from.ip(), std::net::IpAddr::V4(OURS));
    p.send_to(b"pong!", from).unwrap();
    let mut src = sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
    // Poll (non-blocking) while the peer's inline engine is driven here.
    let deadline = Instant::now() + Duration::from_secs(10);
    let n = loop {
        // SAFETY: `buf` and `src` are live.
        let n = unsafe {
            socket::cs_recvfrom(u, buf.as_mut_ptr().cast(), 64, CS_MSG_DONTWAIT, &mut src)
        };
        if n >= 0 {
            break n;
        }
        assert_eq!(errno(), libc::EAGAIN, "{}", last_error());
        assert!(Instant::now() < deadline, "no datagram came back");
        peer.poll(Some(Duration::from_millis(1)));
    };
    assert_eq!(&buf[..n as usize], b"pong!");
    assert_eq!(u32::from_be(src.sin_addr.s_addr), u32::from(PEER));
    assert_eq!(u16::from_be(src.sin_port), 5000);
}

#[test]
fn header_constants_match_the_library() {
    let h = include_str!("../../../include/corestack.h");
    // (name, value) of each constant, named once.
    macro_rules! named {
        ($($c:ident),* $(,)?) => {
            &[$((stringify!($c), i64::from($c))),*]
        };
    }
    let consts: &[(&str, i64)] = named![
        CS_SOCK_STREAM,
        CS_SOCK_DGRAM,
        CS_MSG_DONTWAIT,
        CS_MSG_NOSIGNAL,
        CS_SHUT_RD,
        CS_SHUT_WR,
        CS_SHUT_RDWR,
        CS_POLLIN,
        CS_POLLOUT,
        CS_POLLHUP,
        CS_POLL_ADD,
        CS_POLL_DEL,
        CS_POLL_MOD,
    ];
    for (name, want) in consts {
        let line = h
            .lines()
            .find(|l| l.split_whitespace().take(2).eq(["#define", name]))
            .unwrap_or_else(|| panic!("{name} is not defined in corestack.h"));
        let v = line.split_whitespace().nth(2).unwrap_or("");
        let v = v.trim_end_matches(['u', 'U']);
        let got = match v.strip_prefix("0x") {
            Some(hex) => i64::from_str_radix(hex, 16),
            None => v.parse(),
        }
        .unwrap_or_else(|_| panic!("{name}: cannot read {line:?}"));
        assert_eq!(got, *want, "{name}");
    }
}
