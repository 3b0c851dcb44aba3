//! poll, ppoll, select and pselect over a mix of kernel fds and corestack
//! sockets.
//!
//! The corestack sockets are answered by the shim (their placeholder fds
//! are replaced by -1 in the set given to the kernel, which then ignores
//! them; a wildcard socket's kernel side stays in it); everything else by
//! the kernel. A wait looks at both sides, spins for the stack's spin
//! time, then arms the stack's doorbell with the thread's eventfd, looks
//! once more, and sleeps in the real poll with the eventfd appended. EINTR
//! comes from the kernel, as for Linux's own poll and select (never
//! restarted), or for a signal that arrives during the spin from
//! [`corestack::SpinSignals`]. select is converted to poll and back, as Linux does it
//! (POLLIN_SET, POLLOUT_SET, POLLEX_SET).
#![forbid(unsafe_code)]

use crate::cancel::{self, Quiet};
use crate::table::{self, Obj};
use crate::wait::{self, Deadline};
use core::ffi::c_int;
use libc::pollfd;
use std::sync::Arc;

/// The corestack sockets in `fds` (index, object), if any.
pub fn ours(fds: &[pollfd]) -> Vec<(usize, Arc<Obj>)> {
    fds.iter()
        .enumerate()
        .filter_map(|(i, p)| table::sock(p.fd).map(|o| (i, o)))
        .collect()
}

