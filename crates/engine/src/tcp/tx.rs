//! The transmit path of TCP: every connection marked dirty (new data, an
//! ACK due, a timer's retransmission) gets `Tcb::poll_output`, and each
//! segment it emits becomes a frame through the egress of its family
//! (`egress` for IPv4, `egress6` for IPv6, one algorithm over
//! [`TcpEgress`]): its payload copied from the application's TX ring
//! (through [`SendBuffer`](crate::tcp::SendBuffer), see `rings`) or, on a
//! port that sends from where bytes lie, lent from it. The port's TX queue
//! is flushed once per iteration by the loop.
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `sockets`, `egress`, `ip6`, `dirty`, `dirty_scratch`,
//! `trace`.

use crate::ip::egress::MIN_FRAME;
use crate::ip::family::{Gso, Route, TcpEgress, TcpOut, Via, ECT0};
use crate::obs::stats::Stats;
use crate::sockets::{Conn, Socket};
use crate::tcp::State;
use crate::time::Instant;
use crate::Protocols;
use core::net::SocketAddr;
use nic::TxQueue;
use wire::ipv6::{Ipv6Repr, NEXT_TCP};
/// Segments one connection may emit per iteration.
pub(crate) const TCP_BURST: usize = 64;

impl Protocols {
    /// Emits TCP output for every dirty connection; those with more to
    /// send (burst limit, window) stay queued for the next iteration.
    pub(crate) fn flush_output<T: TxQueue>(&mut self, tx: &mut T) -> usize {
        core::mem::swap(&mut self.dirty, &mut self.dirty_scratch);
        let mut sent = 0;
        for i in 0..self.dirty_scratch.len() {
            let slot = self.dirty_scratch[i];
            if tx.room() < TCP_BURST {
                // The port is out of tx buffers: what is left waits for the
                // next iteration (its bytes stay in the TX rings) instead of
                // being built and dropped, each drop costing an RTO.
                self.stats.tx_output_deferred += 1;
                for k in i..self.dirty_scratch.len() {
                    let s = self.dirty_scratch[k];
                    if self.sockets.conn(s).is_some_and(|c| c.dirty) {
                        self.dirty.push(s);
                    }
                }
                break;
            }
            match self.sockets.conn(slot) {
                Some(c) => c.dirty = false,
                None => continue,
            }
            let n = self.output(slot, tx);
            if let Some(c) = self.sockets.conn(slot) {
                self.stats.fold_tcb(c.tcb.stats(), &mut c.counted);
            }
            self.trace.output_done(slot, n);
            sent += n;
            if self.sockets.conn(slot).is_some_and(|c| c.tcb.has_output()) {
                self.mark_dirty(slot);
            } else {
                // Its last ACK is out: a TIME-WAIT its application let go
                // of becomes a compact record.
                self.enter_time_wait_record(slot);
            }
        }
        self.dirty_scratch.clear();
        sent
    }

    /// Emits up to a burst of segments for the connection in `slot`
    /// through the egress of its family.
    fn output<T: TxQueue>(&mut self, slot: u32, tx: &mut T) -> usize {
        let Protocols {
            sockets,
            egress,
            ip6,
            stats,
            now,
            ..
        } = self;
        let Some(Some(Socket::Tcp(c))) = sockets.slots.get_mut(slot as usize) else {
            return 0;
        };
        let n = match (c.tcb.local(), c.tcb.remote()) {
            (_, SocketAddr::V4(remote)) => send_burst(egress, *remote.ip(), c, stats, *now, tx),
            (SocketAddr::V6(local), SocketAddr::V6(remote)) => {
                let Some(e6) = ip6.as_mut() else {
                    return 0;
                };
                // RFC 6437 flow label, IPV6_TCLASS (the ECN bits are
                // ours, per segment) and IPV6_UNICAST_HOPS.
                let flow = Ipv6Repr {
                    src: *local.ip(),
                    dst: *remote.ip(),
                    next_header: NEXT_TCP,
                    hop_limit: c.ip6.hop_limit(),
                    traffic_class: c.ip6.traffic_class(0),
                    flow_label: c.flow_label,
                    payload_len: 0,
                };
                send_burst(e6, flow, c, stats, *now, tx)
            }
            _ => return 0,
        };
        self.after_output(slot, tx);
        n
    }

