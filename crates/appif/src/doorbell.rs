//! An engine's doorbell: how whoever queues work for a napping engine (an
//! application's command, another engine's handoff) wakes it, with the
//! notify-flag protocol: the engine sets `sleeping`, looks at its queues
//! once more, then sleeps on the eventfd (with its NIC queue's fd); a
//! producer, after queueing, clears the flag if it was set and writes the
//! eventfd. An engine that is running is never signalled.

use core::sync::atomic::{AtomicBool, Ordering};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// One engine's doorbell: a flag and an eventfd.
#[derive(Debug)]
pub struct Doorbell {
    sleeping: AtomicBool,
    fd: OwnedFd,
}

impl Doorbell {
    /// A new doorbell. Errors: the errno of `eventfd` (EMFILE, ENFILE, ENOMEM).
    pub fn new() -> io::Result<Arc<Doorbell>> {
        Ok(Arc::new(Doorbell {
            sleeping: AtomicBool::new(false),
            fd: crate::sys::eventfd()?,
        }))
    }

    /// Producer, after queueing work: wakes the engine if it sleeps. One
    /// load when it does not.
    #[inline]
    pub fn ring(&self) {
        if self.sleeping.load(Ordering::SeqCst) && self.sleeping.swap(false, Ordering::SeqCst) {
            crate::sys::eventfd_signal(self.fd.as_fd());
        }
    }

    /// Engine, about to sleep: from now on producers signal. Look at every
    /// queue once more after this, then sleep on [`Doorbell::fd`].
    pub fn nap_begin(&self) {
        self.sleeping.store(true, Ordering::SeqCst);
    }

    /// Engine, awake again: producers stop signalling; the eventfd is drained.
    pub fn nap_end(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
        crate::sys::eventfd_drain(self.fd.as_fd());
    }

    /// The eventfd to sleep on (readable when rung).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_sleeping_engine_is_signalled() {
        let d = Doorbell::new().unwrap();
        d.ring();
        assert_eq!(
            crate::sys::eventfd_drain(d.fd.as_fd()),
            0,
            "awake: no signal"
        );
        d.nap_begin();
        d.ring();
        d.ring();
        assert_eq!(
            crate::sys::eventfd_drain(d.fd.as_fd()),
            1,
            "one signal per nap"
        );
        d.nap_end();
        d.ring();
        assert_eq!(crate::sys::eventfd_drain(d.fd.as_fd()), 0);
    }
}
