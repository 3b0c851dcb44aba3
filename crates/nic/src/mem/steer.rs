//! How a mem end spreads the frames it receives over its queues (its
//! NIC's receive-side scaling), and the rx rings that hold a queue's
//! frames until that queue reads them.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use super::MEM_MAX_FRAME;
use crate::rss::Steering;

/// Flow buckets of [`Steer::RandomPerFlow`]: a frame's bucket is its
/// [`Steering::frame_hash`] modulo this, and each bucket's queue is drawn
/// once, when the wire is built.
pub const MEM_FLOW_BUCKETS: usize = 4096;

/// How one end of a [`multi_pair`](super::multi_pair) spreads the frames
/// it receives over its queues. The choice is made when a frame leaves
/// the wire (after its impairments). With one queue every policy puts
/// every frame on queue 0.
#[derive(Debug, Clone)]
pub enum Steer {
    /// The queue [`Steering::frame_queue`] chooses, as a NIC programmed
    /// with the same key and table would (modulo the number of queues, if
    /// the table names more engines than the end has queues).
    Hash(Arc<Steering>),
    /// Each flow (by [`Steering::frame_hash`], in [`MEM_FLOW_BUCKETS`]
    /// buckets) gets a queue drawn at random once, from the wire's seed;
    /// frames without a hash (ARP, non-IPv4) go to queue 0.
    RandomPerFlow,
    /// Every frame goes to a queue drawn at random, from the wire's seed:
    /// one flow is spread over every queue.
    RandomPerFrame,
    /// Every frame goes to queue 0 (a NIC without RSS).
    AllToZero,
}

/// A [`Steer`] made ready for one end: its tables and random stream.
#[derive(Debug)]
pub(super) struct Spread {
    queues: usize,
    policy: Policy,
}

#[derive(Debug)]
enum Policy {
    Hash(Arc<Steering>),
    PerFlow {
        /// For its hash functions only.
        hasher: Box<Steering>,
        /// Bucket → queue.
        table: Box<[u32]>,
    },
    PerFrame(Pcg64),
    Zero,
}

impl Spread {
    /// `steer` over `queues` queues (at least 1), random choices seeded by `seed`.
    pub(super) fn new(steer: Steer, queues: usize, seed: u64) -> Spread {
        let queues = queues.max(1);
        let mut rng = Pcg64::seed_from_u64(seed);
        let policy = match steer {
            Steer::Hash(s) => Policy::Hash(s),
            Steer::RandomPerFlow => Policy::PerFlow {
                hasher: Box::new(Steering::new(1)),
                table: (0..MEM_FLOW_BUCKETS)
                    .map(|_| rng.gen_range(0..queues) as u32)
                    .collect(),
            },
            Steer::RandomPerFrame => Policy::PerFrame(rng),
            Steer::AllToZero => Policy::Zero,
        };
        Spread { queues, policy }
    }

    /// The queue that receives `frame`, in `0..queues`.
    #[inline]
    pub(super) fn queue(&mut self, frame: &[u8]) -> usize {
        if self.queues == 1 {
            return 0;
        }
        match &mut self.policy {
            Policy::Hash(s) => s.frame_queue(frame) % self.queues,
            Policy::PerFlow { hasher, table } => hasher
                .frame_hash(frame)
                .map_or(0, |h| table[h as usize % MEM_FLOW_BUCKETS] as usize),
            Policy::PerFrame(rng) => rng.gen_range(0..self.queues),
            Policy::Zero => 0,
        }
    }
}

/// The frames steered to one queue that it has not read yet: a FIFO of
/// fixed slots of [`MEM_MAX_FRAME`] bytes, allocated once; a frame that
/// finds it full is dropped and counted, as a NIC's full rx ring would.
#[derive(Debug)]
pub(super) struct RxRing {
    /// `slots * MEM_MAX_FRAME` bytes.
    storage: Vec<u8>,
    /// The length of the frame in each slot.
    lens: Vec<usize>,
    /// The oldest frame's slot.
    head: usize,
    /// Frames held.
    len: usize,
    /// Frames dropped because every slot was in use.
    pub(super) ring_full: u64,
}

impl RxRing {
    /// A ring of `slots` frames (0: a queue that never needs one).
    pub(super) fn new(slots: usize) -> RxRing {
        RxRing {
            storage: vec![0; slots * MEM_MAX_FRAME],
            lens: vec![0; slots],
            head: 0,
            len: 0,
            ring_full: 0,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `frame` (at most [`MEM_MAX_FRAME`] bytes of it) in; drops
    /// and counts it when the ring is full.
    pub(super) fn push(&mut self, frame: &[u8]) {
        let slots = self.lens.len();
        if self.len == slots {
            self.ring_full += 1;
            return;
        }
        let slot = (self.head + self.len) % slots;
        let len = frame.len().min(MEM_MAX_FRAME);
        let start = slot * MEM_MAX_FRAME;
        self.storage[start..start + len].copy_from_slice(&frame[..len]);
        self.lens[slot] = len;
        self.len += 1;
    }

    /// The oldest frame, removed from the ring; valid until the next push.
    pub(super) fn pop(&mut self) -> Option<&[u8]> {
        if self.len == 0 {
            return None;
        }
        let slot = self.head;
        self.head = (slot + 1) % self.lens.len();
        self.len -= 1;
        let start = slot * MEM_MAX_FRAME;
        Some(&self.storage[start..start + self.lens[slot]])
    }
}
