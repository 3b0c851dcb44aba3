//! The ready rings of a segment (service mode): how the daemon's engine
//! tells the application which of its sockets changed, so that a
//! readiness wait costs O(sockets that changed), as [`crate::ready`] does
//! for embedded and inline mode.
//!
//! Per engine lane a single-consumer ring of slot numbers (u32), with a
//! head (application: slots taken), a tail (engine: slots pushed) and an
//! overflow word (engine sets, application clears), and per slot a
//! `queued` word ([`super::layout::SLOT_READY`]). When the engine wakes a
//! socket's status block ([`crate::socket::StatusHandle::wake`]) it sets
//! the slot's `queued` word and, if it was clear, pushes the slot
//! ([`ReadyProducer`]); the application ([`ReadyRouter::drain`]) takes
//! slots, clears their `queued` word, then hands each to the readiness
//! waiter that registered the socket ([`crate::ready::Watch`]), which
//! looks at it afterwards: a change after the clear pushes the slot again,
//! so no change is missed. A ring that is full sets the overflow word;
//! the application then hands every registered socket to its waiter once.
//!
//! The engine trusts nothing the application writes here: it keeps the
//! tail in its own memory, reads the head only to compute the room left
//! (an impossible head reads as "full", so the overflow word is set), and
//! writes only at its tail modulo the ring's length. A rogue application
//! loses only its own readiness reports.

use super::{AppSegment, ReadyLane};
use crate::ready::{Routed, SlotPush, SlotRoute};
use crate::region::Region;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Engine: the producing end of one lane's ready ring. Shared by the
/// engine handles of that lane's status blocks (a socket handed to
/// another engine may still push here: pushes are serialised).
#[derive(Debug)]
pub struct ReadyProducer {
    region: Arc<Region>,
    at: ReadyLane,
    /// Entries of the ring (a power of two).
    cap: u64,
    /// Slots pushed (monotonic), kept here: the segment's copy is only
    /// published.
    tail: Mutex<u64>,
}

impl ReadyProducer {
    /// The producer of engine `lane`'s ring of `seg`; None past its engines.
    pub fn new(seg: &AppSegment, lane: u32) -> Option<ReadyProducer> {
        let at = seg.layout().ready_lane(lane)?;
        // Every word of the lane lies inside the region (checked here once).
        seg.region()
            .get::<AtomicU32>(at.ring + 4 * (seg.layout().ready_cap() as usize - 1))?;
        Some(ReadyProducer {
            region: seg.region().clone(),
            at,
            cap: u64::from(seg.layout().ready_cap()),
            tail: Mutex::new(0),
        })
    }

    /// Queues `slot`, or sets the overflow word when the ring is full (or
    /// its head, the application's word, is impossible). Never panics,
    /// never writes outside the ring.
    pub fn push(&self, slot: u32) {
        let (Some(head_w), Some(tail_w), Some(overflow)) = (
            self.region.get::<AtomicU64>(self.at.head),
            self.region.get::<AtomicU64>(self.at.tail),
            self.region.get::<AtomicU32>(self.at.overflow),
        ) else {
            return;
        };
        let mut tail = self.tail.lock().unwrap_or_else(|p| p.into_inner());
        let head = head_w.load(Ordering::Acquire);
        // Entries the application has not taken; an impossible head (ahead
        // of the tail, or more than a ring behind) is at least `cap`.
        if tail.wrapping_sub(head) >= self.cap {
            overflow.store(1, Ordering::Release);
            return;
        }
        let i = (*tail & (self.cap - 1)) as usize;
        if let Some(e) = self.region.get::<AtomicU32>(self.at.ring + 4 * i) {
            e.store(slot, Ordering::Relaxed);
        }
        *tail = tail.wrapping_add(1);
        tail_w.store(*tail, Ordering::Release);
    }
}

impl SlotPush for ReadyProducer {
    fn push(&self, slot: u32) {
        ReadyProducer::push(self, slot)
    }
}

