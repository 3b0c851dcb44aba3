//! An in-process wire between two stacks, with seeded impairments per
//! direction, for deterministic tests and simulations.
//!
//! [`pair`] returns the two ends. Each direction is an [`Impairer`]; a frame
//! queued with `transmit` is held in the sender's tx slots until `flush`,
//! which pushes it into the wire; the peer's `rx_burst` pops the frames that
//! are due. Time comes from a [`MemClock`] shared by both ends: the real
//! CLOCK_MONOTONIC by default, or a manual counter so that a simulation
//! decides when time passes.
//!
//! [`multi_pair`] gives each end several queues, as a multi-queue NIC has:
//! every queue is a [`MemPort`] with its own tx slots and its own rx side.
//! The wire is still one link (one impairer per direction, shared by the
//! sending end's queues); a frame leaving it goes to the receiving queue
//! its end's [`Steer`] chooses. A queue that finds a due frame meant for
//! another queue moves it into that queue's rx ring (a full ring drops it,
//! counted in [`Port::rx_drops`]), so no queue waits for another to read.
//!
//! Threading: the ends (and queues) are `Send` and may run on one thread
//! (fully deterministic for a given seed and call sequence) or several; the
//! wire is an `Arc<Mutex<..>>`, taken once per flush and once per received
//! frame; an idle `rx_burst` does not take it (an atomic count of pushed
//! frames and the next due time tell it nothing is ready).
//! Nothing allocates after [`pair`] or [`multi_pair`].

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use crate::impair::{ImpairStats, Impairer, Impairments};
use crate::{Capabilities, Port, RxDrops};

mod steer;
mod tx;
pub use steer::{Steer, MEM_FLOW_BUCKETS};
pub use tx::MemTx;

use steer::{RxRing, Spread};

/// The MTU of a mem port, in bytes.
pub const MEM_MTU: usize = 1500;
/// The largest frame a mem port carries, in bytes (MTU + Ethernet header
/// + one VLAN tag).
pub const MEM_MAX_FRAME: usize = MEM_MTU + 18;
/// Frames a mem port can queue between two flushes.
pub const MEM_TX_SLOTS: usize = 256;
/// Largest TCP payload of one `transmit_gso` frame with [`MemPort::set_tso`], bytes.
pub const MEM_TSO_MAX: usize = 64_000;
/// The default MAC of the first end of a pair.
pub const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// The default MAC of the second end of a pair.
pub const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

/// Where a mem wire reads the time, in ns.
#[derive(Debug, Clone, Default)]
pub enum MemClock {
    /// CLOCK_MONOTONIC.
    #[default]
    Monotonic,
    /// A counter the caller advances (ns); makes delays deterministic.
    Manual(Arc<AtomicU64>),
}

impl MemClock {
    /// A manual clock starting at 0 ns, and the handle that advances it.
    pub fn manual() -> (MemClock, Arc<AtomicU64>) {
        let ns = Arc::new(AtomicU64::new(0));
        (MemClock::Manual(ns.clone()), ns)
    }

    /// The current time in ns.
    pub fn now_ns(&self) -> u64 {
        match self {
            MemClock::Monotonic => crate::sys::monotonic_ns(),
            MemClock::Manual(ns) => ns.load(Ordering::Acquire),
        }
    }
}

/// One direction of the wire.
#[derive(Debug)]
struct Dir {
    /// The link.
    wire: Impairer,
    /// How the receiving end spreads the frames leaving the link.
    spread: Spread,
    /// One per queue of the receiving end: the frames steered to it that
    /// it has not read. Empty rings (no storage) when that end has one
    /// queue: a frame then goes from the link straight to it.
    rings: Vec<RxRing>,
}

impl Dir {
    /// The next frame for receiving queue `queue` at `now_ns`, copied into
    /// `out`; returns its length. Due frames for other queues met on the
    /// way move into their rings.
    fn pop_for(&mut self, queue: usize, now_ns: u64, out: &mut [u8]) -> Option<usize> {
        let copy = |frame: &[u8], out: &mut [u8]| {
            let len = frame.len().min(out.len());
            out[..len].copy_from_slice(&frame[..len]);
            len
        };
        if let Some(frame) = self.rings[queue].pop() {
            return Some(copy(frame, out));
        }
        while let Some(frame) = self.wire.pop_due(now_ns) {
            let to = self.spread.queue(frame);
            if to == queue {
                return Some(copy(frame, out));
            }
            self.rings[to].push(frame);
        }
        None
    }
}

