//! The system calls of service mode's control path: memfd, eventfd,
//! descriptor passing (`SCM_RIGHTS`), peer credentials (`SO_PEERCRED`) and
//! epoll; [`crate::ctl`] re-exports what applications and the daemon
//! call. The only module of the crate with system calls.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

// ---------------------------------------------------------------------------
// memfd and eventfd
// ---------------------------------------------------------------------------

/// A new anonymous shared-memory file of `len` bytes (zero-filled), for the
/// context passed to an application.
///
/// Made with `memfd_create(MFD_CLOEXEC | MFD_ALLOW_SEALING)`, sized with
/// `ftruncate`, then sealed against shrinking and growing
/// (`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`): an application that receives
/// it can write through a shared mapping but cannot truncate it under the
/// daemon's mapping (which would make the daemon's accesses fault, SIGBUS).
/// `name` shows in `/proc/<pid>/maps` as `/memfd:<name>`.
///
/// Errors: `InvalidInput` when `name` contains a NUL byte or `len` exceeds
/// `i64::MAX`; otherwise the errno of `memfd_create` (`EMFILE`, `ENOMEM`, ...),
/// `ftruncate` (`EFBIG`, `ENOSPC`) or `fcntl(F_ADD_SEALS)`.
pub fn memfd(name: &str, len: u64) -> io::Result<OwnedFd> {
    let cname = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "memfd name contains NUL"))?;
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "memfd length too large"))?;
    // SAFETY: `cname` is a valid NUL-terminated string that outlives the call.
    let raw =
        unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    let fd = owned(raw)?;
    // SAFETY: `fd` is an open memfd we own; ftruncate takes no pointers.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len) })?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: F_ADD_SEALS on our own memfd with an int argument; no pointers.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) })?;
    Ok(fd)
}

/// A new doorbell: `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`.
///
/// Errors: the errno of `eventfd` (`EMFILE`, `ENFILE`, `ENOMEM`).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; the result is checked by `owned`.
    owned(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })
}

/// Rings a doorbell: adds 1 to the eventfd's counter. Errors are ignored: the
/// only one a nonblocking eventfd gives is `EAGAIN` (counter at its maximum),
/// and then the doorbell is already ringing. The system call itself, not
/// glibc's `write`: that is a cancellation point, and an application thread
/// that rings (a send under the preload shim) must not be cancelled inside.
pub fn eventfd_signal(fd: BorrowedFd<'_>) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live stack array to an fd we borrow.
    unsafe {
        libc::syscall(libc::SYS_write, fd.as_raw_fd(), one.as_ptr(), one.len());
    }
}

/// Silences a doorbell: reads and resets the eventfd's counter and returns
/// it (how many times it was rung since the last drain); 0 when it was not
/// ringing (`EAGAIN`) or on any other error.
pub fn eventfd_drain(fd: BorrowedFd<'_>) -> u64 {
    let mut buf = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a live stack array of 8 bytes.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n == 8 {
        u64::from_ne_bytes(buf)
    } else {
        0
    }
}

/// A pidfd for process `pid`: `pidfd_open(pid, 0)`, close-on-exec. It
/// names that process, not its number: it stays valid (and polls
/// readable, [`pidfd_exited`]) once the process exits, even after the
/// number is reused.
///
/// Errors: ESRCH when no such process lives, the other errnos of
/// `pidfd_open(2)` (ENOSYS before Linux 5.3, EMFILE).
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, no pointers; the result is
    // checked by `owned`.
    owned(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int)
}

/// True when the process of pidfd `fd` has exited (the pidfd polls
/// readable); false while it runs or on an error of `poll`.
pub fn pidfd_exited(fd: BorrowedFd<'_>) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one live pollfd on the stack, without waiting.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents != 0
}

// ---------------------------------------------------------------------------
// Messages with file descriptors
// ---------------------------------------------------------------------------

/// The most file descriptors one message may carry (send and receive):
/// the daemon's welcome carries a memfd and a doorbell per engine. Below
/// Linux's `SCM_MAX_FD` (253), so a peer can send more than this and
/// `recv_msg` reports the truncation.
pub const MAX_FDS: usize = 128;

