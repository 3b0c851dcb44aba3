//! The two address families the engine serves, as traits: the code that
//! is the same for IPv4 and IPv6 (the TCP demux, the flow table, TCP
//! output) is written once, generic over [`Family`] or [`TcpEgress`], and
//! monomorphized for each, so the IPv4 path keeps its small key and has
//! no dispatch per packet.
//!
//! What the trait gives: the transport checksum's pseudo-header
//! ([`wire::checksum::IpAddress`]), the flow table key and the steering
//! owner of a 4-tuple. Where each family's tables sit in the socket table
//! is `sockets::FamilyTables`'s, beside them.
//! ISNs, timestamp offsets and SYN cookies already take a
//! [`SocketAddr`] of either family and hash the whole address
//! (`tcp::isn`, `syncookie`).
//!
//! On the way out, [`TcpEgress`] is what TCP output needs of a family's
//! egress (`egress::Egress`, `egress6::Egress6`): the [`Route`] toward a
//! peer (next hop's MAC, the port's offloads, the path MTU) and one send,
//! whose [`Via`] says how the segment leaves (payload lent, cut by the
//! port, copied). `tcp::tx` is written once over it.

use crate::ip::pmtu::{PmtuFloor, PmtuTable};
use crate::obs::stats::Stats;
use crate::time::Instant;
use core::fmt::Debug;
use core::hash::Hash;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use nic::rss::Steering;
use nic::{TxPayload, TxQueue};
use wire::checksum::IpAddress;
use wire::MacAddr;

/// The ECT(0) codepoint in the ECN bits, the low two of IPv4's TOS byte
/// and of IPv6's Traffic Class (RFC 3168 §5).
pub(crate) const ECT0: u8 = 0b10;

/// An IP address family: [`Ipv4Addr`] or [`Ipv6Addr`].
pub trait Family: IpAddress + Into<IpAddr> {
    /// The flow table's key: the remote address, the remote port and our
    /// local port (our local address is one of few, left out). 8 bytes
    /// for IPv4, 20 for IPv6.
    type FlowKey: Copy + Eq + Hash + Debug;

    /// The key of the flow from `remote`:`remote_port` to our `local_port`.
    fn flow_key(remote: Self, remote_port: u16, local_port: u16) -> Self::FlowKey;

    /// The remote address, remote port and local port of flow `key`
    /// (the inverse of [`Family::flow_key`]).
    fn unflow_key(key: Self::FlowKey) -> (Self, u16, u16);

    /// The engine owning the flow between `a:port_a` and `b:port_b` under
    /// `steering` (symmetric: the same both ways).
    fn owner(steering: &Steering, a: Self, b: Self, port_a: u16, port_b: u16) -> usize;

    /// `self`:`port` as a socket address (IPv6: flow info and scope 0).
    #[inline]
    fn socket(self, port: u16) -> SocketAddr {
        SocketAddr::new(self.into(), port)
    }
}

impl Family for Ipv4Addr {
    type FlowKey = u64;

    #[inline]
    fn flow_key(remote: Self, remote_port: u16, local_port: u16) -> u64 {
        (u64::from(u32::from(remote)) << 32)
            | (u64::from(remote_port) << 16)
            | u64::from(local_port)
    }

    #[inline]
    fn unflow_key(key: u64) -> (Self, u16, u16) {
        (
            Ipv4Addr::from((key >> 32) as u32),
            (key >> 16) as u16,
            key as u16,
        )
    }

    #[inline]
    fn owner(steering: &Steering, a: Self, b: Self, port_a: u16, port_b: u16) -> usize {
        steering.owner(a.octets(), b.octets(), port_a, port_b)
    }
}

impl Family for Ipv6Addr {
    type FlowKey = (u128, u32);

    #[inline]
    fn flow_key(remote: Self, remote_port: u16, local_port: u16) -> (u128, u32) {
        (
            u128::from(remote),
            (u32::from(remote_port) << 16) | u32::from(local_port),
        )
    }

    #[inline]
    fn unflow_key((addr, ports): (u128, u32)) -> (Self, u16, u16) {
        (Ipv6Addr::from(addr), (ports >> 16) as u16, ports as u16)
    }

    #[inline]
    fn owner(steering: &Steering, a: Self, b: Self, port_a: u16, port_b: u16) -> usize {
        steering.owner(a.octets(), b.octets(), port_a, port_b)
    }
}

/// How the port cuts one oversized TCP segment apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gso {
    /// Payload bytes per segment (the MSS); 0: the port does not cut it.
    pub size: usize,
    /// TCP header bytes, repeated in every segment.
    pub header_len: usize,
}

