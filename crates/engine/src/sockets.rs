//! The socket table: TCP connections, listeners and UDP sockets, the flow
//! table that finds them by 4-tuple; `events` applies what TCP reports to
//! them.

use crate::config::EPHEMERAL;
use crate::ip::family::Family;
use crate::tcp::twtable::TwTable;
use crate::tcp::Tcb;
use crate::time::Instant;
use appif::bytes;
use appif::command::Owner;
use appif::seg::AcceptQueue;
use appif::socket::{ReusePort, SockId, StatusHandle};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::collections::HashMap;
use std::sync::Arc;

/// A TCP connection and the engine's ends of its rings.
pub struct Conn {
    /// The application's id for the socket (engine-assigned on accept).
    pub id: SockId,
    /// The application it belongs to (its listener's, when accepted).
    pub owner: Owner,
    /// The socket's status block, written by the engine.
    pub shared: Arc<StatusHandle>,
    /// The TCP state machine of the connection (RFC 9293 §3.3.1).
    pub tcb: Tcb,
    /// Bytes the application wrote; consumed as they are acknowledged.
    pub tx: bytes::Reader,
    /// In-order received bytes for the application.
    pub rx: bytes::Writer,
    /// The application's ends, until the connection is accepted (boxed:
    /// an accepted connection does not carry their room).
    pub app_ends: Option<Box<(bytes::Writer, bytes::Reader)>>,
    /// The listener slot of a passive connection not yet accepted.
    pub listener: Option<u32>,
    /// The application closed its handle.
    pub app_closed: bool,
    /// The deadline the wheel holds for this slot, if any.
    pub timer_at: Option<Instant>,
    /// Queued on the output list.
    pub dirty: bool,
    /// How far its rings have grown (auto-tuning), against the budget.
    pub growth: RingGrowth,
    /// IPv4 addresses reach the application as IPv4-mapped IPv6 (a
    /// connection accepted by a dual-stack listener, RFC 3493 §3.7).
    pub mapped: bool,
    /// The IPv6 flow label of its packets (RFC 6437: a keyed hash of the
    /// 4-tuple, 20 bits); 0 for IPv4.
    pub flow_label: u32,
    /// The generation of its family's path MTU table ([`crate::ip::pmtu::PmtuTable::generation`])
    /// that its MSS last took into account.
    pub pmtu_gen: u32,
    /// Its IPv6 Traffic Class and Hop Limit (IPV6_TCLASS,
    /// IPV6_UNICAST_HOPS; inherited from its listener).
    pub ip6: Ip6Header,
    /// The part of the TCB's counters already added to the engine's
    /// ([`crate::obs::stats::Stats::fold_tcb`]): the engine's totals stay
    /// current without a pass over every connection.
    pub counted: crate::tcp::TcbStats,
    /// The status block it had before a forked child took it over
    /// (`Command::Adopt`), kept until the connection goes: its rings live
    /// in that slot, which must not be reused before.
    pub former: Option<Arc<StatusHandle>>,
}

/// What a connection's rings have grown by, counted against its
/// application's budget ([`Sockets::growth_limit`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct RingGrowth {
    /// The TX ring size offered to the application, bytes (0: none beyond
    /// its starting size).
    pub tx_grant: usize,
    /// Bytes of ring capacity beyond the starting sizes counted against
    /// the application's budget.
    pub counted: usize,
}

impl Conn {
    /// A passive connection not yet handed to its application.
    pub fn unaccepted(&self) -> bool {
        self.app_ends.is_some() || self.listener.is_some()
    }
}