#[derive(Debug)]
struct Shared {
    /// `[0]`: a to b; `[1]`: b to a.
    dirs: Mutex<[Dir; 2]>,
    clock: RwLock<MemClock>,
    /// Frames pushed per direction so far (bumped with `dirs` locked), so an
    /// idle receiver can tell without the lock that nothing new arrived.
    pushed: [AtomicU64; 2],
    /// Bumped by `set_clock`: due times cached by a port are then stale.
    clock_epoch: AtomicU64,
}

impl Shared {
    fn dirs(&self) -> MutexGuard<'_, [Dir; 2]> {
        // A panic on the other end's thread must not take this end down;
        // the impairers hold only frames and counters, consistent between calls.
        self.dirs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn now_ns(&self) -> u64 {
        self.clock
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .now_ns()
    }
}

/// Frames a mem wire holds in flight per direction by default.
pub const MEM_WIRE_FRAMES: usize = 1024;

/// Two connected mem ports: frames sent by the first arrive at the second
/// through `a_to_b`, and the other way through `b_to_a`. `seed` fixes every
/// random choice (each direction derives its own stream from it). Each
/// direction holds [`MEM_WIRE_FRAMES`] frames in flight; more are dropped
/// and counted (`queue_full`), as a full link queue would.
pub fn pair(a_to_b: Impairments, b_to_a: Impairments, seed: u64) -> (MemPort, MemPort) {
    pair_with_capacity(a_to_b, b_to_a, seed, MEM_WIRE_FRAMES)
}

/// [`pair`] with room for `frames` frames in flight per direction (a
/// long-delay path needs a bandwidth-delay product's worth; storage for
/// them is allocated now, `frames` × [`MEM_MAX_FRAME`] bytes each way, and
/// touched only as it is used).
pub fn pair_with_capacity(
    a_to_b: Impairments,
    b_to_a: Impairments,
    seed: u64,
    frames: usize,
) -> (MemPort, MemPort) {
    let (mut a, mut b) = wire(
        [a_to_b, b_to_a],
        seed,
        frames,
        [1, 1],
        [Steer::AllToZero, Steer::AllToZero],
    );
    match (a.pop(), b.pop()) {
        (Some(a), Some(b)) => (a, b),
        _ => unreachable!("one queue per end"),
    }
}

/// Two connected ends of `queues_a` and `queues_b` queues (0 counts as
/// 1): `.0[i]` is queue `i` of the first end, `.1[j]` queue `j` of the
/// second. Frames flushed by any queue of the first end cross `a_to_b`
/// (one link, [`MEM_WIRE_FRAMES`] frames in flight, as for [`pair`]) and
/// arrive on the second end's queue chosen by `steer_b`; the other way
/// through `b_to_a` and `steer_a`. All queues of an end share its MAC
/// ([`MAC_A`], [`MAC_B`]). Each receiving queue of an end with several
/// has an rx ring of [`MEM_WIRE_FRAMES`] frames (allocated now, touched
/// as used). `seed` fixes every random choice, impairments and steering;
/// with one queue per end this is exactly [`pair`].
pub fn multi_pair(
    a_to_b: Impairments,
    b_to_a: Impairments,
    seed: u64,
    queues_a: usize,
    queues_b: usize,
    steer_a: Steer,
    steer_b: Steer,
) -> (Vec<MemPort>, Vec<MemPort>) {
    wire(
        [a_to_b, b_to_a],
        seed,
        MEM_WIRE_FRAMES,
        [queues_a, queues_b],
        [steer_a, steer_b],
    )
}

