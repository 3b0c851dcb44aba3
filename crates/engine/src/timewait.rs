//! TIME-WAIT without the connection (issue 23): once a connection is in
//! TIME-WAIT and its application let go of it, the engine keeps a
//! [`TwRecord`] in its family's [`TwTable`] instead of the whole `Conn`
//! (its Tcb, rings and socket slot are freed). The record answers
//! segments as the Tcb did ([`TimeWait::input`]), gives way to a newer
//! SYN (RFC 6191) or to an active open that reuses the port
//! (`tcp_tw_reuse`), is listed by `corestack ss`, and expires from a FIFO
//! in deadline order: O(expired) a tick, as every record lives the same
//! `time_wait`.

use crate::family::Family;
use crate::sockets::{Socket, Sockets};
use crate::tcp::{State, TimeWait, TwAction};
use crate::time::Instant;
use crate::Protocols;
use appif::command::Owner;
use core::net::{IpAddr, SocketAddr};
use nic::TxQueue;
use std::collections::{HashMap, VecDeque};
use wire::tcp::TcpRepr;

/// One connection in TIME-WAIT: the [`TimeWait`] state, our address and
/// the application it belonged to (for `ss`). 40 bytes for IPv4, 56 for
/// IPv6, plus the table's key (8 / 20 bytes) and FIFO entry (16 / 32).
#[derive(Debug, Clone, Copy)]
pub struct TwRecord<F> {
    /// What TIME-WAIT reads of the connection.
    pub tw: TimeWait,
    /// Our address of the connection.
    pub local: F,
    /// The application it belonged to.
    pub owner: Owner,
}

/// The TIME-WAIT records of one address family, by flow key, and a FIFO
/// of (deadline, key) in deadline order. A record restarted by a
/// retransmitted FIN gets a new FIFO entry; the old one is stale (its
/// deadline is no longer the record's) and skipped when it comes out.
pub struct TwTable<F: Family> {
    map: HashMap<F::FlowKey, TwRecord<F>>,
    fifo: VecDeque<(Instant, F::FlowKey)>,
}

impl<F: Family> Default for TwTable<F> {
    fn default() -> Self {
        TwTable {
            map: HashMap::new(),
            fifo: VecDeque::new(),
        }
    }
}

impl<F: Family> TwTable<F> {
    /// Records held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The record of the flow from `remote`:`remote_port` to our `local_port`.
    pub fn get(&self, remote: F, remote_port: u16, local_port: u16) -> Option<&TwRecord<F>> {
        self.map.get(&F::flow_key(remote, remote_port, local_port))
    }

    /// Files `rec` under its flow; true when it replaced a record there.
    pub fn insert(
        &mut self,
        remote: F,
        remote_port: u16,
        local_port: u16,
        rec: TwRecord<F>,
    ) -> bool {
        let key = F::flow_key(remote, remote_port, local_port);
        self.fifo.push_back((rec.tw.deadline, key));
        self.map.insert(key, rec).is_some()
    }

    /// Takes the flow's record out; true when there was one. Its FIFO
    /// entry goes stale.
    pub fn remove(&mut self, remote: F, remote_port: u16, local_port: u16) -> bool {
        self.map
            .remove(&F::flow_key(remote, remote_port, local_port))
            .is_some()
    }

    /// Removes the records whose deadline passed by `now`; returns how many.
    /// Looks only at due FIFO entries and the first one not due.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(&(at, key)) = self.fifo.front() {
            if at > now {
                break;
            }
            self.fifo.pop_front();
            if self.map.get(&key).is_some_and(|r| r.tw.deadline == at) {
                self.map.remove(&key);
                n += 1;
            }
        }
        if self.is_empty() && self.fifo.is_empty() && self.map.capacity() > 1024 {
            // Memory follows the load: a burst's table is given back.
            self.map = HashMap::new();
            self.fifo = VecDeque::new();
        }
        n
    }

    /// The earliest FIFO deadline (maybe a stale entry's), if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.fifo.front().map(|&(at, _)| at)
    }

    /// FIFO entries (records and stale entries): the positions `ss` visits.
    pub fn positions(&self) -> usize {
        self.fifo.len()
    }

    /// The record at FIFO position `i` with its remote address and our
    /// port, if that entry is the record's live one.
    pub fn at(&self, i: usize) -> Option<(SocketAddr, u16, &TwRecord<F>)> {
        let &(at, key) = self.fifo.get(i)?;
        let rec = self.map.get(&key).filter(|r| r.tw.deadline == at)?;
        let (remote, remote_port, local_port) = F::unflow_key(key);
        Some((remote.socket(remote_port), local_port, rec))
    }

    /// True when the flow has a record that accepts `seg` as the SYN of a
    /// new incarnation (RFC 6191 §2).
    fn accepts_syn(&self, remote: F, remote_port: u16, local_port: u16, seg: &TcpRepr) -> bool {
        self.get(remote, remote_port, local_port)
            .is_some_and(|rec| rec.tw.accepts_syn(seg))
    }

    /// Processes a segment of `plen` payload bytes from `remote`:`remote_port`
    /// to our `local_port` for the flow's record, if there is one: the action
    /// it asks for and the record's state after it (to build the ACK when
    /// it asks for one).
    fn input(
        &mut self,
        (remote, remote_port, local_port): (F, u16, u16),
        seg: &TcpRepr,
        plen: usize,
        now: Instant,
        time_wait: core::time::Duration,
    ) -> Option<(TwAction, TimeWait)> {
        let key = F::flow_key(remote, remote_port, local_port);
        let rec = self.map.get_mut(&key)?;
        let action = rec.tw.input(seg, plen, now, time_wait);
        let tw = rec.tw;
        match action {
            TwAction::AckRestarted => self.fifo.push_back((tw.deadline, key)),
            TwAction::Close => {
                self.map.remove(&key);
            }
            TwAction::Ack | TwAction::Drop => {}
        }
        Some((action, tw))
    }
}

