//! TAP port: a Linux TAP device (IFF_TAP | IFF_NO_PI), one frame per
//! `read`/`write` on a non-blocking fd.
//!
//! The stack is a host *behind* the tap: the tap device is the kernel's end
//! of the wire and keeps its own MAC, while the stack uses a locally
//! administered MAC of its own, derived deterministically from the
//! interface name ([`tap_mac`]).
//!
//! Hot path: one `read` per received frame and one `write` per transmitted
//! frame, into buffers allocated at open; no allocation.
//!
//! Several engines take a queue each of a multi-queue tap (IFF_MULTI_QUEUE,
//! [`TapPort::open_queues`]). The kernel picks the queue of a frame it
//! sends by its flow hash, not by corestack's steering, so a frame may reach
//! an engine that does not own its flow: the engines hand it over.

#![deny(unsafe_code)]

#[allow(unsafe_code)]
mod sys;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::error::Error;
use crate::{Capabilities, Port, TxQueue};

/// Bytes of the receive buffer: the largest frame a tap can hand us.
const RX_BUF: usize = 65536;

/// The stack's MAC behind tap `ifname`: 02 (locally administered, unicast)
/// followed by 5 bytes of the FNV-1a hash of the name.
pub fn tap_mac(ifname: &str) -> [u8; 6] {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in ifname.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let b = h.to_be_bytes();
    [0x02, b[3], b[4], b[5], b[6], b[7]]
}

/// Counters of a tap port, in frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TapStats {
    /// Frames read.
    pub rx_frames: u64,
    /// `read` errors other than EAGAIN.
    pub rx_errors: u64,
    /// Frames written.
    pub tx_frames: u64,
    /// Frames not written: the device would block, or `write` failed.
    pub tx_dropped: u64,
}

/// The transmit side of a [`TapPort`]: each frame is written at once.
#[derive(Debug)]
pub struct TapTx {
    fd: Arc<OwnedFd>,
    buf: Vec<u8>,
    frames: u64,
    dropped: u64,
}

impl TxQueue for TapTx {
    fn transmit<F: FnOnce(&mut [u8]) -> usize>(&mut self, max_len: usize, fill: F) -> bool {
        let cap = max_len.min(self.buf.len());
        let len = fill(&mut self.buf[..cap]).min(cap);
        if len == 0 {
            return true;
        }
        match crate::sys::write_nb(self.fd.as_raw_fd(), &self.buf[..len]) {
            Ok(Some(_)) => self.frames += 1,
            Ok(None) | Err(_) => self.dropped += 1,
        }
        true
    }

    fn flush(&mut self) {}
}

/// A port on a TAP device.
#[derive(Debug)]
pub struct TapPort {
    fd: Arc<OwnedFd>,
    ifname: String,
    mac: [u8; 6],
    mtu: usize,
    rx_buf: Vec<u8>,
    rx_frames: u64,
    rx_errors: u64,
    tx: TapTx,
}

impl TapPort {
    /// Attaches to the TAP device `ifname` (an existing persistent tap such
    /// as one made by `ip tuntap add dev tap0 mode tap`, or a new one that
    /// lives as long as the port) and brings its link up if it is down.
    ///
    /// # Errors
    /// "/dev/net/tun: no such device: load the tun module or use --driver
    /// af_xdp"; permission denied (needs CAP_NET_ADMIN unless the tap is
    /// owned by the user); a device of that name that is not a tap; the
    /// device busy in another process.
    pub fn open(ifname: &str) -> Result<TapPort, Error> {
        TapPort::attach(ifname, false)
    }

    /// Attaches `n` queues of the multi-queue TAP device `ifname` (one made
    /// by `ip tuntap add dev tap0 mode tap multi_queue`, or a new one that
    /// lives as long as the ports), a port each; `n` of 1 is [`TapPort::open`].
    ///
    /// # Errors
    /// As [`TapPort::open`]; a tap made without `multi_queue` (EINVAL): "...
    /// several engines need one (`ip tuntap add dev IF mode tap
    /// multi_queue`), or use --cores 1"; more queues than the kernel allows
    /// (256).
    pub fn open_queues(ifname: &str, n: usize) -> Result<Vec<TapPort>, Error> {
        if n <= 1 {
            return Ok(vec![TapPort::open(ifname)?]);
        }
        (0..n).map(|_| TapPort::attach(ifname, true)).collect()
    }

    fn attach(ifname: &str, multi_queue: bool) -> Result<TapPort, Error> {
        let fd = Arc::new(sys::open_tap(ifname, multi_queue)?);
        crate::sys::if_set_up(ifname)?;
        let mtu = crate::sys::if_mtu(ifname)? as usize;
        Ok(TapPort {
            tx: TapTx {
                fd: fd.clone(),
                buf: vec![0; (mtu + 18).max(1518)],
                frames: 0,
                dropped: 0,
            },
            fd,
            ifname: ifname.to_string(),
            mac: tap_mac(ifname),
            mtu,
            rx_buf: vec![0; RX_BUF],
            rx_frames: 0,
            rx_errors: 0,
        })
    }

    /// The tap device's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Counters so far.
    pub fn stats(&self) -> TapStats {
        TapStats {
            rx_frames: self.rx_frames,
            rx_errors: self.rx_errors,
            tx_frames: self.tx.frames,
            tx_dropped: self.tx.dropped,
        }
    }
}

impl Port for TapPort {
    type Tx = TapTx;

    fn rx_burst<F: FnMut(&[u8], &mut TapTx)>(&mut self, max: usize, mut handle: F) -> usize {
        let mut n = 0;
        while n < max {
            match crate::sys::read_nb(self.fd.as_raw_fd(), &mut self.rx_buf) {
                Ok(Some(len)) if len > 0 => {
                    n += 1;
                    self.rx_frames += 1;
                    handle(&self.rx_buf[..len], &mut self.tx);
                }
                Ok(_) => break,
                Err(_) => {
                    self.rx_errors += 1;
                    break;
                }
            }
        }
        n
    }

    fn tx(&mut self) -> &mut TapTx {
        &mut self.tx
    }

    /// The stack's own MAC ([`tap_mac`]), not the tap device's.
    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn mtu(&self) -> usize {
        self.mtu
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
}
