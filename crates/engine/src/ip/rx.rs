//! The receive path: Ethernet → ARP | IPv4 (→ reassembly) → ICMP (`icmp`)
//! | UDP (`udp`) | TCP: a segment for a connection goes to its Tcb
//! (`tcp::Tcb::input`, whose in-order bytes land in the application's RX
//! ring through [`RecvBuffer`](crate::tcp::RecvBuffer), see `rings`) and what TCP reports goes on to `events`;
//! a SYN for a listener goes to `listen`; anything else is answered with a
//! RST. Every frame either reaches a socket or is counted under the reason
//! it was dropped.

use crate::ip::egress::Egress;
use crate::sockets::{Conn, FamilyTables};
use crate::steer;
use crate::tcp;
use crate::obs::trace::{RingStamps, StampedRing};
use crate::Protocols;
use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use nic::TxQueue;
use wire::arp::{ArpOp, ArpRepr};
use wire::ethernet::{EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use wire::ipv4::{Ipv4Packet, PROTO_ICMP, PROTO_TCP, PROTO_UDP};
use wire::tcp::TcpRepr;
use wire::{Error, MacAddr};

impl Protocols {
    /// Handles one Ethernet frame received from the port.
    pub(crate) fn handle_frame<T: TxQueue>(&mut self, frame: &[u8], tx: &mut T) {
        self.trace.frame_start();
        self.stats.rx_frames += 1;
        self.stats.rx_bytes += frame.len() as u64;
        self.dispatch_frame(frame, false, tx);
    }

    /// Handles one Ethernet frame: from the port, or `handed` over by the
    /// engine that received it (then ours to handle whoever else owns it).
    pub(crate) fn dispatch_frame<T: TxQueue>(&mut self, frame: &[u8], handed: bool, tx: &mut T) {
        let Ok((eth, payload)) = EthernetRepr::parse(frame) else {
            self.stats.drop_eth_truncated += 1;
            return;
        };
        // IPv6 multicast (33:33:..., RFC 2464 §7) while IPv6 is on; the
        // IPv6 destination is checked next.
        let v6_multicast =
            self.ip6.is_some() && eth.ethertype == ETHERTYPE_IPV6 && eth.dst.0[..2] == [0x33, 0x33];
        if eth.dst != self.egress.mac && !eth.dst.is_broadcast() && !v6_multicast {
            self.stats.drop_eth_other_mac += 1;
            return;
        }
        match eth.ethertype {
            ETHERTYPE_ARP => {
                if !handed {
                    self.share_arp(frame);
                }
                self.handle_arp(payload, tx);
            }
            ETHERTYPE_IPV4 => {
                if !handed {
                    if let Some(owner) = self.foreign_owner(payload) {
                        self.hand_off(owner, steer::Kind::Frame, &[frame]);
                        return;
                    }
                }
                self.handle_ipv4(&eth, &frame[..14], payload, tx);
            }
            ETHERTYPE_IPV6 => self.handle_ipv6(&eth, frame, payload, handed, tx),
            _ => self.stats.drop_eth_unsupported += 1,
        }
    }

    /// What an ARP packet teaches: its sender's address merged into the
    /// cache (added when it is for us, RFC 826), frames waiting for it
    /// sent. Returns whether the packet is for us.
    pub(crate) fn learn_arp<T: TxQueue>(&mut self, arp: &ArpRepr, tx: &mut T) -> bool {
        let for_us = arp.target_ip == self.egress.ip;
        if !arp.sender_ip.is_unspecified() && arp.sender_mac.is_unicast() {
            let waiting = self
                .egress
                .arp
                .learn(arp.sender_ip, arp.sender_mac, for_us, self.now);
            if waiting {
                self.egress
                    .flush_waiting(tx, &mut self.stats, arp.sender_ip, arp.sender_mac);
            }
        }
        for_us
    }

    fn handle_arp<T: TxQueue>(&mut self, packet: &[u8], tx: &mut T) {
        let Ok(arp) = ArpRepr::parse(packet) else {
            self.stats.drop_arp_malformed += 1;
            return;
        };
        let for_us = self.learn_arp(&arp, tx);
        match arp.op {
            ArpOp::Request if for_us => {
                self.stats.arp_requests_rx += 1;
                self.egress.send_arp(
                    tx,
                    &mut self.stats,
                    ArpOp::Reply,
                    arp.sender_mac,
                    arp.sender_mac,
                    arp.sender_ip,
                );
            }
            ArpOp::Request => self.stats.drop_arp_other_target += 1,
            ArpOp::Reply => self.stats.arp_replies_rx += 1,
        }
    }

    /// `eth_header`: the frame's 14 bytes of Ethernet header, for a
    /// reassembled datagram handed to its owner.
    fn handle_ipv4<T: TxQueue>(
        &mut self,
        eth: &EthernetRepr,
        eth_header: &[u8],
        packet: &[u8],
        tx: &mut T,
    ) {
        let ip = match Ipv4Packet::new_checked(packet) {
            Ok(ip) => ip,
            Err(_) => {
                self.stats.drop_ipv4_malformed += 1;
                return;
            }
        };
        if self.cfg.verify_checksums && !ip.checksum_valid() {
            self.stats.drop_ipv4_checksum += 1;
            return;
        }
        let dst = ip.dst();
        if dst != self.egress.ip {
            self.stats.drop_ipv4_other_dst += 1;
            return;
        }
        if ip.is_fragment() {
            // RFC 791 §3.2: reassemble, then handle the whole datagram. The
            // table is taken out while the datagram (borrowed from it) is
            // handled; an empty `Reassembler` allocates nothing.
            let mut frag = core::mem::take(&mut self.frag);
            if let Some(whole) = frag.push(self.now, &ip, &mut self.stats) {
                // Reassembled where the fragments landed; handled by the
                // owner of the whole datagram.
                match self.foreign_owner(whole.bytes()) {
                    Some(owner) => {
                        let parts = [eth_header, whole.bytes()];
                        self.hand_off(owner, steer::Kind::Datagram, &parts);
                    }
                    None => self.deliver_ipv4(eth, &whole, tx),
                }
            }
            self.frag = frag;
            return;
        }
        self.deliver_ipv4(eth, &ip, tx);
    }

    /// Hands a whole datagram for us (unfragmented or reassembled) to its
    /// protocol.
    pub(crate) fn deliver_ipv4<T: TxQueue>(
        &mut self,
        eth: &EthernetRepr,
        ip: &Ipv4Packet<'_>,
        tx: &mut T,
    ) {
        let src = ip.src();
        // Learn the peer's MAC from its traffic when it is on-link and the
        // cache already knows it (refresh only; RFC 1122 §2.3.2.1 allows it).
        let on_link = self.egress.on_link(src) && eth.src.is_unicast();
        if on_link {
            self.egress.arp.refresh(src, eth.src, self.now);
        }
        match ip.protocol() {
            PROTO_ICMP => self.handle_icmp(src, ip.payload(), tx),
            PROTO_UDP => self.handle_udp(ip, tx),
            PROTO_TCP => {
                let ce = ip.tos() & 0b11 == 0b11;
                // A SYN from on-link may glean the sender's MAC (`glean_syn`).
                self.rx_link_src = if on_link { eth.src } else { MacAddr::ZERO };
                self.handle_tcp(src, self.egress.ip, ip.payload(), ce, tx);
                self.rx_link_src = MacAddr::ZERO;
            }
            _ => self.stats.drop_ipv4_unsupported_proto += 1,
        }
    }

    /// A TCP segment `segment` (the upper-layer bytes) from `src` to our
    /// address `dst`, either family: checked with the family's
    /// pseudo-header, then to its connection, a listener, or answered with
    /// RST. `ce`: the IP ECN field carried Congestion Experienced (RFC
    /// 3168 §5). Returns what TCP reported for a connection it found.
    #[inline]
    pub(crate) fn handle_tcp<F: FamilyTables, T: TxQueue>(
        &mut self,
        src: F,
        dst: F,
        segment: &[u8],
        ce: bool,
        tx: &mut T,
    ) -> Option<tcp::Events> {
        let parsed = TcpRepr::parse(segment, src, dst, self.cfg.verify_checksums);
        let s = &mut self.stats;
        let (seg, payload) =
            parsed_or_counted(parsed, &mut s.drop_tcp_checksum, &mut s.drop_tcp_malformed)?;
        self.stats.tcp_rx_segments += 1;
        if let Some(h) = &self.handoff {
            if F::owner(h.steering(), src, dst, seg.src_port, seg.dst_port) != h.me() {
                self.stats.owner_violations += 1;
            }
        }
        let slot = F::flows(&self.sockets).get(src, seg.src_port, seg.dst_port);
        let remote = src.socket(seg.src_port);
        self.tcp_segment(slot, remote, dst.into(), &seg, payload, ce, tx)
    }

    /// A parsed segment from `remote` to our address `local`, of the
    /// connection in `slot` if its flow was found (either family).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn tcp_segment<T: TxQueue>(
        &mut self,
        slot: Option<u32>,
        remote: SocketAddr,
        local: IpAddr,
        seg: &TcpRepr,
        payload: &[u8],
        ce: bool,
        tx: &mut T,
    ) -> Option<tcp::Events> {
        let flags = seg.flags;
        if let Some(slot) = slot {
            let now = self.now;
            let listeners = if remote.is_ipv4() {
                &self.sockets.listeners
            } else {
                &self.sockets.listeners6
            };
            if flags.syn()
                && !flags.ack()
                && !flags.rst()
                && listeners.contains_key(&seg.dst_port)
                && self
                    .sockets
                    .conn(slot)
                    .is_some_and(|c| c.tcb.time_wait_accepts_syn(seg))
            {
                // RFC 6191: a new incarnation of a connection in TIME-WAIT.
                self.stats.tcp_time_wait_recycled += 1;
                self.drop_conn(slot);
                self.handle_unmatched_tcp(remote, local, seg, payload, tx);
                return None;
            }
            let c = self.sockets.conn(slot)?;
            let Conn {
                tcb, tx: txr, rx, ..
            } = c;
            tcb.input_ecn(ce);
            self.trace
                .rx_parsed(seg.dst_port, seg.src_port, payload.len());
            let ev = if self.trace.rx_sampled() {
                // Traced: the RX ring stamps when the bytes go in.
                let mut stamps = RingStamps::default();
                let mut ring = StampedRing {
                    ring: rx,
                    stamps: &mut stamps,
                };
                let ev = tcb.input(seg, payload, now, txr, &mut ring);
                let pos = rx.position();
                self.trace.rx_done(pos, &stamps);
                ev
            } else {
                tcb.input(seg, payload, now, txr, rx)
            };
            self.after_tcp(slot, ev);
            return Some(ev);
        }
        if self.time_wait_segment(remote, local, seg, payload.len(), tx) {
            return None;
        }
        self.handle_unmatched_tcp(remote, local, seg, payload, tx);
        None
    }

    /// A segment of no connection: a SYN (or a SYN cookie's ACK) for a
    /// listener, else answered with RST.
    /// `local`: our address the segment came to.
    fn handle_unmatched_tcp<T: TxQueue>(
        &mut self,
        remote: SocketAddr,
        local: IpAddr,
        seg: &TcpRepr,
        payload: &[u8],
        tx: &mut T,
    ) {
        let flags = seg.flags;
        let listeners = if remote.is_ipv4() {
            &self.sockets.listeners
        } else {
            &self.sockets.listeners6
        };
        let lslot = listeners
            .get(&seg.dst_port)
            .copied()
            .filter(|&l| self.sockets.listener_takes(l, local));
        let local = SocketAddr::new(local, seg.dst_port);
        if let Some(lslot) = lslot {
            if flags.syn() && !flags.ack() && !flags.rst() {
                self.glean_syn(remote.ip());
                self.passive_open(lslot, local, remote, seg, tx);
                return;
            }
            // RFC 4987 §3.6: an ACK for no connection may complete a
            // handshake answered with a SYN cookie.
            if flags.ack()
                && !flags.syn()
                && !flags.rst()
                && self.cookie_open(lslot, local, remote, seg, payload)
            {
                return;
            }
        }
        self.stats.tcp_no_socket += 1;
        self.send_rst(local, remote, seg, tx);
    }

    /// A SYN for a listener from `remote`, on-link at `rx_link_src`
    /// (not ZERO: the frame's unicast source, set by `deliver_ipv4`):
    /// its MAC is gleaned ([`crate::link::arp::ArpCache::glean`]) so that the
    /// SYN-ACK need not wait for an ARP round trip; the request that
    /// confirms it follows. IPv6 peers are resolved as before.
    fn glean_syn(&mut self, remote: IpAddr) {
        let (IpAddr::V4(ip), mac) = (remote, self.rx_link_src) else {
            return;
        };
        if mac != MacAddr::ZERO && self.egress.arp.glean(ip, mac, self.now) {
            self.stats.arp_gleaned += 1;
        }
    }

    /// Answers a segment that matched nothing (RFC 9293 §3.10.7.1).
    fn send_rst<T: TxQueue>(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        seg: &TcpRepr,
        tx: &mut T,
    ) {
        let Some(rst) = tcp::reply_rst(seg) else {
            return;
        };
        if self.send_tcp_ctl(local, remote, &rst, 0, tx) {
            self.stats.tcp_rst_tx += 1;
        }
    }

    /// Sends `seg` (headers and options only) from `local` to `remote`,
    /// over IPv4 or IPv6 as their family says; over IPv6 with Traffic
    /// Class `tclass`.
    pub(crate) fn send_tcp_ctl<T: TxQueue>(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        seg: &TcpRepr,
        tclass: u8,
        tx: &mut T,
    ) -> bool {
        match (local.ip(), remote.ip()) {
            (IpAddr::V6(l), IpAddr::V6(r)) => {
                let label = self.isn.flow_label(local, remote);
                self.send_tcp_headers6(l, r, label, tclass, seg, tx)
            }
            (_, IpAddr::V4(r)) => self.send_tcp_headers(r, seg, tx),
            _ => false,
        }
    }

    /// Sends `seg` as a segment without payload (headers and options only)
    /// from our address to `to`, its checksum filled as
    /// [`Egress::tcp_checksum`] does. Returns false when the link dropped it
    /// (counted there).
    pub(crate) fn send_tcp_headers<T: TxQueue>(
        &mut self,
        to: Ipv4Addr,
        seg: &TcpRepr,
        tx: &mut T,
    ) -> bool {
        let (local, now) = (self.egress.ip, self.now);
        let offload = self.egress.tcp_checksum_offload;
        let hlen = seg.header_len();
        self.egress
            .send_ipv4(tx, &mut self.stats, now, to, PROTO_TCP, hlen, |buf| {
                seg.emit_header(buf);
                Egress::tcp_checksum(offload, buf, local, to);
            })
    }
}

/// The segment or datagram `parsed`, or None with its failure counted:
/// in `checksum` when its checksum was wrong, else in `malformed`.
#[inline]
pub(crate) fn parsed_or_counted<T>(
    parsed: Result<T, Error>,
    checksum: &mut u64,
    malformed: &mut u64,
) -> Option<T> {
    let counter = match parsed {
        Ok(v) => return Some(v),
        Err(Error::Checksum) => checksum,
        Err(_) => malformed,
    };
    *counter += 1;
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_failures_are_counted_as_checksum_or_malformed() {
        let (mut checksum, mut malformed) = (0u64, 0u64);
        let mut take = |parsed| parsed_or_counted(parsed, &mut checksum, &mut malformed);
        assert_eq!(take(Ok(7)), Some(7));
        assert_eq!(take(Err(Error::Checksum)), None);
        for err in [Error::Truncated, Error::Malformed, Error::Unsupported] {
            assert_eq!(take(Err(err)), None);
        }
        assert_eq!((checksum, malformed), (1, 3));
    }
}
