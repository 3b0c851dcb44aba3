//! The shim's logic without root: the process's stack runs on one end of
//! an in-memory wire (`nic::mem`, embedded mode), a peer stack on the
//! other end in the same process, and the tests call the interposed
//! functions (`crate::ffi::...`) with real fds, as a C program would.
//!
//! - **The stack.** In test builds `stack::config` answers the
//!   harness's configuration ([`config`]: corestack at [`OURS`]/24) on the
//!   threads the harness serves (a test's, from [`serial`] on, and those
//!   it starts with [`spawn`]), and `stack::start` starts the harness's
//!   stack ([`start`]), once per test process, at the first bind/connect
//!   that goes to corestack, as the environment's would under
//!   `LD_PRELOAD`. Other threads (the other unit tests') see the
//!   environment's configuration, which a test run leaves unset: for them
//!   the process is not served. Our stack spins [`SPIN`] before it sleeps
//!   (`CORESTACK_SPIN_US`, set for its start only), long enough that a
//!   test can land a signal inside the spin.
//! - **The peer.** A second `corestack::Stack` at [`PEER`] on the wire's
//!   other end, with one thread ([`echo`]) that echoes TCP and UDP on
//!   [`ECHO_PORT`] through the Rust API (nonblocking, bounded in time).
//!   Port [`CLOSED_PORT`] has no listener there (the peer answers RST).
//! - **The calls.** The test binary is linked like a program under
//!   `LD_PRELOAD`: the executable defines (and exports) the interposed
//!   symbols, so std's and the libc crate's calls in this process go
//!   through the shim too (an fd that is not corestack's passes through
//!   to libc's definition, found with `dlsym(RTLD_NEXT)`; see
//!   [`std_calls_in_this_process_go_through_the_shim_as_under_ld_preload`]).
//!   The tests call the `crate::ffi` functions by path all the same, so
//!   that what they exercise is explicit.
//! - One test at a time ([`serial`]): they share the process's stack and
//!   some assert timings. Every wait has a timeout.
//!
//! Findings of the review (`shared/research/shim-review-2026-11-26.md`)
//! covered here: 1 and 2 ([`epoll`]); 3, 5 as embedded mode answers it
//! (EOPNOTSUPP), 6, 7, 11's splice, and the SO_RCVTIMEO and
//! nonblocking-connect semantics ([`sockets`]); 11's EINTR during the
//! spin, and SA_RESTART ([`signals`]); 11's `sendfile` without allocation
//! is `ffi::tests`. Not shown at this layer, and checked by the namespace
//! tests of `crates/cli/tests/preload.rs` instead: 4 (fork, daemonizing,
//! fork per connection: a forked child of this multi-threaded test
//! process has no engine, and service mode needs a daemon), 5 between
//! processes (SCM_RIGHTS in service mode), 8 (`pthread_cancel`), 9
//! (io_uring), 10 (exec of static and Go programs) and 11's `vfork`.

mod epoll;
mod epoll_ready;
mod reuseport;
mod signals;
mod sockets;

use core::ffi::c_int;
use core::net::{Ipv4Addr, SocketAddrV4};
use core::time::Duration;
use corestack::{Stack, TcpListener, TcpStream, UdpSocket};
use std::io::{ErrorKind, Read, Write};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// corestack's address in the test process (the shim's stack), /24.
pub const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The peer stack's address, on the same /24.
pub const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The peer's TCP and UDP echo port.
pub const ECHO_PORT: u16 = 7;
/// A peer port with no listener.
pub const CLOSED_PORT: u16 = 9;
/// How long our stack's waiters spin before they sleep.
pub const SPIN: Duration = Duration::from_millis(200);
/// How long the peer's echo serves (well past the whole module's run).
const ECHO_FOR: Duration = Duration::from_secs(120);

/// The peer stack, once started.
static PEER_STACK: OnceLock<Stack> = OnceLock::new();

std::thread_local! {
    /// This thread is the harness's: the shim serves it.
    static SERVED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// The shim's configuration in test builds, on the threads the harness
/// serves: embedded mode at [`OURS`]/24 (`iface` names no interface: the
/// stack runs on a mem port). None elsewhere.
pub fn config() -> Option<&'static corestack::StackConfig> {
    static CONFIG: OnceLock<corestack::StackConfig> = OnceLock::new();
    if !SERVED.with(core::cell::Cell::get) {
        return None;
    }
    Some(CONFIG.get_or_init(|| corestack::StackConfig {
        iface: "mem".into(),
        ip: OURS,
        prefix: 24,
        ..corestack::StackConfig::default()
    }))
}