/// poll(2) / ppoll(2) on `fds`, of which `ours` are corestack sockets.
pub fn poll(
    fds: &mut [pollfd],
    ours: &[(usize, Arc<Obj>)],
    deadline: Deadline,
    mask: Option<&libc::sigset_t>,
) -> Result<usize, c_int> {
    // The set the kernel sees: our sockets without a kernel side are -1.
    let mut kset: Vec<pollfd> = fds.to_vec();
    let kernel_side: Vec<bool> = ours
        .iter()
        .map(|(i, o)| {
            let Obj::Sock(s) = &**o else { return false };
            let (_, k) = s.poll_bits();
            if !k {
                kset[*i].fd = -1;
            }
            k
        })
        .collect();
    let nkernel = kset.iter().filter(|p| p.fd >= 0).count();
    let stack = crate::process::started();
    let spin_until =
        std::time::Instant::now() + stack.map_or(core::time::Duration::ZERO, |s| s.spin_time());
    let mut round = 0u32;
    // A signal during the spin is EINTR, as during the kernel's sleep.
    let mut sig = corestack::SpinSignals::new(mask);
    // No cancellation acts inside; a requested one ends the wait.
    let quiet = Quiet::new();
    loop {
        if let Some(s) = stack.filter(|s| s.is_inline()) {
            s.drive();
        }
        let look_kernel = nkernel > 0 && round.is_multiple_of(16);
        if let Some(n) = look(fds, &mut kset, ours, &kernel_side, look_kernel)? {
            return Ok(n);
        }
        if deadline.passed() {
            return Ok(0);
        }
        if quiet.due() {
            return Err(cancel::PENDING);
        }
        round = round.wrapping_add(1);
        let Some(stack) = stack else {
            // No stack yet: only undecided sockets, which the kernel
            // answers (with the thread's eventfd, for a cancel).
            let efd = wait::thread_eventfd()?;
            let asleep = quiet.asleep_eventfd(efd);
            if quiet.due() {
                continue;
            }
            let mut set = kset.clone();
            set.push(pollfd {
                fd: efd,
                events: libc::POLLIN,
                revents: 0,
            });
            let r = crate::sys::poll_fds(&mut set, deadline.poll_ms(), mask);
            drop(asleep);
            if set.last().is_some_and(|p| p.revents != 0) {
                crate::sys::eventfd_drain(efd);
            }
            r?;
            round = 0;
            continue;
        };
        if sig.check().is_some() {
            return Err(libc::EINTR);
        }
        if stack.is_inline() {
            // Held through the naps too (ppoll unblocks atomically).
            sig.hold();
            if !stack.idle() {
                continue;
            }
            if sig.check().is_some() {
                return Err(libc::EINTR);
            }
            let nap_mask = sig.sleep_mask();
            let mut set = kset.clone();
            if let Some(nic) = stack.nic_fd() {
                set.push(pollfd {
                    fd: nic,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            let cap = corestack::Stack::MAX_INLINE_SLEEP.as_millis().max(1) as i64;
            let ms = deadline.poll_ms();
            crate::sys::poll_fds(
                &mut set,
                if ms < 0 { cap } else { ms.min(cap) },
                nap_mask.as_ref(),
            )?;
            continue;
        }
        if std::time::Instant::now() < spin_until {
            sig.hold();
            corestack::spin_round();
            continue;
        }
        if sig.release().is_some() {
            return Err(libc::EINTR);
        }
        let efd = wait::thread_eventfd()?;
        let asleep = quiet.asleep_eventfd(efd);
        let armed = stack.arm(stack.changes(), efd);
        if let Some(n) = look(fds, &mut kset, ours, &kernel_side, false)? {
            return Ok(n);
        }
        if quiet.due() {
            continue;
        }
        let mut set = kset.clone();
        set.push(pollfd {
            fd: efd,
            events: libc::POLLIN,
            revents: 0,
        });
        let ms = deadline.sleep_ms(armed.is_some());
        let r = crate::sys::poll_fds(&mut set, ms, mask);
        drop(armed);
        drop(asleep);
        if set.last().is_some_and(|p| p.revents != 0) {
            crate::sys::eventfd_drain(efd);
        }
        r?;
        // Kernel results are taken by the next look (with a zero timeout).
        round = 0;
    }
}

/// One look at both sides: Some(count) when something is ready.
fn look(
    fds: &mut [pollfd],
    kset: &mut [pollfd],
    ours: &[(usize, Arc<Obj>)],
    kernel_side: &[bool],
    kernel: bool,
) -> Result<Option<usize>, c_int> {
    if kernel {
        crate::sys::poll_fds(kset, 0, None)?;
    } else {
        for p in kset.iter_mut() {
            p.revents = 0;
        }
    }
    for (p, k) in fds.iter_mut().zip(kset.iter()) {
        p.revents = k.revents;
    }
    for ((i, o), &kside) in ours.iter().zip(kernel_side) {
        let Obj::Sock(s) = &**o else { continue };
        let (bits, _) = s.poll_bits();
        let want = fds[*i].events as u16 as u32 | (libc::POLLHUP | libc::POLLERR) as u32;
        let mine = (bits & want) as u16 as i16;
        fds[*i].revents = if kside { fds[*i].revents | mine } else { mine };
    }
    let n = fds.iter().filter(|p| p.revents != 0).count();
    Ok((n > 0).then_some(n))
}

/// What select(2) asks of an fd, as poll events (Linux's sets).
pub const POLLIN_SET: i16 =
    libc::POLLRDNORM | libc::POLLRDBAND | libc::POLLIN | libc::POLLHUP | libc::POLLERR;
/// See [`POLLIN_SET`].
pub const POLLOUT_SET: i16 = libc::POLLWRBAND | libc::POLLWRNORM | libc::POLLOUT | libc::POLLERR;
/// See [`POLLIN_SET`].
pub const POLLEX_SET: i16 = libc::POLLPRI;

/// select(2) / pselect(2) on the sets given as 64-bit words (`None`: a
/// null set); `nfds` at most FD_SETSIZE. Returns the number of bits set.
/// Errors: EBADF when a set names an fd that is not open; those of poll.
pub fn select(
    nfds: usize,
    r: Option<&mut [u64; 16]>,
    w: Option<&mut [u64; 16]>,
    e: Option<&mut [u64; 16]>,
    deadline: Deadline,
    mask: Option<&libc::sigset_t>,
) -> Result<usize, c_int> {
    let bit = |set: &Option<&mut [u64; 16]>, fd: usize| {
        set.as_ref()
            .is_some_and(|s| s[fd / 64] >> (fd % 64) & 1 == 1)
    };
    let mut fds = Vec::new();
    for fd in 0..nfds.min(1024) {
        let mut ev = 0i16;
        if bit(&r, fd) {
            ev |= libc::POLLIN;
        }
        if bit(&w, fd) {
            ev |= libc::POLLOUT;
        }
        if bit(&e, fd) {
            ev |= libc::POLLPRI;
        }
        if ev != 0 {
            fds.push(pollfd {
                fd: fd as c_int,
                events: ev,
                revents: 0,
            });
        }
    }
    let ours = ours(&fds);
    let mut r = r;
    let mut w = w;
    let mut e = e;
    for s in [&mut r, &mut w, &mut e].into_iter().flatten() {
        s.fill(0);
    }
    poll(&mut fds, &ours, deadline, mask)?;
    let mut count = 0;
    for p in &fds {
        if p.revents & libc::POLLNVAL != 0 {
            return Err(libc::EBADF);
        }
        let fd = p.fd as usize;
        let mut set = |s: &mut Option<&mut [u64; 16]>, asked: i16, got: i16| {
            if let Some(s) = s {
                if p.events & asked != 0 && p.revents & got != 0 {
                    s[fd / 64] |= 1 << (fd % 64);
                    count += 1;
                }
            }
        };
        set(&mut r, libc::POLLIN, POLLIN_SET);
        set(&mut w, libc::POLLOUT, POLLOUT_SET);
        set(&mut e, libc::POLLPRI, POLLEX_SET);
    }
    Ok(count)
}
