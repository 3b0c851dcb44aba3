//! ICMPv6 (RFC 4443) for a host: echo replies, Packet Too Big into the
//! path MTU table (RFC 8201, `pmtu`), and the errors we send (Parameter
//! Problem, Destination Unreachable), rate limited with ICMP's budget
//! (`icmp_errors_per_sec`) and never where RFC 4443 §2.4 (e) forbids.
//! Neighbor Discovery messages go on to `nd`.
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `egress`, `sockets`, `ip6`.

use crate::ip::rx6::{Icmpv6Error, Rx6};
use crate::Protocols;
use core::net::Ipv6Addr;
use nic::TxQueue;
use wire::icmpv6::{
    Icmpv6Packet, Icmpv6Repr, MAX_ERROR_DATA_LEN, TYPE_ECHO_REQUEST, TYPE_PACKET_TOO_BIG,
    TYPE_REDIRECT, TYPE_ROUTER_SOLICIT,
};
use wire::ipv6::{Ipv6Packet, NEXT_ICMPV6};
use wire::ipv6_ext::{walk_after_fragment, walk_chain, Ipv6ChainEnd};

impl Protocols {
    /// Handles the ICMPv6 message `msg` carried by `ip`.
    pub(crate) fn handle_icmpv6<T: TxQueue>(
        &mut self,
        rx: &Rx6<'_>,
        ip: &Ipv6Packet<'_>,
        msg: &[u8],
        tx: &mut T,
    ) {
        let (src, dst) = (ip.src(), ip.dst());
        let Ok(p) = Icmpv6Packet::new_checked(msg) else {
            self.stats.drop_icmpv6_malformed += 1;
            return;
        };
        if self.cfg.verify_checksums && !p.checksum_valid(src, dst) {
            self.stats.drop_icmpv6_checksum += 1;
            return;
        }
        match p.msg_type() {
            TYPE_ROUTER_SOLICIT..=TYPE_REDIRECT => self.handle_nd(rx, ip, msg, tx),
            TYPE_ECHO_REQUEST => self.echo6(ip, msg, tx),
            TYPE_PACKET_TOO_BIG => {
                let mtu = u32::from_be_bytes([msg[4], msg[5], msg[6], msg[7]]);
                self.packet_too_big(mtu, &msg[8..]);
            }
            // Destination Unreachable, Time Exceeded, Parameter Problem
            // and unknown errors (RFC 4443 §2.4 (a)): one quoting a TCP
            // flow of ours is counted against it (a soft error, RFC 1122
            // §4.2.3.9, RFC 5461: the connection carries on, as
            // `icmp::tcp_icmp_error` does for IPv4; the engine owning the
            // flow is already the one handling it, `steer`).
            t if t < 128 => {
                self.stats.icmpv6_errors_rx += 1;
                if msg.len() >= 8 && matches!(self.quoted_tcp(&msg[8..]), QuotedTcp::Tcp(Some(_))) {
                    self.stats.icmp_tcp_errors_rx += 1;
                }
            }
            // RFC 4443 §2.4 (b): unknown informational messages are
            // discarded (echo replies included: we send no requests).
            _ => self.stats.icmpv6_other_rx += 1,
        }
    }

    /// Answers an Echo Request sent to one of our unicast addresses (RFC
    /// 4443 §4.2: same identifier, sequence number and data).
    fn echo6<T: TxQueue>(&mut self, ip: &Ipv6Packet<'_>, msg: &[u8], tx: &mut T) {
        let (src, dst) = (ip.src(), ip.dst());
        let Ok(Icmpv6Repr::EchoRequest(echo)) = Icmpv6Repr::parse(msg, src, dst, false) else {
            self.stats.drop_icmpv6_malformed += 1;
            return;
        };
        let Some(e6) = self.ip6.as_mut() else { return };
        let reply = Icmpv6Repr::EchoReply(echo);
        let len = reply.buffer_len();
        if dst.is_multicast()
            || src.is_unspecified()
            || wire::ipv6::HEADER_LEN + len > e6.pmtu(src, self.now)
        {
            self.stats.drop_icmpv6_echo += 1;
            return;
        }
        let now = self.now;
        let sent = e6.send_ipv6(
            tx,
            &mut self.stats,
            now,
            dst,
            src,
            NEXT_ICMPV6,
            crate::ip::egress6::HOP_LIMIT,
            len,
            |buf| {
                reply.emit(dst, src, buf);
            },
        );
        if sent {
            self.stats.icmpv6_echo_replies_tx += 1;
        }
    }