/// Starts a thread the shim serves, as [`std::thread::spawn`].
pub fn spawn<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        SERVED.with(|s| s.set(true));
        f()
    })
}

/// The shim's stack in test builds: a mem wire, the peer on one end with
/// its echo thread, ours on the other. Called once, by `stack::start`
/// (inside the shim, with every signal blocked, so the engine and echo
/// threads never take the tests' signals). Errors: ENETDOWN when a stack
/// cannot start (said on stderr).
pub fn start() -> Option<Result<Stack, i32>> {
    let (theirs, ours) = nic::mem::pair(
        nic::impair::Impairments::none(),
        nic::impair::Impairments::none(),
        21,
    );
    let started = (|| -> std::io::Result<Stack> {
        let peer = Stack::builder().mem_port(theirs).ip(PEER, 24).start()?;
        let listener = TcpListener::bind(&peer, SocketAddrV4::new(PEER, ECHO_PORT))?;
        let udp = UdpSocket::bind(&peer, SocketAddrV4::new(PEER, ECHO_PORT))?;
        std::thread::Builder::new()
            .name("peer-echo".into())
            .spawn(move || echo(listener, udp))?;
        let _ = PEER_STACK.set(peer);
        // The spin is read from the environment when a stack starts (the
        // caller's value comes back after); std's environment lock orders
        // this with every other std::env access.
        let caller = std::env::var_os("CORESTACK_SPIN_US");
        std::env::set_var("CORESTACK_SPIN_US", SPIN.as_micros().to_string());
        let s = Stack::builder().mem_port(ours).ip(OURS, 24).start();
        match caller {
            Some(v) => std::env::set_var("CORESTACK_SPIN_US", v),
            None => std::env::remove_var("CORESTACK_SPIN_US"),
        }
        s
    })();
    Some(started.map_err(|e| {
        crate::sys::log_line(&format!("test harness: cannot start the mem stacks: {e}"));
        libc::ENETDOWN
    }))
}

