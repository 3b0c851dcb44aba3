//! Transmit through an AF_PACKET socket with virtio-net headers and
//! software segmentation offload: the transmit path of an AF_XDP port in
//! copy mode ([`crate::af_xdp::TxPath::Packet`]).
//!
//! Why: in copy mode the kernel's AF_XDP transmit allocates and fills one
//! skb per frame under the completion-ring lock (`__xsk_generic_xmit`),
//! which on a veth measured 470–590 k frames/s on one core here, against
//! ~980 k for a packet socket and ~1.4 M segments/s when the socket hands
//! the kernel 64 KiB GSO frames that it cuts into MSS-sized segments (see
//! [`crate::gso`]). Frames queue in a [`GsoBatch`] and leave in one
//! `sendmmsg` per [`TxQueue::flush`]; the kernel copies them, so buffers are
//! free again at once (no completion ring).

use std::os::fd::{AsRawFd, OwnedFd};

use crate::gso::{GsoBatch, MAX_GSO_PAYLOAD};
use crate::{Error, TxPayload, TxQueue};

/// Batch buffer, bytes: room for a burst of merged frames.
const BATCH_BYTES: usize = 4 << 20;
/// Frames (merged ones count once) per flush.
const BATCH_FRAMES: usize = 1024;
/// Socket send buffer, bytes.
const SNDBUF: usize = 16 << 20;

/// Counters of a [`PacketTx`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketTxStats {
    /// Frames queued by the engine (segments, before merging).
    pub frames: u64,
    /// Segments merged into a GSO frame with the ones before them.
    pub merged: u64,
    /// Frames whose payload went from where it lay, not copied into the
    /// frame ([`TxQueue::transmit_gather`]).
    pub gathered: u64,
    /// Messages the kernel took (a merged frame is one message).
    pub sent: u64,
    /// Messages the kernel refused (dropped; TCP retransmits).
    pub refused: u64,
    /// errno of the last refusal, 0 if none.
    pub last_errno: i32,
}

/// The transmit side of a port over an AF_PACKET socket.
#[derive(Debug)]
pub struct PacketTx {
    fd: OwnedFd,
    batch: GsoBatch,
    frame_limit: usize,
    stats: PacketTxStats,
}

impl PacketTx {
    /// Opens the socket on interface `ifindex`; frames are at most
    /// `frame_limit` bytes (the port's MTU plus the Ethernet header).
    ///
    /// # Errors
    /// "permission denied opening a packet socket: run as root or with
    /// CAP_NET_RAW", or another system call failure.
    pub fn open(ifindex: u32, frame_limit: usize) -> Result<PacketTx, Error> {
        let fd =
            crate::sys::packet_tx_socket(ifindex, SNDBUF).map_err(|e| match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => Error::permission(
                    "opening a packet socket",
                    "run as root or with CAP_NET_RAW",
                    e,
                ),
                _ => Error::io("opening the transmit packet socket", e),
            })?;
        Ok(PacketTx {
            fd,
            batch: GsoBatch::new(BATCH_BYTES, BATCH_FRAMES, true),
            frame_limit,
            stats: PacketTxStats::default(),
        })
    }

    /// Largest TCP payload of a frame given to [`TxQueue::transmit_gso`].
    pub fn gso_max(&self) -> usize {
        MAX_GSO_PAYLOAD
    }

    /// Counters so far.
    pub fn stats(&self) -> PacketTxStats {
        PacketTxStats {
            merged: self.batch.merged(),
            ..self.stats
        }
    }
}

impl PacketTx {
    /// Sends the batch first when a frame of `len` bytes might not fit in
    /// it: a full batch goes out instead of refusing the frame (a drop).
    fn make_room(&mut self, len: usize) {
        if !self.batch.fits(len) {
            self.flush();
        }
    }
}

impl TxQueue for PacketTx {
    fn transmit<F: FnOnce(&mut [u8]) -> usize>(&mut self, max_len: usize, fill: F) -> bool {
        self.make_room(max_len.min(self.frame_limit));
        let queued = self.batch.push(max_len.min(self.frame_limit), fill);
        if queued {
            self.stats.frames += 1;
        }
        queued
    }

    fn transmit_gso<F: FnOnce(&mut [u8]) -> usize>(
        &mut self,
        max_len: usize,
        gso_size: usize,
        fill: F,
    ) -> bool {
        self.make_room(max_len);
        let queued = self.batch.push_gso(max_len, gso_size, fill);
        if queued {
            self.stats.frames += 1;
        }
        queued
    }

    fn transmit_gather<F: FnOnce(&mut [u8])>(
        &mut self,
        header_len: usize,
        payload: TxPayload,
        gso_size: usize,
        fill: F,
    ) -> bool {
        self.make_room(header_len);
        let queued = self.batch.push_gather(header_len, payload, gso_size, fill);
        if queued {
            self.stats.frames += 1;
            self.stats.gathered += 1;
        }
        queued
    }

    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        self.batch.finish();
        let out = crate::sys::send_frames(self.fd.as_raw_fd(), self.batch.frames());
        self.batch.clear();
        self.stats.sent += out.sent as u64;
        self.stats.refused += out.refused as u64;
        if let Some(e) = out.last_errno {
            self.stats.last_errno = e;
        }
    }
}
