//! The receive path: Ethernet → ARP | IPv4 → ICMP | UDP | TCP. Every frame
//! either reaches a socket or is counted under the reason it was dropped.

use crate::link::Link;
use crate::sockets::{flow_key, Conn, Listener, Socket};
use crate::tcp::{self, Tcb};
use crate::Core;
use appif::socket::AcceptQueue;
use appif::socket::UdpHeader;
use core::net::{Ipv4Addr, SocketAddrV4};
use nic::TxQueue;
use wire::arp::{ArpOp, ArpRepr};
use wire::ethernet::{EthernetRepr, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use wire::icmp::{Icmpv4Repr, DST_UNREACH_FRAG_NEEDED, DST_UNREACH_PORT};
use wire::ipv4::{Ipv4Packet, PROTO_ICMP, PROTO_TCP, PROTO_UDP};
use wire::tcp::TcpRepr;
use wire::udp::UdpRepr;
use wire::Error;

/// Bytes of the offending datagram quoted in an ICMP error (RFC 1812
/// §4.3.2.3: as much as fits in 576 bytes).
const ICMP_QUOTE_MAX: usize = 576 - 20 - 8;

impl Core {
    /// Handles one received Ethernet frame.
    pub(crate) fn handle_frame<T: TxQueue>(&mut self, frame: &[u8], tx: &mut T) {
        self.stats.rx_frames += 1;
        self.stats.rx_bytes += frame.len() as u64;
        let Ok((eth, payload)) = EthernetRepr::parse(frame) else {
            self.stats.drop_eth_truncated += 1;
            return;
        };
        if eth.dst != self.link.mac && !eth.dst.is_broadcast() {
            self.stats.drop_eth_other_mac += 1;
            return;
        }
        match eth.ethertype {
            ETHERTYPE_ARP => self.handle_arp(payload, tx),
            ETHERTYPE_IPV4 => self.handle_ipv4(&eth, payload, tx),
            _ => self.stats.drop_eth_unsupported += 1,
        }
    }

    fn handle_arp<T: TxQueue>(&mut self, packet: &[u8], tx: &mut T) {
        let Ok(arp) = ArpRepr::parse(packet) else {
            self.stats.drop_arp_malformed += 1;
            return;
        };
        let for_us = arp.target_ip == self.link.ip;
        let now = self.now;
        // RFC 826: merge the sender into the table if it is there; add it
        // when the packet is for us.
        if !arp.sender_ip.is_unspecified() && arp.sender_mac.is_unicast() {
            let waiting = self
                .link
                .arp
                .learn(arp.sender_ip, arp.sender_mac, for_us, now);
            if waiting {
                self.link
                    .flush_waiting(tx, &mut self.stats, arp.sender_ip, arp.sender_mac);
            }
        }
        match arp.op {
            ArpOp::Request if for_us => {
                self.stats.arp_requests_rx += 1;
                self.link.send_arp(
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

    fn handle_ipv4<T: TxQueue>(&mut self, eth: &EthernetRepr, packet: &[u8], tx: &mut T) {
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
        if dst != self.link.ip {
            self.stats.drop_ipv4_other_dst += 1;
            return;
        }
        if ip.is_fragment() {
            // RFC 791 §3.2: reassemble, then handle the whole datagram. The
            // table is taken out while the datagram (borrowed from it) is
            // handled; an empty `Reassembler` allocates nothing.
            let mut frag = core::mem::take(&mut self.frag);
            if let Some(whole) = frag.push(self.now, &ip, &mut self.stats) {
                self.deliver_ipv4(eth, &whole, tx);
            }
            self.frag = frag;
            return;
        }
        self.deliver_ipv4(eth, &ip, tx);
    }

    /// Hands a whole datagram for us (unfragmented or reassembled) to its
    /// protocol.
    fn deliver_ipv4<T: TxQueue>(&mut self, eth: &EthernetRepr, ip: &Ipv4Packet<'_>, tx: &mut T) {
        let src = ip.src();
        // Learn the peer's MAC from its traffic when it is on-link and the
        // cache already knows it (refresh only; RFC 1122 §2.3.2.1 allows it).
        if self.link.on_link(src) && eth.src.is_unicast() {
            self.link.arp.learn(src, eth.src, false, self.now);
        }
        match ip.protocol() {
            PROTO_ICMP => self.handle_icmp(src, ip.payload(), tx),
            PROTO_UDP => self.handle_udp(ip, tx),
            PROTO_TCP => self.handle_tcp(src, ip.payload(), ip.tos() & 0b11 == 0b11, tx),
            _ => self.stats.drop_ipv4_unsupported_proto += 1,
        }
    }

    fn handle_icmp<T: TxQueue>(&mut self, src: Ipv4Addr, msg: &[u8], tx: &mut T) {
        match Icmpv4Repr::parse(msg, self.cfg.verify_checksums) {
            Ok(Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }) => {
                let reply = Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                let len = reply.buffer_len();
                if len + wire::ipv4::HEADER_LEN > self.link.mtu {
                    self.stats.drop_icmp_malformed += 1;
                    return;
                }
                let now = self.now;
                if self
                    .link
                    .send_ipv4(tx, &mut self.stats, now, src, PROTO_ICMP, len, |buf| {
                        reply.emit(buf);
                    })
                {
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
    /// with a next-hop MTU (`frag_needed_mtu`, RFC 1191) lowers the
    /// connection's MSS when the quoted sequence number is one in flight.
    fn tcp_icmp_error(&mut self, quote: &[u8], frag_needed_mtu: Option<usize>) {
        // The quoted header may be cut short past 8 payload bytes (RFC 792),
        // so it is read field by field, not through `Ipv4Packet`.
        let Some(&vihl) = quote.first() else { return };
        let hl = usize::from(vihl & 0x0f) * 4;
        if vihl >> 4 != 4 || hl < wire::ipv4::HEADER_LEN || quote.len() < hl + 8 {
            return;
        }
        let ip = |at: usize| Ipv4Addr::new(quote[at], quote[at + 1], quote[at + 2], quote[at + 3]);
        if quote[9] != PROTO_TCP || ip(12) != self.link.ip {
            return;
        }
        let local_port = u16::from_be_bytes([quote[hl], quote[hl + 1]]);
        let remote = SocketAddrV4::new(ip(16), u16::from_be_bytes([quote[hl + 2], quote[hl + 3]]));
        let Some(&slot) = self.sockets.flows.get(&flow_key(remote, local_port)) else {
            return;
        };
        self.stats.icmp_tcp_errors_rx += 1;
        let seq = wire::SeqNum(u32::from_be_bytes([
            quote[hl + 4],
            quote[hl + 5],
            quote[hl + 6],
            quote[hl + 7],
        ]));
        let link_mtu = self.link.mtu;
        // RFC 1191 §4: an MTU of 0 comes from a router that predates it;
        // and a report above our own link MTU is bogus.
        let Some(mtu) = frag_needed_mtu.filter(|m| (68..=link_mtu).contains(m)) else {
            return;
        };
        if self
            .sockets
            .conn(slot)
            .is_some_and(|c| c.tcb.on_path_mtu(mtu, seq))
        {
            self.stats.tcp_pmtu_reductions += 1;
            self.mark_dirty(slot);
        }
    }

    fn handle_udp<T: TxQueue>(&mut self, ip: &Ipv4Packet<'_>, tx: &mut T) {
        let (src, dst) = (ip.src(), ip.dst());
        let (udp, payload) = match UdpRepr::parse(ip.payload(), src, dst, self.cfg.verify_checksums)
        {
            Ok(v) => v,
            Err(Error::Checksum) => {
                self.stats.drop_udp_checksum += 1;
                return;
            }
            Err(_) => {
                self.stats.drop_udp_malformed += 1;
                return;
            }
        };
        let Some(&slot) = self.sockets.udp.get(&udp.dst_port) else {
            self.stats.drop_udp_no_socket += 1;
            // RFC 1122 §3.2.2.1 / §4.1.3.1: port unreachable, never for
            // broadcasts, and rate limited.
            if !self.link.is_broadcast(dst) && self.icmp_error_allowed() {
                let quoted = ip.header();
                let quote_len = (quoted.len() + ip.payload().len()).min(ICMP_QUOTE_MAX);
                self.send_unreachable(src, ip, quote_len, tx);
            }
            return;
        };
        let Some(Some(Socket::Udp(u))) = self.sockets.slots.get_mut(slot as usize) else {
            return;
        };
        let h = UdpHeader {
            addr: SocketAddrV4::new(src, udp.src_port),
            len: payload.len() as u16,
        };
        if u.rx.free() < UdpHeader::LEN + payload.len() {
            self.stats.drop_udp_rx_full += 1;
            return;
        }
        u.rx.write(&h.encode());
        u.rx.write(payload);
        u.shared.wake();
        self.woke = true;
        self.stats.udp_rx += 1;
    }

    /// Sends ICMP port unreachable quoting the first `quote_len` bytes of `ip`.
    fn send_unreachable<T: TxQueue>(
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
        let len = msg.buffer_len();
        let now = self.now;
        if self
            .link
            .send_ipv4(tx, &mut self.stats, now, to, PROTO_ICMP, len, |buf| {
                msg.emit(buf);
            })
        {
            self.stats.icmp_unreachable_tx += 1;
        }
    }

    /// `ce`: the IPv4 ECN field carried Congestion Experienced (RFC 3168 §5).
    fn handle_tcp<T: TxQueue>(&mut self, src: Ipv4Addr, segment: &[u8], ce: bool, tx: &mut T) {
        let dst = self.link.ip;
        let (seg, payload) = match TcpRepr::parse(segment, src, dst, self.cfg.verify_checksums) {
            Ok(v) => v,
            Err(Error::Checksum) => {
                self.stats.drop_tcp_checksum += 1;
                return;
            }
            Err(_) => {
                self.stats.drop_tcp_malformed += 1;
                return;
            }
        };
        self.stats.tcp_rx_segments += 1;
        let remote = SocketAddrV4::new(src, seg.src_port);
        if let Some(&slot) = self.sockets.flows.get(&flow_key(remote, seg.dst_port)) {
            let now = self.now;
            let Some(c) = self.sockets.conn(slot) else {
                return;
            };
            let Conn {
                tcb, tx: txr, rx, ..
            } = c;
            tcb.input_ecn(ce);
            let ev = tcb.input(&seg, payload, now, txr, rx);
            self.after_tcp(slot, ev);
            return;
        }
        let flags = seg.flags;
        if let Some(&lslot) = self.sockets.listeners.get(&seg.dst_port) {
            if flags.syn() && !flags.ack() && !flags.rst() {
                self.passive_open(lslot, remote, &seg, tx);
                return;
            }
            // RFC 4987 §3.6: an ACK for no connection may complete a
            // handshake answered with a SYN cookie.
            if flags.ack()
                && !flags.syn()
                && !flags.rst()
                && self.cookie_open(lslot, remote, &seg, payload)
            {
                return;
            }
        }
        self.stats.tcp_no_socket += 1;
        self.send_rst(remote, &seg, tx);
    }

    /// Answers a segment that matched nothing (RFC 9293 §3.10.7.1).
    fn send_rst<T: TxQueue>(&mut self, remote: SocketAddrV4, seg: &TcpRepr, tx: &mut T) {
        let Some(rst) = tcp::reply_rst(seg) else {
            return;
        };
        let local = self.link.ip;
        let to = *remote.ip();
        let hlen = rst.header_len();
        let now = self.now;
        let offload = self.link.tcp_checksum_offload;
        if self
            .link
            .send_ipv4(tx, &mut self.stats, now, to, PROTO_TCP, hlen, |buf| {
                rst.emit_header(buf);
                Link::tcp_checksum(offload, buf, local, to);
            })
        {
            self.stats.tcp_rst_tx += 1;
        }
    }

    /// A SYN for a listener: a new connection in SYN-RECEIVED, bounded by
    /// the listener's backlog and the socket table.
    fn passive_open<T: TxQueue>(
        &mut self,
        lslot: u32,
        remote: SocketAddrV4,
        syn: &TcpRepr,
        tx: &mut T,
    ) {
        let Some(Some(Socket::Listener(l))) = self.sockets.slots.get_mut(lslot as usize) else {
            return;
        };
        if l.pending >= l.backlog {
            if self.cfg.syn_cookies {
                self.send_cookie_synack(remote, syn, tx);
            } else {
                self.stats.drop_tcp_backlog_full += 1;
            }
            return;
        }
        if self.sockets.is_full() || self.link.next_hop(*remote.ip()).is_none() {
            self.stats.drop_tcp_table_full += 1;
            return;
        }
        let local = SocketAddrV4::new(self.link.ip, syn.dst_port);
        let iss = self.isn.isn(local, remote, self.now);
        self.new_passive(lslot, remote, syn, iss);
    }

    /// A connection in SYN-RECEIVED for `syn` with our ISN `iss`, owned by
    /// the listener in `lslot` until accepted. Returns its slot.
    fn new_passive(
        &mut self,
        lslot: u32,
        remote: SocketAddrV4,
        syn: &TcpRepr,
        iss: wire::SeqNum,
    ) -> Option<u32> {
        let local = SocketAddrV4::new(self.link.ip, syn.dst_port);
        // Only a plain SYN opens a connection (before any ring is taken).
        let f = syn.flags;
        if !f.syn() || f.rst() || f.ack() || f.fin() {
            return None;
        }
        // The rings come from where the listener's application lives.
        let buffers = match self.sockets.slots.get(lslot as usize) {
            Some(Some(Socket::Listener(l))) => l.buffers,
            _ => (0, 0),
        };
        let (id, shared, eng_tx, eng_rx, app_ends) =
            match self.sockets.slots.get_mut(lslot as usize) {
                Some(Some(Socket::Listener(Listener {
                    accept: AcceptQueue::Segment(a),
                    ..
                }))) => {
                    let Some(c) = a.claim() else {
                        self.stats.drop_tcp_backlog_full += 1;
                        return None;
                    };
                    (c.id, c.shared, c.tx, c.rx, None)
                }
                _ => {
                    let (init, max) = (self.cfg.ring_bytes, self.cfg.ring_max_bytes);
                    let (app_tx, eng_tx) = appif::bytes::growable_ring(init, max);
                    let (eng_rx, app_rx) = appif::bytes::growable_ring(init, max);
                    let id = self.sockets.engine_id();
                    let shared = appif::socket::SharedSlot::local();
                    (id, shared, eng_tx, eng_rx, Some((app_tx, app_rx)))
                }
            };
        let mut cfg = self.cfg.tcp.clone();
        cfg.rcv_buf = eng_rx.capacity();
        cfg.rcv_buf_max = cfg.rcv_buf_max.min(eng_rx.reserved());
        cfg.snd_buf_max = cfg.snd_buf_max.min(eng_tx.reserved());
        if buffers.0 > 0 {
            // SO_RCVBUF on the listener: before the SYN-ACK picks the
            // window scale (as Linux's tcp_select_initial_window).
            cfg.rcv_buf_max = buffers.0.min(eng_rx.reserved());
        }
        let mut tcb = Tcb::accept(&cfg, local, remote, syn, iss, self.now)?;
        tcb.set_ts_offset(self.isn.ts_offset(local, remote));
        if buffers.0 > 0 {
            tcb.set_rcv_buf(buffers.0.min(eng_rx.reserved()));
        }
        if buffers.1 > 0 {
            tcb.set_snd_buf(buffers.1.min(eng_tx.reserved()));
        }
        let conn = Conn {
            id,
            shared,
            tcb,
            tx: eng_tx,
            rx: eng_rx,
            app_ends,
            listener: Some(lslot),
            app_closed: false,
            timer_at: None,
            dirty: false,
            growth: Default::default(),
        };
        if let Some(Some(Socket::Listener(l))) = self.sockets.slots.get_mut(lslot as usize) {
            l.pending += 1;
        }
        let slot = self.sockets.insert(id, Socket::Tcp(Box::new(conn)))?;
        self.sockets
            .flows
            .insert(flow_key(remote, syn.dst_port), slot);
        self.stats.tcp_passive_opens += 1;
        self.mark_dirty(slot);
        self.arm_timer(slot);
        Some(slot)
    }

    /// Answers a SYN without keeping state: the SYN-ACK's ISN is a cookie
    /// (RFC 4987 §3.6) carrying the MSS; no window scale, SACK or timestamps.
    fn send_cookie_synack<T: TxQueue>(&mut self, remote: SocketAddrV4, syn: &TcpRepr, tx: &mut T) {
        let local = SocketAddrV4::new(self.link.ip, syn.dst_port);
        let peer_mss = syn.options.mss.unwrap_or(536).min(self.cfg.tcp.mss);
        let cookie = self
            .cookies
            .mint(local, remote, syn.seq, peer_mss, self.now);
        let mut synack = TcpRepr {
            src_port: syn.dst_port,
            dst_port: syn.src_port,
            seq: cookie,
            ack: syn.seq + 1usize,
            flags: wire::tcp::TcpFlags(wire::tcp::TcpFlags::SYN | wire::tcp::TcpFlags::ACK),
            window: cookie_window(self.cfg.ring_bytes),
            ..TcpRepr::default()
        };
        synack.options.mss = Some(self.cfg.tcp.mss);
        let hlen = synack.header_len();
        let (src, to, now) = (self.link.ip, *remote.ip(), self.now);
        let offload = self.link.tcp_checksum_offload;
        if self
            .link
            .send_ipv4(tx, &mut self.stats, now, to, PROTO_TCP, hlen, |buf| {
                synack.emit_header(buf);
                Link::tcp_checksum(offload, buf, src, to);
            })
        {
            self.stats.tcp_syncookies_sent += 1;
        }
    }

    /// An ACK that may answer a cookie SYN-ACK: when the cookie checks out,
    /// the connection is created as if its SYN had been queued, and the ACK
    /// (with any data) completes it. Returns false when it is no cookie.
    fn cookie_open(
        &mut self,
        lslot: u32,
        remote: SocketAddrV4,
        ack: &TcpRepr,
        payload: &[u8],
    ) -> bool {
        if !self.cfg.syn_cookies {
            return false;
        }
        let local = SocketAddrV4::new(self.link.ip, ack.dst_port);
        let Some(mss) = self
            .cookies
            .check(local, remote, ack.seq, ack.ack, self.now)
        else {
            return false;
        };
        if self.sockets.is_full() {
            self.stats.drop_tcp_table_full += 1;
            return true;
        }
        self.stats.tcp_syncookies_ok += 1;
        // The SYN as the cookie remembers it: sequence, MSS, no other options.
        let mut syn = TcpRepr {
            src_port: ack.src_port,
            dst_port: ack.dst_port,
            seq: ack.seq - 1usize,
            flags: wire::tcp::TcpFlags(wire::tcp::TcpFlags::SYN),
            window: ack.window,
            ..TcpRepr::default()
        };
        syn.options.mss = Some(mss);
        let iss = ack.ack - 1usize;
        let Some(slot) = self.new_passive(lslot, remote, &syn, iss) else {
            return true;
        };
        let now = self.now;
        let rcv_window = usize::from(cookie_window(self.cfg.ring_bytes));
        let Some(c) = self.sockets.conn(slot) else {
            return true;
        };
        let Conn {
            tcb, tx: txr, rx, ..
        } = c;
        // Our SYN-ACK already went out (statelessly): account for it.
        tcb.poll_output(now, &*txr, rcv_window, 1, &mut |_| {});
        let ev = tcb.input(ack, payload, now, txr, rx);
        self.after_tcp(slot, ev);
        true
    }
}

/// The window of a cookie SYN-ACK: unscaled, at most the RX ring.
fn cookie_window(ring_bytes: usize) -> u16 {
    ring_bytes.min(usize::from(u16::MAX)) as u16
}