/// Room for one `SCM_RIGHTS` control message of [`MAX_FDS`] descriptors.
// SAFETY: CMSG_SPACE is plain arithmetic on its argument.
const CMSG_CAP: usize = unsafe { libc::CMSG_SPACE((MAX_FDS * size_of::<RawFd>()) as u32) } as usize;

/// A control-message buffer aligned for `cmsghdr`.
#[repr(C, align(8))]
struct CmsgBuf([u8; CMSG_CAP]);

/// The eventfds among `fds` (received from a less trusted process), made
/// non-blocking so that a write to one can never block the writer (an
/// eventfd whose counter is at its maximum refuses the write with EAGAIN
/// instead); anything else is closed. Checked through
/// `/proc/self/fd/N`, which names an eventfd `anon_inode:[eventfd]`. The
/// kept ones keep their order but close up over the dropped ones, so an
/// application that sends anything else loses its own later entries'
/// wake-ups (it sleeps in its short naps), nobody else's.
pub fn keep_eventfds(fds: Vec<OwnedFd>) -> Vec<OwnedFd> {
    fds.into_iter()
        .filter(|f| {
            let link = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()));
            if !link.is_ok_and(|l| l.as_os_str() == "anon_inode:[eventfd]") {
                return false;
            }
            // SAFETY: F_GETFL/F_SETFL on an fd we own, integer arguments.
            unsafe {
                let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
                fl >= 0 && libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
            }
        })
        .collect()
}

/// Sends `bytes` with `fds` attached (`SCM_RIGHTS`) on a Unix stream socket.
///
/// The fds travel with the first byte; if the kernel takes only part of
/// `bytes` (a full socket buffer on a blocking socket, or a signal), the rest
/// is sent without fds. `MSG_NOSIGNAL`: a closed peer gives `EPIPE`, not
/// SIGPIPE. `EINTR` is retried.
///
/// Errors: `InvalidInput` for more than [`MAX_FDS`] fds or for fds with no
/// byte to carry them; otherwise the errno of `sendmsg` (`EPIPE`,
/// `ECONNRESET`, `EAGAIN` on a nonblocking socket, `ETOOMANYREFS`).
pub fn send_msg(sock: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many fds for one message",
        ));
    }
    if bytes.is_empty() && !fds.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "fds need at least one byte to travel with",
        ));
    }
    let mut cbuf = CmsgBuf([0; CMSG_CAP]);
    let mut sent = 0usize;
    let mut first = true;
    while sent < bytes.len() {
        let rest = &bytes[sent..];
        let mut iov = libc::iovec {
            iov_base: rest.as_ptr() as *mut libc::c_void,
            iov_len: rest.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { MaybeUninit::zeroed().assume_init() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if first && !fds.is_empty() {
            let data_len = fds.len() * size_of::<RawFd>();
            // SAFETY: CMSG_SPACE is arithmetic; data_len <= MAX_FDS * 4.
            let space = unsafe { libc::CMSG_SPACE(data_len as u32) } as usize;
            msg.msg_control = cbuf.0.as_mut_ptr().cast();
            msg.msg_controllen = space as _;
            // SAFETY: msg_control points to `cbuf` (aligned, CMSG_CAP >= space
            // bytes); CMSG_FIRSTHDR returns its start since controllen >=
            // sizeof(cmsghdr); CMSG_DATA lies within it and has room for
            // `data_len` bytes, written unaligned.
            unsafe {
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = libc::SOL_SOCKET;
                (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(data_len as u32) as _;
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                for (i, fd) in fds.iter().enumerate() {
                    data.add(i).write_unaligned(fd.as_raw_fd());
                }
            }
        }
        // SAFETY: `msg` points to `iov` (over `rest`) and possibly `cbuf`, all
        // alive for the call; sendmsg only reads them.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        first = false;
        sent += n as usize;
    }
    Ok(())
}

/// Receives one message into `buf` and the fds that came with it into `fds`
/// (cleared first; previous contents are closed). Returns the number of bytes
/// read; `Ok(0)` means the peer closed the connection.
///
/// Uses `MSG_CMSG_CLOEXEC`; at most [`MAX_FDS`] fds. On a stream socket one
/// call returns what one `send_msg` sent when `buf` is large enough and the
/// peer waits for the answer before sending more (the control protocol is
/// request/answer). `EINTR` is retried.
///
/// Errors: `InvalidInput` for an empty `buf`; `InvalidData` when the control
/// data was truncated (the peer sent more than [`MAX_FDS`] fds; those
/// received are closed); otherwise the errno
/// of `recvmsg` (`ECONNRESET`, `EAGAIN` on a nonblocking socket).
pub fn recv_msg(sock: &UnixStream, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> io::Result<usize> {
    fds.clear();
    if buf.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "empty receive buffer (0 would read as end of stream)",
        ));
    }
    let mut cbuf = CmsgBuf([0; CMSG_CAP]);
    loop {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { MaybeUninit::zeroed().assume_init() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.0.as_mut_ptr().cast();
        msg.msg_controllen = CMSG_CAP as _;
        // SAFETY: `iov` covers `buf` and `msg_control` covers `cbuf`, both
        // alive and writable for the call, with the lengths given.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // Take ownership of every fd first so that each is closed on error.
        // SAFETY: the kernel filled `msg_controllen` bytes of `cbuf` with
        // well-formed cmsghdrs; CMSG_FIRSTHDR/NXTHDR stay within that range
        // (they return null past it), and each SCM_RIGHTS payload holds
        // (cmsg_len - CMSG_LEN(0)) / 4 fds now open in this process, read
        // unaligned.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let header = libc::CMSG_LEN(0) as usize;
                    let payload = ((*cmsg).cmsg_len as usize).saturating_sub(header);
                    let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                    for i in 0..payload / size_of::<RawFd>() {
                        let raw = data.add(i).read_unaligned();
                        if raw >= 0 {
                            fds.push(OwnedFd::from_raw_fd(raw));
                        }
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            fds.clear();
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "control message truncated (peer sent too many fds)",
            ));
        }
        return Ok(n as usize);
    }
}

