//! The two address families the engine serves, as one trait: the code
//! that is the same for IPv4 and IPv6 (the TCP demux, the flow table) is
//! written once, generic over [`Family`], and monomorphized for each, so
//! the IPv4 path keeps its small key and has no dispatch per packet.
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
//! egress (`egress::Egress`, `egress6::Egress6`): the path MTU, the next
//! hop's MAC, the port's offloads, and three ways to send a segment
//! (payload lent, cut by the port, copied). `tcp::tx` is written once
//! over it.

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

/// A family's egress as TCP output sees it: implemented by
/// `egress::Egress` (IPv4) and `egress6::Egress6` (IPv6), used through
/// generics (monomorphized, no dispatch per segment). Every send counts
/// what it sent or dropped in `stats` and returns false when the frame
/// was dropped.
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

    /// The path MTU table: its generation says when to look again.
    fn pmtu_table(&self) -> &PmtuTable<Self::Addr>;

    /// The path MTU toward `dst`, bytes of IP packet.
    fn path_mtu(&self, dst: Self::Addr, now: Instant) -> usize;

    /// The MAC of the next hop toward `dst` if it is known now.
    fn resolved(&mut self, dst: Self::Addr, now: Instant) -> Option<MacAddr>;

    /// Largest TCP payload of one segment the port cuts apart for this
    /// family's header length; 0 for none.
    fn tcp_gso_max(&self) -> usize;

    /// The port sends TCP payloads from where they lie.
    fn tcp_gather(&self) -> bool;

    /// Sends one TCP segment of `flow` with ECN codepoint `ecn` to the
    /// resolved next hop `dst_mac`, its `payload` lent to the port
    /// ([`TxQueue::transmit_gather`]): `fill` writes the `header_len`
    /// bytes of TCP header, the port completes the checksum and, with
    /// `gso_size` > 0, cuts the payload into segments of that many bytes.
    /// The frame needs no padding (at least `egress::MIN_FRAME` bytes).
    #[allow(clippy::too_many_arguments)]
    fn send_tcp_gather<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        flow: &Self::Flow,
        ecn: u8,
        dst_mac: MacAddr,
        header_len: usize,
        payload: TxPayload,
        gso_size: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool;

    /// Sends one TCP segment of `flow` of `tcp_len` bytes (a `header_len`
    /// byte header included), longer than the MTU, to the resolved next
    /// hop `dst_mac`: `fill` writes it, the family puts in the checksum
    /// field what the port needs, and the port cuts it into segments of
    /// `gso_size` payload bytes ([`TxQueue::transmit_gso`]).
    #[allow(clippy::too_many_arguments)]
    fn send_tcp_gso<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        flow: &Self::Flow,
        ecn: u8,
        dst_mac: MacAddr,
        header_len: usize,
        gso_size: usize,
        tcp_len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool;

    /// Sends one TCP segment of `flow` of `tcp_len` bytes within the MTU,
    /// copied into its frame: `fill` writes it, the family fills its
    /// checksum. A frame for an unresolved next hop waits for ARP or
    /// Neighbor Discovery.
    #[allow(clippy::too_many_arguments)]
    fn send_tcp<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        now: Instant,
        flow: &Self::Flow,
        ecn: u8,
        tcp_len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool;
}
