//! The descriptor table: which kernel fd numbers are corestack's.
//!
//! Every corestack socket (and every epoll instance) holds a real kernel
//! fd: the kernel socket `socket(2)` made, or an eventfd placeholder for an
//! accepted connection. So numbers are the kernel's own (lowest free first,
//! below FD_SETSIZE for select), and they cannot collide with files.
//!
//! Fast path: [`STATE`] is a flat array of bytes indexed by fd; a call on
//! an fd that is not ours costs one bounds check and one relaxed load.
//! Ours: the object lives in a chunk of slots (allocated on first use, 4096
//! fds each, never freed), each behind its own `RwLock`; a lookup clones
//! the object's `Arc` under the read lock, so a concurrent close cannot
//! free it under the reader. dup'ed fds share one object (refcount).
//!
//! The objects' type is the floors' above: [`Slots`] and [`Handle`] are
//! generic, and `crate::obj` holds the one table of sockets and epoll
//! instances; the fd states (ours, closing, reserved) live here.
//!
//! Close ordering (as Onload): the entry is taken out and marked CLOSING
//! *before* the real close, so that a number the kernel hands out again
//! to another thread is never confused with the old socket; the real close
//! follows, then CLOSING goes back to FREE unless the number was reused.
#![forbid(unsafe_code)]

use core::ffi::c_int;
use core::sync::atomic::{AtomicI32, AtomicU8, AtomicUsize, Ordering};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::{Arc, OnceLock, RwLock};

/// What an fd of ours refers to: a socket or an epoll instance, of the
/// types the floors above define (`crate::obj::Obj`). Always behind an
/// `Arc`, so the size of the larger variant costs nothing per fd.
#[allow(clippy::large_enum_variant)]
pub enum Handle<S, E> {
    Sock(S),
    Epoll(E),
}

/// fds at or above this are never ours (they pass through).
pub const MAX_FDS: usize = 1 << 20;
const CHUNK: usize = 4096;

const FREE: u8 = 0;
const OURS: u8 = 1;
const CLOSING: u8 = 2;
const RESERVED: u8 = 3;

static STATE: [AtomicU8; MAX_FDS] = [const { AtomicU8::new(FREE) }; MAX_FDS];
type Chunk<T> = Box<[RwLock<Option<Arc<T>>>]>;
/// One past the highest fd ever made ours or reserved (bounds scans).
static HIGH: AtomicUsize = AtomicUsize::new(0);
/// Where the shim's own fds go (see [`internal_base`]).
static BASE: AtomicI32 = AtomicI32::new(0);

fn index(fd: c_int) -> Option<usize> {
    usize::try_from(fd).ok().filter(|&i| i < MAX_FDS)
}

/// The objects behind the fds of ours. One in the process (`crate::obj`'s):
/// the fd states its methods keep are this module's, shared.
pub struct Slots<T> {
    chunks: [OnceLock<Chunk<T>>; MAX_FDS / CHUNK],
}

impl<T> Slots<T> {
    /// An empty table (no chunk allocated).
    pub const fn new() -> Slots<T> {
        Slots {
            chunks: [const { OnceLock::new() }; MAX_FDS / CHUNK],
        }
    }

    fn slot(&self, i: usize) -> &RwLock<Option<Arc<T>>> {
        let chunk =
            self.chunks[i / CHUNK].get_or_init(|| (0..CHUNK).map(|_| RwLock::new(None)).collect());
        &chunk[i % CHUNK]
    }

