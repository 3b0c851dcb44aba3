//! The process's one stack and its descriptor table.
//!
//! Descriptors are small non-negative ints, indexes into a table of
//! entries; the lowest free index is reused first, as with kernel fds. They
//! are not kernel fds: `close(2)` or `poll(2)` on one means nothing.
//!
//! Locking: the table is behind a `RwLock` (lookups read, socket creation
//! and close write) and each entry behind its own `Mutex`. The table lock
//! is never held while an entry lock is taken; an entry lock may be held
//! while the table is read. A waiting call never holds a lock while it
//! sleeps, except `cs_poller_wait`, which holds its poller's for slices of
//! at most `SLICE` (poll.rs).
//!
//! Each entry carries a serial number, unique for the life of the process,
//! so that a poller can tell a registered socket from a newer one that got
//! the same descriptor after a close.

use crate::error::{Error, Result};
use corestack::{Event, Poller, Stack, TcpListener, TcpStream, UdpSocket};
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The most descriptors open at once; one more is EMFILE.
pub const MAX_DESCRIPTORS: usize = 1 << 16;

/// What a descriptor is.
pub(crate) enum Slot {
    /// Closed while another call was using it.
    Closed,
    /// A TCP socket before `cs_listen` or `cs_connect`; `local` from `cs_bind`.
    TcpFresh {
        local: Option<core::net::SocketAddr>,
        /// A `cs_connect` is under way on another thread.
        connecting: bool,
    },
    Listener(TcpListener),
    Stream(TcpStream),
    /// A UDP socket before `cs_bind` (or the first `cs_sendto`).
    UdpFresh,
    Udp(UdpSocket),
    Poller(Box<PollerSet>),
}

/// A descriptor's state. The Rust sockets inside are always non-blocking:
/// `nonblocking` here decides whether a call waits.
pub(crate) struct Desc {
    pub slot: Slot,
    pub nonblocking: bool,
    /// TCP_NODELAY: applied at connect, inherited by accepted connections.
    pub nodelay: bool,
    /// SO_RCVBUF and SO_SNDBUF in bytes (0: not set): applied at connect
    /// and listen (the engine gives them to accepted connections).
    pub buffers: (usize, usize),
    /// `cs_shutdown(SHUT_RD)` was called: reads no longer wait.
    pub rd_shut: bool,
}

impl Desc {
    pub fn new(slot: Slot) -> Desc {
        Desc {
            slot,
            nonblocking: false,
            nodelay: false,
            buffers: (0, 0),
            rd_shut: false,
        }
    }
}

/// What a poller registration carries back to the caller.
pub(crate) struct Reg {
    pub sd: c_int,
    pub data: u64,
}

/// A poller descriptor's state; the calls on it are in poll.rs.
pub(crate) struct PollerSet {
    pub poller: Poller,
    /// By the registered entry's serial (the poller's token).
    pub regs: HashMap<u64, Reg>,
    /// Scratch for `Poller::wait`, reused.
    pub events: Vec<Event>,
    /// [`closes`] at the last purge.
    seen_closes: u64,
}

impl PollerSet {
    pub fn new(stack: &Stack) -> PollerSet {
        PollerSet {
            poller: Poller::new(stack),
            regs: HashMap::new(),
            events: Vec::new(),
            seen_closes: closes(),
        }
    }

    /// Drops the registrations of descriptors closed since the last purge
    /// (nothing to do when none was closed).
    pub fn purge(&mut self) {
        if closes() == self.seen_closes {
            return;
        }
        self.seen_closes = closes();
        let regs = &self.regs;
        let stale: Vec<u64> = with(|t| {
            regs.iter()
                .filter(|(serial, r)| t.serial_of(r.sd) != Some(**serial))
                .map(|(serial, _)| *serial)
                .collect()
        });
        for serial in stale {
            self.regs.remove(&serial);
            let _ = self.poller.deregister(serial);
        }
    }
}

/// One table entry.
pub(crate) struct Entry {
    /// Unique for the life of the process (never reused).
    pub serial: u64,
    /// Threads waiting for `desc`'s lock; a long holder (a poller wait)
    /// lets them in between its slices.
    contenders: AtomicU32,
    desc: Mutex<Desc>,
}

impl Entry {
    /// Locks the descriptor (a poisoned lock is taken over: every state a
    /// panic can leave behind is a valid one).
    pub fn lock(&self) -> MutexGuard<'_, Desc> {
        self.contenders.fetch_add(1, Ordering::Relaxed);
        let g = self.desc.lock().unwrap_or_else(|p| p.into_inner());
        self.contenders.fetch_sub(1, Ordering::Relaxed);
        g
    }

    /// Lets threads waiting for this entry's lock take it (bounded: at most
    /// about a thousand yields).
    pub fn yield_to_contenders(&self) {
        for _ in 0..1000 {
            if self.contenders.load(Ordering::Relaxed) == 0 {
                return;
            }
            std::thread::yield_now();
        }
    }
}

