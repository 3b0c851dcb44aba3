//! Many engines: which engine owns a frame, and the handoff rings that
//! carry it there.
//!
//! Every flow has one owner engine ([`nic::rss::Steering`]: the symmetric
//! Toeplitz hash of its 4-tuple through a 128-bucket table). A NIC that
//! steers with the same key and table puts each frame on its owner's
//! queue; where it cannot (veth, TAP, a NIC without RSS) the engine that
//! receives a frame it does not own hands it to the owner over a
//! single-producer ring per engine pair, always on and counted
//! (`rx_foreign`, `handoff_tx`, `handoff_rx`, `handoff_dropped`).
//!
//! Who owns what:
//! - TCP: the owner of the 4-tuple. So only the owner sends a RST for an
//!   unknown flow, validates a SYN cookie, and keeps TIME-WAIT.
//! - UDP: the owner of the local port alone (a bound socket lives on one
//!   engine, whatever its peers).
//! - ICMP errors: the owner of the flow in the quoted header.
//! - IPv4 fragments: reassembled where they land (a NIC hashes every
//!   fragment of a datagram by its addresses, so they land together),
//!   then the whole datagram goes to its owner.
//! - ARP: processed where it lands, and a copy goes to every other engine
//!   to learn from (each keeps its own cache and sends its own requests).
//! - IPv6: TCP and UDP like IPv4's ([`Steering::owner_v6`]); ICMPv6
//!   errors by the flow in the quoted header; fragments reassembled where
//!   they land. Neighbor Solicitations and Advertisements like ARP: handled
//!   where they land, a copy to every other engine to learn from.
//! - Anything else (ICMP echo, ICMPv6 echo): the engine that received it.
//!
//! A ring record is `[u32 length][u8 kind][3 bytes zero][length bytes]`.

use crate::ip::family::Family;
use appif::bytes;
use appif::doorbell::Doorbell;
use core::net::{Ipv4Addr, Ipv6Addr};
use nic::rss::Steering;
use std::sync::Arc;
use wire::ipv4::{PROTO_ICMP, PROTO_TCP, PROTO_UDP};

// IPv6's upper-layer Next Header values are IPv4's Protocol numbers.
const _: () = assert!(wire::ipv6::NEXT_TCP == PROTO_TCP && wire::ipv6::NEXT_UDP == PROTO_UDP);

/// Bytes of each handoff ring (per ordered engine pair) by default: 2 730
/// full-size frames, more than one iteration's receive bursts
/// ([`crate::RX_BURSTS`] × 64); reserved at start, touched as used.
pub const HANDOFF_RING_BYTES: usize = 4 << 20;

/// The largest record: a reassembled datagram (64 KiB) with its Ethernet
/// header.
const MAX_RECORD: usize = 14 + 65_535;
const RECORD_HEADER: usize = 8;

/// What a handoff record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// An Ethernet frame the receiver owns: handle it as if received.
    Frame = 0,
    /// An ARP packet (whole frame) another engine received: learn from it only.
    ArpCopy = 1,
    /// An Ethernet header and a reassembled IPv4 datagram the receiver owns.
    Datagram = 2,
    /// A Neighbor Solicitation or Advertisement (whole frame) another
    /// engine received: learn from it only.
    NdCopy = 3,
}

/// One engine's place among several: its index, the steering table, and
/// its ends of the handoff rings (one to and one from every other engine).
pub struct Handoff {
    me: usize,
    steering: Arc<Steering>,
    to: Vec<Option<bytes::Writer>>,
    from: Vec<Option<bytes::Reader>>,
    /// Each engine's doorbell, where it naps ([`Handoff::set_doorbells`]).
    bells: Vec<Option<Arc<Doorbell>>>,
    /// Engines handed records since the bells were last rung.
    to_ring: Vec<bool>,
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handoff")
            .field("me", &self.me)
            .field("engines", &self.steering.engines())
            .finish()
    }
}

