//! The ready list: how the engine tells a readiness waiter which of its
//! sockets changed, so that a wait costs O(sockets that changed) instead of
//! a look at every registered socket (epoll's ready list, for corestack's
//! own sockets).
//!
//! A waiter ([`ReadyList`]) owns a bounded single-producer single-consumer
//! ring of tokens. A socket's status block carries at most one [`Watch`]:
//! the list it reports to, its token there and a `queued` flag. When the
//! engine notifies the block ([`crate::socket::StatusHandle::wake`]) it
//! pushes the token unless the flag says it is queued already; the waiter
//! clears the flag when it takes the token and then looks at the socket,
//! so a change after that look queues the token again. A ring that is full
//! sets `overflow`: the waiter then looks at every socket once.
//!
//! The producer is the engine, which one thread at a time runs (inline
//! mode hands it over under a lock); the consumer is the waiter that owns
//! the list. Only for status blocks in this process's memory (embedded and
//! inline mode): in service mode the engine runs in the daemon, which
//! holds its own handles of the blocks, and waiters look at every socket.

use core::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Tokens a [`ReadyList`] holds before it overflows.
pub const READY_LIST_TOKENS: usize = 4096;

/// A waiter's queue of the tokens of sockets that changed.
#[derive(Debug)]
pub struct ReadyList {
    slots: Box<[AtomicU64]>,
    /// Next slot the producer writes (monotonic).
    tail: AtomicUsize,
    /// Next slot the consumer reads (monotonic).
    head: AtomicUsize,
    /// A token could not be queued: the waiter must look at every socket.
    overflow: AtomicBool,
}

impl ReadyList {
    /// An empty list of [`READY_LIST_TOKENS`] tokens.
    pub fn new() -> Arc<ReadyList> {
        Self::with_capacity(READY_LIST_TOKENS)
    }

    /// An empty list of `cap` tokens (at least 1).
    pub fn with_capacity(cap: usize) -> Arc<ReadyList> {
        Arc::new(ReadyList {
            slots: (0..cap.max(1)).map(|_| AtomicU64::new(0)).collect(),
            tail: AtomicUsize::new(0),
            head: AtomicUsize::new(0),
            overflow: AtomicBool::new(false),
        })
    }

    /// Producer (the engine): queues `token`, or records the overflow.
    fn push(&self, token: u64) {
        let t = self.tail.load(Ordering::Relaxed);
        if t.wrapping_sub(self.head.load(Ordering::Acquire)) >= self.slots.len() {
            self.overflow.store(true, Ordering::SeqCst);
            return;
        }
        self.slots[t % self.slots.len()].store(token, Ordering::Relaxed);
        self.tail.store(t.wrapping_add(1), Ordering::Release);
    }

    /// Consumer: the oldest queued token.
    pub fn pop(&self) -> Option<u64> {
        let h = self.head.load(Ordering::Relaxed);
        if h == self.tail.load(Ordering::Acquire) {
            return None;
        }
        let token = self.slots[h % self.slots.len()].load(Ordering::Relaxed);
        self.head.store(h.wrapping_add(1), Ordering::Release);
        Some(token)
    }

    /// Consumer: true (once) when tokens were lost to a full ring since the
    /// last call; the waiter must then look at every socket.
    pub fn take_overflow(&self) -> bool {
        self.overflow.swap(false, Ordering::SeqCst)
    }
}

/// A socket's registration with a [`ReadyList`] (kept in its status block).
#[derive(Debug)]
pub struct Watch {
    list: Arc<ReadyList>,
    token: AtomicU64,
    active: AtomicBool,
    queued: AtomicBool,
}

impl Watch {
    /// A watch for `list`, reporting `token`.
    pub fn new(list: &Arc<ReadyList>, token: u64) -> Watch {
        Watch {
            list: list.clone(),
            token: AtomicU64::new(token),
            active: AtomicBool::new(true),
            queued: AtomicBool::new(false),
        }
    }

    /// True when this watch reports to `list`.
    pub fn is_for(&self, list: &Arc<ReadyList>) -> bool {
        Arc::ptr_eq(&self.list, list)
    }

    /// Reports to its list again under `token` (a new registration).
    pub fn activate(&self, token: u64) {
        self.token.store(token, Ordering::SeqCst);
        self.queued.store(false, Ordering::SeqCst);
        self.active.store(true, Ordering::SeqCst);
    }

    /// Stops reporting (the registration was removed).
    pub fn deactivate(&self) {
        self.active.store(false, Ordering::SeqCst);
    }

    /// Consumer, having taken the token: the next change queues it again.
    /// Call before looking at the socket, so that no change is missed.
    pub fn rearm(&self) {
        self.queued.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Producer (the engine, after changing the socket): queues the token
    /// unless it is queued already.
    pub fn signal(&self) {
        if self.active.load(Ordering::Acquire) && !self.queued.swap(true, Ordering::SeqCst) {
            self.list.push(self.token.load(Ordering::Relaxed));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_queues_the_token_once_until_rearmed() {
        let list = ReadyList::with_capacity(4);
        let w = Watch::new(&list, 7);
        w.signal();
        w.signal();
        assert_eq!(list.pop(), Some(7));
        assert_eq!(list.pop(), None);
        w.signal();
        assert_eq!(list.pop(), None, "still queued: not rearmed");
        w.rearm();
        w.signal();
        assert_eq!(list.pop(), Some(7));
    }

    #[test]
    fn a_full_list_reports_overflow_once() {
        let list = ReadyList::with_capacity(2);
        let ws: Vec<Watch> = (0..3).map(|t| Watch::new(&list, t)).collect();
        for w in &ws {
            w.signal();
        }
        assert!(list.take_overflow());
        assert!(!list.take_overflow());
        assert_eq!(list.pop(), Some(0));
        assert_eq!(list.pop(), Some(1));
        assert_eq!(list.pop(), None);
    }

    #[test]
    fn an_inactive_watch_queues_nothing() {
        let list = ReadyList::with_capacity(2);
        let w = Watch::new(&list, 1);
        w.deactivate();
        w.signal();
        assert_eq!(list.pop(), None);
        w.activate(9);
        w.signal();
        assert_eq!(list.pop(), Some(9));
    }
}
