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

use core::fmt::Debug;
use core::hash::Hash;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use nic::rss::Steering;
use wire::checksum::IpAddress;

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