/// The general wire: `imp[d]` for direction `d` (0: a to b), `queues[e]`
/// and `steer[e]` for end `e` (0: a).
fn wire(
    imp: [Impairments; 2],
    seed: u64,
    frames: usize,
    queues: [usize; 2],
    steer: [Steer; 2],
) -> (Vec<MemPort>, Vec<MemPort>) {
    let queues = queues.map(|q| q.max(1));
    let [steer_a, steer_b] = steer;
    let dir = |imp: Impairments, seed: u64, to: usize, steer: Steer, steer_seed: u64| {
        let ring = if queues[to] > 1 { frames } else { 0 };
        Dir {
            wire: Impairer::with_capacity(imp, seed, frames, MEM_MAX_FRAME),
            spread: Spread::new(steer, queues[to], steer_seed),
            rings: (0..queues[to]).map(|_| RxRing::new(ring)).collect(),
        }
    };
    let shared = Arc::new(Shared {
        dirs: Mutex::new([
            dir(imp[0], seed, 1, steer_b, seed ^ 0x5851_f42d_4c95_7f2d),
            dir(
                imp[1],
                seed ^ 0x9e37_79b9_7f4a_7c15,
                0,
                steer_a,
                seed ^ 0x1405_7b7e_f767_814f,
            ),
        ]),
        clock: RwLock::new(MemClock::Monotonic),
        pushed: [AtomicU64::new(0), AtomicU64::new(0)],
        clock_epoch: AtomicU64::new(0),
    });
    let end = |side: usize, mac: [u8; 6]| -> Vec<MemPort> {
        (0..queues[side])
            .map(|q| MemPort::new(shared.clone(), side, q, queues[side] == 1, mac))
            .collect()
    };
    (end(0, MAC_A), end(1, MAC_B))
}

/// One end of a mem wire, or one queue of an end built by [`multi_pair`].
#[derive(Debug)]
pub struct MemPort {
    shared: Arc<Shared>,
    /// 0 for the first end of the pair, 1 for the second.
    side: usize,
    /// This queue's index in its end.
    queue: usize,
    /// This end has one queue: frames come straight from the link.
    single: bool,
    mac: [u8; 6],
    /// Frames handed out by `rx_burst`.
    rx_frames: u64,
    rx_buf: Vec<u8>,
    /// `pushed` of the rx direction when last looked at under the lock.
    rx_seen_pushed: u64,
    /// When the next frame then waiting falls due (ns), if any.
    rx_next_due_ns: Option<u64>,
    /// `clock_epoch` when `rx_next_due_ns` was computed.
    rx_clock_epoch: u64,
    tx: MemTx,
}

impl MemPort {
    fn new(shared: Arc<Shared>, side: usize, queue: usize, single: bool, mac: [u8; 6]) -> MemPort {
        MemPort {
            tx: MemTx {
                shared: shared.clone(),
                side,
                buf: vec![0; MEM_TX_SLOTS * MEM_MAX_FRAME],
                lens: Vec::with_capacity(MEM_TX_SLOTS),
                tso: None,
                lent: None,
            },
            shared,
            side,
            queue,
            single,
            mac,
            rx_frames: 0,
            rx_buf: vec![0; MEM_MAX_FRAME],
            rx_seen_pushed: 0,
            rx_next_due_ns: None,
            rx_clock_epoch: 0,
        }
    }

