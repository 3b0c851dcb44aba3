//! The readiness API, shaped like epoll: `cs_poller_create`,
//! `cs_poller_ctl`, `cs_poller_wait`, `cs_poller_close`.
//!
//! A poller is a descriptor holding a [`corestack::Poller`]. Readiness is
//! level-triggered: a socket is reported on every wait while it stays
//! ready. Sockets are registered under their entry's serial number, so a
//! registration never outlives its socket: after a `cs_close`, the next
//! wait of every poller drops the registrations of closed descriptors
//! (as closing an fd removes it from every epoll set).
//!
//! A wait holds its poller's lock in slices of at most [`SLICE`], so a
//! `cs_poller_ctl` or `cs_close` on the same poller from another thread
//! takes effect within one slice.

use crate::error::{Error, Result};
use crate::ffi::{self, CsEvent};
use crate::table::{self, Desc, PollerSet, Reg, Slot};
use crate::{CS_POLLHUP, CS_POLLIN, CS_POLLOUT, CS_POLL_ADD, CS_POLL_DEL, CS_POLL_MOD};
use corestack::{Event, Interest, Poller};
use std::ffi::c_int;
use std::time::{Duration, Instant};

/// The longest a wait holds its poller's lock at a time.
pub const SLICE: Duration = Duration::from_millis(10);

/// Waits up to `slice` on `ps` and fills `out` with ready registrations.
fn wait(ps: &mut PollerSet, out: &mut [CsEvent], slice: Duration) -> Result<usize> {
    ps.purge();
    ps.poller.wait(&mut ps.events, out.len(), Some(slice))?;
    ps.purge();
    let mut n = 0;
    for ev in &ps.events {
        let Some(reg) = ps.regs.get(&ev.token) else {
            continue;
        };
        if let Some(slot) = out.get_mut(n) {
            *slot = CsEvent {
                events: bits(ev),
                data: reg.data,
            };
            n += 1;
        }
    }
    Ok(n)
}

fn bits(ev: &Event) -> u32 {
    let mut b = 0;
    if ev.readable {
        b |= CS_POLLIN;
    }
    if ev.writable {
        b |= CS_POLLOUT;
    }
    if ev.closed {
        b |= CS_POLLHUP;
    }
    b
}

/// The interest `events` asks for. CS_POLLHUP is accepted and ignored (it
/// is always reported with the readiness asked for). Errors: EINVAL for
/// other bits.
fn interest(events: u32) -> Result<Interest> {
    if events & !(CS_POLLIN | CS_POLLOUT | CS_POLLHUP) != 0 {
        return Err(Error::msg(
            libc::EINVAL,
            "unknown event bits: use CS_POLLIN and CS_POLLOUT",
        ));
    }
    Ok(Interest {
        readable: events & CS_POLLIN != 0,
        writable: events & CS_POLLOUT != 0,
    })
}

/// Registers the socket in `d` with `p` under `token`. Errors: EINVAL for
/// a socket that is neither listening, connected nor bound (there is
/// nothing to watch yet) and for a poller; EEXIST when `token` is taken.
pub(crate) fn register(p: &mut Poller, d: &Desc, token: u64, interest: Interest) -> Result<()> {
    let r = match &d.slot {
        Slot::Stream(s) => p.register(s, token, interest),
        Slot::Listener(l) => p.register(l, token, interest),
        Slot::Udp(u) => p.register(u, token, interest),
        Slot::TcpFresh { .. } | Slot::UdpFresh => {
            return Err(Error::msg(
                libc::EINVAL,
                "nothing to watch yet: register a socket after cs_listen, cs_connect or cs_bind",
            ))
        }
        Slot::Poller(_) => return Err(Error::msg(libc::EINVAL, "a poller cannot watch a poller")),
        Slot::Closed => return Err(Error::errno(libc::EBADF)),
    };
    r.map_err(Error::from)
}

/// Creates a poller and returns its descriptor.
///
/// Errors: ENETDOWN before `cs_init`, EMFILE when the table is full.
#[no_mangle]
pub extern "C" fn cs_poller_create() -> c_int {
    crate::error::ffi(-1, || {
        let stack = table::stack()?;
        table::insert(Desc::new(Slot::Poller(Box::new(PollerSet::new(&stack)))))
    })
}