/// A listening TCP socket.
pub struct Listener {
    /// The application's id for the socket (engine-assigned on accept).
    pub id: SockId,
    /// The application it belongs to; the connections it accepts too.
    pub owner: Owner,
    /// The socket's status block, written by the engine.
    pub shared: Arc<StatusHandle>,
    /// The address and port it listens on (IPv4 or IPv6).
    pub local: SocketAddr,
    /// IPV6_V6ONLY of a listener on an IPv6 address: false (Linux's
    /// default) lets one on `::` accept IPv4 too.
    pub v6only: bool,
    /// Where accepted connections go to the application.
    pub accept: AcceptQueue,
    /// Connections in SYN-RECEIVED or waiting in the accept queue.
    pub pending: usize,
    /// Largest `pending`.
    pub backlog: usize,
    /// SO_RCVBUF / SO_SNDBUF for the connections it accepts (0: default).
    pub buffers: (usize, usize),
    /// The IPv6 header fields of the connections it accepts.
    pub ip6: Ip6Header,
    /// A shared listener (service mode: a pre-forking server's workers
    /// joined their parent's listener): on the group's head, the socket
    /// its port maps to, the slots of the other members; empty otherwise.
    pub members: Vec<u32>,
    /// On a member other than the head: the head's slot.
    pub head: Option<u32>,
    /// On the head: where the next choice among equally good members
    /// starts (round robin).
    pub turn: u32,
    /// Its application is gone but the listener stays, for the processes
    /// that share its port (a daemonizing server's parent exited before its
    /// workers joined): it takes no connection, so a SYN goes to a member
    /// that accepts, or is dropped (the client sends it again) while none
    /// has joined yet.
    pub orphaned: bool,
    /// SO_REUSEPORT, if it was set when it started listening: on a group's
    /// head, the group is a SO_REUSEPORT group (members picked by a hash
    /// of the peer, home members first).
    pub reuseport: Option<ReusePort>,
}

/// A bound UDP socket.
pub struct UdpSock {
    /// The application's id for the socket (engine-assigned on accept).
    pub id: SockId,
    /// The application it belongs to.
    pub owner: Owner,
    /// The socket's status block, written by the engine.
    pub shared: Arc<StatusHandle>,
    /// The address and port it is bound to (IPv4 or IPv6).
    pub local: SocketAddr,
    /// IPV6_V6ONLY, as for [`Listener::v6only`].
    pub v6only: bool,
    /// Datagram records the application wrote, to send.
    pub tx: bytes::Reader,
    /// Datagram records received, for the application.
    pub rx: bytes::Writer,
    /// Its IPv6 Traffic Class and Hop Limit.
    pub ip6: Ip6Header,
    /// The status block it had before a forked child took it over
    /// (`Command::Adopt`), kept until the socket goes (as [`Conn::former`]).
    pub former: Option<Arc<StatusHandle>>,
}

/// A socket's own IPv6 header fields: IPV6_TCLASS and IPV6_UNICAST_HOPS
/// (RFC 3542 §6.5, RFC 3493 §5.1). The default: class 0, hop limit 64.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ip6Header {
    /// Traffic Class; its two ECN bits are the engine's (RFC 3168 §5).
    pub tclass: u8,
    /// Hop Limit; 0: the default ([`crate::ip::egress6::HOP_LIMIT`]).
    pub hop_limit: u8,
}

impl Ip6Header {
    /// The Traffic Class of a packet with ECN codepoint `ecn` (two bits).
    pub fn traffic_class(self, ecn: u8) -> u8 {
        (self.tclass & !0b11) | (ecn & 0b11)
    }

    /// The Hop Limit of a unicast packet.
    pub fn hop_limit(self) -> u8 {
        if self.hop_limit == 0 {
            crate::ip::egress6::HOP_LIMIT
        } else {
            self.hop_limit
        }
    }
}

pub enum Socket {
    /// A TCP connection, in any state from SYN-SENT/SYN-RECEIVED to TIME-WAIT.
    Tcp(Box<Conn>),
    /// A TCP listener (boxed, as all three: a slot of the table costs a
    /// pointer and a tag, whatever it holds).
    Listener(Box<Listener>),
    /// A bound UDP socket.
    Udp(Box<UdpSock>),
}

impl Socket {
    /// The status block of a connection or UDP socket, and the one it had
    /// before it was taken over (`Command::Adopt`); None for a listener.
    pub fn handles_mut(
        &mut self,
    ) -> Option<(&mut Arc<StatusHandle>, &mut Option<Arc<StatusHandle>>)> {
        match self {
            Socket::Tcp(c) => Some((&mut c.shared, &mut c.former)),
            Socket::Udp(u) => Some((&mut u.shared, &mut u.former)),
            Socket::Listener(_) => None,
        }
    }

    /// The socket's id, whatever its kind.
    pub fn id(&self) -> SockId {
        match self {
            Socket::Tcp(c) => c.id,
            Socket::Listener(l) => l.id,
            Socket::Udp(u) => u.id,
        }
    }