/// The stack and the descriptors.
pub(crate) struct Table {
    stack: Option<Stack>,
    entries: Vec<Option<Arc<Entry>>>,
}

impl Table {
    /// The serial of the entry at `sd`, if it is open.
    pub fn serial_of(&self, sd: c_int) -> Option<u64> {
        let i = usize::try_from(sd).ok()?;
        self.entries.get(i)?.as_ref().map(|e| e.serial)
    }
}

static TABLE: RwLock<Table> = RwLock::new(Table {
    stack: None,
    entries: Vec::new(),
});
static SERIAL: AtomicU64 = AtomicU64::new(1);
/// Descriptors closed so far: a poller that saw a different count purges
/// its registrations of closed descriptors.
static CLOSES: AtomicU64 = AtomicU64::new(0);

fn read() -> RwLockReadGuard<'static, Table> {
    TABLE.read().unwrap_or_else(|p| p.into_inner())
}

fn write() -> RwLockWriteGuard<'static, Table> {
    TABLE.write().unwrap_or_else(|p| p.into_inner())
}

fn not_initialised() -> Error {
    Error::msg(
        libc::ENETDOWN,
        "corestack is not initialised: call cs_init() first",
    )
}

/// Runs `f` on the table under its read lock.
pub(crate) fn with<T>(f: impl FnOnce(&Table) -> T) -> T {
    f(&read())
}

/// Descriptors closed so far (see [`CLOSES`]).
pub(crate) fn closes() -> u64 {
    CLOSES.load(Ordering::Acquire)
}

/// The running stack. Errors: ENETDOWN before `cs_init`.
pub(crate) fn stack() -> Result<Stack> {
    read().stack.clone().ok_or_else(not_initialised)
}

/// Starts the stack with `start` unless one runs already.
pub(crate) fn init(start: impl FnOnce() -> Result<Stack>) -> Result<()> {
    let mut t = write();
    if t.stack.is_none() {
        t.stack = Some(start()?);
    }
    Ok(())
}

/// Closes every descriptor and drops the stack (its engine stops once no
/// other thread still holds it).
pub(crate) fn fini() {
    let (stack, entries) = {
        let mut t = write();
        (t.stack.take(), std::mem::take(&mut t.entries))
    };
    CLOSES.fetch_add(1, Ordering::AcqRel);
    for e in entries.into_iter().flatten() {
        e.lock().slot = Slot::Closed;
    }
    drop(stack);
}

/// The entry at `sd`. Errors: EBADF when `sd` is not open.
pub(crate) fn lookup(sd: c_int) -> Result<Arc<Entry>> {
    let t = read();
    usize::try_from(sd)
        .ok()
        .and_then(|i| t.entries.get(i))
        .and_then(|e| e.clone())
        .ok_or_else(|| Error::errno(libc::EBADF))
}

/// Installs `desc` at the lowest free descriptor. Errors: ENETDOWN before
/// `cs_init`, EMFILE when [`MAX_DESCRIPTORS`] are open.
pub(crate) fn insert(desc: Desc) -> Result<c_int> {
    let mut t = write();
    if t.stack.is_none() {
        return Err(not_initialised());
    }
    let i = match t.entries.iter().position(Option::is_none) {
        Some(i) => i,
        None if t.entries.len() < MAX_DESCRIPTORS => {
            t.entries.push(None);
            t.entries.len() - 1
        }
        None => return Err(Error::errno(libc::EMFILE)),
    };
    t.entries[i] = Some(Arc::new(Entry {
        serial: SERIAL.fetch_add(1, Ordering::Relaxed),
        contenders: AtomicU32::new(0),
        desc: Mutex::new(desc),
    }));
    Ok(i as c_int)
}

/// Frees `sd` and closes what it held. Errors: EBADF when it is not open.
pub(crate) fn close(sd: c_int) -> Result<()> {
    let entry = {
        let mut t = write();
        let slot = usize::try_from(sd).ok().and_then(|i| t.entries.get_mut(i));
        match slot.and_then(Option::take) {
            Some(e) => {
                // Keep the table short when its tail empties.
                while matches!(t.entries.last(), Some(None)) {
                    t.entries.pop();
                }
                e
            }
            None => return Err(Error::errno(libc::EBADF)),
        }
    };
    CLOSES.fetch_add(1, Ordering::AcqRel);
    // Dropping the socket sends the engine its close.
    let old = std::mem::replace(&mut entry.lock().slot, Slot::Closed);
    drop(old);
    Ok(())
}

#[cfg(test)]
pub(crate) fn install(stack: Stack) {
    write().stack = Some(stack);
}
