//! splice(2) between a corestack TCP socket and a pipe (HAProxy's
//! `option splice-*`, proxies that relay through a pipe).
//!
//! The kernel cannot move pages into or out of a corestack socket, so the
//! bytes are copied through this thread's sendfile buffer, and never lost:
//! - socket → pipe: the bytes are peeked, written to the pipe, and only as
//!   many as the pipe took are consumed from the socket;
//! - pipe → socket: no more is read from the pipe than the socket's send
//!   ring takes without waiting (a blocking socket waits for the whole
//!   write, as a blocking send does).
//!
//! As in the kernel's splice, the socket's side waits as the socket does
//! (O_NONBLOCK: EAGAIN), and SPLICE_F_NONBLOCK makes only the pipe's side
//! nonblocking (EAGAIN for an empty or full pipe); SPLICE_F_MOVE and
//! SPLICE_F_MORE are hints and are ignored. An offset for the socket's side
//! (a socket cannot seek), a splice between two sockets, and one from a
//! listener or a UDP socket are EINVAL, as Linux answers them. tee(2) and
//! vmsplice(2) take pipes only; on a corestack socket the kernel answers
//! EINVAL as it does for any socket.
//!
//! Unlike the kernel's, a pipe's side without SPLICE_F_NONBLOCK follows the
//! pipe's own O_NONBLOCK (EAGAIN instead of waiting).

use super::data::{recv_one, send_bufs, with_sendfile_buf};
use super::*;

/// The most one splice copies, bytes (a pipe holds 64 KiB by default).
const SPLICE_CHUNK: usize = 64 * 1024;
/// Bytes a pipe takes without blocking once poll says POLLOUT (one page).
const PIPE_ROOM_ON_POLLOUT: usize = 4096;

/// splice(2): moves up to `len` bytes between `fd_in` and `fd_out`, one
/// of them a pipe; see the module documentation for corestack sockets.
#[no_mangle]
pub unsafe extern "C-unwind" fn splice(
    fd_in: c_int,
    off_in: *mut off64_t,
    fd_out: c_int,
    off_out: *mut off64_t,
    len: size_t,
    flags: c_uint,
) -> ssize_t {
    // A cancellation point, as glibc's splice is.
    crate::cancel::point(|| {
        let pass = || {
            // SAFETY: passed through with the caller's arguments.
            unsafe { sys::splice(fd_in, off_in, fd_out, off_out, len, flags) }
        };
        let (src, dst) = (ours(fd_in), ours(fd_out));
        let src = src.filter(|o| as_sock(o).is_some_and(Sock::on_corestack));
        let dst = dst.filter(|o| as_sock(o).is_some_and(Sock::on_corestack));
        let nonblock = flags & libc::SPLICE_F_NONBLOCK != 0;
        match (src, dst) {
            (None, None) => pass(),
            (Some(_), Some(_)) => run(|| Err::<ssize_t, _>(libc::EINVAL)),
            (Some(o), None) => run(|| {
                let s = as_sock(&o).ok_or(libc::EINVAL)?;
                alive(s)?;
                if !off_in.is_null() {
                    return Err(libc::EINVAL);
                }
                size(socket_to_pipe(&o, s, fd_in, fd_out, len, nonblock))
            }),
            (None, Some(o)) => run(|| {
                let s = as_sock(&o).ok_or(libc::EINVAL)?;
                alive(s)?;
                if !off_out.is_null() {
                    return Err(libc::EINVAL);
                }
                size(pipe_to_socket(&o, s, fd_in, fd_out, len, nonblock))
            }),
        }
    })
}

/// EINVAL unless kernel fd `fd` is a pipe (splice needs one end to be).
fn need_pipe(fd: c_int) -> R<()> {
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: `st` is a live, writable stat.
    if unsafe { sys::fstat(fd, &mut st) } < 0 {
        return Err(sys::errno());
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// True when kernel fd `fd` has O_NONBLOCK.
fn fd_nonblocking(fd: c_int) -> R<bool> {
    Ok(k::fcntl_int(fd, libc::F_GETFL, 0)? & libc::O_NONBLOCK != 0)
}

/// write(2) of `buf` to kernel fd `fd`, with cancellation disabled (glibc's
/// write is a cancellation point, and none may act inside the shim's
/// frames; a cancel while the socket side waits ends the call at its entry).
fn write_fd(fd: c_int, buf: &[u8]) -> R<usize> {
    let _quiet = crate::cancel::Quiet::new();
    // SAFETY: `buf` is readable for its length.
    let n = unsafe { sys::write(fd, buf.as_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| sys::errno())
}

fn socket_to_pipe(
    o: &Arc<Obj>,
    s: &Sock,
    fd: c_int,
    pipe: c_int,
    len: usize,
    nonblock: bool,
) -> R<usize> {
    if s.with_stream(|_| ()).is_none() {
        return Err(libc::EINVAL);
    }
    need_pipe(pipe)?;
    let mut cap = len.min(SPLICE_CHUNK);
    if nonblock && !fd_nonblocking(pipe)? {
        // A blocking pipe must not block: write no more than POLLOUT promises.
        if k::poll_now(pipe, libc::POLLOUT) & libc::POLLOUT == 0 {
            return Err(libc::EAGAIN);
        }
        cap = cap.min(PIPE_ROOM_ON_POLLOUT);
    }
    if cap == 0 {
        return Ok(0);
    }
    with_sendfile_buf(cap, |buf| {
        // Waits as the socket does (O_NONBLOCK: EAGAIN).
        let n = recv_one(o, s, fd, &mut [&mut buf[..]], libc::MSG_PEEK)?.n;
        if n == 0 {
            return Ok(0);
        }
        let w = write_fd(pipe, &buf[..n])?;
        // The pipe took `w` of the peeked bytes: consume exactly those.
        let mut done = 0;
        while done < w {
            let got = recv_one(o, s, fd, &mut [&mut buf[done..w]], libc::MSG_DONTWAIT)?.n;
            if got == 0 {
                break;
            }
            done += got;
        }
        Ok(w)
    })
}

fn pipe_to_socket(
    o: &Arc<Obj>,
    s: &Sock,
    pipe: c_int,
    fd: c_int,
    len: usize,
    nonblock: bool,
) -> R<usize> {
    let room = s.with_stream(|t| t.send_room()).ok_or(libc::EINVAL)?;
    need_pipe(pipe)?;
    let dontwait = s.nonblocking();
    let mut cap = len.min(SPLICE_CHUNK);
    if dontwait {
        if room == 0 {
            return Err(libc::EAGAIN);
        }
        cap = cap.min(room);
    }
    if nonblock && k::poll_now(pipe, libc::POLLIN) == 0 {
        return Err(libc::EAGAIN);
    }
    if cap == 0 {
        return Ok(0);
    }
    with_sendfile_buf(cap, |buf| {
        let n = {
            // As in `write_fd`.
            let _quiet = crate::cancel::Quiet::new();
            k::read(pipe, buf)?
        };
        if n == 0 {
            return Ok(0);
        }
        let flags = if dontwait { libc::MSG_DONTWAIT } else { 0 };
        // With room for all of it (nonblocking) or waiting for room
        // (blocking), the socket takes the n bytes read from the pipe.
        let mut done = 0;
        while done < n {
            match send_bufs(o, s, fd, &[&buf[done..n]], flags, None) {
                Ok(w) => done += w,
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        if done < n {
            sys::log_line(&format!(
                "splice to fd {fd}: {} bytes read from the pipe were not sent (the socket failed)",
                n - done
            ));
        }
        Ok(done)
    })
}
