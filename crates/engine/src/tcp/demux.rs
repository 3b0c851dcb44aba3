//! TCP on receive, either family: a segment is checked with its family's
//! pseudo-header and goes to its connection's Tcb (`Tcb::input`, whose
//! in-order bytes land in the application's RX ring through
//! [`RecvBuffer`](crate::tcp::RecvBuffer), see `app::rings`), and what TCP
//! reports goes on to `app::events`; a SYN for a listener goes to
//! `listen`, a segment of a TIME-WAIT record to `tw_records`; anything
//! else is answered with a RST (RFC 9293 §3.10.7.1). Reached from
//! `ip::rx` (IPv4) and `ip::rx6` (IPv6).
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `egress`, `ip6`, `sockets`, `isn`, `trace`, `handoff`,
//! `rx_link_src`.

use crate::ip::family::{TcpEgress, TcpOut};
use crate::ip::rx::parsed_or_counted;
use crate::obs::trace::{RingStamps, StampedRing};
use crate::sockets::{Conn, FamilyTables};
use crate::tcp;
use crate::Protocols;
use core::net::{IpAddr, SocketAddr};
use nic::TxQueue;
use wire::ipv6::{Ipv6Repr, NEXT_TCP};
use wire::tcp::TcpRepr;
use wire::MacAddr;

impl Protocols {
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

    /// Sends `seg` (headers and options only) from `local` to `remote`
    /// through the egress of their family ([`TcpEgress::send_tcp`]); over
    /// IPv6 with the flow label of the 4-tuple, Traffic Class `tclass` and
    /// the default Hop Limit (as Linux answers from TIME-WAIT). Returns
    /// false when the link dropped it (counted there).
    pub(crate) fn send_tcp_ctl<T: TxQueue>(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        seg: &TcpRepr,
        tclass: u8,
        tx: &mut T,
    ) -> bool {
        let hlen = seg.header_len();
        let now = self.now;
        let header = |buf: &mut [u8]| {
            seg.emit_header(buf);
        };
        match (local.ip(), remote.ip()) {
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let Some(e6) = self.ip6.as_mut() else {
                    return false;
                };
                let flow = Ipv6Repr {
                    src,
                    dst,
                    next_header: NEXT_TCP,
                    hop_limit: crate::ip::egress6::HOP_LIMIT,
                    traffic_class: tclass,
                    flow_label: self.isn.flow_label(local, remote),
                    payload_len: 0,
                };
                let ctl = TcpOut::control(flow, hlen, now);
                e6.send_tcp(tx, &mut self.stats, ctl, header)
            }
            (_, IpAddr::V4(dst)) => {
                let ctl = TcpOut::control(dst, hlen, now);
                self.egress.send_tcp(tx, &mut self.stats, ctl, header)
            }
            _ => false,
        }
    }
}