/// The peer's echo, for [`ECHO_FOR`]: accepts TCP connections (64 at
/// most) and writes back what each sends until its FIN, then closes it;
/// sends every UDP datagram back to where it came from.
fn echo(mut listener: TcpListener, mut udp: UdpSocket) {
    let _ = listener.set_nonblocking(true);
    let _ = udp.set_nonblocking(true);
    let end = Instant::now() + ECHO_FOR;
    let mut conns: Vec<TcpStream> = Vec::new();
    let mut buf = [0u8; 2048];
    while Instant::now() < end {
        let mut busy = false;
        if conns.len() < 64 {
            if let Ok((mut c, _)) = listener.accept() {
                let _ = c.set_nonblocking(true);
                conns.push(c);
                busy = true;
            }
        }
        conns.retain_mut(|c| match c.read(&mut buf) {
            Ok(0) => false,
            Ok(n) => {
                busy = true;
                write_within(c, &buf[..n], Duration::from_secs(2))
            }
            Err(e) => e.kind() == ErrorKind::WouldBlock,
        });
        if let Ok((n, from)) = udp.recv_from(&mut buf) {
            let _ = udp.send_to(&buf[..n], from);
            busy = true;
        }
        if !busy {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Writes all of `b` to nonblocking `c` within `limit`; false if it could
/// not (the connection is then dropped).
fn write_within(c: &mut TcpStream, mut b: &[u8], limit: Duration) -> bool {
    let end = Instant::now() + limit;
    while !b.is_empty() && Instant::now() < end {
        match c.write(b) {
            Ok(n) => b = &b[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_micros(200))
            }
            Err(_) => return false,
        }
    }
    b.is_empty()
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the suite's lock (one test at a time) and makes the calling
/// thread one the shim serves.
pub fn serial() -> MutexGuard<'static, ()> {
    SERVED.with(|s| s.set(true));
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The calling thread's errno.
pub fn errno() -> c_int {
    crate::sys::errno()
}

/// A socket address for the C calls.
pub fn sin(ip: Ipv4Addr, port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// The address in a `sockaddr_in` the shim wrote.
pub fn from_sin(a: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
        u16::from_be(a.sin_port),
    )
}

const SIN_LEN: libc::socklen_t = core::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

/// An fd of the test, closed with the shim's `close` when dropped.
pub struct Fd(pub c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        if self.0 >= 0 {
            close(self.0);
        }
    }
}

/// socket(2) through the shim; panics on failure.
pub fn socket(ty: c_int) -> Fd {
    // SAFETY: no pointers.
    let fd = unsafe { crate::ffi::lifecycle::socket(libc::AF_INET, ty, 0) };
    assert!(fd >= 0, "socket: errno {}", errno());
    Fd(fd)
}

/// close(2) through the shim.
pub fn close(fd: c_int) -> c_int {
    // SAFETY: no pointers.
    unsafe { crate::ffi::lifecycle::close(fd) }
}

/// bind(2) through the shim: 0 or -1 (errno).
pub fn bind(fd: c_int, ip: Ipv4Addr, port: u16) -> c_int {
    let a = sin(ip, port);
    // SAFETY: `a` is a live sockaddr_in of SIN_LEN bytes.
    unsafe { crate::ffi::conn::bind(fd, (&a as *const libc::sockaddr_in).cast(), SIN_LEN) }
}

/// connect(2) through the shim: 0 or -1 (errno).
pub fn connect(fd: c_int, ip: Ipv4Addr, port: u16) -> c_int {
    let a = sin(ip, port);
    // SAFETY: as in bind.
    unsafe { crate::ffi::conn::connect(fd, (&a as *const libc::sockaddr_in).cast(), SIN_LEN) }
}

/// listen(2) through the shim.
pub fn listen(fd: c_int, backlog: c_int) -> c_int {
    // SAFETY: no pointers.
    unsafe { crate::ffi::conn::listen(fd, backlog) }
}

/// getpeername(2) through the shim.
pub fn peer_of(fd: c_int) -> Option<SocketAddrV4> {
    let mut a = sin(Ipv4Addr::UNSPECIFIED, 0);
    let mut len = SIN_LEN;
    // SAFETY: `a` is writable for `len` bytes, `len` a live socklen_t.
    let r = unsafe {
        crate::ffi::conn::getpeername(fd, (&mut a as *mut libc::sockaddr_in).cast(), &mut len)
    };
    (r == 0).then(|| from_sin(&a))
}

/// A blocking TCP socket connected to the peer's echo.
pub fn echo_conn() -> Fd {
    let c = socket(libc::SOCK_STREAM);
    assert_eq!(
        connect(c.0, PEER, ECHO_PORT),
        0,
        "connect: errno {}",
        errno()
    );
    c
}

/// send(2) through the shim.
pub fn send(fd: c_int, b: &[u8]) -> isize {
    // SAFETY: `b` is readable for its length.
    unsafe { crate::ffi::data::send(fd, b.as_ptr().cast(), b.len(), 0) }
}

/// recv(2) through the shim.
pub fn recv(fd: c_int, b: &mut [u8], flags: c_int) -> isize {
    // SAFETY: `b` is writable for its length.
    unsafe { crate::ffi::data::recv(fd, b.as_mut_ptr().cast(), b.len(), flags) }
}

/// recvfrom(2) through the shim: the length and the source.
pub fn recvfrom(fd: c_int, b: &mut [u8], flags: c_int) -> (isize, SocketAddrV4) {
    let mut a = sin(Ipv4Addr::UNSPECIFIED, 0);
    let mut len = SIN_LEN;
    // SAFETY: `b` and `a` are writable for the lengths passed.
    let n = unsafe {
        crate::ffi::data::recvfrom(
            fd,
            b.as_mut_ptr().cast(),
            b.len(),
            flags,
            (&mut a as *mut libc::sockaddr_in).cast(),
            &mut len,
        )
    };
    (n, from_sin(&a))
}

/// write(2) through the shim.
pub fn write(fd: c_int, b: &[u8]) -> isize {
    // SAFETY: `b` is readable for its length.
    unsafe { crate::ffi::data::write(fd, b.as_ptr().cast(), b.len()) }
}

/// read(2) through the shim.
pub fn read(fd: c_int, b: &mut [u8]) -> isize {
    // SAFETY: `b` is writable for its length.
    unsafe { crate::ffi::data::read(fd, b.as_mut_ptr().cast(), b.len()) }
}

/// poll(2) of one fd through the shim: the result and revents.
pub fn poll1(fd: c_int, events: i16, ms: c_int) -> (c_int, i16) {
    let mut p = [libc::pollfd {
        fd,
        events,
        revents: 0,
    }];
    // SAFETY: one live pollfd.
    let r = unsafe { crate::ffi::ready::poll(p.as_mut_ptr(), 1, ms) };
    (r, p[0].revents)
}

/// setsockopt(2) of an int through the shim.
pub fn set_int(fd: c_int, level: c_int, name: c_int, v: c_int) -> c_int {
    set_opt(fd, level, name, v)
}

/// setsockopt(2) of `v` (an int, a timeval, ...) through the shim: its result.
pub fn set_opt<T: Copy>(fd: c_int, level: c_int, name: c_int, v: T) -> c_int {
    // SAFETY: `v` is a live T of the length passed.
    unsafe {
        crate::ffi::conn::setsockopt(
            fd,
            level,
            name,
            (&v as *const T).cast(),
            core::mem::size_of::<T>() as libc::socklen_t,
        )
    }
}

/// Sets SO_RCVTIMEO of `fd` to `tv_sec` s and `tv_usec` µs (0 and 0: no
/// timeout) through the shim; asserts that it succeeds.
pub fn set_rcvtimeo(fd: c_int, tv_sec: libc::time_t, tv_usec: libc::suseconds_t) {
    let tv = libc::timeval { tv_sec, tv_usec };
    let r = set_opt(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, tv);
    assert_eq!(r, 0, "setsockopt SO_RCVTIMEO: errno {}", errno());
}

/// getsockopt(2) of an int through the shim: the value, or the errno.
pub fn get_int(fd: c_int, level: c_int, name: c_int) -> Result<c_int, c_int> {
    let mut v: c_int = -12345;
    let mut len = core::mem::size_of::<c_int>() as libc::socklen_t;
    // SAFETY: `v` is writable for `len` bytes.
    let r = unsafe {
        crate::ffi::conn::getsockopt(fd, level, name, (&mut v as *mut c_int).cast(), &mut len)
    };
    if r == 0 {
        Ok(v)
    } else {
        Err(errno())
    }
}

/// Receives from `fd` until `want` bytes came, EOF, an error or `limit`
/// passed (poll, then recv); returns what came.
pub fn recv_within(fd: c_int, want: usize, limit: Duration) -> Vec<u8> {
    let end = Instant::now() + limit;
    let mut got = Vec::new();
    let mut b = [0u8; 256];
    while got.len() < want && Instant::now() < end {
        let ms = end.saturating_duration_since(Instant::now()).as_millis() as c_int;
        if poll1(fd, libc::POLLIN, ms.max(1)).0 != 1 {
            break;
        }
        let n = recv(fd, &mut b, libc::MSG_DONTWAIT);
        if n <= 0 {
            break;
        }
        got.extend_from_slice(&b[..n as usize]);
    }
    got
}

/// The harness itself: a connection through the shim reaches the peer's
/// echo and comes back byte for byte, and the interposed fd is a real
/// kernel fd (fcntl through libc answers for it).
#[test]
fn a_shim_connection_over_the_mem_wire_echoes() {
    let _g = serial();
    let c = echo_conn();
    assert_eq!(peer_of(c.0), Some(SocketAddrV4::new(PEER, ECHO_PORT)));
    assert!(crate::obj::get(c.0).is_some(), "the fd is not corestack's");
    // SAFETY: F_GETFD takes no argument.
    assert!(unsafe { libc::fcntl(c.0, libc::F_GETFD) } >= 0);
    assert_eq!(send(c.0, b"hello"), 5);
    assert_eq!(recv_within(c.0, 5, Duration::from_secs(3)), b"hello");
}
/// The module's premise: this binary is linked as a program under
/// `LD_PRELOAD` is, so std's own socket calls reach the shim too: a
/// `std::net::TcpStream` to the peer is a corestack connection (in the
/// table, echoed over the mem wire), and its SO_RCVTIMEO is the shim's.
#[test]
fn std_calls_in_this_process_go_through_the_shim_as_under_ld_preload() {
    use std::os::fd::AsRawFd;
    let _g = serial();
    let _started = echo_conn();
    let mut s = std::net::TcpStream::connect((PEER, ECHO_PORT)).expect("std's connect");
    assert!(crate::obj::get(s.as_raw_fd()).is_some(), "not corestack's");
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("std's SO_RCVTIMEO");
    s.write_all(b"std").expect("std's write");
    let mut b = [0u8; 3];
    s.read_exact(&mut b).expect("std's read");
    assert_eq!(&b, b"std");
}