/// The handoff mesh of `steering.engines()` engines: element `i` goes to
/// engine `i` ([`crate::Engine::join`]). Every ordered pair of engines
/// gets a ring of `ring_bytes` bytes (allocated now, touched as used).
pub fn handoff_mesh(steering: Arc<Steering>, ring_bytes: usize) -> Vec<Handoff> {
    let n = steering.engines();
    let mut all: Vec<Handoff> = (0..n)
        .map(|me| Handoff {
            me,
            steering: steering.clone(),
            to: (0..n).map(|_| None).collect(),
            from: (0..n).map(|_| None).collect(),
            bells: (0..n).map(|_| None).collect(),
            to_ring: vec![false; n],
        })
        .collect();
    for i in 0..n {
        for j in 0..n {
            if i != j {
                let (w, r) = bytes::ring(ring_bytes);
                all[i].to[j] = Some(w);
                all[j].from[i] = Some(r);
            }
        }
    }
    all
}

impl Handoff {
    /// This engine's index.
    pub fn me(&self) -> usize {
        self.me
    }

    /// The steering table every engine shares.
    pub fn steering(&self) -> &Arc<Steering> {
        &self.steering
    }

    /// The number of engines.
    pub fn engines(&self) -> usize {
        self.steering.engines()
    }

    /// The doorbells of the engines that nap (by engine index; None: one
    /// that polls without pause): after an iteration that handed records
    /// to a napping engine, it is woken.
    pub fn set_doorbells(&mut self, bells: Vec<Option<Arc<Doorbell>>>) {
        let n = self.engines();
        self.bells = bells;
        self.bells.resize(n, None);
    }

    /// Rings the doorbell of every engine handed records since the last call.
    pub(crate) fn ring(&mut self) {
        for (to, pending) in self.to_ring.iter_mut().enumerate() {
            if core::mem::take(pending) {
                if let Some(Some(b)) = self.bells.get(to) {
                    b.ring();
                }
            }
        }
    }

    /// True when another engine handed this one records not yet taken.
    pub fn has_records(&self) -> bool {
        self.from.iter().flatten().any(|r| !r.is_empty())
    }

    /// Hands `parts` (concatenated) as one record of `kind` to engine `to`.
    /// False when its ring has no room (the caller counts the loss).
    pub(crate) fn send(&mut self, to: usize, kind: Kind, parts: &[&[u8]]) -> bool {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let Some(Some(w)) = self.to.get_mut(to) else {
            return false;
        };
        if len > MAX_RECORD || w.free() < RECORD_HEADER + len {
            return false;
        }
        let mut header = [0u8; RECORD_HEADER];
        header[..4].copy_from_slice(&(len as u32).to_le_bytes());
        header[4] = kind as u8;
        w.write(&header);
        for p in parts {
            w.write(p);
        }
        self.to_ring[to] = true;
        true
    }

    /// Takes the next whole record from engine `from` into `scratch`
    /// (grown once to the largest record): its kind and length. None when
    /// that ring holds no whole record.
    pub(crate) fn take(&mut self, from: usize, scratch: &mut Vec<u8>) -> Option<(Kind, usize)> {
        let r = self.from.get_mut(from)?.as_mut()?;
        if r.len() < RECORD_HEADER {
            return None;
        }
        let mut header = [0u8; RECORD_HEADER];
        r.peek_at(0, &mut header);
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        if r.len() < RECORD_HEADER + len {
            return None;
        }
        r.consume(RECORD_HEADER);
        if scratch.len() < MAX_RECORD {
            scratch.resize(MAX_RECORD, 0);
        }
        let len = len.min(MAX_RECORD);
        r.read(&mut scratch[..len]);
        let kind = match header[4] {
            1 => Kind::ArpCopy,
            2 => Kind::Datagram,
            3 => Kind::NdCopy,
            _ => Kind::Frame,
        };
        Some((kind, len))
    }

