//! The engine's side of `corestack trace` (`observe::trace`): stamps of a
//! sampled received segment (frame taken → parsed → TCP input done → bytes
//! in the socket ring) and of a sampled send (Send command taken → TCP
//! output → frames on the NIC ring), written as one record each.
//!
//! Off, the only cost is [`EngineTrace::frame_start`]'s load and branch per
//! frame, and a branch on engine-local state at each later hook. On, every
//! Nth data segment and every Nth Send command is sampled (N written by the
//! observer); at most one of each is in progress. Allocates nothing.

use crate::tcp::RecvBuffer;
use observe::trace::{clock, conn_key, Kind, Record, Tracer};

/// A received segment being traced: its connection key and stamps t0..t2.
#[derive(Clone, Copy)]
struct RxSample {
    key: u32,
    t: [u64; 3],
}

/// A send being traced: the connection's slot and key, command taken at
/// t0, output done at t1 (0: not yet).
#[derive(Clone, Copy)]
struct TxSample {
    slot: u32,
    key: u32,
    t0: u64,
    t1: u64,
}

/// Trace state of one engine.
pub(crate) struct EngineTrace {
    tracer: Tracer,
    /// The current frame's t0 (0: tracing off when it was taken).
    frame_t0: u64,
    /// Data segments and Send commands seen while tracing (sampling).
    segments: u64,
    sends: u64,
    rx: Option<RxSample>,
    tx: Option<TxSample>,
}

impl EngineTrace {
    pub(crate) fn new(tracer: Tracer) -> Self {
        EngineTrace {
            tracer,
            frame_t0: 0,
            segments: 0,
            sends: 0,
            rx: None,
            tx: None,
        }
    }

    /// The tracer records go to.
    pub(crate) fn tracer(&self) -> &Tracer {
        &self.tracer
    }

    /// A frame was taken from the NIC ring.
    #[inline]
    pub(crate) fn frame_start(&mut self) {
        self.frame_t0 = if self.tracer.on() { clock() } else { 0 };
    }

    /// The current frame is a TCP segment for a connection (`local`,
    /// `remote` ports) carrying `payload_len` bytes: sample it or not.
    #[inline]
    pub(crate) fn rx_parsed(&mut self, local: u16, remote: u16, payload_len: usize) {
        self.rx = None;
        if self.frame_t0 == 0
            || payload_len == 0
            || !nth_of(&mut self.segments, self.tracer.every())
        {
            return;
        }
        self.rx = Some(RxSample {
            key: conn_key(local, remote),
            t: [self.frame_t0, clock(), 0],
        });
    }

    /// Whether the current frame is sampled.
    #[inline]
    pub(crate) fn rx_sampled(&self) -> bool {
        self.rx.is_some()
    }

    /// TCP input of the sampled segment is done; `pos` is the RX ring's
    /// write position after it. Records it if its bytes reached the ring.
    pub(crate) fn rx_done(&mut self, pos: u64, stamps: &RingStamps) {
        let Some(s) = self.rx.take() else { return };
        if stamps.before == 0 {
            return; // nothing was delivered (out of order, duplicate)
        }
        self.tracer.record(&Record {
            kind: Kind::Rx,
            key: s.key,
            bytes: 0,
            pos,
            t: [s.t[0], s.t[1], stamps.before, stamps.after, 0],
        });
    }

    /// The engine took a Send command for the TCP connection in `slot`,
    /// whose TX ring holds bytes not yet sent (`unsent`; a command whose
    /// bytes already left is not sampled: its output is not what follows).
    #[inline]
    pub(crate) fn send_taken(&mut self, slot: u32, local: u16, remote: u16, unsent: bool) {
        if !self.tracer.on() || !unsent || !nth_of(&mut self.sends, self.tracer.every()) {
            return;
        }
        self.tx = Some(TxSample {
            slot,
            key: conn_key(local, remote),
            t0: clock(),
            t1: 0,
        });
    }

    /// TCP output of the connection in `slot` emitted `segments` segments.
    #[inline]
    pub(crate) fn output_done(&mut self, slot: u32, segments: usize) {
        if let Some(s) = self.tx.as_mut() {
            if s.slot == slot && s.t1 == 0 && segments > 0 {
                s.t1 = clock();
            }
        }
    }

    /// The port's TX queue was flushed: a traced send whose output is done
    /// is on the NIC ring.
    #[inline]
    pub(crate) fn flushed(&mut self) {
        if let Some(s) = self.tx {
            if s.t1 != 0 {
                self.tx = None;
                self.tracer.record(&Record {
                    kind: Kind::Tx,
                    key: s.key,
                    bytes: 0,
                    pos: 0,
                    t: [s.t0, s.t1, clock(), 0, 0],
                });
            }
        }
    }
}

/// Counts one more candidate for a sample in `count` and tells whether it
/// is the `every`-th (0 taken as 1): how both directions pick their
/// samples.
#[inline]
fn nth_of(count: &mut u64, every: u64) -> bool {
    *count += 1;
    count.is_multiple_of(every.max(1))
}

/// When bytes of a sampled segment were first copied into the RX ring
/// (`before`: the copy starts; `after`: the last copy ended; 0: none).
#[derive(Default)]
pub(crate) struct RingStamps {
    pub before: u64,
    pub after: u64,
}

/// An RX ring that stamps its copies (only a sampled segment's TCP input
/// writes through it).
pub(crate) struct StampedRing<'a, R: RecvBuffer> {
    pub ring: &'a mut R,
    pub stamps: &'a mut RingStamps,
}

impl<R: RecvBuffer> RecvBuffer for StampedRing<'_, R> {
    fn free(&self) -> usize {
        self.ring.free()
    }
    fn write(&mut self, data: &[u8]) -> usize {
        if self.stamps.before == 0 {
            self.stamps.before = clock();
        }
        let n = self.ring.write(data);
        self.stamps.after = clock();
        n
    }
}
