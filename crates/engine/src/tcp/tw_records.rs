//! TIME-WAIT without the connection (issue 23): once a connection is in
//! TIME-WAIT and its application let go of it, the engine keeps a
//! [`TwRecord`] in its family's [`TwTable`](crate::tcp::twtable::TwTable) instead of the whole `Conn`
//! (its Tcb, rings and socket slot are freed). The record answers
//! segments as the Tcb did ([`TimeWait::input`](crate::tcp::TimeWait::input)), gives way to a newer
//! SYN (RFC 6191) or to an active open that reuses the port
//! (`tcp_tw_reuse`), is listed by `corestack ss`, and expires from a FIFO
//! in deadline order: O(expired) a tick, as every record lives the same
//! `time_wait`.
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `sockets`.

use crate::sockets::Socket;
use crate::tcp::twtable::TwRecord;
use crate::tcp::TwAction;
use crate::Protocols;
use core::net::{IpAddr, SocketAddr};
use nic::TxQueue;
use wire::tcp::TcpRepr;

impl<P: nic::Port> crate::Engine<P> {
    /// Connections in TIME-WAIT held as compact records now (both
    /// families; see `tcp_time_wait_entered` in [`crate::obs::stats::Stats`]).
    pub fn time_wait_records(&self) -> usize {
        self.protocols.time_wait_records()
    }
}

impl Protocols {
    /// TIME-WAIT records held, both families.
    pub(crate) fn time_wait_records(&self) -> usize {
        self.sockets.tw.len() + self.sockets.tw6.len()
    }

    /// Replaces the connection in `slot` by a TIME-WAIT record when it is
    /// in TIME-WAIT, its application let go (closed, or never accepted
    /// it) and it has nothing left to send. Returns true when it did.
    pub(crate) fn enter_time_wait_record(&mut self, slot: u32) -> bool {
        let Some(Some(Socket::Tcp(c))) = self.sockets.slots.get(slot as usize) else {
            return false;
        };
        if !(c.app_closed || c.unaccepted()) || c.tcb.has_output() {
            return false;
        }
        let Some(mut tw) = c.tcb.time_wait() else {
            return false;
        };
        tw.tclass = c.ip6.traffic_class(0);
        let (local, remote, owner) = (c.tcb.local(), c.tcb.remote(), c.owner);
        c.shared.set_closed(0);
        self.drop_conn(slot);
        let replaced = match (local.ip(), remote) {
            (IpAddr::V4(l), SocketAddr::V4(r)) => {
                let rec = TwRecord {
                    tw,
                    local: l,
                    owner,
                };
                self.sockets.tw.insert(*r.ip(), r.port(), local.port(), rec)
            }
            (IpAddr::V6(l), SocketAddr::V6(r)) => {
                let rec = TwRecord {
                    tw,
                    local: l,
                    owner,
                };
                self.sockets
                    .tw6
                    .insert(*r.ip(), r.port(), local.port(), rec)
            }
            _ => return true,
        };
        self.stats.tcp_time_wait_entered += 1;
        self.stats.tcp_time_wait_ended += u64::from(replaced);
        true
    }

    /// Expires the TIME-WAIT records due by now.
    pub(crate) fn expire_time_waits(&mut self) {
        let now = self.now;
        let n = self.sockets.tw.expire(now) + self.sockets.tw6.expire(now);
        self.stats.tcp_time_wait_ended += n as u64;
    }

    /// Takes the TIME-WAIT record of `remote` and local `port` out (a new
    /// incarnation takes the 4-tuple); true when there was one.
    pub(crate) fn end_time_wait(&mut self, remote: SocketAddr, port: u16) -> bool {
        let gone = match remote {
            SocketAddr::V4(r) => self.sockets.tw.remove(*r.ip(), r.port(), port),
            SocketAddr::V6(r) => self.sockets.tw6.remove(*r.ip(), r.port(), port),
        };
        self.stats.tcp_time_wait_ended += u64::from(gone);
        gone
    }

    /// A segment from `remote` to our `local` address that found no
    /// connection: handled by the flow's TIME-WAIT record if there is one
    /// (then true). A SYN a listener would take and the record accepts
    /// (RFC 6191) ends the record and is left to the listener (false).
    pub(crate) fn time_wait_segment<T: TxQueue>(
        &mut self,
        remote: SocketAddr,
        local: IpAddr,
        seg: &TcpRepr,
        plen: usize,
        tx: &mut T,
    ) -> bool {
        let (now, d) = (self.now, self.cfg.tcp.time_wait);
        let f = seg.flags;
        let port = seg.dst_port;
        let syn = f.syn() && !f.ack() && !f.rst();
        let socks = &mut self.sockets;
        let recycles = match remote {
            SocketAddr::V4(r) => {
                let to_listener = syn && socks.listeners.contains_key(&port);
                to_listener && socks.tw.accepts_syn(*r.ip(), r.port(), port, seg)
            }
            SocketAddr::V6(r) => {
                let to_listener = syn && socks.listeners6.contains_key(&port);
                to_listener && socks.tw6.accepts_syn(*r.ip(), r.port(), port, seg)
            }
        };
        if recycles {
            return self.recycle(remote, port);
        }
        let handled = match remote {
            SocketAddr::V4(r) => socks.tw.input((*r.ip(), r.port(), port), seg, plen, now, d),
            SocketAddr::V6(r) => socks
                .tw6
                .input((*r.ip(), r.port(), port), seg, plen, now, d),
        };
        let Some((action, tw)) = handled else {
            return false;
        };
        match action {
            TwAction::Ack | TwAction::AckRestarted => {
                let ack = tw.ack(port, remote.port(), now);
                let from = SocketAddr::new(local, port);
                if self.send_tcp_ctl(from, remote, &ack, tw.tclass, tx) {
                    self.stats.tcp_time_wait_acks += 1;
                }
            }
            TwAction::Close => self.stats.tcp_time_wait_ended += 1,
            TwAction::Drop => {}
        }
        true
    }

    /// RFC 6191: a newer SYN ends the record of `remote` and local `port`.
    fn recycle(&mut self, remote: SocketAddr, port: u16) -> bool {
        self.stats.tcp_time_wait_recycled += 1;
        self.end_time_wait(remote, port);
        false
    }
}
