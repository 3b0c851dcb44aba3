//! The link and network layers on the way out: IPv4 routing on one subnet
//! (plus an optional gateway), ARP resolution, Ethernet framing.

use crate::ip::family::{Gso, Route, TcpEgress, TcpOffloads, TcpOut, Via};
use crate::ip::pmtu::{PmtuTable, PMTU_ENTRIES};
use crate::link::arp::{ArpAction, ArpCache};
use crate::obs::stats::Stats;
use crate::time::Instant;
use core::net::Ipv4Addr;
use nic::TxQueue;
use wire::arp::{ArpOp, ArpRepr};
use wire::checksum::IpAddress;
use wire::ethernet::{self, EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use wire::ipv4::{self, Ipv4Repr, PROTO_TCP};
use wire::MacAddr;

/// Ethernet frames shorter than this (without FCS) are padded with zeros.
pub const MIN_FRAME: usize = 60;
/// Bytes of link + network headers in front of every transport header.
pub const HEADERS: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN;

/// Our interface: address, routing, ARP.
pub struct Egress {
    /// Our MAC address.
    pub mac: MacAddr,
    /// Our IPv4 address.
    pub ip: Ipv4Addr,
    /// The subnet's prefix length, bits.
    pub prefix_len: u8,
    /// Next hop for destinations off the subnet.
    pub gateway: Option<Ipv4Addr>,
    /// Largest IP packet in bytes.
    pub mtu: usize,
    /// Path MTUs learned from ICMP Fragmentation Needed (RFC 1191).
    pub pmtu: PmtuTable<Ipv4Addr>,
    /// Neighbours' MAC addresses and frames waiting for them (RFC 826).
    pub arp: ArpCache,
    /// The port completes TCP checksums ([`nic::Capabilities::tx_tcp_checksum`]).
    pub tcp_checksum_offload: bool,
    /// Segmentation offload and gather ([`nic::Capabilities`]).
    pub offloads: TcpOffloads,
    ident: u16,
}

impl Egress {
    /// The interface `mac` with `ip`/`prefix_len`, an optional `gateway`, an
    /// `mtu` (bytes of IP packet) and an ARP cache; no offloads until the
    /// engine sets them from the port's capabilities.
    pub fn new(
        mac: MacAddr,
        ip: Ipv4Addr,
        prefix_len: u8,
        gateway: Option<Ipv4Addr>,
        mtu: usize,
        arp: ArpCache,
    ) -> Egress {
        Egress {
            mac,
            ip,
            prefix_len,
            gateway,
            mtu,
            pmtu: PmtuTable::new(PMTU_ENTRIES),
            arp,
            tcp_checksum_offload: false,
            offloads: TcpOffloads::default(),
            ident: 1,
        }
    }

    /// Fills the checksum of `segment` (a whole TCP segment from `src` to
    /// `dst`): in full, or only the pseudo-header sum when the port
    /// completes it.
    pub fn tcp_checksum(offload: bool, segment: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr) {
        if offload {
            wire::tcp::fill_pseudo_checksum(segment, src, dst);
        } else {
            wire::tcp::fill_checksum(segment, src, dst);
        }
    }

    fn mask(&self) -> u32 {
        if self.prefix_len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix_len.min(32)))
        }
    }

    /// True when `ip` is on our subnet.
    pub fn on_link(&self, ip: Ipv4Addr) -> bool {
        (u32::from(ip) ^ u32::from(self.ip)) & self.mask() == 0
    }

    /// True for the limited broadcast and our subnet's broadcast address.
    pub fn is_broadcast(&self, ip: Ipv4Addr) -> bool {
        ip.is_broadcast()
            || (self.prefix_len < 31 && u32::from(ip) == u32::from(self.ip) | !self.mask())
    }

    /// The path MTU toward `dst` in bytes: the estimate learned from
    /// Fragmentation Needed (at least 552), else the link MTU.
    /// O(`pmtu::PMTU_ENTRIES`).
    pub fn path_mtu(&self, dst: Ipv4Addr, now: Instant) -> usize {
        self.pmtu.path_mtu(dst, now, self.mtu)
    }

    /// The next hop toward `dst`: itself when on-link, else the gateway.
    pub fn next_hop(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        if self.on_link(dst) {
            Some(dst)
        } else {
            self.gateway
        }
    }

    /// The MAC address of the next hop to `dst` if it is known now: a frame
    /// to it goes out at once instead of waiting in the ARP queue.
    pub fn resolved(&self, dst: Ipv4Addr, now: Instant) -> Option<MacAddr> {
        self.next_hop(dst).and_then(|h| self.arp.lookup(h, now))
    }

    /// Sends one IPv4 packet of `payload_len` bytes (≤ mtu - 20) to `dst`
    /// with TOS byte `tos` (DSCP and the RFC 3168 ECN codepoint in its low
    /// two bits); `fill` writes the transport header and payload into
    /// exactly that many bytes. Frames for an unresolved next hop wait in
    /// the ARP queue. Returns false when the packet was dropped (counted).
    #[allow(clippy::too_many_arguments)]
    pub fn send_ipv4<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        now: Instant,
        dst: Ipv4Addr,
        protocol: u8,
        tos: u8,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        let Some(next_hop) = self.next_hop(dst) else {
            stats.drop_no_route += 1;
            return false;
        };
        debug_assert!(payload_len + ipv4::HEADER_LEN <= self.mtu);
        let ip = self.ipv4_repr(dst, protocol, payload_len, 1);
        let src_mac = self.mac;
        let frame_len = (HEADERS + payload_len).max(MIN_FRAME);
        let build = |dst_mac: MacAddr, buf: &mut [u8]| -> usize {
            emit_headers(buf, dst_mac, src_mac, &ip, tos);
            fill(&mut buf[HEADERS..HEADERS + payload_len]);
            buf[HEADERS + payload_len..frame_len].fill(0);
            frame_len
        };
        if let Some(mac) = self.arp.lookup(next_hop, now) {
            let sent = tx.transmit(frame_len, |buf| build(mac, buf));
            stats.count_tx(sent, 1, frame_len)
        } else {
            match self
                .arp
                .enqueue(next_hop, now, |buf| build(MacAddr::ZERO, buf))
            {
                Some(true) => {
                    self.send_arp_request(tx, stats, next_hop);
                    true
                }
                Some(false) => true,
                None => {
                    stats.drop_arp_pending_full += 1;
                    false
                }
            }
        }
    }

    /// The IPv4 header of a packet of `payload_len` bytes to `dst` that the
    /// port cuts into `segments` packets: they take the next `segments` IP
    /// identifications.
    fn ipv4_repr(
        &mut self,
        dst: Ipv4Addr,
        protocol: u8,
        payload_len: usize,
        segments: usize,
    ) -> Ipv4Repr {
        let ident = self.ident.wrapping_add(1);
        self.ident = self.ident.wrapping_add(segments as u16);
        Ipv4Repr {
            src: self.ip,
            dst,
            protocol,
            ttl: 64,
            ident,
            dont_frag: true,
            payload_len,
        }
    }

    /// Broadcasts an ARP request for `ip` (RFC 826).
    fn send_arp_request<T: TxQueue>(&mut self, tx: &mut T, stats: &mut Stats, ip: Ipv4Addr) {
        let (op, dst) = (ArpOp::Request, MacAddr::BROADCAST);
        self.send_arp(tx, stats, op, dst, MacAddr::ZERO, ip);
    }

    /// Sends an ARP packet from us to `target_ip` (at `target_mac`, or
    /// zero for a request), in an Ethernet frame to `eth_dst`.
    pub fn send_arp<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        op: ArpOp,
        eth_dst: MacAddr,
        target_mac: MacAddr,
        target_ip: Ipv4Addr,
    ) {
        let repr = ArpRepr {
            op,
            sender_mac: self.mac,
            sender_ip: self.ip,
            target_mac,
            target_ip,
        };
        let src = self.mac;
        let sent = tx.transmit(MIN_FRAME, |buf| {
            EthernetRepr {
                dst: eth_dst,
                src,
                ethertype: ETHERTYPE_ARP,
            }
            .emit(buf);
            repr.emit(&mut buf[ethernet::HEADER_LEN..]);
            let end = ethernet::HEADER_LEN + wire::arp::PACKET_LEN;
            buf[end..MIN_FRAME].fill(0);
            MIN_FRAME
        });
        if !stats.count_tx(sent, 1, MIN_FRAME) {
            return;
        }
        match op {
            ArpOp::Request => stats.arp_requests_tx += 1,
            ArpOp::Reply => stats.arp_replies_tx += 1,
        }
    }

    /// Sends the frames that waited for `ip`, now known to be at `mac`.
    pub fn flush_waiting<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        ip: Ipv4Addr,
        mac: MacAddr,
    ) {
        self.arp
            .take_waiting(ip, |frame| send_waiting(tx, stats, mac, frame));
    }

    /// Retries ARP requests and drops frames for silent next hops.
    pub fn poll_arp<T: TxQueue>(&mut self, tx: &mut T, stats: &mut Stats, now: Instant) {
        let mut requests = [Ipv4Addr::UNSPECIFIED; 16];
        let mut n = 0;
        self.arp.poll(now, |a| match a {
            ArpAction::Request(ip) => {
                if n < requests.len() {
                    requests[n] = ip;
                    n += 1;
                }
            }
            ArpAction::Unresolved(dropped) => stats.drop_arp_unresolved += dropped as u64,
        });
        for &ip in &requests[..n] {
            self.send_arp_request(tx, stats, ip);
        }
    }
}

