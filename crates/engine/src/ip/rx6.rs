//! The IPv6 receive path (issue 25): Ethernet → IPv6 (RFC 8200) → the
//! extension header chain (`wire::ipv6_ext::walk_chain`) → reassembly
//! (`frag6`) → ICMPv6 (`icmpv6`, Neighbor Discovery in `nd`), TCP
//! (`handle_tcp6`, then the family-generic `tcp::demux`) and UDP (`udp`).
//! Every packet either reaches a handler or is counted under the reason it
//! was dropped. What TCP sends back over IPv6 goes out through `egress6`
//! like IPv4's through `egress` (`tcp::tx`, generic over
//! `family::TcpEgress`).
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `ip6`, `frag6`.

use crate::Protocols;
use nic::TxQueue;
use wire::ethernet::EthernetRepr;
use wire::ipv6::{Ipv6Packet, NEXT_ICMPV6, NEXT_NO_NEXT_HEADER, NEXT_TCP, NEXT_UDP};
use wire::ipv6_ext::{walk_after_fragment, walk_chain, Ipv6ChainEnd, Ipv6ChainError};
use wire::MacAddr;

/// What the receive path knows of one IPv6 packet beyond its bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rx6<'a> {
    /// The whole Ethernet frame (for copies of ND messages to other
    /// engines); empty for a reassembled datagram.
    pub frame: &'a [u8],
    /// The frame's source MAC.
    pub eth_src: MacAddr,
    /// The frame went to a link-layer multicast or broadcast address
    /// (RFC 4443 §2.4 (e.3)).
    pub eth_multicast: bool,
    /// Handed over by the engine that received it.
    pub handed: bool,
    /// The packet had a Fragment header (reassembled, or atomic).
    pub fragmented: bool,
}

impl Protocols {
    /// Handles one IPv6 packet `packet` of Ethernet frame `frame`
    /// (`handed` over by another engine, or received here).
    pub(crate) fn handle_ipv6<T: TxQueue>(
        &mut self,
        eth: &EthernetRepr,
        frame: &[u8],
        packet: &[u8],
        handed: bool,
        tx: &mut T,
    ) {
        let Some(e6) = self.ip6.as_ref() else {
            self.stats.drop_eth_unsupported += 1;
            return;
        };
        let Ok(ip) = Ipv6Packet::new_checked(packet) else {
            self.stats.drop_ipv6_malformed += 1;
            return;
        };
        self.stats.ipv6_rx += 1;
        if ip.src().is_multicast() {
            self.stats.drop_ipv6_bad_src += 1;
            return;
        }
        let dst = ip.dst();
        if !(e6.is_ours(dst) || (dst.is_multicast() && e6.in_group(dst))) {
            self.stats.drop_ipv6_other_dst += 1;
            return;
        }
        if !handed {
            if let Some(owner) = self.foreign_owner_v6(&ip) {
                self.hand_off(owner, crate::steer::Kind::Frame, &[frame]);
                return;
            }
        }
        let rx = Rx6 {
            frame,
            eth_src: eth.src,
            eth_multicast: eth.dst.is_multicast(),
            handed,
            fragmented: false,
        };
        self.process_ipv6(&rx, &ip, tx);
    }

    /// Walks the extension header chain of `ip` (for us) and hands it on:
    /// to its upper layer, to reassembly, or to a counted drop with a
    /// Parameter Problem where RFC 8200 §4 asks for one.
    pub(crate) fn process_ipv6<T: TxQueue>(
        &mut self,
        rx: &Rx6<'_>,
        ip: &Ipv6Packet<'_>,
        tx: &mut T,
    ) {
        let end = match walk_chain(ip.next_header(), ip.payload()) {
            Ok(Ipv6ChainEnd::Fragment { offset, fragment }) if fragment.is_atomic() => {
                // RFC 6946 §4: processed as a whole packet, never mixed
                // with fragments in reassembly.
                if !rx.fragmented {
                    self.stats.ipv6_frag_atomic += 1;
                }
                let rx = Rx6 {
                    fragmented: true,
                    ..*rx
                };
                match walk_after_fragment(ip.payload(), offset) {
                    Ok(Ipv6ChainEnd::UpperLayer {
                        next_header,
                        offset,
                        pointer,
                    }) => return self.deliver_ipv6(&rx, ip, next_header, offset, pointer, tx),
                    // A second Fragment header.
                    Ok(Ipv6ChainEnd::Fragment { .. }) => {
                        self.stats.drop_ipv6_ext_malformed += 1;
                        return;
                    }
                    Err(e) => return self.chain_error(&rx, ip, e, tx),
                }
            }
            Ok(Ipv6ChainEnd::Fragment { offset, fragment }) => {
                self.reassemble6(rx, ip, offset, &fragment, tx);
                return;
            }
            Ok(end) => end,
            Err(e) => return self.chain_error(rx, ip, e, tx),
        };
        if let Ipv6ChainEnd::UpperLayer {
            next_header,
            offset,
            pointer,
        } = end
        {
            self.deliver_ipv6(rx, ip, next_header, offset, pointer, tx);
        }
    }