    /// The object behind `fd` if it is ours (the fast path: one load for a
    /// kernel fd).
    #[inline]
    pub fn get(&self, fd: c_int) -> Option<Arc<T>> {
        let i = index(fd)?;
        if STATE[i].load(Ordering::Acquire) != OURS {
            return None;
        }
        self.slot(i)
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes `fd` refer to `obj`; returns what it referred to before (an entry
    /// the application closed behind the shim's back), for the caller to drop.
    /// Errors: EMFILE when `fd` is beyond the table.
    pub fn install(&self, fd: c_int, obj: Arc<T>) -> Result<Option<Arc<T>>, c_int> {
        let i = index(fd).ok_or(libc::EMFILE)?;
        let old = {
            let mut g = self.slot(i).write().unwrap_or_else(|p| p.into_inner());
            let old = g.replace(obj);
            STATE[i].store(OURS, Ordering::Release);
            old
        };
        HIGH.fetch_max(i + 1, Ordering::Relaxed);
        Ok(old)
    }

    /// Takes `fd`'s object out before its real close: the entry is CLOSING
    /// until [`end_close`]. None when `fd` is not ours.
    pub fn begin_close(&self, fd: c_int) -> Option<Arc<T>> {
        let i = index(fd)?;
        if STATE[i].load(Ordering::Acquire) != OURS {
            return None;
        }
        let mut g = self.slot(i).write().unwrap_or_else(|p| p.into_inner());
        let obj = g.take();
        STATE[i].store(CLOSING, Ordering::Release);
        obj
    }

    /// Drops `fd`'s entry (the fd stays open, now a plain kernel fd): a socket
    /// handed over to the kernel. Returns the object if it was `obj`'s.
    pub fn release(&self, fd: c_int, obj: &Arc<T>) -> Option<Arc<T>> {
        let i = index(fd)?;
        let mut g = self.slot(i).write().unwrap_or_else(|p| p.into_inner());
        if !g.as_ref().is_some_and(|o| Arc::ptr_eq(o, obj)) {
            return None;
        }
        STATE[i].store(FREE, Ordering::Release);
        g.take()
    }

    /// Forgets a stale entry at `fd` (a number the kernel just handed out for
    /// something else); returns it for the caller to drop.
    pub fn forget(&self, fd: c_int) -> Option<Arc<T>> {
        let i = index(fd)?;
        if STATE[i].load(Ordering::Acquire) != OURS {
            return None;
        }
        let mut g = self.slot(i).write().unwrap_or_else(|p| p.into_inner());
        STATE[i].store(FREE, Ordering::Release);
        g.take()
    }

    /// Takes every entry out of the table (process exit: Linux closes
    /// every fd, so each connection gets its FIN); the fds stay open.
    pub fn take_all(&self) -> Vec<Arc<T>> {
        ours_in(0, u32::MAX)
            .0
            .into_iter()
            .filter_map(|fd| {
                let o = self.begin_close(fd);
                end_close(fd);
                o
            })
            .collect()
    }
}

impl<S, E> Slots<Handle<S, E>> {
    /// The socket behind `fd`, if `fd` is one of ours.
    pub fn sock(&self, fd: c_int) -> Option<Arc<Handle<S, E>>> {
        self.get(fd).filter(|o| matches!(**o, Handle::Sock(_)))
    }
}

/// After the real close: CLOSING back to FREE (a number reused by another
/// thread in between stays as that thread made it).
pub fn end_close(fd: c_int) {
    if let Some(i) = index(fd) {
        let _ = STATE[i].compare_exchange(CLOSING, FREE, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// True when `fd` is one of the shim's own (the application may not close
/// it or `dup2` onto it: EBADF).
pub fn is_reserved(fd: c_int) -> bool {
    index(fd).is_some_and(|i| STATE[i].load(Ordering::Acquire) == RESERVED)
}

/// Marks `fd` as the shim's own.
pub fn reserve(fd: c_int) {
    if let Some(i) = index(fd) {
        STATE[i].store(RESERVED, Ordering::Release);
        HIGH.fetch_max(i + 1, Ordering::Relaxed);
    }
}

/// The fds of ours (and reserved ones) in `[first, last]`, ascending.
pub fn ours_in(first: u32, last: u32) -> (Vec<c_int>, Vec<c_int>) {
    let high = HIGH.load(Ordering::Relaxed);
    let (mut ours, mut reserved) = (Vec::new(), Vec::new());
    let end = (last as usize).saturating_add(1).min(high);
    for (i, st) in STATE.iter().enumerate().take(end).skip(first as usize) {
        match st.load(Ordering::Acquire) {
            OURS => ours.push(i as c_int),
            RESERVED => reserved.push(i as c_int),
            _ => {}
        }
    }
    (ours, reserved)
}

/// The lowest number the shim's own fds take (F_DUPFD): three quarters of
/// the soft RLIMIT_NOFILE at start-up, so that applications that `dup2`
/// onto small fixed numbers never meet them; at least 64.
pub fn internal_base() -> c_int {
    let b = BASE.load(Ordering::Relaxed);
    if b > 0 {
        return b;
    }
    let soft = crate::sys::nofile_soft_limit();
    let base = (soft / 4 * 3).clamp(64, (MAX_FDS - CHUNK) as u64) as c_int;
    BASE.store(base, Ordering::Relaxed);
    base
}

/// A new eventfd (CLOEXEC, NONBLOCK) for the shim's own use, moved above
/// the numbers applications use ([`internal_base`]) and reserved in the
/// table so that the application cannot close it or `dup2` onto it.
/// Errors: the errno of eventfd (EMFILE, ...).
pub fn internal_eventfd() -> Result<c_int, c_int> {
    internal_eventfd_owned().map(IntoRawFd::into_raw_fd)
}

/// [`internal_eventfd`] as an owned fd (closing it does not lift the
/// reservation: for eventfds the shim keeps for the life of the process,
/// such as the ones handed to a daemon).
pub fn internal_eventfd_owned() -> Result<OwnedFd, c_int> {
    let fd = crate::sys::eventfd_above(internal_base())?;
    reserve(fd.as_raw_fd());
    Ok(fd)
}

/// A connected pair of AF_UNIX datagram sockets for the shim's own use
/// (CLOEXEC, both moved above the application's numbers and reserved, as
/// [`internal_eventfd`]). Errors: the errno of socketpair.
pub fn internal_dgram_pair() -> Result<(OwnedFd, OwnedFd), c_int> {
    let (a, b) = crate::sys::dgram_pair_above(internal_base())?;
    reserve(a.as_raw_fd());
    reserve(b.as_raw_fd());
    Ok((a, b))
}