    /// A Packet Too Big (RFC 4443 §3.2) reporting `mtu` for the packet
    /// `quote` (our packet, as much as fitted): the path MTU toward the
    /// quoted destination goes down to `mtu`, never below 1280 and never
    /// up (RFC 8201 §4).
    ///
    /// RFC 5927 §4.1, §5.2: a Packet Too Big quoting a TCP segment is
    /// believed only when the quoted sequence number is in flight on its
    /// connection (`Tcb::seq_in_flight`; a segment of no connection of
    /// ours is ignored). Then the connection's MSS goes down to the
    /// destination's path MTU (`Tcb::on_path_mtu`, segments in flight that
    /// no longer fit sent again) even when the table already held that
    /// estimate: another connection to the same destination may have
    /// lowered it first. The other connections to it take the estimate at
    /// their next segment (`pmtu`'s generation).
    fn packet_too_big(&mut self, mtu: u32, quote: &[u8]) {
        self.stats.icmpv6_ptb_rx += 1;
        let Some(e6) = self.ip6.as_ref() else { return };
        let addr = |at: usize| -> Option<Ipv6Addr> {
            let b: [u8; 16] = quote.get(at..at + 16)?.try_into().ok()?;
            Some(Ipv6Addr::from(b))
        };
        let quoted = match (quote.first(), addr(8), addr(24)) {
            (Some(v), Some(qsrc), Some(qdst)) if v >> 4 == 6 && e6.is_ours(qsrc) => Some(qdst),
            _ => None,
        };
        let Some(qdst) = quoted else {
            self.stats.icmpv6_ptb_ignored += 1;
            return;
        };
        let tcp = match self.quoted_tcp(quote) {
            QuotedTcp::Tcp(Some((slot, seq))) => match self.sockets.conn(slot) {
                Some(c) if c.tcb.seq_in_flight(seq) => Some((slot, seq)),
                _ => None,
            },
            QuotedTcp::Tcp(None) => None,
            QuotedTcp::Other => Some((u32::MAX, wire::SeqNum(0))),
        };
        let Some((slot, seq)) = tcp else {
            // RFC 5927 §5.2: out of window, or no connection of ours.
            self.stats.icmpv6_ptb_ignored += 1;
            return;
        };
        let Some(e6) = self.ip6.as_mut() else { return };
        let now = self.now;
        let current = e6.pmtu(qdst, now);
        let mtu = usize::try_from(mtu).unwrap_or(usize::MAX);
        let lowered = e6.pmtu.lower(qdst, mtu, current, now).is_some();
        if lowered {
            self.stats.icmpv6_pmtu_reductions += 1;
        }
        let (pmtu, generation) = (e6.pmtu(qdst, now), e6.pmtu.generation());
        let reduced = self.quoted_conn_takes_pmtu(slot, pmtu, generation, seq);
        if !lowered && !reduced {
            self.stats.icmpv6_ptb_ignored += 1;
        }
    }

    /// What the quoted packet `quote` (an IPv6 packet of ours, as much as
    /// fitted in an ICMPv6 error) was: a TCP segment, with the slot of its
    /// connection and its sequence number when one of ours matches, or
    /// something else.
    pub(crate) fn quoted_tcp(&self, quote: &[u8]) -> QuotedTcp {
        let (Some(head), Some(rest)) = (quote.get(..wire::ipv6::HEADER_LEN), quote.get(40..))
        else {
            return QuotedTcp::Other;
        };
        let end = match walk_chain(head[6], rest) {
            Ok(Ipv6ChainEnd::Fragment { offset, .. }) => walk_after_fragment(rest, offset),
            end => end,
        };
        let Ok(Ipv6ChainEnd::UpperLayer {
            next_header: wire::ipv6::NEXT_TCP,
            offset,
            ..
        }) = end
        else {
            return QuotedTcp::Other;
        };
        let Some(t) = rest.get(offset..offset + 8) else {
            return QuotedTcp::Tcp(None);
        };
        let mut dst = [0u8; 16];
        dst.copy_from_slice(&head[24..40]);
        let local_port = u16::from_be_bytes([t[0], t[1]]);
        let remote_port = u16::from_be_bytes([t[2], t[3]]);
        let seq = wire::SeqNum(u32::from_be_bytes([t[4], t[5], t[6], t[7]]));
        let slot = self
            .sockets
            .flows6
            .get(Ipv6Addr::from(dst), remote_port, local_port);
        QuotedTcp::Tcp(slot.map(|s| (s, seq)))
    }