impl<P: nic::Port> crate::Engine<P> {
    /// Connections in TIME-WAIT held as compact records now (both
    /// families; see `tcp_time_wait_entered` in [`crate::stats::Stats`]).
    pub fn time_wait_records(&self) -> usize {
        self.protocols.time_wait_records()
    }
}

impl Sockets {
    /// Positions of the TIME-WAIT records for `ss` (FIFO entries, IPv4's
    /// then IPv6's; some stale).
    pub(crate) fn time_wait_positions(&self) -> usize {
        self.tw.positions() + self.tw6.positions()
    }

    /// The `corestack ss` row of the record at position `i`, if it holds one.
    pub(crate) fn time_wait_row(&self, i: usize) -> Option<observe::stats_shm::ConnRow> {
        let n4 = self.tw.positions();
        if i < n4 {
            self.tw.at(i).map(|(r, port, rec)| tw_row(r, port, rec))
        } else {
            self.tw6
                .at(i - n4)
                .map(|(r, port, rec)| tw_row(r, port, rec))
        }
    }
}

/// The `corestack ss` row of a TIME-WAIT record.
fn tw_row<F: Family>(
    remote: SocketAddr,
    local_port: u16,
    rec: &TwRecord<F>,
) -> observe::stats_shm::ConnRow {
    observe::stats_shm::ConnRow {
        local: rec.local.socket(local_port),
        remote,
        state: State::TimeWait.published(),
        owner: rec.owner.0,
        rcv_wnd: rec.tw.rcv_wnd,
        ..Default::default()
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

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    /// What a record costs before its table's entry: the TCP state, our
    /// address and its owner.
    #[test]
    fn records_are_compact() {
        let sizes = (
            core::mem::size_of::<TimeWait>(),
            core::mem::size_of::<TwRecord<Ipv4Addr>>(),
            core::mem::size_of::<TwRecord<Ipv6Addr>>(),
        );
        eprintln!("TimeWait, IPv4 and IPv6 records: {sizes:?} bytes");
        assert!(sizes.0 <= 32 && sizes.1 <= 40 && sizes.2 <= 56, "{sizes:?}");
    }

    /// Expiry looks at due entries only; a restarted record's old entry is
    /// stale and skipped, its new one expires it.
    #[test]
    fn expiry_follows_the_fifo_and_skips_stale_entries() {
        let mut t = TwTable::<Ipv4Addr>::default();
        let tw = |at: u64| TimeWait {
            snd_nxt: wire::SeqNum(1),
            rcv_nxt: wire::SeqNum(1),
            rcv_wnd: 0,
            window: 0,
            ts: false,
            ts_recent: 0,
            ts_offset: 0,
            tclass: 0,
            deadline: Instant(at),
        };
        let ip = Ipv4Addr::new(10, 0, 0, 2);
        let rec = |at| TwRecord {
            tw: tw(at),
            local: ip,
            owner: Owner(0),
        };
        for p in 0..3u16 {
            assert!(!t.insert(ip, 80, 1000 + p, rec(10 + u64::from(p))));
        }
        // The first one restarted to 20: its entry at 10 goes stale.
        let key = Ipv4Addr::flow_key(ip, 80, 1000);
        t.map.get_mut(&key).unwrap().tw.deadline = Instant(20);
        t.fifo.push_back((Instant(20), key));
        assert_eq!(t.expire(Instant(9)), 0);
        assert_eq!(
            t.expire(Instant(11)),
            1,
            "the second, not the restarted first"
        );
        assert!(t.get(ip, 80, 1000).is_some() && t.get(ip, 80, 1001).is_none());
        assert_eq!(t.positions(), 2);
        assert!(t.at(0).is_some_and(|(r, p, _)| r.port() == 80 && p == 1002));
        assert_eq!(t.expire(Instant(20)), 2);
        assert!(t.is_empty() && t.positions() == 0);
    }
}