/// TCP output over IPv4 (`tcp::tx`): the TOS byte carries only the ECN
/// codepoint; packets cut by the port take consecutive IP identifications;
/// checksums as [`Egress::tcp_checksum`] fills them.
impl TcpEgress for Egress {
    type Addr = Ipv4Addr;
    type Flow = Ipv4Addr;
    const HEADERS: usize = HEADERS;

    fn peer(dst: &Ipv4Addr) -> Ipv4Addr {
        *dst
    }

    fn send_tcp<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        TcpOut {
            flow: dst,
            ecn: tos,
            tcp_len,
            gso,
            via,
        }: TcpOut<Ipv4Addr>,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        let (src, src_mac, offload) = (self.ip, self.mac, self.tcp_checksum_offload);
        let checksum = |segment: &mut [u8]| Egress::tcp_checksum(offload, segment, src, dst);
        let (dst_mac, lent) = match via {
            Via::Lent(mac, payload) => (mac, Some(payload)),
            Via::Cut(mac) => (mac, None),
            Via::Copied(now) => {
                return self.send_ipv4(tx, stats, now, dst, PROTO_TCP, tos, tcp_len, |s| {
                    fill(s);
                    checksum(s);
                });
            }
        };
        let ip = self.ipv4_repr(dst, PROTO_TCP, tcp_len, gso.segments(tcp_len));
        let emit = |buf: &mut [u8]| emit_headers(buf, dst_mac, src_mac, &ip, tos);
        if let Some(payload) = lent {
            return transmit_tcp_gather(tx, stats, HEADERS, (src, dst), gso, payload, emit, fill);
        }
        transmit_tcp_gso(tx, stats, HEADERS, gso, tcp_len, emit, |s| {
            fill(s);
            checksum(s);
        })
    }

    fn route(&mut self, dst: Ipv4Addr, now: Instant) -> Route<'_, Ipv4Addr> {
        Route {
            next_mac: self.resolved(dst, now),
            offloads: self.offloads,
            link_mtu: self.mtu,
            pmtu: &self.pmtu,
        }
    }
}

