//! An engine's side of the handoff mesh (`mesh`): whether a received
//! packet is another engine's, handing it over (counted: `rx_foreign`,
//! `handoff_tx`, `handoff_dropped`), copies of ARP and Neighbor Discovery
//! frames to every other engine, and taking what the others handed over
//! (`handoff_rx`), at most [`HANDOFF_BURST`] records from each a call.
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `handoff`, `handoff_scratch`.

use crate::steer::{Kind, HANDOFF_BURST};
use crate::Protocols;
use core::net::Ipv4Addr;

impl Protocols {
    /// The engine owning IPv4 `packet` (header and payload) when it is not
    /// this one; None when this engine handles it (it owns it, any engine
    /// may, or this is the only engine). Fragments are None: they are
    /// reassembled where they land.
    pub(crate) fn foreign_owner(&self, packet: &[u8]) -> Option<usize> {
        let h = self.handoff.as_ref()?;
        if packet.len() < 20 || packet[0] >> 4 != 4 {
            return None;
        }
        let ihl = usize::from(packet[0] & 0x0f) * 4;
        let fragment = u16::from_be_bytes([packet[6], packet[7]]) & 0x3fff != 0;
        if fragment || packet.len() < ihl {
            return None;
        }
        let at = |i: usize| Ipv4Addr::new(packet[i], packet[i + 1], packet[i + 2], packet[i + 3]);
        let owner = h.owner(at(12), at(16), packet[9], &packet[ihl..])?;
        (owner != h.me()).then_some(owner)
    }

    /// Hands a record to engine `owner`, counted (a full ring loses it).
    pub(crate) fn hand_off(&mut self, owner: usize, kind: Kind, parts: &[&[u8]]) {
        let Some(h) = self.handoff.as_mut() else {
            return;
        };
        if kind == Kind::Frame {
            self.stats.rx_foreign += 1;
        }
        if h.send(owner, kind, parts) {
            self.stats.handoff_tx += 1;
        } else {
            self.stats.handoff_dropped += 1;
        }
    }

    /// The engine owning IPv6 packet `ip` (for us) when it is not this
    /// one; None when this engine handles it. Fragments are None: they
    /// are reassembled where they land.
    pub(crate) fn foreign_owner_v6(&self, ip: &wire::ipv6::Ipv6Packet<'_>) -> Option<usize> {
        let h = self.handoff.as_ref()?;
        let Ok(wire::ipv6_ext::Ipv6ChainEnd::UpperLayer {
            next_header,
            offset,
            ..
        }) = wire::ipv6_ext::walk_chain(ip.next_header(), ip.payload())
        else {
            return None;
        };
        let l4 = ip.payload().get(offset..)?;
        let owner = h.owner_v6(ip.src(), ip.dst(), next_header, l4)?;
        (owner != h.me()).then_some(owner)
    }

    /// A copy of a received ARP frame to every other engine, so that what
    /// one learns all know.
    pub(crate) fn share_arp(&mut self, frame: &[u8]) {
        self.share_copy(Kind::ArpCopy, frame);
    }

    /// A copy of `frame` as a record of `kind` ([`Kind::ArpCopy`],
    /// [`Kind::NdCopy`]) to every other engine to learn from.
    pub(crate) fn share_copy(&mut self, kind: Kind, frame: &[u8]) {
        let Some(h) = self.handoff.as_mut() else {
            return;
        };
        for to in 0..h.engines() {
            if to == h.me() {
                continue;
            }
            if h.send(to, kind, &[frame]) {
                self.stats.handoff_tx += 1;
            } else {
                self.stats.handoff_dropped += 1;
            }
        }
    }

    /// Handles the records other engines handed over since the last call,
    /// at most [`HANDOFF_BURST`] from each. Returns how many.
    pub(crate) fn take_handoff<T: nic::TxQueue>(&mut self, tx: &mut T) -> usize {
        let Some(engines) = self.handoff.as_ref().map(|h| h.engines()) else {
            return 0;
        };
        let mut scratch = core::mem::take(&mut self.handoff_scratch);
        let mut n = 0;
        for from in 0..engines {
            for _ in 0..HANDOFF_BURST {
                let Some(h) = self.handoff.as_mut() else {
                    break;
                };
                let Some((kind, len)) = h.take(from, &mut scratch) else {
                    break;
                };
                n += 1;
                self.stats.handoff_rx += 1;
                let record = &scratch[..len];
                match kind {
                    Kind::Frame => self.dispatch_frame(record, true, tx),
                    Kind::ArpCopy => {
                        let arp = record
                            .get(14..)
                            .and_then(|p| wire::arp::ArpRepr::parse(p).ok());
                        if let Some(arp) = arp {
                            self.learn_arp(&arp, tx);
                        }
                    }
                    Kind::NdCopy => self.learn_nd(record, tx),
                    Kind::Datagram if record.get(14).is_some_and(|v| v >> 4 == 6) => {
                        self.take_datagram6(record, tx)
                    }
                    Kind::Datagram => {
                        let parsed = wire::ethernet::EthernetRepr::parse(record).ok().and_then(
                            |(eth, p)| Some((eth, wire::ipv4::Ipv4Packet::new_checked(p).ok()?)),
                        );
                        if let Some((eth, ip)) = parsed {
                            self.deliver_ipv4(&eth, &ip, tx);
                        }
                    }
                }
            }
        }
        self.handoff_scratch = scratch;
        n
    }
}
