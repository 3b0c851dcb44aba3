//! ICMP (RFC 792, RFC 1122 §3.2.2): echo replies, errors about our own
//! TCP segments (RFC 1191 path MTU, RFC 5927 checks), and port unreachable
//! for UDP datagrams nobody listens for, rate limited.
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `egress`, `sockets`, `icmp_tokens`, `icmp_refill`.

use crate::Protocols;
use core::net::Ipv4Addr;
use core::time::Duration;
use nic::TxQueue;
use wire::icmp::{Icmpv4Repr, DST_UNREACH_FRAG_NEEDED, DST_UNREACH_PORT};
use wire::ipv4::{Ipv4Packet, PROTO_ICMP, PROTO_TCP};

/// Bytes of the offending datagram quoted in an ICMP error (RFC 1812
/// §4.3.2.3: as much as fits in 576 bytes).
pub(crate) const ICMP_QUOTE_MAX: usize = 576 - 20 - 8;

impl Protocols {
    pub(crate) fn handle_icmp<T: TxQueue>(&mut self, src: Ipv4Addr, msg: &[u8], tx: &mut T) {
        match Icmpv4Repr::parse(msg, self.cfg.verify_checksums) {
            Ok(Icmpv4Repr::EchoRequest(echo)) => {
                let reply = Icmpv4Repr::EchoReply(echo);
                let len = reply.buffer_len();
                if len + wire::ipv4::HEADER_LEN > self.egress.mtu {
                    self.stats.drop_icmp_malformed += 1;
                    return;
                }
                if self.send_icmp(src, &reply, tx) {
                    self.stats.icmp_echo_replies_tx += 1;
                }
            }
            Ok(Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu,
                data,
            }) => {
                self.stats.icmp_other_rx += 1;
                let mtu = (code == DST_UNREACH_FRAG_NEEDED).then_some(usize::from(next_hop_mtu));
                self.tcp_icmp_error(data, mtu);
            }
            Ok(_) => self.stats.icmp_other_rx += 1,
            Err(_) => self.stats.drop_icmp_malformed += 1,
        }
    }

    /// RFC 1122 §4.2.3.9: an ICMP error quoting a segment one of our TCP
    /// connections sent is counted (`icmp_tcp_errors_rx`); soft errors MUST
    /// NOT abort the connection, and none here does. "Fragmentation needed"
    /// with a next-hop MTU (`frag_needed_mtu`, RFC 1191) is believed only
    /// when the quoted sequence number is one in flight (RFC 5927 §4.1,
    /// §5.2); then the destination's path MTU goes down (the table every
    /// connection to it reads before it sends, `pmtu`) and the quoted
    /// connection's MSS with it at once, its segments in flight that no
    /// longer fit sent again. One that changes nothing, is out of window
    /// or quotes no connection of ours is counted in `icmp_frag_needed_ignored`.
    fn tcp_icmp_error(&mut self, quote: &[u8], frag_needed_mtu: Option<usize>) {
        let ignored = self.tcp_icmp_error_applied(quote, frag_needed_mtu) == Some(false);
        if ignored {
            self.stats.icmp_frag_needed_ignored += 1;
        }
    }

    /// [`Protocols::tcp_icmp_error`]: None for an error that is not a
    /// Fragmentation Needed, else whether it lowered an MTU or MSS.
    fn tcp_icmp_error_applied(
        &mut self,
        quote: &[u8],
        frag_needed_mtu: Option<usize>,
    ) -> Option<bool> {
        // The quoted header may be cut short past 8 payload bytes (RFC 792),
        // so it is read field by field, not through `Ipv4Packet`.
        let ours = self.quoted_tcp_v4(quote);
        if ours.is_some() {
            self.stats.icmp_tcp_errors_rx += 1;
        }
        let mtu = frag_needed_mtu?;
        let Some((slot, dst, seq)) = ours else {
            return Some(false);
        };
        // RFC 1191 §4: an MTU of 0 comes from a router that predates it;
        // and a report above our own link MTU is bogus.
        if !(68..=self.egress.mtu).contains(&mtu) {
            return Some(false);
        }
        if !self
            .sockets
            .conn(slot)
            .is_some_and(|c| c.tcb.seq_in_flight(seq))
        {
            return Some(false);
        }
        let now = self.now;
        let current = self.egress.path_mtu(dst, now);
        let lowered = self.egress.pmtu.lower(dst, mtu, current, now).is_some();
        if lowered {
            self.stats.icmp_pmtu_reductions += 1;
        }
        let pmtu = self.egress.path_mtu(dst, now);
        let generation = self.egress.pmtu.generation();
        let reduced = self.quoted_conn_takes_pmtu(slot, pmtu, generation, seq);
        Some(lowered || reduced)
    }

    /// The connection in `slot`, quoted at `seq` by an ICMP error either
    /// family believed, takes the destination's path MTU `pmtu` as of the
    /// table's `generation` (`Tcb::on_path_mtu`: its MSS, and what it has in
    /// flight that no longer fits, sent again). Returns true when its MSS
    /// went down.
    pub(crate) fn quoted_conn_takes_pmtu(
        &mut self,
        slot: u32,
        pmtu: usize,
        generation: u32,
        seq: wire::SeqNum,
    ) -> bool {
        let Some(c) = self.sockets.conn(slot) else {
            return false;
        };
        c.pmtu_gen = generation;
        if !c.tcb.on_path_mtu(pmtu, seq) {
            return false;
        }
        self.stats.tcp_pmtu_reductions += 1;
        self.mark_dirty(slot);
        true
    }

    /// The TCP connection of ours that sent the IPv4 packet `quote` (as
    /// much of it as an ICMP error carried, at least its header and 8
    /// bytes): its slot, the destination and the quoted sequence number.
    fn quoted_tcp_v4(&self, quote: &[u8]) -> Option<(u32, Ipv4Addr, wire::SeqNum)> {
        let &vihl = quote.first()?;
        let hl = usize::from(vihl & 0x0f) * 4;
        if vihl >> 4 != 4 || hl < wire::ipv4::HEADER_LEN || quote.len() < hl + 8 {
            return None;
        }
        let ip = |at: usize| Ipv4Addr::new(quote[at], quote[at + 1], quote[at + 2], quote[at + 3]);
        if quote[9] != PROTO_TCP || ip(12) != self.egress.ip {
            return None;
        }
        let local_port = u16::from_be_bytes([quote[hl], quote[hl + 1]]);
        let remote_port = u16::from_be_bytes([quote[hl + 2], quote[hl + 3]]);
        let slot = self.sockets.flows.get(ip(16), remote_port, local_port)?;
        let seq = wire::SeqNum(u32::from_be_bytes([
            quote[hl + 4],
            quote[hl + 5],
            quote[hl + 6],
            quote[hl + 7],
        ]));
        Some((slot, ip(16), seq))
    }

    /// Sends ICMP port unreachable quoting the first `quote_len` bytes of `ip`.
    pub(crate) fn send_unreachable<T: TxQueue>(
        &mut self,
        to: Ipv4Addr,
        ip: &Ipv4Packet<'_>,
        quote_len: usize,
        tx: &mut T,
    ) {
        let hl = ip.header().len();
        let mut quote = [0u8; ICMP_QUOTE_MAX];
        let n = quote_len.min(ICMP_QUOTE_MAX);
        let hn = hl.min(n);
        quote[..hn].copy_from_slice(&ip.header()[..hn]);
        let pn = (n - hn).min(ip.payload().len());
        quote[hn..hn + pn].copy_from_slice(&ip.payload()[..pn]);
        let msg = Icmpv4Repr::DstUnreachable {
            code: DST_UNREACH_PORT,
            next_hop_mtu: 0,
            data: &quote[..hn + pn],
        };
        if self.send_icmp(to, &msg, tx) {
            self.stats.icmp_unreachable_tx += 1;
        }
    }

    /// Sends the ICMP message `msg` from our address to `to`. Returns false
    /// when the link dropped it (counted there).
    fn send_icmp<T: TxQueue>(&mut self, to: Ipv4Addr, msg: &Icmpv4Repr<'_>, tx: &mut T) -> bool {
        let (len, now) = (msg.buffer_len(), self.now);
        self.egress
            .send_ipv4(tx, &mut self.stats, now, to, PROTO_ICMP, 0, len, |buf| {
                msg.emit(buf);
            })
    }

    /// Takes an ICMP error token (token bucket, refilled every second).
    pub(crate) fn icmp_error_allowed(&mut self) -> bool {
        if self.now.saturating_since(self.icmp_refill) >= Duration::from_secs(1) {
            self.icmp_refill = self.now;
            self.icmp_tokens = self.cfg.icmp_errors_per_sec;
        }
        if self.icmp_tokens == 0 {
            self.stats.icmp_rate_limited += 1;
            return false;
        }
        self.icmp_tokens -= 1;
        true
    }
}
