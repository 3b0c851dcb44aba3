//! The wake-up protocol (notify flag) over a futex word.
//!
//! A consumer about to sleep sets `sleeping`, re-checks its condition, then
//! waits on `seq`. A producer, after publishing, bumps `seq` and, only if
//! `sleeping` is set, clears it and wakes the sleeper: no wake-up is ever
//! sent to a consumer that is running.

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;

/// A wake-up point shared by one producer and its waiters. `repr(C)` and
/// made of atomics only, so it can live in memory shared between processes
/// (the futex calls are not process-private).
#[derive(Debug, Default)]
#[repr(C)]
pub struct Notify {
    seq: AtomicU32,
    sleeping: AtomicU32,
}

impl Notify {
    /// The current sequence; pass it to [`Notify::wait`] after checking the
    /// condition, so that a change in between is not missed.
    pub fn seq(&self) -> u32 {
        self.seq.load(Ordering::Acquire)
    }

    /// Producer side: records a change and wakes a sleeper if there is one.
    pub fn notify(&self) {
        self.seq.fetch_add(1, Ordering::Release);
        if self.sleeping.load(Ordering::SeqCst) != 0 {
            self.sleeping.store(0, Ordering::SeqCst);
            futex_wake(&self.seq);
        }
    }

    /// Consumer side: sleeps until `seq` moves past `seen` or `timeout`
    /// passes (None = no limit). Returns at once if it already moved.
    pub fn wait(&self, seen: u32, timeout: Option<Duration>) {
        self.sleeping.store(1, Ordering::SeqCst);
        if self.seq.load(Ordering::SeqCst) != seen {
            return;
        }
        futex_wait(&self.seq, seen, timeout);
    }
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT reads the aligned u32 behind `word`, which lives for
    // the call; `ts_ptr` is null or points to a timespec on our stack. Any
    // error (EAGAIN, EINTR, ETIMEDOUT) just ends the wait.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE only uses the address as a key.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn sleeping_waiter_is_woken_by_notify() {
        let n = Arc::new(Notify::default());
        let seen = n.seq();
        let n2 = n.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            n2.notify();
        });
        let start = std::time::Instant::now();
        n.wait(seen, Some(Duration::from_secs(5)));
        assert!(start.elapsed() < Duration::from_secs(4));
        assert_ne!(n.seq(), seen);
        t.join().unwrap();
    }

    #[test]
    fn wait_with_stale_seq_returns_at_once() {
        let n = Notify::default();
        let seen = n.seq();
        n.notify();
        let start = std::time::Instant::now();
        n.wait(seen, Some(Duration::from_secs(5)));
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
