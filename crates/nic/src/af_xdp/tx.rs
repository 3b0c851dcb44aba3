//! The transmit side of an AF_XDP port: the tx and completion rings over the
//! tx half of the UMEM, its free chunks, and the copy-mode kicks (or the
//! packet socket that replaces them).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use super::sys::{self, FrameArea, Ring};
use crate::packet_tx::PacketTx;
use crate::TxQueue;

/// Frames `sendto` processes per call in copy mode (kernel `TX_BATCH_SIZE`).
const KERNEL_TX_BATCH: u32 = 32;

/// The transmit side of an [`AfXdpPort`]: tx and completion rings over the
/// tx half of the UMEM, and the free list of tx chunks.
#[derive(Debug)]
pub struct AfXdpTx {
    pub(super) tx: Ring<libc::xdp_desc>,
    pub(super) comp: Ring<u64>,
    pub(super) area: FrameArea,
    /// Free tx chunks (capacity: tx frames; never grows).
    pub(super) free: Vec<u64>,
    pub(super) frame_size: usize,
    /// Our producer index of the tx ring, including unpublished entries.
    pub(super) tx_prod: u32,
    /// The producer index last published.
    pub(super) tx_published: u32,
    /// Our consumer index of the completion ring.
    pub(super) comp_cons: u32,
    /// Kick on every flush with outstanding frames (copy mode).
    pub(super) always_kick: bool,
    pub(super) xsk: Arc<OwnedFd>,
    /// Set for [`TxPath::Packet`]: frames go there instead of the tx ring.
    pub(super) packet: Option<PacketTx>,
    pub(super) frames: u64,
    pub(super) invalid: u64,
    pub(super) kicks: u64,
    pub(super) kick_errors: u64,
}

impl AfXdpTx {
    /// Moves completed chunks from the completion ring to the free list.
    fn reap(&mut self) {
        let prod = self.comp.load_producer();
        let n = prod.wrapping_sub(self.comp_cons).min(self.comp.size());
        for i in 0..n {
            let addr = self.comp.read(self.comp_cons.wrapping_add(i));
            if self.area.contains(addr, self.frame_size) && self.free.len() < self.free.capacity() {
                self.free.push(addr);
            } else {
                self.invalid += 1;
            }
        }
        if n > 0 {
            self.comp_cons = self.comp_cons.wrapping_add(n);
            self.comp.store_consumer(self.comp_cons);
        }
    }

    /// Tx chunks free right now (after reaping completions).
    pub fn free_frames(&mut self) -> usize {
        self.reap();
        self.free.len()
    }
}

impl TxQueue for AfXdpTx {
    fn transmit<F: FnOnce(&mut [u8]) -> usize>(&mut self, max_len: usize, fill: F) -> bool {
        if let Some(p) = &mut self.packet {
            return p.transmit(max_len, fill);
        }
        if self.free.is_empty() {
            self.reap();
        }
        let Some(addr) = self.free.pop() else {
            return false;
        };
        let cap = max_len.min(self.frame_size);
        let Some(buf) = self.area.slice_mut(addr, cap) else {
            self.invalid += 1;
            return false;
        };
        let len = fill(buf).min(cap);
        if len == 0 {
            self.free.push(addr);
            return true;
        }
        self.tx.write(
            self.tx_prod,
            libc::xdp_desc {
                addr,
                len: len as u32,
                options: 0,
            },
        );
        self.tx_prod = self.tx_prod.wrapping_add(1);
        self.frames += 1;
        true
    }

    fn transmit_gso<F: FnOnce(&mut [u8]) -> usize>(
        &mut self,
        max_len: usize,
        gso_size: usize,
        fill: F,
    ) -> bool {
        match &mut self.packet {
            Some(p) => p.transmit_gso(max_len, gso_size, fill),
            None => false,
        }
    }

    fn transmit_gather<F: FnOnce(&mut [u8])>(
        &mut self,
        header_len: usize,
        payload: crate::TxPayload,
        gso_size: usize,
        fill: F,
    ) -> bool {
        match &mut self.packet {
            Some(p) => p.transmit_gather(header_len, payload, gso_size, fill),
            None => crate::transmit_copied(self, header_len, payload, gso_size, fill),
        }
    }

    fn room(&self) -> usize {
        match &self.packet {
            Some(_) => usize::MAX,
            None => self.free.len(),
        }
    }

    fn flush(&mut self) {
        if let Some(p) = &mut self.packet {
            return p.flush();
        }
        if self.tx_prod != self.tx_published {
            self.tx.store_producer(self.tx_prod);
            self.tx_published = self.tx_prod;
        }
        // Copy mode sends at most KERNEL_TX_BATCH frames per sendto, so kick
        // until the kernel has consumed everything or stops making progress.
        let outstanding = self.tx_published.wrapping_sub(self.tx.load_consumer());
        let max_kicks = outstanding / KERNEL_TX_BATCH + 2;
        let mut kicks = 0;
        while kicks < max_kicks {
            let before = self.tx.load_consumer();
            if before == self.tx_published {
                break;
            }
            if !self.always_kick && !self.tx.needs_wakeup() {
                break;
            }
            kicks += 1;
            self.kicks += 1;
            if let Err(e) = sys::kick_tx(self.xsk.as_raw_fd()) {
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => {}
                    _ => {
                        self.kick_errors += 1;
                        break;
                    }
                }
            }
            if self.tx.load_consumer() == before {
                break;
            }
        }
        self.reap();
    }
}
