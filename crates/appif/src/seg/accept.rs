//! Where a listener's accepted connections go: a queue in this process,
//! or the listener slot's ring of an application segment.

use super::{
    service_id, service_owner, AppSegment, OWNER_APP, OWNER_BOTH, OWNER_ENGINE, OWNER_FREE,
};
use crate::bytes;
use crate::socket::{SockId, StatusHandle};
use crate::spsc;
use core::sync::atomic::Ordering;
use std::sync::Arc;

/// Where a listener's accepted connections go. One per listener, so the
/// size of the larger variant costs nothing per connection or packet (and
/// a box would add a pointer chase to every accept).
#[allow(clippy::large_enum_variant)]
pub enum AcceptQueue {
    /// In this process: each connection is handed over as a value, with
    /// rings the engine allocates.
    Local(spsc::Sender<Accepted>),
    /// In an application segment: each connection takes a free slot of the
    /// segment (rings included) and its slot number is handed over.
    AppSegment(AppSegmentAccept),
}

impl AcceptQueue {
    /// Connections handed over and not yet taken, at most.
    pub fn capacity(&self) -> usize {
        match self {
            AcceptQueue::Local(s) => s.capacity(),
            AcceptQueue::AppSegment(a) => a.backlog(),
        }
    }

    /// Connections handed over and not yet taken by the application.
    pub fn len(&self) -> usize {
        match self {
            AcceptQueue::Local(s) => s.len(),
            AcceptQueue::AppSegment(a) => a.queued(),
        }
    }

    /// True when no connection waits to be taken.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when the application end is gone (in-process queues only).
    pub fn is_disconnected(&self) -> bool {
        match self {
            AcceptQueue::Local(s) => s.is_disconnected(),
            AcceptQueue::AppSegment(_) => false,
        }
    }
}

/// What a listener hands to the application for each accepted connection.
pub struct Accepted {
    /// The connection's id (engine-assigned, [`ENGINE_ID_BIT`](crate::socket::ENGINE_ID_BIT) set, or a
    /// service-mode id naming its segment slot).
    pub id: SockId,
    /// The connection's status block.
    pub shared: Arc<StatusHandle>,
    /// The application writes here; the engine sends from it.
    pub tx: bytes::Writer,
    /// The engine writes received bytes here; the application reads.
    pub rx: bytes::Reader,
}

/// Engine: the accept queue of a listener in an application segment.
pub struct AppSegmentAccept {
    seg: AppSegment,
    assoc: u32,
    /// The listener slot's RX ring: slot numbers of accepted connections.
    queue: bytes::Writer,
    backlog: usize,
    cursor: u32,
    /// Connections handed over so far.
    handed: u64,
}

/// A slot the engine took for a new passive connection.
pub struct Claimed {
    /// The connection's service-mode id (names the association and slot).
    pub id: SockId,
    /// The segment slot taken.
    pub slot: u32,
    /// The slot's status block.
    pub shared: Arc<StatusHandle>,
    /// The engine's end of the TX ring.
    pub tx: bytes::Reader,
    /// The engine's end of the RX ring.
    pub rx: bytes::Writer,
}

impl AppSegmentAccept {
    /// The accept queue of the listener in `listener_slot`; None when the
    /// slot is out of range.
    pub fn new(seg: AppSegment, assoc: u32, listener_slot: u32, backlog: usize) -> Option<Self> {
        let queue = seg.rx_writer(listener_slot)?;
        let backlog = backlog.clamp(1, queue.capacity() / 4);
        Some(AppSegmentAccept {
            seg,
            assoc,
            queue,
            backlog,
            cursor: 0,
            handed: 0,
        })
    }

    /// Connections the queue may hold.
    pub fn backlog(&self) -> usize {
        self.backlog
    }

    /// Connections handed over and not yet taken by the application.
    pub fn queued(&self) -> usize {
        self.queue.len() / 4
    }

    /// True once the application took at least one connection from the
    /// queue (it accepts; a member of a shared listener that never did is
    /// served last).
    pub fn has_accepted(&self) -> bool {
        self.handed > self.queued() as u64
    }

    /// True while the application has a readiness waiter armed on its
    /// wake-up point (a thread asleep in epoll_wait, poll or select, see
    /// `crate::notify`): it is idle. A hint for choosing among the members
    /// of a shared listener; the listener's own doorbell (a thread blocked
    /// in accept) is the engine's to check.
    pub fn app_waiting(&self) -> bool {
        self.seg.app_wake().has_sleepers()
    }

    /// The association whose segment holds the queue.
    pub fn assoc(&self) -> u32 {
        self.assoc
    }

    /// True once the application broke the queue's indices.
    pub fn violated(&self) -> bool {
        self.queue.violated()
    }

    /// Takes a free slot for a new connection; None when none is free.
    /// O(slots) in the worst case (connection setup only).
    pub fn claim(&mut self) -> Option<Claimed> {
        let n = self.seg.layout.nslots;
        for i in 0..n {
            let slot = (self.cursor.wrapping_add(i)) % n;
            let owner = self.seg.owner(slot)?;
            if owner
                .compare_exchange(OWNER_FREE, OWNER_BOTH, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            self.cursor = slot.wrapping_add(1);
            self.seg.reset_slot(slot);
            let (Some(shared), Some(tx), Some(rx)) = (
                self.seg.shared(slot, true),
                self.seg.tx_reader(slot),
                self.seg.rx_writer(slot),
            ) else {
                owner.store(OWNER_FREE, Ordering::Release);
                return None;
            };
            // Until it is handed over, the application has not seen it.
            shared.set_release_bits(OWNER_BOTH);
            return Some(Claimed {
                id: service_id(self.assoc, slot),
                slot,
                shared,
                tx,
                rx,
            });
        }
        None
    }

    /// Hands connection `id` (one [`AppSegmentAccept::claim`] gave; its
    /// engine handle is `shared`) to the application; false when the queue
    /// is full or `id` is no slot of this queue's segment (the caller
    /// resets the connection).
    pub fn hand_over(&mut self, id: SockId, shared: &StatusHandle) -> bool {
        let slot = match service_owner(id) {
            Some((assoc, slot)) if assoc == self.assoc => slot,
            _ => return false,
        };
        let ok = self.queued() < self.backlog && self.queue.write_all(&slot.to_le_bytes());
        if ok {
            shared.set_release_bits(OWNER_ENGINE);
            self.handed += 1;
        }
        ok
    }

    /// Daemon: the application's Close for `slot` was taken: its owner bit
    /// is cleared (the slot is free once the engine lets go too).
    pub fn app_closed(seg: &AppSegment, slot: u32) {
        if let Some(o) = seg.owner(slot) {
            o.fetch_and(!OWNER_APP, Ordering::AcqRel);
        }
    }
}
