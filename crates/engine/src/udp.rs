//! UDP (RFC 768), over IPv4 and IPv6: datagrams in, to the bound socket's
//! RX ring as records (a header, then the payload); datagrams out, from
//! the TX ring (over IPv6 with the checksum it makes mandatory, RFC 8200
//! §8.1).
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `egress`, `ip6`, `sockets`, `woke`.

use crate::ip::icmp::ICMP_QUOTE_MAX;
use crate::ip::rx::parsed_or_counted;
use crate::ip::rx6::{Icmpv6Error, Rx6};
use crate::sockets::{FamilyTables, Ports, Socket};
use crate::Protocols;
use appif::socket::UdpHeader;
use core::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};
use nic::TxQueue;
use wire::ipv4::Ipv4Packet;
use wire::ipv6::{Ipv6Packet, Ipv6Repr, NEXT_UDP};
use wire::udp::UdpRepr;

impl Protocols {
    /// A UDP datagram of the IPv4 packet `ip`: to the socket bound to its
    /// port, or answered with port unreachable (RFC 1122 §3.2.2.1).
    pub(crate) fn handle_udp<T: TxQueue>(&mut self, ip: &Ipv4Packet<'_>, tx: &mut T) {
        let (src, dst) = (ip.src(), ip.dst());
        if self.udp_rx(src, dst, ip.payload()) {
            // RFC 1122 §3.2.2.1 / §4.1.3.1: port unreachable, never for
            // broadcasts, and rate limited.
            if !self.egress.is_broadcast(dst) && self.icmp_error_allowed() {
                let quoted = ip.header();
                let quote_len = (quoted.len() + ip.payload().len()).min(ICMP_QUOTE_MAX);
                self.send_unreachable(src, ip, quote_len, tx);
            }
        }
    }

    /// A UDP datagram `datagram` (the upper-layer bytes) of the IPv6
    /// packet `ip`: to the socket bound to its port (as a record with the
    /// IPv6 source), or counted and answered with port unreachable (RFC
    /// 4443 §3.1 code 4, under `send_icmpv6_error`'s rules).
    pub(crate) fn handle_udp6<T: TxQueue>(
        &mut self,
        rx: &Rx6<'_>,
        ip: &Ipv6Packet<'_>,
        datagram: &[u8],
        tx: &mut T,
    ) {
        if self.udp_rx(ip.src(), ip.dst(), datagram) {
            let err = Icmpv6Error::DstUnreachable(wire::icmpv6::DST_UNREACH_PORT);
            self.send_icmpv6_error(rx, ip, err, tx);
        }
    }

    /// A UDP datagram `datagram` (the upper-layer bytes) from `src` to our
    /// `dst`, either family: checked with the family's pseudo-header, then
    /// put in the RX ring of the socket bound to its port as a record (a
    /// dual-stack socket sees IPv4 peers as `::ffff:a.b.c.d`), or counted.
    /// Returns true when no socket is bound to the port: the caller may
    /// answer with its family's port unreachable.
    #[inline]
    pub(crate) fn udp_rx<F: FamilyTables>(&mut self, src: F, dst: F, datagram: &[u8]) -> bool {
        let parsed = UdpRepr::parse(datagram, src, dst, self.cfg.verify_checksums);
        let s = &mut self.stats;
        let counted =
            parsed_or_counted(parsed, &mut s.drop_udp_checksum, &mut s.drop_udp_malformed);
        let Some((udp, payload)) = counted else {
            return false;
        };
        let Some(&slot) = F::ports(&self.sockets, Ports::Udp).get(&udp.dst_port) else {
            self.stats.drop_udp_no_socket += 1;
            return true;
        };
        let Some(Some(Socket::Udp(u))) = self.sockets.slots.get_mut(slot as usize) else {
            return false;
        };
        // Bound to one of our addresses, it takes only datagrams sent to
        // that one (as on Linux): not those to our other IPv6 address.
        let bound = appif::socket::from_mapped(u.local).ip();
        if !bound.is_unspecified() && bound != dst.socket(0).ip() {
            self.stats.drop_udp_no_socket += 1;
            return true;
        }
        let from = src.socket(udp.src_port);
        let h = UdpHeader {
            // A dual-stack socket sees IPv4 peers as ::ffff:a.b.c.d.
            addr: if u.local.is_ipv6() {
                appif::socket::to_mapped(from)
            } else {
                from
            },
            len: payload.len() as u16,
        };
        if u.rx.free() < UdpHeader::LEN + payload.len() {
            self.stats.drop_udp_rx_full += 1;
            return false;
        }
        u.rx.write(&h.encode());
        u.rx.write(payload);
        u.shared.wake();
        self.woke = true;
        self.stats.udp_rx += 1;
        false
    }

