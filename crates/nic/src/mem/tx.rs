//! The transmit side of a mem port: tx slots filled by `transmit`,
//! pushed into the wire by `flush`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Shared, MEM_MAX_FRAME, MEM_TX_SLOTS};
use crate::{TxPayload, TxQueue};

/// The transmit side of a [`MemPort`](super::MemPort): up to [`MEM_TX_SLOTS`] frames wait
/// here until `flush`.
#[derive(Debug)]
pub struct MemTx {
    pub(super) shared: Arc<Shared>,
    pub(super) side: usize,
    /// `MEM_TX_SLOTS` slots of `MEM_MAX_FRAME` bytes.
    pub(super) buf: Vec<u8>,
    /// Lengths of the queued frames, in slot order.
    pub(super) lens: Vec<usize>,
    /// Set by [`MemPort::set_tso`](super::MemPort::set_tso): a frame of up
    /// to [`MEM_TSO_MAX`](super::MEM_TSO_MAX) payload bytes for
    /// `transmit_gso`, cut here into segments.
    pub(super) tso: Option<Vec<u8>>,
    /// Set by [`MemPort::set_gather`](super::MemPort::set_gather): frames
    /// queued with lent payloads, built at `flush` into the slots they
    /// reserved.
    pub(super) lent: Option<Vec<Lent>>,
}

/// A frame queued with [`TxQueue::transmit_gather`] on a [`MemTx`].
#[derive(Debug)]
pub(super) struct Lent {
    /// First reserved slot and how many.
    slot: usize,
    slots: usize,
    headers: [u8; 128],
    header_len: usize,
    payload: TxPayload,
    gso_size: usize,
}

impl TxQueue for MemTx {
    fn transmit<F: FnOnce(&mut [u8]) -> usize>(&mut self, max_len: usize, fill: F) -> bool {
        if self.tso.is_some() {
            // The engine left TCP checksums to us: complete them.
            return self.transmit_gso(max_len, 0, fill);
        }
        if self.lens.len() >= MEM_TX_SLOTS {
            return false;
        }
        let start = self.lens.len() * MEM_MAX_FRAME;
        let slot = &mut self.buf[start..start + MEM_MAX_FRAME.min(max_len)];
        let len = fill(slot).min(slot.len());
        if len > 0 {
            self.lens.push(len);
        }
        true
    }

    fn transmit_gso<F: FnOnce(&mut [u8]) -> usize>(
        &mut self,
        max_len: usize,
        gso_size: usize,
        fill: F,
    ) -> bool {
        let Some(scratch) = self.tso.as_mut() else {
            return false;
        };
        let max_len = max_len.min(scratch.len());
        // Room for every segment the frame could make.
        let most = if gso_size == 0 {
            1
        } else {
            max_len.div_ceil(gso_size)
        };
        if self.lens.len() + most > MEM_TX_SLOTS {
            return false;
        }
        let len = fill(&mut scratch[..max_len]).min(max_len);
        let frame = &scratch[..len];
        for i in 0..crate::gso::segment_count(frame, gso_size) {
            let start = self.lens.len() * MEM_MAX_FRAME;
            let slot = &mut self.buf[start..start + MEM_MAX_FRAME];
            let n = crate::gso::write_segment(frame, gso_size, i, slot);
            if n > 0 {
                self.lens.push(n);
            }
        }
        true
    }

    fn transmit_gather<F: FnOnce(&mut [u8])>(
        &mut self,
        header_len: usize,
        payload: TxPayload,
        gso_size: usize,
        fill: F,
    ) -> bool {
        let slot = self.lens.len();
        let (Some(lent), Some(scratch)) = (self.lent.as_mut(), self.tso.as_ref()) else {
            return crate::transmit_copied(self, header_len, payload, gso_size, fill);
        };
        let len = header_len + payload.len();
        let slots = payload.segments(gso_size);
        if header_len > 128 || len > scratch.len() || slot + slots > MEM_TX_SLOTS {
            return false;
        }
        let mut headers = [0u8; 128];
        fill(&mut headers[..header_len]);
        lent.push(Lent {
            slot,
            slots,
            headers,
            header_len,
            payload,
            gso_size,
        });
        // Reserved; sized when the frame is built.
        self.lens.resize(slot + slots, 0);
        true
    }

    fn room(&self) -> usize {
        MEM_TX_SLOTS - self.lens.len()
    }

    fn flush(&mut self) {
        if self.lens.is_empty() {
            return;
        }
        if let (Some(lent), Some(scratch)) = (self.lent.as_mut(), self.tso.as_mut()) {
            for l in lent.drain(..) {
                let h = l.header_len;
                let len = h + l.payload.len();
                scratch[..h].copy_from_slice(&l.headers[..h]);
                l.payload.copy_to(&mut scratch[h..len]);
                let frame = &scratch[..len];
                let count = crate::gso::segment_count(frame, l.gso_size).min(l.slots);
                for i in 0..count {
                    let start = (l.slot + i) * MEM_MAX_FRAME;
                    let out = &mut self.buf[start..start + MEM_MAX_FRAME];
                    self.lens[l.slot + i] = crate::gso::write_segment(frame, l.gso_size, i, out);
                }
            }
        }
        let now = self.shared.now_ns();
        let mut dirs = self.shared.dirs();
        let mut pushed = 0;
        for (i, &len) in self.lens.iter().enumerate() {
            if len == 0 {
                continue; // a reserved slot its frame did not need
            }
            let start = i * MEM_MAX_FRAME;
            dirs[self.side]
                .wire
                .push(now, &self.buf[start..start + len]);
            pushed += 1;
        }
        self.shared.pushed[self.side].fetch_add(pushed, Ordering::Release);
        drop(dirs);
        self.lens.clear();
    }
}