// ---------------------------------------------------------------------------
// Peer credentials
// ---------------------------------------------------------------------------

/// Who is at the other end of a Unix socket, as the kernel recorded it when
/// the connection was made (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// The peer's process id.
    pub pid: i32,
    /// The peer's effective user id.
    pub uid: u32,
    /// The peer's effective group id.
    pub gid: u32,
}

/// The credentials of the process at the other end of `sock`.
///
/// Errors: the errno of `getsockopt(SO_PEERCRED)` (`ENOTCONN`, `EBADF`).
pub fn peer_cred(sock: &UnixStream) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live locals; the kernel writes at most
    // `len` bytes into `cred` and the actual length into `len`.
    cvt(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    })?;
    Ok(PeerCred {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// The supplementary group ids of process `pid`, from the `Groups:` line of
/// `/proc/<pid>/status`; empty when the process is gone or the file cannot
/// be read or parsed.
///
/// Racy by nature (the pid may be reused after the peer exits): use it right
/// after [`peer_cred`] while the connection is open, for policy decisions
/// only where a wrong "no" is acceptable.
pub fn supplementary_gids(pid: i32) -> Vec<u32> {
    if pid <= 0 {
        return Vec::new();
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Vec::new();
    };
    parse_groups(&status)
}

fn parse_groups(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|s| s.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// epoll
// ---------------------------------------------------------------------------

/// Events fetched per `epoll_wait` call.
const EPOLL_BATCH: usize = 64;

/// A minimal level-triggered epoll set: each fd is watched for readability
/// (`EPOLLIN`) and reported by the token it was added with. Hang-ups and
/// errors (`EPOLLHUP`, `EPOLLERR`, always reported by the kernel) are
/// reported as the same token: the owner reads the fd and sees EOF or the
/// error.
pub struct Epoll {
    fd: OwnedFd,
    buf: Vec<libc::epoll_event>,
}

impl fmt::Debug for Epoll {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Epoll").field("fd", &self.fd).finish()
    }
}

impl Epoll {
    /// A new, empty set (`epoll_create1(EPOLL_CLOEXEC)`).
    ///
    /// Errors: the errno of `epoll_create1` (`EMFILE`, `ENFILE`, `ENOMEM`).
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes no pointers; the result is checked.
        let fd = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll {
            fd,
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; EPOLL_BATCH],
        })
    }

    /// Watches `fd` for readability; [`Epoll::wait`] reports it as `token`.
    /// The fd must stay open while it is in the set (remove it with
    /// [`Epoll::delete`] before closing it, or it stays registered while any
    /// duplicate of it is open).
    ///
    /// Errors: the errno of `epoll_ctl(EPOLL_CTL_ADD)` (`EEXIST` when already
    /// added, `EPERM` for a regular file, `ENOSPC`).
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        self.add_raw(fd.as_raw_fd(), token)
    }

    /// [`Epoll::add`] for a raw fd someone else owns (a NIC queue's fd held
    /// by a port). An fd that is not open is refused with `EBADF`.
    pub fn add_raw(&self, fd: std::os::fd::RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `ev` is a live local the kernel reads; the kernel checks
        // that `fd` is open (EBADF otherwise).
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })
            .map(drop)
    }

    /// Stops watching `fd`.
    ///
    /// Errors: the errno of `epoll_ctl(EPOLL_CTL_DEL)` (`ENOENT` when it was
    /// not in the set).
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: `ev` is a live local (ignored by DEL, non-null for old
        // kernels); both fds are open.
        cvt(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd.as_raw_fd(),
                &mut ev,
            )
        })
        .map(drop)
    }

    /// Waits until at least one watched fd is ready or `timeout` passes
    /// (`None` = no limit; rounded up to whole milliseconds, except that
    /// `Some(Duration::ZERO)` polls without blocking). Replaces the contents
    /// of `events` with the tokens of the ready fds (at most 64 per call) and
    /// returns how many there are; 0 on timeout or when a signal interrupted
    /// the wait (`EINTR`).
    ///
    /// Errors: the errno of `epoll_wait` other than `EINTR` (`EBADF`,
    /// `EINVAL`).
    pub fn wait(&mut self, events: &mut Vec<u64>, timeout: Option<Duration>) -> io::Result<usize> {
        events.clear();
        let ms = timeout_ms(timeout);
        // SAFETY: `buf` holds EPOLL_BATCH initialised epoll_events the
        // kernel may overwrite; the length passed is that count.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.buf.as_mut_ptr(),
                self.buf.len() as libc::c_int,
                ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            };
        }
        // `ev.u64` copies the field out (epoll_event is packed on x86_64, so
        // it is never borrowed).
        events.extend(self.buf[..n as usize].iter().map(|ev| ev.u64));
        Ok(events.len())
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// epoll_wait's timeout argument: -1 for none, else whole milliseconds
/// rounded up (a nonzero wait never becomes a busy poll), capped at
/// `i32::MAX`.
fn timeout_ms(timeout: Option<Duration>) -> libc::c_int {
    match timeout {
        None => -1,
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            ms.min(libc::c_int::MAX as u128) as libc::c_int
        }
    }
}

