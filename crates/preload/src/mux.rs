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

use crate::cancel::Quiet;
use crate::obj::{self, Obj};
use crate::wait::{self, Deadline};
use core::ffi::c_int;
use libc::pollfd;
use std::sync::Arc;

/// The corestack sockets in `fds` (index, object), if any.
pub fn ours(fds: &[pollfd]) -> Vec<(usize, Arc<Obj>)> {
    fds.iter()
        .enumerate()
        .filter_map(|(i, p)| obj::sock(p.fd).map(|o| (i, o)))
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
    let stack = crate::stack::started();
    // The steps every wait takes (spin with signals held, then sleep); a
    // signal during the spin is EINTR, as during the kernel's sleep.
    let mut steps = stack.map(|s| corestack::WaitSteps::new(s, mask));
    let mut round = 0u32;
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
        if let Some(end) = deadline.nothing_ready(&quiet) {
            return end;
        }
        round = round.wrapping_add(1);
        let (Some(stack), Some(steps)) = (stack, steps.as_mut()) else {
            // No stack yet: only undecided sockets, which the kernel
            // answers (with the thread's eventfd, for a cancel).
            wait::sleep_on::<()>(None, &quiet, &kset, deadline, mask, || Ok(None))?;
            round = 0;
            continue;
        };
        match steps.next(stack).map_err(|_| libc::EINTR)? {
            corestack::Step::Look => {}
            corestack::Step::Nap(nap_mask) => {
                wait::nap(stack, &kset, deadline, nap_mask.as_ref())?;
            }
            corestack::Step::Sleep => {
                let recheck = || look(fds, &mut kset.clone(), ours, &kernel_side, false);
                let doorbell = Some((stack, stack.changes()));
                if let Some(n) = wait::sleep_on(doorbell, &quiet, &kset, deadline, mask, recheck)? {
                    return Ok(n);
                }
                // Kernel results are taken by the next look (with a zero timeout).
                round = 0;
            }
        }
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
