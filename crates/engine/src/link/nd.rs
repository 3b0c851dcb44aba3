//! Neighbor Discovery on receive (RFC 4861 §7): Neighbor Solicitations
//! for our addresses are answered with Neighbor Advertisements, both
//! teach the neighbor cache (`neighbor`), and Duplicate Address Detection
//! (RFC 4862 §5.4.3-5.4.5) watches for our tentative addresses. Every ND
//! message must arrive with Hop Limit 255 (RFC 4861 §7.1) and unfragmented
//! (RFC 6980 §5). Router Solicitations, Router Advertisements and
//! Redirects are counted and ignored: default routers and prefixes come
//! from the configuration.
//!
//! Several engines: a Neighbor Solicitation or Advertisement is handled
//! (answered) where it lands, and a copy goes to every other engine to
//! learn from (`steer::Kind::NdCopy`), as ARP does.
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `ip6`.

use crate::ip::egress6::AddrState;
use crate::ip::rx6::Rx6;
use crate::Protocols;
use core::net::Ipv6Addr;
use nic::TxQueue;
use wire::ethernet::{EthernetRepr, ETHERTYPE_IPV6};
use wire::ipv6::{Ipv6Packet, NEXT_ICMPV6};
use wire::ipv6_ext::{walk_chain, Ipv6ChainEnd};
use wire::ndisc::{self, NdiscRepr};
use wire::MacAddr;

impl Protocols {
    /// Handles the ND message `msg` (checksum verified) carried by `ip`.
    pub(crate) fn handle_nd<T: TxQueue>(
        &mut self,
        rx: &Rx6<'_>,
        ip: &Ipv6Packet<'_>,
        msg: &[u8],
        tx: &mut T,
    ) {
        if rx.fragmented {
            self.stats.drop_nd_fragmented += 1;
            return;
        }
        if ip.hop_limit() != ndisc::HOP_LIMIT {
            self.stats.drop_nd_hop_limit += 1;
            return;
        }
        let (src, dst) = (ip.src(), ip.dst());
        let Ok(nd) = NdiscRepr::parse(msg, src, dst, false) else {
            self.stats.drop_nd_malformed += 1;
            return;
        };
        match nd {
            NdiscRepr::NeighborSolicit { .. } => self.stats.nd_ns_rx += 1,
            NdiscRepr::NeighborAdvert { .. } => self.stats.nd_na_rx += 1,
            _ => {
                self.stats.nd_other_rx += 1;
                return;
            }
        }
        if !rx.handed && !rx.frame.is_empty() {
            self.share_copy(crate::steer::Kind::NdCopy, rx.frame);
        }
        self.neighbor_message(&nd, src, rx.eth_src, true, tx);
    }

    /// What a Neighbor Solicitation or Advertisement `nd` from `src` (in a
    /// frame from `eth_src`) does: the cache learns, DAD looks, and with
    /// `answer` a solicitation for our address is answered.
    fn neighbor_message<T: TxQueue>(
        &mut self,
        nd: &NdiscRepr<'_>,
        src: Ipv6Addr,
        eth_src: MacAddr,
        answer: bool,
        tx: &mut T,
    ) {
        let now = self.now;
        let Some(e6) = self.ip6.as_mut() else { return };
        match *nd {
            NdiscRepr::NeighborSolicit { target, .. } => {
                // RFC 4861 §7.2.3: the source's link-layer address, STALE.
                let sll = nd.source_lladdr().filter(|m| m.is_unicast());
                if let (false, Some(mac)) = (src.is_unspecified(), sll) {
                    if e6.neighbors.learn_solicit(src, mac, now) {
                        e6.flush_waiting(tx, &mut self.stats, src, mac);
                    }
                }
                match e6.state_of(target) {
                    // RFC 4862 §5.4.3: another node's DAD for our
                    // tentative address; a unicast source is resolving
                    // it, which is ignored.
                    Some(AddrState::Tentative { .. }) => {
                        if src.is_unspecified() {
                            self.dad_conflict(target);
                        }
                    }
                    Some(AddrState::Preferred) if answer => {
                        if src.is_unspecified() {
                            // RFC 4861 §7.2.4: to all-nodes, S clear.
                            let all = ndisc::ALL_NODES;
                            let mac = ndisc::multicast_mac(all);
                            e6.send_na(tx, &mut self.stats, mac, all, target, false);
                        } else {
                            // To the source, at its link-layer address
                            // (the option, else the frame's source).
                            let mac = sll.unwrap_or(eth_src);
                            e6.send_na(tx, &mut self.stats, mac, src, target, true);
                        }
                    }
                    Some(AddrState::Preferred) => {}
                    Some(AddrState::Duplicate) | None => {
                        if answer {
                            self.stats.drop_nd_other_target += 1;
                        }
                    }
                }
            }
            NdiscRepr::NeighborAdvert {
                target,
                solicited_flag,
                override_flag,
                ..
            } => match e6.state_of(target) {
                // RFC 4862 §5.4.4: our tentative address is in use.
                Some(AddrState::Tentative { .. }) => self.dad_conflict(target),
                // An advertisement of an address of ours by another node
                // after DAD: nothing to learn (RFC 4862 §5.4.4 leaves it).
                Some(_) => {}
                None => {
                    let tll = nd.target_lladdr().filter(|m| m.is_unicast());
                    // RFC 4861 §7.2.5.
                    if e6
                        .neighbors
                        .learn_advert(target, tll, solicited_flag, override_flag, now)
                    {
                        if let Some((_, mac)) = e6.neighbors.peek(target, now) {
                            e6.flush_waiting(tx, &mut self.stats, target, mac);
                        }
                    }
                }
            },
            _ => {}
        }
    }

    /// RFC 4862 §5.4.5: `addr` is used by another node; it is never ours.
    fn dad_conflict(&mut self, addr: Ipv6Addr) {
        if let Some(e6) = self.ip6.as_mut() {
            e6.set_state(addr, AddrState::Duplicate);
            self.stats.nd_dad_duplicates += 1;
        }
    }

    /// A copy of an ND frame another engine received: the cache learns,
    /// DAD looks, nothing is answered (the receiving engine did) and
    /// nothing is counted twice.
    pub(crate) fn learn_nd<T: TxQueue>(&mut self, frame: &[u8], tx: &mut T) {
        let Ok((eth, payload)) = EthernetRepr::parse(frame) else {
            return;
        };
        if eth.ethertype != ETHERTYPE_IPV6 {
            return;
        }
        let Ok(ip) = Ipv6Packet::new_checked(payload) else {
            return;
        };
        if ip.hop_limit() != ndisc::HOP_LIMIT {
            return;
        }
        let Ok(Ipv6ChainEnd::UpperLayer {
            next_header: NEXT_ICMPV6,
            offset,
            ..
        }) = walk_chain(ip.next_header(), ip.payload())
        else {
            return;
        };
        let (src, dst) = (ip.src(), ip.dst());
        if let Ok(nd) = NdiscRepr::parse(&ip.payload()[offset..], src, dst, false) {
            self.neighbor_message(&nd, src, eth.src, false, tx);
        }
    }
}