    /// One fragment to the reassembler; a completed datagram is processed
    /// like a whole packet (its Fragment header made atomic).
    fn reassemble6<T: TxQueue>(
        &mut self,
        rx: &Rx6<'_>,
        ip: &Ipv6Packet<'_>,
        offset: usize,
        fragment: &wire::ipv6_ext::Ipv6FragmentRepr,
        tx: &mut T,
    ) {
        // Taken out while the datagram (borrowed from it) is handled; an
        // empty reassembler allocates nothing.
        let mut frag = core::mem::take(&mut self.frag6);
        match frag.push(self.now, ip, offset, fragment, &mut self.stats) {
            crate::ip::frag6::Frag6::Whole(bytes) => {
                // Reassembled where the fragments landed; handled by the
                // owner of the whole datagram.
                let owner = match Ipv6Packet::new_checked(bytes) {
                    Ok(whole) if !rx.handed => self.foreign_owner_v6(&whole),
                    _ => None,
                };
                if let (Some(owner), Some(eth)) = (owner, rx.frame.get(..14)) {
                    self.hand_off(owner, crate::steer::Kind::Datagram, &[eth, bytes]);
                } else if let Ok(whole) = Ipv6Packet::new_checked(bytes) {
                    let rx = Rx6 {
                        frame: &[],
                        fragmented: true,
                        ..*rx
                    };
                    self.process_ipv6(&rx, &whole, tx);
                }
            }
            crate::ip::frag6::Frag6::ParamProblem { code, pointer } => {
                self.send_icmpv6_error(rx, ip, Icmpv6Error::ParamProblem { code, pointer }, tx);
            }
            crate::ip::frag6::Frag6::Pending | crate::ip::frag6::Frag6::Dropped => {}
        }
        self.frag6 = frag;
    }

    /// A reassembled IPv6 datagram another engine handed over (Ethernet
    /// header, then the packet): ours to handle.
    pub(crate) fn take_datagram6<T: TxQueue>(&mut self, record: &[u8], tx: &mut T) {
        let Ok((eth, packet)) = EthernetRepr::parse(record) else {
            return;
        };
        let Ok(ip) = Ipv6Packet::new_checked(packet) else {
            return;
        };
        let rx = Rx6 {
            frame: &[],
            eth_src: eth.src,
            eth_multicast: eth.dst.is_multicast(),
            handed: true,
            fragmented: true,
        };
        self.process_ipv6(&rx, &ip, tx);
    }

    /// A chain `walk_chain` rejected: counted by reason, with the
    /// Parameter Problem RFC 8200 §4 asks for (RFC 4443 §2.4 (e.3, e.4):
    /// to a multicast destination only for an option whose type says so).
    fn chain_error<T: TxQueue>(
        &mut self,
        rx: &Rx6<'_>,
        ip: &Ipv6Packet<'_>,
        e: Ipv6ChainError,
        tx: &mut T,
    ) {
        let s = &mut self.stats;
        match e {
            Ipv6ChainError::UnrecognizedOption { .. } => s.drop_ipv6_ext_option += 1,
            Ipv6ChainError::UnrecognizedRouting { .. } if e.is_type0_routing() => {
                // RFC 5095 §3: handled as an unrecognized Routing Type.
                s.drop_ipv6_rh0 += 1
            }
            Ipv6ChainError::UnrecognizedRouting { .. } => s.drop_ipv6_routing += 1,
            _ => s.drop_ipv6_ext_malformed += 1,
        }
        let multicast = ip.dst().is_multicast() || rx.eth_multicast;
        if let Some((code, pointer)) = e.param_problem(multicast) {
            let err = Icmpv6Error::ParamProblem { code, pointer };
            // Multicast already vetted by `param_problem` (RFC 8200 §4.2).
            self.send_icmpv6_error_checked(rx, ip, err, true, tx);
        }
    }

    /// A whole packet for us whose upper-layer header `next_header` is at
    /// `offset` of the payload, named by the field at packet offset
    /// `pointer`.
    fn deliver_ipv6<T: TxQueue>(
        &mut self,
        rx: &Rx6<'_>,
        ip: &Ipv6Packet<'_>,
        next_header: u8,
        offset: usize,
        pointer: usize,
        tx: &mut T,
    ) {
        match next_header {
            NEXT_ICMPV6 => self.handle_icmpv6(rx, ip, &ip.payload()[offset..], tx),
            NEXT_TCP => self.handle_tcp6(ip, &ip.payload()[offset..], tx),
            NEXT_UDP => self.handle_udp6(rx, ip, &ip.payload()[offset..], tx),
            NEXT_NO_NEXT_HEADER => self.stats.ipv6_no_next_header += 1,
            _ => {
                // RFC 8200 §4: an unrecognized Next Header, Parameter
                // Problem code 1 pointing at it.
                self.stats.drop_ipv6_unknown_next_header += 1;
                let pointer = u32::try_from(pointer).unwrap_or(u32::MAX);
                let err = Icmpv6Error::ParamProblem {
                    code: wire::icmpv6::PARAM_PROBLEM_NEXT_HEADER,
                    pointer,
                };
                self.send_icmpv6_error(rx, ip, err, tx);
            }
        }
    }

    /// A TCP segment `segment` (the upper-layer bytes) of the IPv6 packet
    /// `ip`: to its connection, a listener, or answered with RST.
    fn handle_tcp6<T: TxQueue>(&mut self, ip: &Ipv6Packet<'_>, segment: &[u8], tx: &mut T) {
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

/// An ICMPv6 error message to send about a packet we received (RFC 4443 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Icmpv6Error {
    /// Destination Unreachable (§3.1) with this code, e.g.
    /// `wire::icmpv6::DST_UNREACH_PORT`.
    DstUnreachable(u8),
    /// Parameter Problem (§3.4).
    ParamProblem {
        /// The code.
        code: u8,
        /// Offset in the invoking packet of the field in error.
        pointer: u32,
    },
}