/// Adds (`CS_POLL_ADD`), changes (`CS_POLL_MOD`) or removes
/// (`CS_POLL_DEL`) the watch of poller `pd` on socket `sd`. `events` is
/// CS_POLLIN and/or CS_POLLOUT; `data` comes back in each event for `sd`
/// (ignored by CS_POLL_DEL). Returns 0.
///
/// Errors: EBADF when `pd` or `sd` is not open; EINVAL when `pd` is not a
/// poller, `sd` is `pd` or a poller, `op` or `events` is unknown, or `sd`
/// is a socket with nothing to watch yet (neither listening, connected nor
/// bound); EEXIST when adding a socket already watched; ENOENT when
/// changing or removing one that is not.
#[no_mangle]
pub extern "C" fn cs_poller_ctl(pd: c_int, op: c_int, sd: c_int, events: u32, data: u64) -> c_int {
    crate::error::ffi(-1, || {
        if pd == sd {
            return Err(Error::msg(libc::EINVAL, "a poller cannot watch itself"));
        }
        let pe = table::lookup(pd)?;
        let se = table::lookup(sd)?;
        let interest = interest(events)?;
        // Lock order: socket, then poller. A poller is never locked as the
        // socket here (refused before the poller is locked), so two pollers
        // are never held at once.
        let sdesc = se.lock();
        if matches!(sdesc.slot, Slot::Poller(_)) {
            return Err(Error::msg(libc::EINVAL, "a poller cannot watch a poller"));
        }
        let mut pdesc = pe.lock();
        let ps = match &mut pdesc.slot {
            Slot::Poller(ps) => ps,
            Slot::Closed => return Err(Error::errno(libc::EBADF)),
            _ => return Err(Error::msg(libc::EINVAL, "not a poller descriptor")),
        };
        let serial = se.serial;
        match op {
            CS_POLL_ADD => {
                if ps.regs.contains_key(&serial) {
                    return Err(Error::errno(libc::EEXIST));
                }
                register(&mut ps.poller, &sdesc, serial, interest)?;
                ps.regs.insert(serial, Reg { sd, data });
            }
            CS_POLL_MOD => {
                let reg = ps
                    .regs
                    .get_mut(&serial)
                    .ok_or_else(|| Error::errno(libc::ENOENT))?;
                ps.poller.reregister(serial, interest)?;
                reg.data = data;
            }
            CS_POLL_DEL => {
                ps.regs
                    .remove(&serial)
                    .ok_or_else(|| Error::errno(libc::ENOENT))?;
                ps.poller.deregister(serial)?;
            }
            _ => {
                return Err(Error::msg(
                    libc::EINVAL,
                    "unknown op: use CS_POLL_ADD, CS_POLL_MOD or CS_POLL_DEL",
                ))
            }
        }
        Ok(0)
    })
}

/// Waits until at least one watched socket is ready or `timeout_ms`
/// milliseconds pass (-1: without limit, 0: just look), and fills up to
/// `max` records of `evs`. Returns the number filled, 0 on timeout.
///
/// Each record's `events` holds CS_POLLIN (a recv, accept or recvfrom will
/// not wait: data, a connection, end of stream or an error is there),
/// CS_POLLOUT (a send will not wait) and CS_POLLHUP (the connection is
/// closed: reads return 0 or the error), as far as they were asked for.
/// Signals do not interrupt the wait (no EINTR).
///
/// Errors: EBADF when `pd` is not open (or is closed during the wait),
/// EINVAL when it is not a poller or `max` < 1, EFAULT when `evs` is null.
///
/// # Safety
/// `evs` must be null or valid for writes of `max` `struct cs_event`s.
#[no_mangle]
pub unsafe extern "C" fn cs_poller_wait(
    pd: c_int,
    evs: *mut CsEvent,
    max: c_int,
    timeout_ms: c_int,
) -> c_int {
    crate::error::ffi(-1, || {
        // SAFETY: the caller promises `max` writable records at `evs`.
        let out = unsafe { ffi::events(evs, max) }?;
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        let start = Instant::now();
        let entry = table::lookup(pd)?;
        loop {
            let left = timeout.map(|t| t.saturating_sub(start.elapsed()));
            let slice = left.map_or(SLICE, |l| l.min(SLICE));
            {
                let mut d = entry.lock();
                let ps = match &mut d.slot {
                    Slot::Poller(ps) => ps,
                    Slot::Closed => return Err(Error::errno(libc::EBADF)),
                    _ => return Err(Error::msg(libc::EINVAL, "not a poller descriptor")),
                };
                let n = wait(ps, out, slice)?;
                if n > 0 {
                    return Ok(n as c_int);
                }
            }
            if left.is_some_and(|l| l <= slice) {
                return Ok(0);
            }
            entry.yield_to_contenders();
        }
    })
}

/// Closes poller `pd` (its registrations go with it; the sockets stay
/// open). Returns 0. Errors: EBADF when `pd` is not open, EINVAL when it is
/// not a poller (use `cs_close`).
#[no_mangle]
pub extern "C" fn cs_poller_close(pd: c_int) -> c_int {
    crate::error::ffi(-1, || {
        let e = table::lookup(pd)?;
        if !matches!(e.lock().slot, Slot::Poller(_)) {
            return Err(Error::msg(
                libc::EINVAL,
                "not a poller descriptor: close sockets with cs_close",
            ));
        }
        table::close(pd)?;
        Ok(0)
    })
}