    /// After `poll_output` for the connection in `slot` (either family):
    /// everything written is sent, so a writer that adds bytes kicks us
    /// (FLAG_TX_IDLE), and bytes that came while we were sending, which
    /// that writer may have seen no flag for, we take ourselves; a closed
    /// connection nobody will read is dropped, any other gets its timer.
    #[inline]
    pub(crate) fn after_output<T: TxQueue>(&mut self, slot: u32, tx: &mut T) {
        let Some(c) = self.sockets.conn(slot) else {
            return;
        };
        let mut again = false;
        let len = c.tx.len();
        if c.tcb.all_sent(len) && c.shared.set_tx_idle() {
            core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
            again = c.tx.len() > len && c.shared.take_tx_idle();
        }
        let closed = c.tcb.state() == State::Closed;
        if closed && (c.app_closed || c.unaccepted()) {
            // Payloads lent from its TX ring leave before the ring can
            // serve another socket.
            tx.flush();
            self.drop_conn(slot);
        } else {
            self.arm_timer(slot);
            if again {
                self.mark_dirty(slot);
            }
        }
    }
}

/// Before a connection sends: when its family's path MTU table changed
/// since it last looked (`pmtu`'s generation: another connection learned a
/// smaller path MTU, RFC 8201 §5.2, RFC 1191 §6.3), its MSS takes the
/// estimate toward its peer, `path_mtu()`, so it never sends what that
/// path drops. A connection before ESTABLISHED looks once it is.
#[inline]
fn take_path_mtu<A: crate::ip::pmtu::PmtuFloor>(
    c: &mut Conn,
    table: &crate::ip::pmtu::PmtuTable<A>,
    path_mtu: impl FnOnce() -> usize,
    stats: &mut Stats,
) {
    let generation = table.generation();
    if c.pmtu_gen != generation && c.tcb.state().is_synchronized() {
        c.pmtu_gen = generation;
        if c.tcb.clamp_path_mtu(path_mtu()) {
            stats.tcp_pmtu_reductions += 1;
        }
    }
}

/// Emits up to a burst of segments of connection `c` at `now`, toward
/// `flow`, through `out`, its family's egress. Toward a resolved next hop
/// a segment may exceed the MTU (the port cuts it: TSO) and its payload
/// may stay in the TX ring (gather); else it is copied into its frame,
/// which waits for ARP or Neighbor Discovery if need be.
fn send_burst<E: TcpEgress, T: TxQueue>(
    out: &mut E,
    flow: E::Flow,
    c: &mut Conn,
    stats: &mut Stats,
    now: Instant,
    tx: &mut T,
) -> usize {
    let remote = E::peer(&flow);
    let Route {
        next_mac,
        offloads,
        link_mtu,
        pmtu,
    } = out.route(remote, now);
    take_path_mtu(c, pmtu, || pmtu.path_mtu(remote, now, link_mtu), stats);
    // TSO only towards a resolved next hop: a frame waiting for ARP or ND
    // must fit the MTU.
    c.tcb.set_gso_max(match next_mac {
        Some(_) => offloads.gso_max,
        None => 0,
    });
    // Payloads lent to the port (below) only towards a resolved next hop:
    // a frame waiting for it is a copy.
    let lend_to = next_mac.filter(|_| offloads.gather);
    let Conn {
        tcb,
        tx: txr,
        rx,
        shared,
        ..
    } = c;
    tcb.set_corked(shared.has_flags(appif::socket::FLAG_TX_CORK));
    let rcv_free = rx.free();
    let txr = &*txr;
    tcb.poll_output(now, txr, rcv_free, TCP_BURST, &mut |seg| {
        let (hlen, plen) = (seg.repr.header_len(), seg.repr.payload_len);
        // The payload goes from the TX ring itself when the port can send
        // it from there (not a frame that needs padding): it stays
        // unchanged until tx is flushed, as ring bytes are released only by
        // ACKs, read before output, and a connection dropped below flushes
        // first.
        let frame_len = E::HEADERS + hlen + plen;
        let lent = match lend_to {
            Some(mac) if plen > 0 && frame_len >= MIN_FRAME => {
                txr.payload(seg.payload_offset, plen).map(|p| (mac, p))
            }
            _ => None,
        };
        let (via, copy) = match (lent, next_mac) {
            (Some((mac, payload)), _) => (Via::Lent(mac, payload), false),
            (None, Some(mac)) if seg.gso_size > 0 => (Via::Cut(mac), true),
            _ => (Via::Copied(now), true),
        };
        let out_seg = TcpOut {
            flow,
            // RFC 3168 §5: ECT(0) on data of an ECN-capable connection.
            ecn: if seg.ect { ECT0 } else { 0 },
            tcp_len: hlen + plen,
            gso: Gso {
                size: seg.gso_size,
                header_len: hlen,
            },
            via,
        };
        out.send_tcp(tx, stats, out_seg, |buf| {
            seg.repr.emit_header(&mut buf[..hlen]);
            if copy {
                txr.peek_at(seg.payload_offset, &mut buf[hlen..hlen + plen]);
            }
        });
        stats.tcp_tx_segments += seg.segments() as u64;
        if seg.gso_size > 0 {
            stats.tcp_tso_sends += 1;
        }
    })
}
