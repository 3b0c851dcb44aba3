//! The table of TIME-WAIT records of one address family (issue 23): a
//! [`TwRecord`] per flow in place of its `Conn`, and a FIFO of deadlines
//! that expires them in O(expired) a tick. The socket table holds one per
//! family; what the engine does with them is `tw_records`'s.

use crate::ip::family::Family;
use crate::tcp::{TimeWait, TwAction};
use crate::time::Instant;
use appif::command::Owner;
use core::net::SocketAddr;
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
    pub(crate) fn accepts_syn(
        &self,
        remote: F,
        remote_port: u16,
        local_port: u16,
        seg: &TcpRepr,
    ) -> bool {
        self.get(remote, remote_port, local_port)
            .is_some_and(|rec| rec.tw.accepts_syn(seg))
    }

    /// Processes a segment of `plen` payload bytes from `remote`:`remote_port`
    /// to our `local_port` for the flow's record, if there is one: the action
    /// it asks for and the record's state after it (to build the ACK when
    /// it asks for one).
    pub(crate) fn input(
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
