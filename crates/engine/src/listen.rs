//! Passive open (RFC 9293 §3.10.7.2): a SYN for a listener becomes a
//! connection in SYN-RECEIVED, bounded by the listener's backlog and the
//! socket table; when the backlog is full, SYN cookies (RFC 4987 §3.6)
//! answer without keeping state, and a returning ACK that carries a valid
//! cookie creates the connection then. Established connections are handed
//! to the listener's application by `events`.

use crate::sockets::{flow_key, Conn, Listener, Socket};
use crate::tcp::Tcb;
use crate::Core;
use appif::socket::AcceptQueue;
use core::net::SocketAddrV4;
use nic::TxQueue;
use wire::tcp::TcpRepr;

impl Core {
    /// A SYN for a listener: a new connection in SYN-RECEIVED, bounded by
    /// the listener's backlog and the socket table.
    pub(crate) fn passive_open<T: TxQueue>(
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
                    let shared = appif::socket::StatusHandle::local();
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
        if self.send_tcp_headers(*remote.ip(), &synack, tx) {
            self.stats.tcp_syncookies_sent += 1;
        }
    }

    /// An ACK that may answer a cookie SYN-ACK: when the cookie checks out,
    /// the connection is created as if its SYN had been queued, and the ACK
    /// (with any data) completes it. Returns false when it is no cookie.
    pub(crate) fn cookie_open(
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