    /// The application the socket belongs to, whatever its kind.
    pub fn owner(&self) -> Owner {
        match self {
            Socket::Tcp(c) => c.owner,
            Socket::Listener(l) => l.owner,
            Socket::Udp(u) => u.owner,
        }
    }

    /// The socket's status block, whatever its kind.
    pub fn shared(&self) -> &Arc<StatusHandle> {
        match self {
            Socket::Tcp(c) => &c.shared,
            Socket::Listener(l) => &l.shared,
            Socket::Udp(u) => &u.shared,
        }
    }
}

/// Where an address family's tables sit in [`Sockets`]: its TCP flow table
/// and its port tables. Beside the tables, so that [`Family`] names nothing
/// of the socket table; dispatched statically as `Family` is.
pub trait FamilyTables: Family {
    /// The family's TCP flow table in `sockets`.
    fn flows(sockets: &Sockets) -> &FlowTable<Self>;

    /// The family's port table `which` in `sockets` (local port → slot).
    fn ports(sockets: &Sockets, which: Ports) -> &HashMap<u16, u32>;
}

impl FamilyTables for Ipv4Addr {
    #[inline]
    fn flows(sockets: &Sockets) -> &FlowTable<Self> {
        &sockets.flows
    }

    #[inline]
    fn ports(sockets: &Sockets, which: Ports) -> &HashMap<u16, u32> {
        sockets.ports(which)
    }
}

impl FamilyTables for Ipv6Addr {
    #[inline]
    fn flows(sockets: &Sockets) -> &FlowTable<Self> {
        &sockets.flows6
    }

    #[inline]
    fn ports(sockets: &Sockets, which: Ports) -> &HashMap<u16, u32> {
        sockets.ports6(which)
    }
}

/// The TCP flow table of one address family `F`: (remote address,
/// remote port, local port) → slot. One implementation, two instances
/// ([`Sockets::flows`], [`Sockets::flows6`]), each with its family's key.
pub struct FlowTable<F: Family> {
    map: HashMap<F::FlowKey, u32>,
}

impl<F: Family> FlowTable<F> {
    /// An empty table with room for `n` flows.
    pub fn with_capacity(n: usize) -> Self {
        FlowTable {
            map: HashMap::with_capacity(n),
        }
    }

    /// The slot of the connection from `remote`:`remote_port` to our
    /// `local_port`.
    #[inline]
    pub fn get(&self, remote: F, remote_port: u16, local_port: u16) -> Option<u32> {
        self.map
            .get(&F::flow_key(remote, remote_port, local_port))
            .copied()
    }

    /// Files `slot` under the flow; returns the slot it replaced.
    pub fn insert(
        &mut self,
        remote: F,
        remote_port: u16,
        local_port: u16,
        slot: u32,
    ) -> Option<u32> {
        self.map
            .insert(F::flow_key(remote, remote_port, local_port), slot)
    }

    /// Takes the flow out if it names `slot`.
    pub fn remove_slot(&mut self, remote: F, remote_port: u16, local_port: u16, slot: u32) {
        let key = F::flow_key(remote, remote_port, local_port);
        if self.map.get(&key) == Some(&slot) {
            self.map.remove(&key);
        }
    }
}

/// Which families a socket bound to `local` receives: (IPv4, IPv6). An
/// IPv4 socket only IPv4; an IPv6 one IPv6, and IPv4 too when it is on the
/// unspecified address `::` without IPV6_V6ONLY (RFC 3493 §5.3, Linux).
pub fn families(local: SocketAddr, v6only: bool) -> (bool, bool) {
    match local {
        SocketAddr::V4(_) => (true, false),
        SocketAddr::V6(a) => (!v6only && a.ip().is_unspecified(), true),
    }
}

/// The port tables of [`Sockets`] a bound socket is found by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ports {
    /// `Sockets::listeners`.
    Listeners,
    /// `Sockets::udp`.
    Udp,
}

