//! Ports: where frames enter and leave corestack.
//!
//! A [`Port`] moves whole Ethernet frames in bursts. Drivers:
//! - [`af_xdp`]: one AF_XDP socket per NIC queue (own UMEM, fill/completion/rx/tx rings),
//!   one XDP program and one XSKMAP per interface (`AfXdpPort::open_queues`: a port per queue,
//!   one per engine);
//! - [`tap`]: a Linux TAP device (IFF_NO_PI);
//! - [`mem`]: an in-process wire between two stacks with seeded impairments,
//!   one queue per end ([`mem::pair`]) or several with selectable steering
//!   ([`mem::multi_pair`], [`mem::Steer`]).
//!
//! Every port passes the same conformance tests (`tests/conformance.rs`).
//! [`impair`] holds the seeded impairment model shared by `mem` and the
//! [`bridge`] (an AF_PACKET forwarder standing in for `tc netem` in tests).
//!
//! `unsafe` code lives only in the `sys` modules (`sys`, `af_xdp::sys`,
//! `tap::sys`); every block carries a `// SAFETY:` comment. The lent
//! payloads of [`TxQueue::transmit_gather`] ([`TxPayload`] over
//! [`StableMemory`]) are crate `payload`'s, re-exported here.

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod af_xdp;
pub mod bridge;
mod error;
pub mod group;
pub mod gso;
pub mod impair;
pub mod mem;
pub mod packet_tx;
pub mod rss;
#[allow(unsafe_code)]
mod sys;
pub mod tap;

pub use error::{Error, ErrorKind};
pub use payload::{StableMemory, TxPayload};

/// Which port driver carries the frames: one type for the library's
/// builder, the daemon's configuration file (`driver = "af_xdp"`) and every
/// command line (`--driver af_xdp|tap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
pub enum Driver {
    /// AF_XDP on one NIC queue (native XDP, falling back to generic), see `af_xdp`.
    #[default]
    #[cfg_attr(feature = "serde", serde(rename = "af_xdp"))]
    #[cfg_attr(
        feature = "clap",
        value(name = "af_xdp", alias = "af-xdp", alias = "xdp")
    )]
    AfXdp,
    /// A Linux TAP device, see `tap`.
    #[cfg_attr(feature = "serde", serde(rename = "tap"))]
    Tap,
}

impl Driver {
    /// The name in files and on command lines: `af_xdp` or `tap`.
    pub fn name(self) -> &'static str {
        match self {
            Driver::AfXdp => "af_xdp",
            Driver::Tap => "tap",
        }
    }
}

impl core::fmt::Display for Driver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Offloads a port can perform; each is a switch so its effect can be measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// The port verifies IPv4/TCP/UDP checksums on receive.
    pub rx_checksum: bool,
    /// The port completes TCP checksums on transmit: the engine stores only
    /// the folded pseudo-header sum, not complemented, in every TCP
    /// segment's checksum field (Linux's CHECKSUM_PARTIAL convention) and
    /// the port (or the kernel or NIC behind it) sums the segment over it.
    pub tx_tcp_checksum: bool,
    /// Largest TCP payload, in bytes, of one frame handed to
    /// [`TxQueue::transmit_gso`], which the port cuts into segments (TSO or
    /// software GSO); 0 when the port cannot. Implies `tx_tcp_checksum`.
    pub tx_gso_max: usize,
    /// [`TxQueue::transmit_gather`] sends the payload from where it lies
    /// instead of copying it into the frame. Implies `tx_tcp_checksum`.
    pub tx_gather: bool,
}

/// The transmit side of a port.
pub trait TxQueue {
    /// Queues one frame: `fill` gets a buffer of `max_len` bytes (at most the
    /// port's frame size), writes the frame at its start and returns the
    /// frame length in bytes (0 cancels). Returns false, without calling
    /// `fill`, when no tx buffer is free (the caller counts a drop).
    fn transmit<F: FnOnce(&mut [u8]) -> usize>(&mut self, max_len: usize, fill: F) -> bool;
    /// Queues one TCP/IPv4 frame larger than the MTU that the port cuts into
    /// segments of `gso_size` payload bytes, as `tcp_gso_segment` does:
    /// segment *i* gets sequence number `seq + i·gso_size` and IP
    /// identification `id + i`, CWR only on the first, PSH and FIN only on
    /// the last, and fresh checksums (the TCP checksum field holds the
    /// pseudo-header sum, see [`Capabilities::tx_tcp_checksum`]). `fill` as
    /// for [`TxQueue::transmit`]. Only for ports with
    /// [`Capabilities::tx_gso_max`] > 0; the default refuses (false) without
    /// calling `fill`.
    fn transmit_gso<F: FnOnce(&mut [u8]) -> usize>(
        &mut self,
        max_len: usize,
        gso_size: usize,
        fill: F,
    ) -> bool {
        let _ = (max_len, gso_size, fill);
        false
    }

