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
//! The producers are the engines (a waiter's sockets may live on several;
//! inline mode hands each over under a lock); the consumer is the waiter
//! that owns the list. In service mode the engine runs in the daemon,
//! which cannot reach this list: it pushes the socket's slot to a ready
//! ring in the application's segment instead, and the application's drain
//! of those rings ([`crate::seg::ready`]) signals the watch. A status block
//! in a segment carries its slot's place in those rings ([`SlotReady`]);
//! the rings themselves are reached through [`SlotPush`] and [`SlotRoute`],
//! so that this module, and the socket module above it, need not name the
//! segment's.

use crate::region::View;
use crate::words::Notify;
use core::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

/// Tokens a [`ReadyList`] holds before it overflows.
pub const READY_LIST_TOKENS: usize = 4096;

/// A waiter's queue of the tokens of sockets that changed: a bounded
/// queue of many producers (one per engine: a waiter's sockets may live on
/// several) and one consumer, each slot with a sequence number saying
/// whose turn it is (Vyukov's bounded queue).
#[derive(Debug)]
pub struct ReadyList {
    slots: Box<[AtomicU64]>,
    /// Per slot: equal to the position a producer may write there, or
    /// that position + 1 once written (the consumer's turn).
    turns: Box<[AtomicUsize]>,
    /// Next position a producer claims (monotonic).
    tail: AtomicUsize,
    /// Next slot the consumer reads (monotonic).
    head: AtomicUsize,
    /// A token could not be queued: the waiter must look at every socket.
    overflow: AtomicBool,
    /// Rung after every push (and overflow): a waiter that arms it
    /// ([`Notify::arm`]) sleeps until one of its own sockets changes, not
    /// until any socket of the process does.
    bell: Notify,
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
            turns: (0..cap.max(1)).map(AtomicUsize::new).collect(),
            tail: AtomicUsize::new(0),
            head: AtomicUsize::new(0),
            overflow: AtomicBool::new(false),
            bell: Notify::default(),
        })
    }

    /// Producer (an engine): queues `token`, or records the overflow.
    /// Safe from several engines at once: a position is claimed by CAS on
    /// `tail`, then its slot is written and handed to the consumer.
    fn push(&self, token: u64) {
        let cap = self.slots.len();
        let mut t = self.tail.load(Ordering::Relaxed);
        loop {
            let turn = self.turns[t % cap].load(Ordering::Acquire);
            if turn == t {
                match self.tail.compare_exchange_weak(
                    t,
                    t.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(now) => t = now,
                }
            } else if turn.wrapping_sub(t) as isize > 0 {
                // Another producer took this position: look again.
                t = self.tail.load(Ordering::Relaxed);
            } else {
                // The consumer has not freed the slot a lap ago: full.
                self.overflow.store(true, Ordering::SeqCst);
                self.bell.notify();
                return;
            }
        }
        self.slots[t % cap].store(token, Ordering::Relaxed);
        self.turns[t % cap].store(t.wrapping_add(1), Ordering::Release);
        self.bell.notify();
    }

    /// The list's doorbell, rung by every push (and every overflow), in
    /// this process only: one atomic add and one load when nobody is
    /// armed. A waiter whose sockets all report here arms it instead of
    /// the stack-wide doorbell, so a change to another waiter's socket
    /// does not wake it.
    pub fn doorbell(&self) -> &Notify {
        &self.bell
    }

    /// Consumer: the oldest queued token (None also while the producer
    /// of the oldest is still writing it: it notifies after).
    pub fn pop(&self) -> Option<u64> {
        let cap = self.slots.len();
        let h = self.head.load(Ordering::Relaxed);
        if self.turns[h % cap].load(Ordering::Acquire) != h.wrapping_add(1) {
            return None;
        }
        let token = self.slots[h % cap].load(Ordering::Relaxed);
        self.turns[h % cap].store(h.wrapping_add(cap), Ordering::Release);
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

    /// True while it reports to its list.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
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

/// Engine: the ready ring a segment's slots are pushed to
/// ([`crate::seg::ready::ReadyProducer`]).
pub(crate) trait SlotPush: Send + Sync {
    /// Queues `slot`, or sets the ring's overflow word when it is full.
    fn push(&self, slot: u32);
}

/// Application: what hands a segment's slots to the status blocks waiters
/// watch ([`crate::seg::ready::ReadyRouter`]).
pub(crate) trait SlotRoute: Send + Sync {
    /// True in the process that mapped the segment.
    fn is_current(&self) -> bool;
    /// Routes `slot`'s changes to `to` (the block a waiter watches).
    fn route(&self, slot: u32, to: Weak<dyn Routed>);
}

/// What a [`SlotRoute`] hands a slot to: a status block a waiter watches
/// ([`crate::socket::StatusHandle`]).
pub(crate) trait Routed: Send + Sync {
    /// The engine pushed this block's slot: if a waiter watches it, clears
    /// the slot's `queued` word (unless `rearm` is false: a forked child's
    /// look), then queues the waiter's token.
    fn seg_signal(&self, rearm: bool);
}

/// A status block's place in the ready rings of an application segment
/// (service mode): its slot's `queued` word and, on the engine's handle,
/// the ring it is pushed to; on the application's, the router that hands
/// it to its waiter.
pub(crate) struct SlotReady {
    pub(crate) slot: u32,
    pub(crate) queued: View<AtomicU32>,
    pub(crate) producer: Option<Arc<dyn SlotPush>>,
    pub(crate) router: Option<Arc<dyn SlotRoute>>,
}

impl core::fmt::Debug for SlotReady {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SlotReady")
            .field("slot", &self.slot)
            .field("queued", &self.queued.load(Ordering::Relaxed))
            .finish()
    }
}

