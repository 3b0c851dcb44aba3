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

use crate::ip::egress::Gso;
use crate::sockets::Socket;
use crate::Protocols;
use core::net::{Ipv6Addr, SocketAddr};
use nic::TxQueue;
use wire::ipv6::{Ipv6Packet, Ipv6Repr, NEXT_TCP};
use wire::tcp::TcpRepr;

/// Bytes an IPv6 header has beyond an IPv4 one without options: taken off
/// the port's largest GSO payload so that a frame stays within it.
const IPV6_EXTRA: usize = wire::ipv6::HEADER_LEN - wire::ipv4::HEADER_LEN;

/// The ECT(0) codepoint in the Traffic Class's ECN bits (RFC 3168 §5).
const ECT0: u8 = 0b10;

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

    /// Sends `seg` (headers and options only) from `local` to `remote`
    /// with flow label `label`, Traffic Class `tclass` and the default Hop
    /// Limit (as Linux answers from TIME-WAIT). Returns false when the link dropped it
    /// (counted there).
    pub(crate) fn send_tcp_headers6<T: TxQueue>(
        &mut self,
        local: Ipv6Addr,
        remote: Ipv6Addr,
        label: u32,
        tclass: u8,
        seg: &TcpRepr,
        tx: &mut T,
    ) -> bool {
        let now = self.now;
        let Some(e6) = self.ip6.as_mut() else {
            return false;
        };
        let ip = Ipv6Repr {
            src: local,
            dst: remote,
            next_header: NEXT_TCP,
            hop_limit: crate::ip::egress6::HOP_LIMIT,
            traffic_class: tclass,
            flow_label: label,
            payload_len: seg.header_len(),
        };
        e6.send_repr(tx, &mut self.stats, now, &ip, |buf| {
            seg.emit_header(buf);
            wire::tcp::fill_checksum(buf, local, remote);
        })
    }

    /// `flush_output` for a connection over IPv6 in `slot`: up to a burst
    /// of segments. Toward a resolved next hop a segment may exceed the
    /// MTU (the port cuts it, `gso_max` 20 bytes below IPv4's for the
    /// longer header) and its payload may stay in the TX ring (gather), as
    /// over IPv4 (`tx::output`); else it is copied into its frame.
    pub(crate) fn output6<T: TxQueue>(&mut self, slot: u32, tx: &mut T) -> usize {
        let Protocols {
            sockets,
            egress,
            ip6,
            stats,
            now,
            ..
        } = self;
        let now = *now;
        let Some(Some(Socket::Tcp(c))) = sockets.slots.get_mut(slot as usize) else {
            return 0;
        };
        let (SocketAddr::V6(local), SocketAddr::V6(remote)) = (c.tcb.local(), c.tcb.remote())
        else {
            return 0;
        };
        let (local, remote) = (*local.ip(), *remote.ip());
        let Some(e6) = ip6.as_mut() else {
            return 0;
        };
        crate::tcp::tx::take_path_mtu(c, &e6.pmtu, || e6.pmtu(remote, now), stats);
        let next_mac = e6.resolved(remote, now);
        c.tcb.set_gso_max(match next_mac {
            Some(_) if egress.gso_max > 0 => egress.gso_max.saturating_sub(IPV6_EXTRA),
            _ => 0,
        });
        let lend_to = next_mac.filter(|_| egress.gather);
        let (label, hdr) = (c.flow_label, c.ip6);
        let n = crate::tcp::tx::poll_burst(c, now, |seg, txr| {
            let hlen = seg.repr.header_len();
            let plen = seg.repr.payload_len;
            let ip = Ipv6Repr {
                src: local,
                dst: remote,
                next_header: NEXT_TCP,
                hop_limit: hdr.hop_limit(),
                traffic_class: hdr.traffic_class(if seg.ect { ECT0 } else { 0 }),
                flow_label: label,
                payload_len: hlen + plen,
            };
            let frame_len = crate::ip::egress6::HEADERS6 + hlen + plen;
            let lent = match lend_to {
                Some(mac) if plen > 0 && frame_len >= crate::ip::egress::MIN_FRAME => {
                    txr.payload(seg.payload_offset, plen).map(|p| (mac, p))
                }
                _ => None,
            };
            let header = |buf: &mut [u8]| {
                seg.repr.emit_header(&mut buf[..hlen]);
            };
            match (lent, next_mac) {
                (Some((mac, payload)), _) => {
                    e6.send_tcp_gather(tx, stats, mac, &ip, hlen, payload, seg.gso_size, header);
                }
                (None, Some(mac)) if seg.gso_size > 0 => {
                    let gso = Gso {
                        size: seg.gso_size,
                        header_len: hlen,
                    };
                    // The port writes the pseudo-header sum of what it cuts.
                    e6.send_tcp_gso(tx, stats, mac, &ip, gso, |buf| {
                        header(buf);
                        txr.peek_at(seg.payload_offset, &mut buf[hlen..hlen + plen]);
                    });
                }
                _ => {
                    e6.send_repr(tx, stats, now, &ip, |buf| {
                        header(buf);
                        txr.peek_at(seg.payload_offset, &mut buf[hlen..hlen + plen]);
                        wire::tcp::fill_checksum(buf, local, remote);
                    });
                }
            }
            stats.tcp_tx_segments += seg.segments() as u64;
            if seg.gso_size > 0 {
                stats.tcp_tso_sends += 1;
            }
        });
        self.after_output(slot, tx);
        n
    }
}
