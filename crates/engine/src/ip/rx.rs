//! The receive path: Ethernet → ARP | IPv4 (→ reassembly in `frag`) →
//! ICMP (`icmp`) | UDP (`udp`) | TCP (`tcp::demux`); IPv6 goes on to
//! `rx6`. Every frame either reaches a socket or is counted under the
//! reason it was dropped.
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `egress`, `frag`, `ip6`, `trace`, `rx_link_src`.

use crate::steer;
use crate::Protocols;
use nic::TxQueue;
use wire::arp::{ArpOp, ArpRepr};
use wire::ethernet::{EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use wire::ipv4::{Ipv4Packet, PROTO_ICMP, PROTO_TCP, PROTO_UDP};
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