impl Gso {
    /// Segments a transport segment of `l4_len` bytes (header included)
    /// makes; 1 when `size` is 0 (the port does not cut it).
    #[inline]
    pub(crate) fn segments(&self, l4_len: usize) -> usize {
        if self.size == 0 {
            return 1;
        }
        l4_len
            .saturating_sub(self.header_len)
            .div_ceil(self.size)
            .max(1)
    }

    /// Bytes the wire carries for a frame of `frame_len` bytes cut into
    /// `segments`: each segment after the first repeats the `link_headers`
    /// bytes of Ethernet and IP header and the TCP header.
    #[inline]
    pub(crate) fn wire_bytes(
        &self,
        frame_len: usize,
        segments: usize,
        link_headers: usize,
    ) -> usize {
        frame_len + (segments - 1) * (link_headers + self.header_len)
    }
}

/// How one TCP segment leaves, as `tcp::tx` decides it.
pub(crate) enum Via {
    /// To the resolved next hop at this MAC with its payload lent to the
    /// port ([`TxQueue::transmit_gather`]): the segment's `fill` writes
    /// only the TCP header, the port completes the checksum. The frame
    /// needs no padding (at least `egress::MIN_FRAME` bytes).
    Lent(MacAddr, TxPayload),
    /// To the resolved next hop at this MAC, copied, for the port to cut
    /// apart ([`TxQueue::transmit_gso`]).
    Cut(MacAddr),
    /// Copied, within the MTU, at the given time: the frame waits for ARP
    /// or Neighbor Discovery when the next hop is not resolved.
    Copied(Instant),
}

/// What the port does for TCP output, from its [`nic::Capabilities`]:
/// each family's egress holds a copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpOffloads {
    /// Largest TCP payload of one segment the port cuts apart
    /// ([`nic::Capabilities::tx_gso_max`], with an IPv4 header); 0 for
    /// none.
    pub gso_max: usize,
    /// The port sends TCP payloads from where they lie
    /// ([`nic::Capabilities::tx_gather`]).
    pub gather: bool,
}

/// The route toward a peer as TCP output sees it, for one burst.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route<'a, A> {
    /// The next hop's MAC address, if it is known now.
    pub next_mac: Option<MacAddr>,
    /// The port's offloads, `gso_max` for this family's header length.
    pub offloads: TcpOffloads,
    /// The link MTU, bytes of IP packet.
    pub link_mtu: usize,
    /// The path MTUs learned (its generation says when to look again).
    pub pmtu: &'a PmtuTable<A>,
}

/// One TCP segment for a family's egress to send.
pub(crate) struct TcpOut<F> {
    /// The connection's IP header fields ([`TcpEgress::Flow`]).
    pub flow: F,
    /// The ECN codepoint of its IP header (two bits).
    pub ecn: u8,
    /// Bytes of TCP header and payload.
    pub tcp_len: usize,
    /// Its TCP header's length, and how the port cuts it (size 0: not).
    pub gso: Gso,
    /// How it leaves.
    pub via: Via,
}

impl<F> TcpOut<F> {
    /// A segment of `flow` without payload (RST, SYN-ACK, a bare ACK) of
    /// `header_len` bytes, without ECN, copied at `now`.
    pub(crate) fn control(flow: F, header_len: usize, now: Instant) -> TcpOut<F> {
        TcpOut {
            flow,
            ecn: 0,
            tcp_len: header_len,
            gso: Gso {
                size: 0,
                header_len,
            },
            via: Via::Copied(now),
        }
    }
}

/// A family's egress as TCP output sees it: implemented by
/// `egress::Egress` (IPv4) and `egress6::Egress6` (IPv6), used through
/// generics (monomorphized, no dispatch per segment).
pub(crate) trait TcpEgress {
    /// The family's address.
    type Addr: Family + PmtuFloor;
    /// The IP header fields of one connection's packets but the payload
    /// length and the ECN codepoint: for IPv4 the peer (the source is
    /// ours, TTL 64, TOS only ECN); for IPv6 the whole header (addresses,
    /// Flow Label, Traffic Class, Hop Limit).
    type Flow: Copy;
    /// Bytes of Ethernet and IP header in front of the TCP header.
    const HEADERS: usize;

    /// The peer of `flow`.
    fn peer(flow: &Self::Flow) -> Self::Addr;

    /// The route toward `dst` now.
    fn route(&mut self, dst: Self::Addr, now: Instant) -> Route<'_, Self::Addr>;

    /// Sends `seg` as its `via` says, `fill` writing its TCP header and
    /// payload into `seg.tcp_len` bytes (the header only when lent), the
    /// family its checksum as its port needs it (IPv4: as
    /// `Egress::tcp_checksum`; IPv6: in full when copied, the port's when
    /// cut). Counted in `stats`; false when it was dropped.
    fn send_tcp<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        seg: TcpOut<Self::Flow>,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool;
}