// ---------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------

/// A syscall result that is -1 on error, as `io::Result`.
fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A syscall's new fd (or -1 on error), owned.
fn owned(raw: RawFd) -> io::Result<OwnedFd> {
    let raw = cvt(raw)?;
    // SAFETY: the syscall just returned `raw` as a new fd that nothing else
    // owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Pins the calling thread to `cpu` (sched_setaffinity); a CPU that does
/// not exist or is not allowed leaves the thread as it was.
pub fn pin_current_thread(cpu: usize) {
    if cpu >= libc::CPU_SETSIZE as usize {
        return;
    }
    // SAFETY: cpu_set_t is plain bits, valid when zeroed; CPU_SET writes
    // inside it (cpu < CPU_SETSIZE checked); sched_setaffinity(0, ..) reads
    // the set for the calling thread and reports errors by return value.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// A CPU list as `taskset -c` and `cpuset(7)` write it: CPU numbers and
/// ranges, comma-separated (`0-3,8,10-11`), in the order given, each CPU
/// once. Errors: the part that is not a CPU number or range (a range's end
/// before its start, or a CPU of 1024 or more, the most `sched_setaffinity`
/// takes here).
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |t: &str| {
            t.trim()
                .parse::<usize>()
                .ok()
                .filter(|&c| c < 1024)
                .ok_or_else(|| format!("`{part}` is not a CPU number or range (e.g. 0-3,8)"))
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if hi < lo {
            return Err(format!("`{part}`: the range ends before it starts"));
        }
        for c in lo..=hi {
            if !cpus.contains(&c) {
                cpus.push(c);
            }
        }
    }
    if cpus.is_empty() {
        return Err("an empty CPU list".into());
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests;
