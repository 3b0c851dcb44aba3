//! The impairment bridge: forwards Ethernet frames between two interfaces
//! through seeded [`Impairer`]s, where tests on a kernel with `tc netem`
//! would use netem.
//!
//! Typical layout: a namespace of its own holds one end of two veth pairs
//! and runs [`run`]; the other ends sit in the client and server namespaces:
//! `nsC <-> [bridge ns: if_a | if_b] <-> nsS`. Each interface gets an
//! AF_PACKET raw socket (every protocol, bound to the interface, ignoring
//! its own outgoing frames, promiscuous). Frames read on `if_a` go through
//! `a_to_b` and are sent on `if_b`, and the other way round.
//!
//! Every ethertype meets the same model (IPv4 and ARP, IPv6 and its Neighbor
//! Discovery): the impairer never looks inside a frame. A corrupted bit lands
//! anywhere in it; in an IPv6 frame, which has no header checksum, TCP's and
//! UDP's checksums over the IPv6 pseudo-header (RFC 8200 §8.1) cover the
//! addresses, the payload length and the payload, and only a flipped traffic
//! class, flow label or hop limit bit goes through unnoticed, as it would on a
//! real link.
//!
//! The loop sleeps in `poll` for at most 10 ms (less when a delayed frame
//! falls due), so `stop` is honoured within that. Buffers are allocated
//! before the loop.

#![forbid(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::Error;
use crate::impair::{ImpairStats, Impairer, Impairments};

/// Frames longer than this (bytes) are dropped and counted as oversize.
pub const BRIDGE_MAX_FRAME: usize = 9216;
/// Frames each direction can hold (delayed or held back): with 10 ms of
/// delay, 6 MB in flight, beyond any rate the bridge forwards, so that the
/// delay line itself drops nothing.
pub const BRIDGE_SLOTS: usize = 4096;
/// Frames read from one interface per loop iteration.
const BURST: usize = 64;
/// Longest sleep in poll, in ms.
const POLL_MS: u64 = 10;

/// What the bridge did, per direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeStats {
    /// Impairments applied to frames from `if_a` to `if_b`.
    pub a_to_b: ImpairStats,
    /// Impairments applied to frames from `if_b` to `if_a`.
    pub b_to_a: ImpairStats,
    /// Frames that could not be sent (device busy or error).
    pub send_errors: u64,
    /// Failed reads (other than EAGAIN).
    pub recv_errors: u64,
    /// Frames the kernel dropped before the bridge read them, its socket's
    /// receive buffer being full (both interfaces): loss beyond the model.
    pub socket_drops: u64,
}

/// The bridge's two packet sockets, open and bound: from now on frames on either interface are
/// queued for it, so a caller can say "ready" before [`Bridge::run`] starts forwarding.
#[derive(Debug)]
pub struct Bridge {
    sock_a: OwnedFd,
    sock_b: OwnedFd,
}

impl Bridge {
    /// Opens a packet socket on each interface.
    ///
    /// # Errors
    /// An interface that does not exist, or permission denied opening a packet
    /// socket (needs root or CAP_NET_RAW).
    pub fn open(if_a: &str, if_b: &str) -> Result<Bridge, Error> {
        let open = |ifname: &str| {
            let index = crate::sys::ifindex(ifname)?;
            crate::sys::packet_socket(index).map_err(|e| {
                if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
                    Error::permission(
                        &format!("opening a packet socket on {ifname}"),
                        "run as root or with CAP_NET_RAW",
                        e,
                    )
                } else {
                    Error::io(&format!("opening a packet socket on {ifname}"), e)
                }
            })
        };
        Ok(Bridge {
            sock_a: open(if_a)?,
            sock_b: open(if_b)?,
        })
    }

    /// Forwards frames between the two interfaces, impairing each direction, until `stop`
    /// becomes true; returns the counters.
    ///
    /// # Errors
    /// A failing `poll`.
    pub fn run(
        self,
        a_to_b: Impairments,
        b_to_a: Impairments,
        seed: u64,
        stop: &AtomicBool,
    ) -> Result<BridgeStats, Error> {
        let fds = [self.sock_a.as_raw_fd(), self.sock_b.as_raw_fd()];
        let mut dirs = [
            Impairer::with_capacity(a_to_b, seed, BRIDGE_SLOTS, BRIDGE_MAX_FRAME),
            Impairer::with_capacity(
                b_to_a,
                seed ^ 0x9e37_79b9_7f4a_7c15,
                BRIDGE_SLOTS,
                BRIDGE_MAX_FRAME,
            ),
        ];
        let mut buf = vec![0u8; 65536];
        let mut stats = BridgeStats::default();
        while !stop.load(Ordering::Relaxed) {
            let now = crate::sys::monotonic_ns();
            let wait_ms = dirs
                .iter()
                .filter_map(Impairer::next_due_ns)
                .min()
                .map_or(POLL_MS, |due| {
                    due.saturating_sub(now).div_ceil(1_000_000).min(POLL_MS)
                });
            let ready = crate::sys::poll_readable(&fds, wait_ms as i32)
                .map_err(|e| Error::io("poll in the impairment bridge", e))?;
            let now = crate::sys::monotonic_ns();
            for side in 0..2 {
                if ready[side] {
                    read_burst(fds[side], &mut buf, &mut dirs[side], now, &mut stats);
                }
            }
            for (side, dir) in dirs.iter_mut().enumerate() {
                forward_due(dir, fds[1 - side], now, &mut stats);
            }
        }
        stats.a_to_b = dirs[0].stats();
        stats.b_to_a = dirs[1].stats();
        for fd in fds {
            stats.socket_drops += crate::sys::packet_drops(fd).unwrap_or(0);
        }
        Ok(stats)
    }
}

/// Forwards frames between `if_a` and `if_b`, impairing each direction,
/// until `stop` becomes true; returns the counters ([`Bridge::open`], then
/// [`Bridge::run`]).
///
/// # Errors
/// An interface that does not exist, or permission denied opening a packet
/// socket (needs root or CAP_NET_RAW); a failing `poll`.
pub fn run(
    if_a: &str,
    if_b: &str,
    a_to_b: Impairments,
    b_to_a: Impairments,
    seed: u64,
    stop: &AtomicBool,
) -> Result<BridgeStats, Error> {
    Bridge::open(if_a, if_b)?.run(a_to_b, b_to_a, seed, stop)
}

fn read_burst(fd: RawFd, buf: &mut [u8], dir: &mut Impairer, now: u64, stats: &mut BridgeStats) {
    for _ in 0..BURST {
        match crate::sys::recv_nb(fd, buf) {
            Ok(Some(len)) => dir.push(now, &buf[..len.min(buf.len())]),
            Ok(None) => break,
            Err(_) => {
                stats.recv_errors += 1;
                break;
            }
        }
    }
}

fn forward_due(dir: &mut Impairer, out: RawFd, now: u64, stats: &mut BridgeStats) {
    for _ in 0..BRIDGE_SLOTS {
        let Some(frame) = dir.pop_due(now) else {
            break;
        };
        if !matches!(crate::sys::send_nb(out, frame), Ok(Some(_))) {
            stats.send_errors += 1;
        }
    }
}
