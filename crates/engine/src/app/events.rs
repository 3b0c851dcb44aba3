//! What TCP reports reaches the application: events become the socket's
//! status block (and a wake-up), a connection that just completed its
//! handshake goes to its listener's accept queue, a finished one is freed,
//! and rings grow when auto-tuning asks (within the application's budget).
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `sockets`, `woke`.

use crate::sockets::{Conn, Socket, Sockets};
use crate::tcp::{self, CloseReason, Events, State};
use crate::Protocols;
use appif::errno;
use appif::seg::AcceptQueue;
use appif::socket::SockState;

impl Protocols {
    /// Applies TCP events of the connection in `slot`, removes it when done,
    /// and schedules its output and timer.
    pub(crate) fn after_tcp(&mut self, slot: u32, ev: tcp::Events) {
        let Some(c) = self.sockets.conn(slot) else {
            return;
        };
        if ev.connected || ev.readable || ev.writable || ev.peer_fin || ev.closed.is_some() {
            self.woke = true;
        }
        match ev.closed {
            Some(tcp::CloseReason::Reset) | Some(tcp::CloseReason::Refused) => {
                self.stats.tcp_resets += 1
            }
            Some(tcp::CloseReason::TimedOut) => self.stats.tcp_timeouts += 1,
            _ => {}
        }
        // Its counters are folded into the engine's after its output
        // (`flush_output`), or when it is removed (`drop_conn`).
        // A connection that ends with a segment still to send (the RST of
        // an orphan that got data) is dropped after its output (`after_output`).
        let finished = apply_events(c, &ev) && !c.tcb.has_output();
        if ev.connected {
            if let Some(l) = c.listener {
                self.hand_over(slot, l);
            }
        }
        if finished {
            self.drop_conn(slot);
            return;
        }
        self.tune_buffers(slot);
        self.mark_dirty(slot);
        self.arm_timer(slot);
    }

    /// Grows the rings of the connection in `slot` towards what TCP asks
    /// for (receive-window auto-tuning, a send buffer of four times cwnd), within
    /// its application's budget; a growth past the budget is not made.
    /// Allocates nothing; costs two comparisons when nothing is asked.
    pub(crate) fn tune_buffers(&mut self, slot: u32) {
        let Sockets {
            slots,
            growth_used,
            growth_limit,
            ..
        } = &mut self.sockets;
        let Some(Some(Socket::Tcp(c))) = slots.get_mut(slot as usize) else {
            return;
        };
        let rx_want = c.tcb.rcv_buf_wanted().min(c.rx.reserved());
        // The TX ring grows only while the flight fills half of it: it
        // bounds the flight then; else its unsent backlog is enough.
        let tx_bounds_flight = 2 * c.tcb.bytes_in_flight() >= c.tx.capacity();
        let tx_want = if tx_bounds_flight {
            c.tcb.snd_buf_wanted().min(c.tx.reserved())
        } else {
            0
        };
        let rx_have = c.rx.wanted();
        let tx_have = c.growth.tx_grant.max(c.tx.capacity());
        if rx_want <= rx_have && tx_want <= tx_have {
            return;
        }
        let used = growth_used.entry(c.owner).or_insert(0);
        if rx_want > rx_have {
            let target = rx_want.next_power_of_two().min(c.rx.reserved());
            let extra = target.saturating_sub(rx_have);
            if used.saturating_add(extra) <= *growth_limit {
                c.rx.grow(target);
                *used += extra;
                c.growth.counted += extra;
            }
        }
        if tx_want > tx_have {
            let target = tx_want.next_power_of_two().min(c.tx.reserved());
            let extra = target.saturating_sub(tx_have);
            if used.saturating_add(extra) <= *growth_limit {
                c.growth.tx_grant = target;
                c.shared.set_tx_grant(target);
                *used += extra;
                c.growth.counted += extra;
            }
        }
    }

    /// Moves a just-established passive connection to its listener's accept queue.
    fn hand_over(&mut self, slot: u32, listener_slot: u32) {
        let Some(c) = self.sockets.conn(slot) else {
            return;
        };
        c.listener = None;
        let ends = c.app_ends.take().map(|e| *e);
        let (local, remote) = app_addrs(c);
        c.shared.set_addrs(local, remote);
        c.shared.set_state(SockState::Open);
        let (id, shared) = (c.id, c.shared.clone());
        let refused = match self.sockets.slots.get_mut(listener_slot as usize) {
            Some(Some(Socket::Listener(l))) => {
                l.pending = l.pending.saturating_sub(1);
                let r = match (&mut l.accept, ends) {
                    (AcceptQueue::Local(q), Some((tx, rx))) => {
                        q.push(appif::seg::Accepted { id, shared, tx, rx }).is_err()
                    }
                    (AcceptQueue::AppSegment(q), None) => !q.hand_over(id, &shared),
                    _ => true,
                };
                l.shared.wake();
                r
            }
            _ => true,
        };
        if refused {
            self.stats.drop_tcp_backlog_full += 1;
            if let Some(c) = self.sockets.conn(slot) {
                c.app_closed = true;
                c.tcb.abort();
            }
        }
    }

    /// Removes a finished connection and releases its listener slot.
    pub(crate) fn drop_conn(&mut self, slot: u32) {
        if let Some(Socket::Tcp(mut c)) = self.sockets.remove(slot) {
            self.stats.fold_tcb(c.tcb.stats(), &mut c.counted);
            if let Some(l) = c.listener {
                if let Some(Some(Socket::Listener(l))) = self.sockets.slots.get_mut(l as usize) {
                    l.pending = l.pending.saturating_sub(1);
                }
            }
        }
    }
}

/// Applies what TCP reported for a connection to its shared status block.
/// Returns true when the connection is finished and can be removed.
fn apply_events(conn: &mut Conn, ev: &Events) -> bool {
    if ev.connected && conn.listener.is_none() {
        let (local, remote) = app_addrs(conn);
        conn.shared.set_addrs(local, remote);
        conn.shared.set_state(appif::socket::SockState::Open);
    }
    if ev.peer_fin {
        conn.shared.set_flags(appif::socket::FLAG_RX_FIN);
    } else if ev.readable || ev.writable {
        conn.shared.wake();
    }
    if let Some(reason) = ev.closed {
        conn.shared.set_closed(errno_of(reason));
    }
    conn.tcb.state() == State::Closed && (conn.app_closed || conn.unaccepted())
}

/// The errno an application sees for a TCP close reason: the only place a
/// [`CloseReason`] becomes an errno; the values and their meaning are
/// `appif::errno`'s.
pub(crate) fn errno_of(reason: CloseReason) -> errno::Errno {
    match reason {
        CloseReason::Normal => 0,
        CloseReason::Reset => errno::ECONNRESET,
        CloseReason::Refused => errno::ECONNREFUSED,
        CloseReason::TimedOut => errno::ETIMEDOUT,
    }
}

/// The connection's local and remote addresses as its application sees
/// them: IPv4-mapped IPv6 for an IPv4 connection of a dual-stack listener
/// (RFC 3493 §3.7).
fn app_addrs(c: &Conn) -> (core::net::SocketAddr, core::net::SocketAddr) {
    let (l, r) = (c.tcb.local(), c.tcb.remote());
    if c.mapped {
        (appif::socket::to_mapped(l), appif::socket::to_mapped(r))
    } else {
        (l, r)
    }
}