    /// The owner of an IPv4 packet from `src` to `dst` (us) carrying
    /// `proto` with transport bytes `l4`; None when any engine may handle
    /// it (ICMP echo, other protocols, a header too short to say).
    pub(crate) fn owner(
        &self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        proto: u8,
        l4: &[u8],
    ) -> Option<usize> {
        match proto {
            // Errors (destination unreachable, source quench, time
            // exceeded, parameter problem) quote our datagram: IPv4 header
            // from us to the peer, then 8 bytes of it (the ports).
            PROTO_ICMP if matches!(l4.first(), Some(3 | 4 | 11 | 12)) => {
                let q = l4.get(8..)?;
                let ihl = usize::from(q.first()? & 0x0f) * 4;
                if q.len() < ihl + 4 || ihl < 20 {
                    return None;
                }
                let at = |i: usize| Ipv4Addr::new(q[i], q[i + 1], q[i + 2], q[i + 3]);
                let (qsrc, qdst) = (at(12), at(16));
                let (qsport, qdport) = ports(&q[ihl..])?;
                self.flow_owner(q[9], qdst, qsrc, (qdport, qsport))
            }
            _ => self.flow_owner(proto, src, dst, ports(l4)?),
        }
    }

    /// The owner of an IPv6 packet from `src` to `dst` (us) whose
    /// upper-layer protocol `proto` has bytes `l4`; None when any engine
    /// may handle it (ICMPv6 echo and Neighbor Discovery, other protocols,
    /// a header too short to say).
    pub(crate) fn owner_v6(
        &self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        proto: u8,
        l4: &[u8],
    ) -> Option<usize> {
        use wire::ipv6::NEXT_ICMPV6;
        match proto {
            // Errors (types below 128) quote our packet: its IPv6 header
            // from us to the peer, its extension headers, then the ports.
            NEXT_ICMPV6 if l4.first().is_some_and(|&t| t < 128) => {
                // A quote cut short of its Payload Length: read what is there.
                let q = l4.get(8..)?;
                if q.len() < 40 {
                    return None;
                }
                let at = |i: usize| -> Ipv6Addr {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(&q[i..i + 16]);
                    Ipv6Addr::from(b)
                };
                let (qsrc, qdst) = (at(8), at(24));
                let (next, off) = match wire::ipv6_ext::walk_chain(q[6], &q[40..]) {
                    Ok(wire::ipv6_ext::Ipv6ChainEnd::UpperLayer {
                        next_header,
                        offset,
                        ..
                    }) => (next_header, offset),
                    _ => return None,
                };
                let (qsport, qdport) = ports(q.get(40 + off..)?)?;
                self.flow_owner(next, qdst, qsrc, (qdport, qsport))
            }
            _ => self.flow_owner(proto, src, dst, ports(l4)?),
        }
    }

    /// The owner of a packet of either family from `src`:`ports.0` to us
    /// at `dst`:`ports.1` whose transport protocol is `proto` (IPv4's
    /// Protocol, IPv6's upper-layer Next Header: the same numbers): the
    /// owner of the 4-tuple for TCP (the same both ways), of our port for
    /// UDP; None for any other protocol. A quoted packet, which we sent,
    /// comes with its addresses and ports swapped.
    #[inline]
    fn flow_owner<F: Family>(&self, proto: u8, src: F, dst: F, ports: (u16, u16)) -> Option<usize> {
        match proto {
            PROTO_TCP => Some(F::owner(&self.steering, src, dst, ports.0, ports.1)),
            PROTO_UDP => Some(self.udp_owner(ports.1)),
            _ => None,
        }
    }

    /// The owner of UDP port `port` (a bound socket lives on one engine).
    pub fn udp_owner(&self, port: u16) -> usize {
        udp_owner(&self.steering, port)
    }
}

/// The source and destination ports at the start of a TCP or UDP header;
/// None when `l4` is shorter than 4 bytes.
fn ports(l4: &[u8]) -> Option<(u16, u16)> {
    let p = l4.get(..4)?;
    Some((
        u16::from_be_bytes([p[0], p[1]]),
        u16::from_be_bytes([p[2], p[3]]),
    ))
}

/// The engine owning UDP local port `port` under `steering`.
pub fn udp_owner(steering: &Steering, port: u16) -> usize {
    steering.owner_of_fold(port)
}