/// Every socket, by slot, with the indexes that find them.
pub struct Sockets {
    /// Every socket by engine slot; `None` for a free slot. It grows on
    /// demand up to `max` entries: its length is the most sockets open at
    /// once so far, never the configured capacity.
    pub slots: Vec<Option<Socket>>,
    /// Free slots below `slots.len()`.
    free: Vec<u32>,
    /// The most sockets the table holds (`EngineConfig::max_sockets`).
    max: usize,
    /// 4-tuple → slot of TCP connections over IPv4 (an 8-byte key).
    pub flows: FlowTable<Ipv4Addr>,
    /// 4-tuple → slot of TCP connections over IPv6 (a 20-byte key).
    pub flows6: FlowTable<Ipv6Addr>,
    /// TIME-WAIT records of IPv4 connections the engine let go of
    /// ([`crate::tcp::tw_records`]): no slot, no Conn.
    pub tw: TwTable<Ipv4Addr>,
    /// TIME-WAIT records of IPv6 connections.
    pub tw6: TwTable<Ipv6Addr>,
    /// Local port → slot of listeners that take IPv4 SYNs.
    pub listeners: HashMap<u16, u32>,
    /// Local port → slot of listeners that take IPv6 SYNs (a dual-stack
    /// listener is in both tables).
    pub listeners6: HashMap<u16, u32>,
    /// Local port → slot of UDP sockets receiving IPv4.
    pub udp: HashMap<u16, u32>,
    /// Local port → slot of UDP sockets receiving IPv6.
    pub udp6: HashMap<u16, u32>,
    /// Application socket id → slot.
    pub ids: HashMap<SockId, u32>,
    /// Ring capacity each application (service-mode association, 0 for
    /// this process's) may add by growing its connections' rings, bytes.
    pub growth_limit: usize,
    /// Ring capacity added so far per application, bytes.
    pub growth_used: HashMap<Owner, usize>,
    next_engine_id: u64,
    next_ephemeral: u16,
    /// First and last port of active opens (`EngineConfig::ephemeral_ports`).
    pub ephemeral: (u16, u16),
}

/// Slots the table allocates for at start; it grows from there.
pub const INITIAL_SLOTS: usize = 1024;

impl Sockets {
    /// The port table `which`: local port -> slot.
    /// Whether the listener in `slot` takes a SYN sent to our address
    /// `local`: bound to the wildcard of its family, or to `local` itself
    /// (an IPv4-mapped address standing for the IPv4 one). A listener on
    /// one of our IPv6 addresses does not take SYNs to another one (the
    /// global and the link-local), as on Linux.
    pub fn listener_takes(&self, slot: u32, local: IpAddr) -> bool {
        match self.slots.get(slot as usize) {
            Some(Some(Socket::Listener(l))) => {
                let bound = appif::socket::from_mapped(l.local).ip();
                bound.is_unspecified() || bound == local
            }
            _ => false,
        }
    }

    /// The IPv4 port table `which`: local port -> slot.
    pub fn ports(&self, which: Ports) -> &HashMap<u16, u32> {
        match which {
            Ports::Listeners => &self.listeners,
            Ports::Udp => &self.udp,
        }
    }

    /// The IPv6 port table `which`: local port -> slot.
    pub fn ports6(&self, which: Ports) -> &HashMap<u16, u32> {
        match which {
            Ports::Listeners => &self.listeners6,
            Ports::Udp => &self.udp6,
        }
    }

    /// Both families' port tables `which` ([`Sockets::ports`],
    /// [`Sockets::ports6`]), to change: (IPv4, IPv6).
    fn ports_mut(&mut self, which: Ports) -> [&mut HashMap<u16, u32>; 2] {
        match which {
            Ports::Listeners => [&mut self.listeners, &mut self.listeners6],
            Ports::Udp => [&mut self.udp, &mut self.udp6],
        }
    }

    /// True when port `port` of table `which` is taken for a socket that
    /// receives the families `fam` (IPv4, IPv6).
    pub fn port_taken(&self, which: Ports, port: u16, fam: (bool, bool)) -> bool {
        (fam.0 && self.ports(which).contains_key(&port))
            || (fam.1 && self.ports6(which).contains_key(&port))
    }

    /// Registers `slot` under `port` in the tables of families `fam`.
    pub fn register_port(&mut self, which: Ports, port: u16, fam: (bool, bool), slot: u32) {
        for (on, table) in [fam.0, fam.1].into_iter().zip(self.ports_mut(which)) {
            if on {
                table.insert(port, slot);
            }
        }
    }