impl SlotReady {
    /// Engine, after changing the socket: pushes its slot unless queued.
    pub(crate) fn signal(&self) {
        if let Some(p) = &self.producer {
            if self.queued.load(Ordering::Relaxed) == 0
                && self.queued.swap(1, Ordering::SeqCst) == 0
            {
                p.push(self.slot);
            }
        }
    }

    /// Application: the next change pushes the slot again. Call before
    /// looking at the socket.
    pub(crate) fn rearm(&self) {
        self.queued.swap(0, Ordering::SeqCst);
        fence(Ordering::SeqCst);
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
    fn every_push_and_overflow_rings_the_doorbell() {
        let list = ReadyList::with_capacity(2);
        let ws: Vec<Watch> = (0..3).map(|t| Watch::new(&list, t)).collect();
        let s0 = list.doorbell().seq();
        ws[0].signal();
        assert_eq!(list.doorbell().seq(), s0.wrapping_add(1), "a push rings");
        ws[0].signal();
        assert_eq!(list.doorbell().seq(), s0.wrapping_add(1), "queued: no ring");
        ws[1].signal();
        ws[2].signal();
        assert_eq!(
            list.doorbell().seq(),
            s0.wrapping_add(3),
            "an overflow rings"
        );
        assert!(list.take_overflow());
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

    #[test]
    fn four_producers_at_once_lose_and_repeat_no_token() {
        const EACH: u64 = 20_000;
        let list = ReadyList::with_capacity(1024);
        let producers: Vec<_> = (0..4u64)
            .map(|p| {
                let list = list.clone();
                std::thread::spawn(move || {
                    for k in 0..EACH {
                        // Waits for room instead of overflowing, to count every token.
                        while list.tail.load(Ordering::Relaxed) - list.head.load(Ordering::Acquire)
                            >= 1000
                        {
                            std::thread::yield_now();
                        }
                        list.push(p * EACH + k);
                    }
                })
            })
            .collect();
        let mut seen = vec![false; 4 * EACH as usize];
        let mut got = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while got < 4 * EACH {
            assert!(std::time::Instant::now() < deadline, "{got} tokens taken");
            match list.pop() {
                Some(t) => {
                    assert!(!std::mem::replace(&mut seen[t as usize], true), "{t} twice");
                    got += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert!(!list.take_overflow());
        assert_eq!(list.pop(), None);
    }
}