/// Sends `frame`, one that waited for its next hop's link-layer address
/// (ARP or Neighbor Discovery), now addressed to `mac`; counted in `stats`.
pub(crate) fn send_waiting<T: TxQueue>(
    tx: &mut T,
    stats: &mut Stats,
    mac: MacAddr,
    frame: &mut [u8],
) {
    frame[..6].copy_from_slice(&mac.0);
    let len = frame.len();
    let sent = tx.transmit(len, |buf| {
        buf[..len].copy_from_slice(frame);
        len
    });
    stats.count_tx(sent, 1, len);
}

/// Hands the port one TCP segment whose payload stays where it lies
/// ([`TxQueue::transmit_gather`]), either family: `emit` writes the
/// `link_headers` bytes of Ethernet and IP header, `fill` the
/// `gso.header_len` bytes of TCP header, whose checksum field then gets
/// the pseudo-header sum of `ends` (source, destination) over the whole
/// segment; the port cuts it as `gso` says ([`Gso::segments`]) and
/// completes the sums. The frame must need no padding (at least
/// [`MIN_FRAME`] bytes). Counted in `stats` (a refusal in
/// `tx_no_buffer`); false when the port refused it.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn transmit_tcp_gather<T: TxQueue, A: IpAddress>(
    tx: &mut T,
    stats: &mut Stats,
    link_headers: usize,
    (src, dst): (A, A),
    gso: Gso,
    payload: nic::TxPayload,
    emit: impl FnOnce(&mut [u8]),
    fill: impl FnOnce(&mut [u8]),
) -> bool {
    let tcp_len = gso.header_len + payload.len();
    let frame_len = link_headers + tcp_len;
    debug_assert!(frame_len >= MIN_FRAME, "a lent frame cannot be padded");
    let segments = gso.segments(tcp_len);
    let lent_at = link_headers + gso.header_len;
    let queued = tx.transmit_gather(lent_at, payload, gso.size, |buf| {
        emit(buf);
        let tcp = &mut buf[link_headers..];
        fill(tcp);
        wire::tcp::fill_pseudo_checksum_len(tcp, src, dst, tcp_len);
    });
    stats.count_tx(
        queued,
        segments,
        gso.wire_bytes(frame_len, segments, link_headers),
    )
}