    /// Takes `slot` out of both port tables `which` under `port`.
    fn unregister_port(&mut self, which: Ports, port: u16, slot: u32) {
        for table in self.ports_mut(which) {
            if table.get(&port) == Some(&slot) {
                table.remove(&port);
            }
        }
    }

    /// The slot of the TCP connection to `remote` from local port `port`.
    pub fn flow(&self, remote: SocketAddr, port: u16) -> Option<u32> {
        match remote {
            SocketAddr::V4(r) => self.flows.get(*r.ip(), r.port(), port),
            SocketAddr::V6(r) => self.flows6.get(*r.ip(), r.port(), port),
        }
    }

    /// Files the TCP connection in `slot` under `remote` and local `port`.
    pub fn insert_flow(&mut self, remote: SocketAddr, port: u16, slot: u32) {
        match remote {
            SocketAddr::V4(r) => self.flows.insert(*r.ip(), r.port(), port, slot),
            SocketAddr::V6(r) => self.flows6.insert(*r.ip(), r.port(), port, slot),
        };
    }

    /// An empty table for at most `max` sockets; it allocates for
    /// [`INITIAL_SLOTS`] and grows as sockets are opened.
    pub fn new(max: usize) -> Sockets {
        let initial = max.min(INITIAL_SLOTS);
        Sockets {
            slots: Vec::with_capacity(initial),
            free: Vec::with_capacity(initial),
            max,
            flows: FlowTable::with_capacity(initial),
            flows6: FlowTable::with_capacity(0),
            tw: TwTable::default(),
            tw6: TwTable::default(),
            listeners: HashMap::with_capacity(64),
            listeners6: HashMap::new(),
            udp: HashMap::with_capacity(64),
            udp6: HashMap::new(),
            ids: HashMap::with_capacity(initial),
            growth_limit: usize::MAX,
            growth_used: HashMap::new(),
            next_engine_id: appif::socket::ENGINE_ID_BIT | 1,
            next_ephemeral: EPHEMERAL.0,
            ephemeral: EPHEMERAL,
        }
    }

    /// Numbers the sockets this engine creates as engine `index`'s.
    pub fn set_engine_index(&mut self, index: usize) {
        self.next_engine_id = appif::socket::with_engine(self.next_engine_id, index);
    }

    /// A fresh id for a socket the engine creates.
    pub fn engine_id(&mut self) -> SockId {
        let id = self.next_engine_id;
        self.next_engine_id += 1;
        id
    }

