//! TCP over IPv6 (issue 25): segments that `rx6::deliver_ipv6` found
//! under a whole packet for us (its datagrams go to `udp`), checked with the
//! IPv6 pseudo-header (RFC 8200 §8.1, RFC 2460 §8.1), and what we send
//! back through `egress6` with the connection's flow label (RFC 6437) and
//! ECN in the Traffic Class (RFC 3168 §5, RFC 8200 §7). The TCP state
//! machine, the flow tables and the listeners are the family-generic ones
//! of IPv4 (`demux::tcp_segment`, `sockets`, `listen`). IPv6 has no DF and no
//! identification: nothing to set (RFC 8200 §5: we never fragment, the
//! MSS keeps segments within the path MTU). Toward a resolved neighbor,
//! TCP output uses the port's segmentation offload and lends payloads from
//! the TX ring as over IPv4 (`egress6::send_tcp_gso`, `send_tcp_gather`);
//! other segments are copied into their frame and checksummed here.
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `sockets`, `egress`, `ip6`.

use crate::Protocols;
use nic::TxQueue;
use wire::ipv6::Ipv6Packet;

impl Protocols {
    /// A TCP segment `segment` (the upper-layer bytes) of the IPv6 packet
    /// `ip`: to its connection, a listener, or answered with RST.
    pub(crate) fn handle_tcp6<T: TxQueue>(
        &mut self,
        ip: &Ipv6Packet<'_>,
        segment: &[u8],
        tx: &mut T,
    ) {
        let (src, dst) = (ip.src(), ip.dst());
        if dst.is_multicast() {
            // RFC 9293 §3.10.7.1 answers no segment to a multicast address.
            self.stats.drop_ipv6_transport += 1;
            return;
        }
        let ce = ip.traffic_class() & 0b11 == 0b11;
        let ev = self.handle_tcp(src, dst, segment, ce, tx);
        // RFC 4861 §7.3.1: new data acknowledged (or the handshake done)
        // is forward progress: the neighbor toward the peer is reachable.
        if ev.is_some_and(|e| e.writable || e.connected) {
            let now = self.now;
            if let Some(e6) = self.ip6.as_mut() {
                if let Some(hop) = e6.next_hop(src) {
                    e6.neighbors.confirm(hop, now);
                }
            }
        }
    }
}