    /// Queues one TCP/IPv4 frame of `header_len + payload.len()` bytes
    /// (at least 60) whose payload the port may send from where it lies:
    /// `fill` writes the `header_len` bytes of Ethernet, IPv4 (without
    /// options) and TCP headers, with the IP total length and checksum of
    /// the whole frame and the TCP pseudo-header sum (see
    /// [`Capabilities::tx_tcp_checksum`]). With `gso_size` > 0 and a longer
    /// payload the port cuts the frame as [`TxQueue::transmit_gso`] does.
    /// The port may keep `payload` until the next [`TxQueue::flush`]; its
    /// bytes must not change before then. Returns false when no tx buffer
    /// is free or the frame is refused (the caller counts a drop). The
    /// default copies headers and payload into one frame through
    /// [`TxQueue::transmit_gso`] or [`TxQueue::transmit`].
    fn transmit_gather<F: FnOnce(&mut [u8])>(
        &mut self,
        header_len: usize,
        payload: TxPayload,
        gso_size: usize,
        fill: F,
    ) -> bool {
        transmit_copied(self, header_len, payload, gso_size, fill)
    }

    /// Frames that can be queued now without a drop for want of a buffer
    /// (a lower bound); `usize::MAX` when the port does not run out.
    fn room(&self) -> usize {
        usize::MAX
    }

    /// Hands every queued frame to the device (AF_XDP: one `sendto` kick if
    /// the kernel asked for a wake-up; TAP: nothing, frames are written at
    /// once; mem: delivery to the peer) and reaps completed tx buffers.
    fn flush(&mut self);
}

/// [`TxQueue::transmit_gather`] by copying: headers and payload go into one
/// frame through [`TxQueue::transmit_gso`] (a payload longer than
/// `gso_size` > 0) or [`TxQueue::transmit`].
pub fn transmit_copied<T: TxQueue + ?Sized, F: FnOnce(&mut [u8])>(
    tx: &mut T,
    header_len: usize,
    payload: TxPayload,
    gso_size: usize,
    fill: F,
) -> bool {
    let len = header_len + payload.len();
    let build = |buf: &mut [u8]| {
        if buf.len() < len {
            return 0;
        }
        fill(&mut buf[..header_len]);
        payload.copy_to(&mut buf[header_len..len]);
        len
    };
    if gso_size > 0 && payload.len() > gso_size {
        tx.transmit_gso(len, gso_size, build)
    } else {
        tx.transmit(len, build)
    }
}

/// A network port: batched receive and transmit of Ethernet frames.
pub trait Port {
    /// The transmit side; borrowed separately from received frames so the
    /// engine can answer while it reads.
    type Tx: TxQueue;

    /// Receives up to `max` frames and calls `handle(frame, tx)` on each; the
    /// frame slice is valid only during the call. Returns the number of
    /// frames handled. Never blocks.
    fn rx_burst<F: FnMut(&[u8], &mut Self::Tx)>(&mut self, max: usize, handle: F) -> usize;

    /// The transmit side, for frames not sent in answer to a received one.
    fn tx(&mut self) -> &mut Self::Tx;

    /// The port's MAC address.
    fn mac(&self) -> [u8; 6];

    /// The largest IP packet the port carries, in bytes (the link MTU, e.g. 1500).
    fn mtu(&self) -> usize;

    /// Offloads in effect.
    fn capabilities(&self) -> Capabilities;

    /// A file descriptor that becomes readable when frames arrive, for an
    /// engine that sleeps instead of polling; None for ports without one.
    fn rx_fd(&self) -> Option<std::os::fd::RawFd>;

    /// Frames the NIC side dropped before the engine saw them, since the
    /// port opened (AF_XDP: the kernel's XDP_STATISTICS); zeros for ports
    /// that drop nothing there or cannot tell. May make a system call.
    fn rx_drops(&self) -> RxDrops {
        RxDrops::default()
    }
}

/// Frames a port's receive side lost before the engine took them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxDrops {
    /// Dropped because the rx ring was full: the engine did not keep up
    /// (AF_XDP `rx_ring_full`).
    pub ring_full: u64,
    /// Dropped because the fill ring had no free buffer (AF_XDP
    /// `rx_fill_ring_empty_descs`).
    pub fill_empty: u64,
    /// Dropped for any other reason (AF_XDP `rx_dropped`: e.g. a frame
    /// larger than a UMEM chunk).
    pub other: u64,
}

#[cfg(test)]
mod tests {
    fn assert_send<T: Send>() {}

    #[test]
    fn ports_are_send() {
        assert_send::<crate::af_xdp::AfXdpPort>();
        assert_send::<crate::tap::TapPort>();
        assert_send::<crate::mem::MemPort>();
    }
}