    /// Stores `sock` under `id`; None when the table is full or `id` is
    /// taken (an application reusing a socket it has not closed).
    pub fn insert(&mut self, id: SockId, sock: Socket) -> Option<u32> {
        if self.ids.contains_key(&id) {
            return None;
        }
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None if self.slots.len() < self.max => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
            None => return None,
        };
        self.slots[slot as usize] = Some(sock);
        self.ids.insert(id, slot);
        Some(slot)
    }

    /// Removes the socket in `slot` and every index entry naming it.
    pub fn remove(&mut self, slot: u32) -> Option<Socket> {
        let sock = self.slots.get_mut(slot as usize)?.take()?;
        match &sock {
            Socket::Tcp(c) => {
                let port = c.tcb.local().port();
                match c.tcb.remote() {
                    SocketAddr::V4(r) => self.flows.remove_slot(*r.ip(), r.port(), port, slot),
                    SocketAddr::V6(r) => self.flows6.remove_slot(*r.ip(), r.port(), port, slot),
                }
                self.ids.remove(&c.id);
                if c.growth.counted > 0 {
                    if let Some(used) = self.growth_used.get_mut(&c.owner) {
                        *used = used.saturating_sub(c.growth.counted);
                    }
                }
            }
            Socket::Listener(l) => {
                // A member of a shared listener other than its head does
                // not hold the port (see `Protocols::leave_group`).
                self.unregister_port(Ports::Listeners, l.local.port(), slot);
                self.ids.remove(&l.id);
            }
            Socket::Udp(u) => {
                self.unregister_port(Ports::Udp, u.local.port(), slot);
                self.ids.remove(&u.id);
            }
        }
        self.free.push(slot);
        Some(sock)
    }

    /// Files the connection or UDP socket in `slot` under `id` and `owner`
    /// instead of its id and owner until now (a forked child took it
    /// over): a connection's ring growth moves to the new owner's budget.
    /// False when `id` is taken or `slot` holds neither.
    pub fn rekey(&mut self, slot: u32, id: SockId, owner: Owner) -> bool {
        if self.ids.contains_key(&id) {
            return false;
        }
        let (from, before, counted) = match self.slots.get_mut(slot as usize) {
            Some(Some(Socket::Tcp(c))) => (
                std::mem::replace(&mut c.id, id),
                std::mem::replace(&mut c.owner, owner),
                c.growth.counted,
            ),
            Some(Some(Socket::Udp(u))) => (
                std::mem::replace(&mut u.id, id),
                std::mem::replace(&mut u.owner, owner),
                0,
            ),
            _ => return false,
        };
        self.ids.remove(&from);
        self.ids.insert(id, slot);
        if counted > 0 {
            if let Some(used) = self.growth_used.get_mut(&before) {
                *used = used.saturating_sub(counted);
            }
            *self.growth_used.entry(owner).or_default() += counted;
        }
        true
    }

    /// The status blocks of the connection or UDP socket in `slot` (see
    /// [`Socket::handles_mut`]).
    pub fn handles_mut(
        &mut self,
        slot: u32,
    ) -> Option<(&mut Arc<StatusHandle>, &mut Option<Arc<StatusHandle>>)> {
        self.slots.get_mut(slot as usize)?.as_mut()?.handles_mut()
    }

    /// True when no slot is free and the table is at its limit.
    pub fn is_full(&self) -> bool {
        self.free.is_empty() && self.slots.len() >= self.max
    }

    /// The TCP connection in `slot`.
    pub fn conn(&mut self, slot: u32) -> Option<&mut Conn> {
        match self.slots.get_mut(slot as usize) {
            Some(Some(Socket::Tcp(c))) => Some(c),
            _ => None,
        }
    }

    /// An ephemeral port free for `in_use`; None when the range is exhausted.
    pub fn ephemeral_port(&mut self, in_use: impl Fn(&Sockets, u16) -> bool) -> Option<u16> {
        let (lo, hi) = self.ephemeral;
        let span = hi.saturating_sub(lo).saturating_add(1);
        for _ in 0..span {
            let p = if (lo..=hi).contains(&self.next_ephemeral) {
                self.next_ephemeral
            } else {
                lo
            };
            self.next_ephemeral = if p >= hi { lo } else { p + 1 };
            if !in_use(self, p) {
                return Some(p);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One implementation, two instances: an IPv4 and an IPv6 flow with the
    /// same ports stay apart, each found by its own family's key, and a
    /// slot's removal leaves a flow filed since under another slot.
    #[test]
    fn flow_tables_of_both_families_keep_their_flows_apart() {
        let mut s = Sockets::new(16);
        let v4: SocketAddr = "10.0.0.1:40000".parse().unwrap();
        let v6: SocketAddr = "[fd00::1]:40000".parse().unwrap();
        s.insert_flow(v4, 80, 3);
        s.insert_flow(v6, 80, 4);
        assert_eq!(s.flow(v4, 80), Some(3));
        assert_eq!(s.flow(v6, 80), Some(4));
        assert_eq!(s.flow(v4, 81), None);
        assert_eq!(s.flow("10.0.0.1:40001".parse().unwrap(), 80), None);
        assert_eq!(s.flow("[fd00::2]:40000".parse().unwrap(), 80), None);
        let ip4: Ipv4Addr = "10.0.0.1".parse().unwrap();
        assert_eq!(s.flows.get(ip4, 40000, 80), Some(3));
        // A new connection took the 4-tuple: the old slot's removal keeps it.
        assert_eq!(s.flows.insert(ip4, 40000, 80, 5), Some(3));
        s.flows.remove_slot(ip4, 40000, 80, 3);
        assert_eq!(s.flow(v4, 80), Some(5));
        s.flows.remove_slot(ip4, 40000, 80, 5);
        assert_eq!(s.flow(v4, 80), None);
        assert_eq!(s.flow(v6, 80), Some(4));
    }
}