    /// Sends the datagrams queued in a UDP socket's TX ring: each to its
    /// record's address, over IPv4 or IPv6 (an IPv4-mapped destination of
    /// a dual-stack socket over IPv4). A record the socket cannot send
    /// (too long, a family it does not have, a family byte neither 4 nor
    /// 6) is counted and skipped.
    pub(crate) fn udp_send<T: TxQueue>(&mut self, slot: u32, tx: &mut T) {
        let Protocols {
            sockets,
            egress: link,
            ip6,
            stats,
            now,
            ..
        } = self;
        let now = *now;
        let Some(Some(Socket::Udp(u))) = sockets.slots.get_mut(slot as usize) else {
            return;
        };
        let max_payload = link.mtu - wire::ipv4::HEADER_LEN - wire::udp::HEADER_LEN;
        let dual = crate::sockets::families(u.local, u.v6only).0;
        // Bounded: each record consumes at least a header of a finite ring.
        loop {
            let mut hb = [0u8; UdpHeader::LEN];
            if u.tx.peek_at(0, &mut hb) < UdpHeader::LEN {
                break;
            }
            let h = UdpHeader::decode(&hb);
            let len = usize::from(h.len);
            if u.tx.len() < UdpHeader::LEN + len {
                break; // the rest of the record is not published yet
            }
            if !UdpHeader::family_ok(&hb) {
                stats.drop_udp_tx_malformed += 1;
                u.tx.consume(UdpHeader::LEN + len);
                continue;
            }
            let src_port = u.local.port();
            let hdr = u.ip6;
            let txr = &u.tx;
            let sent = match (appif::socket::from_mapped(h.addr), u.local.ip()) {
                (SocketAddr::V4(to), IpAddr::V4(_)) | (SocketAddr::V4(to), IpAddr::V6(_))
                    if u.local.is_ipv4() || dual =>
                {
                    if len > max_payload {
                        stats.drop_udp_tx_malformed += 1;
                        u.tx.consume(UdpHeader::LEN + len);
                        continue;
                    }
                    let (dst, dport) = (*to.ip(), to.port());
                    let local = link.ip;
                    link.send_ipv4(
                        tx,
                        stats,
                        now,
                        dst,
                        wire::ipv4::PROTO_UDP,
                        0,
                        wire::udp::HEADER_LEN + len,
                        |buf| {
                            wire::udp::UdpRepr {
                                src_port,
                                dst_port: dport,
                                payload_len: len,
                            }
                            .emit_header(buf);
                            txr.peek_at(UdpHeader::LEN, &mut buf[wire::udp::HEADER_LEN..]);
                            wire::udp::fill_checksum(buf, local, dst);
                        },
                    )
                }
                (SocketAddr::V6(to), IpAddr::V6(bound)) => {
                    let src = match ip6.as_ref() {
                        Some(_) if !bound.is_unspecified() => Some(bound),
                        Some(e6) => e6.source_for(*to.ip()),
                        None => None,
                    };
                    match (ip6.as_mut(), src) {
                        (Some(e6), Some(src))
                            if wire::ipv6::HEADER_LEN + wire::udp::HEADER_LEN + len <= e6.mtu =>
                        {
                            send_udp6(e6, tx, stats, now, src, src_port, to, hdr, len, |b| {
                                txr.peek_at(UdpHeader::LEN, b);
                            })
                        }
                        _ => {
                            stats.drop_udp_tx_malformed += 1;
                            false
                        }
                    }
                }
                _ => {
                    stats.drop_udp_tx_malformed += 1;
                    false
                }
            };
            if sent {
                stats.udp_tx += 1;
            }
            u.tx.consume(UdpHeader::LEN + len);
        }
        u.shared.wake();
    }
}

/// Sends one UDP datagram from `src` (port `src_port`) to `dst` with the
/// socket's Traffic Class and Hop Limit `hdr`, its `len`-byte payload
/// copied by `copy`, the checksum filled (mandatory over IPv6, RFC 8200
/// §8.1). Returns false when it was dropped (counted).
#[allow(clippy::too_many_arguments)]
pub(crate) fn send_udp6<T: TxQueue>(
    e6: &mut crate::ip::egress6::Egress6,
    tx: &mut T,
    stats: &mut crate::obs::stats::Stats,
    now: crate::time::Instant,
    src: Ipv6Addr,
    src_port: u16,
    dst: SocketAddrV6,
    hdr: crate::sockets::Ip6Header,
    len: usize,
    copy: impl FnOnce(&mut [u8]),
) -> bool {
    let (daddr, dport) = (*dst.ip(), dst.port());
    let ip = Ipv6Repr {
        src,
        dst: daddr,
        next_header: NEXT_UDP,
        hop_limit: hdr.hop_limit(),
        traffic_class: hdr.traffic_class(0),
        flow_label: 0,
        payload_len: wire::udp::HEADER_LEN + len,
    };
    e6.send_repr(tx, stats, now, &ip, |buf| {
        UdpRepr {
            src_port,
            dst_port: dport,
            payload_len: len,
        }
        .emit_header(buf);
        copy(&mut buf[wire::udp::HEADER_LEN..]);
        wire::udp::fill_checksum(buf, src, daddr);
    })
}