/// Records taken from each other engine per iteration, at most.
pub const HANDOFF_BURST: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;
    use wire::ipv6::{NEXT_ICMPV6, NEXT_TCP, NEXT_UDP};

    const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const US: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const PEER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
    const US6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

    /// The first 8 bytes of a TCP or UDP header: the ports, then zeros.
    fn transport(sport: u16, dport: u16) -> Vec<u8> {
        [&sport.to_be_bytes()[..], &dport.to_be_bytes(), &[0; 4]].concat()
    }

    /// An ICMP(v6) error of `icmp_type` quoting `header` and `transport`.
    fn error(icmp_type: u8, header: &[u8], transport: &[u8]) -> Vec<u8> {
        [&[icmp_type, 0, 0, 0, 0, 0, 0, 0][..], header, transport].concat()
    }

    /// The IPv4 and the IPv6 header of a packet carrying `proto` (8 bytes
    /// of it) that we sent to the peer.
    fn quoted(proto: u8) -> (Vec<u8>, Vec<u8>) {
        let v4 = [0x45, 0, 0, 28, 0, 1, 0x40, 0, 64, proto, 0, 0];
        let v6 = [0x60, 0, 0, 0, 0, 8, proto, 64];
        (
            [&v4[..], &US.octets(), &PEER.octets()].concat(),
            [&v6[..], &US6.octets(), &PEER6.octets()].concat(),
        )
    }

    #[test]
    fn owner_is_the_4_tuples_for_tcp_our_ports_for_udp_and_the_quoted_flows_for_errors() {
        let mesh = handoff_mesh(Arc::new(Steering::new(4)), 4096);
        let (h, s) = (&mesh[0], &*mesh[0].steering);
        for (peer_port, our_port) in [(40_000, 80), (1234, 5353), (65_535, 1), (7, 9)] {
            let to_us = transport(peer_port, our_port);
            let from_us = transport(our_port, peer_port);
            let tcp4 = s.owner_v4(PEER, US, peer_port, our_port);
            let tcp6 = s.owner_v6(PEER6, US6, peer_port, our_port);
            let udp = udp_owner(s, our_port);
            let what = format!("{peer_port} -> {our_port}");

            assert_eq!(h.owner(PEER, US, PROTO_TCP, &to_us), Some(tcp4), "{what}");
            assert_eq!(h.owner(PEER, US, PROTO_UDP, &to_us), Some(udp), "{what}");
            for (proto, want4, want6) in [(PROTO_TCP, tcp4, tcp6), (PROTO_UDP, udp, udp)] {
                let (v4, v6) = quoted(proto);
                let quote = error(3, &v4, &from_us);
                assert_eq!(h.owner(PEER, US, PROTO_ICMP, &quote), Some(want4), "{what}");
                let quote = error(1, &v6, &from_us);
                assert_eq!(
                    h.owner_v6(PEER6, US6, NEXT_ICMPV6, &quote),
                    Some(want6),
                    "{what}"
                );
            }
            assert_eq!(
                h.owner_v6(PEER6, US6, NEXT_TCP, &to_us),
                Some(tcp6),
                "{what}"
            );
            assert_eq!(
                h.owner_v6(PEER6, US6, NEXT_UDP, &to_us),
                Some(udp),
                "{what}"
            );
        }
        // Any engine: echo, other protocols, headers too short to say.
        let echo = transport(0x0800, 0);
        assert_eq!(h.owner(PEER, US, PROTO_ICMP, &echo), None);
        assert_eq!(h.owner(PEER, US, 47, &transport(1, 2)), None);
        assert_eq!(h.owner(PEER, US, PROTO_TCP, &[0, 80, 0]), None);
        let cut = error(3, &quoted(PROTO_UDP).0, &[0, 80]);
        assert_eq!(h.owner(PEER, US, PROTO_ICMP, &cut), None);
        assert_eq!(h.owner_v6(PEER6, US6, NEXT_ICMPV6, &[128, 0, 0, 0]), None);
        assert_eq!(h.owner_v6(PEER6, US6, NEXT_UDP, &[0, 80, 0]), None);
        let cut = error(1, &quoted(PROTO_TCP).1[..39], &[]);
        assert_eq!(h.owner_v6(PEER6, US6, NEXT_ICMPV6, &cut), None);
    }
}