/// Application: the consuming end of a segment's ready rings and the
/// table that routes each slot to the status handle a waiter watches.
/// One per segment mapping, shared by its clones; [`ReadyRouter::drain`]
/// is safe from several threads (it takes a lock).
#[derive(Debug)]
pub struct ReadyRouter {
    /// The process that mapped the segment: a forked child, which has a
    /// segment of its own, neither drains nor watches through this one.
    pid: AtomicU32,
    state: Mutex<RouterState>,
}

#[derive(Debug)]
struct RouterState {
    /// Per lane: slots taken (monotonic).
    heads: Vec<u64>,
    /// Per slot: the status block a waiter watches.
    routes: Vec<Option<Weak<dyn Routed>>>,
}

/// What a [`ReadyRouter::drain`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drained {
    /// Slots taken from the rings.
    pub slots: usize,
    /// A ring had overflowed: every watched slot was handed over.
    pub overflow: bool,
}

impl ReadyRouter {
    pub(crate) fn new(lanes: u32, nslots: u32) -> ReadyRouter {
        ReadyRouter {
            pid: AtomicU32::new(std::process::id()),
            state: Mutex::new(RouterState {
                heads: vec![0; lanes as usize],
                routes: (0..nslots).map(|_| None).collect(),
            }),
        }
    }

    /// True in the process that mapped the segment.
    pub(crate) fn is_current(&self) -> bool {
        self.pid.load(Ordering::Relaxed) == std::process::id()
    }

    /// Tests: acts as a forked child's copy.
    #[cfg(test)]
    pub(crate) fn pretend_forked(&self) {
        self.pid.store(0, Ordering::Relaxed);
    }

    /// Takes every slot the engines pushed to `seg`'s ready rings and
    /// hands each to the waiter watching it (after clearing its `queued`
    /// word); after an overflow, every watched slot. O(slots pushed), or
    /// O(slots) after an overflow. A slot nobody watches keeps its
    /// `queued` word set (the engine stops pushing it until it is
    /// watched). In a forked child of the process that mapped the
    /// segment: takes nothing, and signals every watched slot (O(slots)).
    pub fn drain(&self, seg: &AppSegment) -> Drained {
        let mut out = Drained::default();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !self.is_current() {
            // A forked child's copy: the rings are its parent's to take.
            // The waiters this process inherited look at each of their
            // sockets instead, on every drain (as with no ready ring).
            for h in st.routes.iter().flatten().filter_map(Weak::upgrade) {
                h.seg_signal(false);
            }
            return out;
        }
        let layout = seg.layout();
        let cap = u64::from(layout.ready_cap());
        let RouterState { heads, routes } = &mut *st;
        for (lane, head) in heads.iter_mut().enumerate() {
            let Some(at) = layout.ready_lane(lane as u32) else {
                continue;
            };
            if seg.word32(at.overflow).swap(0, Ordering::AcqRel) != 0 {
                out.overflow = true;
            }
            let tail = seg.word64(at.tail).load(Ordering::Acquire);
            let n = tail.wrapping_sub(*head).min(cap);
            for k in 0..n {
                let i = (head.wrapping_add(k) & (cap - 1)) as usize;
                let slot = seg.word32(at.ring + 4 * i).load(Ordering::Relaxed);
                hand_over(routes.get(slot as usize));
            }
            *head = tail;
            seg.word64(at.head).store(tail, Ordering::Release);
            out.slots += n as usize;
        }
        if out.overflow {
            for r in routes.iter() {
                hand_over(Some(r));
            }
        }
        out
    }
}

/// Hands a slot's watched handle (if any) to its waiter: clears the
/// slot's `queued` word, then signals the waiter's watch.
fn hand_over(route: Option<&Option<Weak<dyn Routed>>>) {
    if let Some(h) = route.and_then(Option::as_ref).and_then(Weak::upgrade) {
        h.seg_signal(true);
    }
}

impl SlotRoute for ReadyRouter {
    fn is_current(&self) -> bool {
        ReadyRouter::is_current(self)
    }

    fn route(&self, slot: u32, to: Weak<dyn Routed>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = st.routes.get_mut(slot as usize) {
            *r = Some(to);
        }
    }
}