/// Hands the port one TCP segment of `tcp_len` bytes that it cuts as
/// `gso` says ([`TxQueue::transmit_gso`]), either family: `emit` writes
/// the `link_headers` bytes of Ethernet and IP header, `fill` the segment
/// after them; the frame is padded to [`MIN_FRAME`]. Counted in `stats`
/// (a refusal in `tx_no_buffer`); false when the port refused it.
#[inline]
pub(crate) fn transmit_tcp_gso<T: TxQueue>(
    tx: &mut T,
    stats: &mut Stats,
    link_headers: usize,
    gso: Gso,
    tcp_len: usize,
    emit: impl FnOnce(&mut [u8]),
    fill: impl FnOnce(&mut [u8]),
) -> bool {
    let end = link_headers + tcp_len;
    let frame_len = end.max(MIN_FRAME);
    let queued = tx.transmit_gso(frame_len, gso.size, |buf| {
        emit(buf);
        fill(&mut buf[link_headers..end]);
        buf[end..frame_len].fill(0);
        frame_len
    });
    let segments = gso.segments(tcp_len);
    stats.count_tx(
        queued,
        segments,
        gso.wire_bytes(frame_len, segments, link_headers),
    )
}

/// Writes the Ethernet header (to `dst_mac` from `src_mac`) and the IPv4
/// header `ip` at the start of `buf`, with TOS byte `tos` (header checksum
/// refreshed when it is not 0).
fn emit_headers(buf: &mut [u8], dst_mac: MacAddr, src_mac: MacAddr, ip: &Ipv4Repr, tos: u8) {
    EthernetRepr {
        dst: dst_mac,
        src: src_mac,
        ethertype: ETHERTYPE_IPV4,
    }
    .emit(buf);
    ip.emit(&mut buf[ethernet::HEADER_LEN..]);
    if tos != 0 {
        buf[ethernet::HEADER_LEN + 1] = tos;
        ipv4::fill_header_checksum(&mut buf[ethernet::HEADER_LEN..HEADERS]);
    }
}

#[cfg(test)]
mod tests {
    use super::{Gso, HEADERS};

    #[test]
    fn gso_counts_segments_and_the_bytes_the_wire_carries() {
        let g = Gso {
            size: 1000,
            header_len: 32,
        };
        assert_eq!(g.segments(32 + 2500), 3);
        assert_eq!(g.segments(32), 1, "a bare header is one segment");
        let not_cut = Gso { size: 0, ..g };
        assert_eq!(not_cut.segments(32 + 2500), 1);
        // The second and third segments repeat Ethernet, IPv4 and TCP headers.
        let frame_len = HEADERS + 32 + 2500;
        assert_eq!(
            g.wire_bytes(frame_len, 3, HEADERS),
            frame_len + 2 * (HEADERS + 32)
        );
        assert_eq!(not_cut.wire_bytes(frame_len, 1, HEADERS), frame_len);
    }
}