    /// The path MTU toward `dst` in bytes (at least 1280 when learned; the
    /// link MTU when nothing was learned or IPv6 is off).
    pub(crate) fn pmtu_v6(&self, dst: Ipv6Addr) -> usize {
        self.ip6
            .as_ref()
            .map_or(self.egress.mtu, |e6| e6.pmtu(dst, self.now))
    }

    /// Sends the ICMPv6 error `err` about `invoking` (RFC 4443 §2.4):
    /// never about an ICMPv6 error, a packet to a multicast destination
    /// (IPv6 or link layer) or from a source that is not one node, and
    /// within the rate limit. Returns true when it went out.
    pub(crate) fn send_icmpv6_error<T: TxQueue>(
        &mut self,
        rx: &Rx6<'_>,
        invoking: &Ipv6Packet<'_>,
        err: Icmpv6Error,
        tx: &mut T,
    ) -> bool {
        self.send_icmpv6_error_checked(rx, invoking, err, false, tx)
    }

    /// [`Protocols::send_icmpv6_error`]; `multicast_ok`: the caller
    /// applied the exceptions of RFC 4443 §2.4 (e.3) itself (Parameter
    /// Problem code 2 for an option whose type asks for it).
    pub(crate) fn send_icmpv6_error_checked<T: TxQueue>(
        &mut self,
        rx: &Rx6<'_>,
        invoking: &Ipv6Packet<'_>,
        err: Icmpv6Error,
        multicast_ok: bool,
        tx: &mut T,
    ) -> bool {
        let (src, dst) = (invoking.src(), invoking.dst());
        let multicast = dst.is_multicast() || rx.eth_multicast;
        if (multicast && !multicast_ok)
            || src.is_unspecified()
            || src.is_multicast()
            || is_icmpv6_error(invoking)
        {
            self.stats.icmpv6_errors_suppressed += 1;
            return false;
        }
        let Some(e6) = self.ip6.as_ref() else {
            return false;
        };
        let from = if e6.is_ours(dst) {
            Some(dst)
        } else {
            e6.source_for(src)
        };
        let Some(from) = from else {
            self.stats.drop_ipv6_no_route += 1;
            return false;
        };
        if !self.icmp_error_allowed() {
            return false;
        }
        let packet = invoking.packet();
        let data = &packet[..packet.len().min(MAX_ERROR_DATA_LEN)];
        let msg = match err {
            Icmpv6Error::DstUnreachable(code) => Icmpv6Repr::DstUnreachable { code, data },
            Icmpv6Error::ParamProblem { code, pointer } => Icmpv6Repr::ParamProblem {
                code,
                pointer,
                data,
            },
        };
        let now = self.now;
        let Some(e6) = self.ip6.as_mut() else {
            return false;
        };
        let sent = e6.send_ipv6(
            tx,
            &mut self.stats,
            now,
            from,
            src,
            NEXT_ICMPV6,
            crate::ip::egress6::HOP_LIMIT,
            msg.buffer_len(),
            |buf| {
                msg.emit(from, src, buf);
            },
        );
        if sent {
            match err {
                Icmpv6Error::DstUnreachable(_) => self.stats.icmpv6_unreachable_tx += 1,
                Icmpv6Error::ParamProblem { .. } => self.stats.icmpv6_param_problem_tx += 1,
            }
        }
        sent
    }
}

/// True when `ip` carries an ICMPv6 error message (RFC 4443 §2.4 (e.1)).
fn is_icmpv6_error(ip: &Ipv6Packet<'_>) -> bool {
    let end = match walk_chain(ip.next_header(), ip.payload()) {
        Ok(Ipv6ChainEnd::Fragment { offset, fragment }) if fragment.is_atomic() => {
            walk_after_fragment(ip.payload(), offset)
        }
        end => end,
    };
    match end {
        Ok(Ipv6ChainEnd::UpperLayer {
            next_header: NEXT_ICMPV6,
            offset,
            ..
        }) => ip.payload().get(offset).is_some_and(|&t| t < 128),
        _ => false,
    }
}

/// What an ICMPv6 error quoted ([`Protocols::quoted_tcp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QuotedTcp {
    /// A TCP segment: its connection's slot and sequence number when the
    /// flow is one of ours (None: no connection, or the TCP header cut).
    Tcp(Option<(u32, wire::SeqNum)>),
    /// Not TCP, or too little of the packet to tell.
    Other,
}