    /// Sets the clock of the whole wire (both ends).
    pub fn set_clock(&mut self, clock: MemClock) {
        *self
            .shared
            .clock
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = clock;
        // Due times were computed on the old clock: both ends look again.
        self.shared.clock_epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Segmentation offload on this end: `transmit_gso` takes TCP frames of
    /// up to [`MEM_TSO_MAX`] payload bytes and the port cuts them into
    /// MSS-sized segments in software (as a NIC's TSO would); TCP checksums
    /// are then completed by the port too ([`Capabilities::tx_tcp_checksum`]).
    /// Off by default.
    pub fn set_tso(&mut self, on: bool) {
        self.tx.tso = on.then(|| vec![0; MEM_TSO_MAX + 200]);
    }

    /// Lent payloads on this end (needs [`MemPort::set_tso`]):
    /// [`TxQueue::transmit_gather`](crate::TxQueue::transmit_gather) keeps the payload where it lies and
    /// reads it only at `flush`, as a packet socket's `sendmmsg` does, so
    /// a payload that changes before the flush reaches the wire changed.
    /// Off by default.
    pub fn set_gather(&mut self, on: bool) {
        self.tx.lent = on.then(|| Vec::with_capacity(MEM_TX_SLOTS));
    }

    /// Sets this port's MAC address (of this queue only, for an end with
    /// several: set it on each).
    pub fn set_mac(&mut self, mac: [u8; 6]) {
        self.mac = mac;
    }

    /// What the wire did to frames sent by this end (all its queues).
    pub fn tx_stats(&self) -> ImpairStats {
        self.shared.dirs()[self.side].wire.stats()
    }

    /// When the next frame for this end falls due (ns), if one is in flight
    /// (for any of its queues); the current time if one already waits in
    /// this queue's rx ring. Lets a simulation advance a manual clock
    /// straight to it.
    pub fn next_rx_due_ns(&self) -> Option<u64> {
        let now = self.shared.now_ns();
        let dirs = self.shared.dirs();
        let dir = &dirs[1 - self.side];
        if dir.rings[self.queue].is_empty() {
            dir.wire.next_due_ns()
        } else {
            Some(now)
        }
    }

    /// This queue's index in its end: 0 for a [`pair`] port, `0..queues`
    /// for a [`multi_pair`] one.
    pub fn queue(&self) -> usize {
        self.queue
    }

    /// Frames this queue has received (handed to `rx_burst`'s handler)
    /// since it was built: with [`multi_pair`], the frames steered to it
    /// and read.
    pub fn rx_queue_frames(&self) -> u64 {
        self.rx_frames
    }
}

impl Port for MemPort {
    type Tx = MemTx;

    fn rx_burst<F: FnMut(&[u8], &mut MemTx)>(&mut self, max: usize, mut handle: F) -> usize {
        let rx_dir = 1 - self.side;
        let now = self.shared.now_ns();
        // Idle fast path without the lock: nothing pushed since we last
        // looked, and nothing then waiting has fallen due.
        let epoch = self.shared.clock_epoch.load(Ordering::Acquire);
        if self.shared.pushed[rx_dir].load(Ordering::Acquire) == self.rx_seen_pushed
            && epoch == self.rx_clock_epoch
            && !matches!(self.rx_next_due_ns, Some(due) if now >= due)
        {
            return 0;
        }
        let mut n = 0;
        while n < max {
            let len = {
                let mut dirs = self.shared.dirs();
                self.rx_seen_pushed = self.shared.pushed[rx_dir].load(Ordering::Acquire);
                self.rx_clock_epoch = epoch;
                let dir = &mut dirs[rx_dir];
                let popped = if self.single {
                    // Straight from the link: no steering, no ring.
                    match dir.wire.pop_due(now) {
                        Some(frame) => {
                            let len = frame.len().min(self.rx_buf.len());
                            self.rx_buf[..len].copy_from_slice(&frame[..len]);
                            Some(len)
                        }
                        None => None,
                    }
                } else {
                    dir.pop_for(self.queue, now, &mut self.rx_buf)
                };
                // A frame left in this queue's ring is due already.
                self.rx_next_due_ns = if self.single || dir.rings[self.queue].is_empty() {
                    dir.wire.next_due_ns()
                } else {
                    Some(now)
                };
                match popped {
                    Some(len) => len,
                    None => break,
                }
            };
            self.rx_frames += 1;
            handle(&self.rx_buf[..len], &mut self.tx);
            n += 1;
        }
        n
    }

    fn tx(&mut self) -> &mut MemTx {
        &mut self.tx
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn mtu(&self) -> usize {
        MEM_MTU
    }

    fn capabilities(&self) -> Capabilities {
        let tso = self.tx.tso.is_some();
        Capabilities {
            rx_checksum: false,
            tx_tcp_checksum: tso,
            tx_gso_max: if tso { MEM_TSO_MAX } else { 0 },
            tx_gather: tso && self.tx.lent.is_some(),
        }
    }

    fn rx_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// `ring_full`: frames steered to this queue that found its rx ring
    /// full (only an end with several queues has rings).
    fn rx_drops(&self) -> RxDrops {
        RxDrops {
            ring_full: self.shared.dirs()[1 - self.side].rings[self.queue].ring_full,
            ..RxDrops::default()
        }
    }
}

#[cfg(test)]
mod tests;
