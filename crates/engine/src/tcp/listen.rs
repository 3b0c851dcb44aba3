//! Passive open (RFC 9293 §3.10.7.2): a SYN for a listener becomes a
//! connection in SYN-RECEIVED, bounded by the listener's backlog and the
//! socket table; when the backlog is full, SYN cookies (RFC 4987 §3.6)
//! answer without keeping state, and a returning ACK that carries a valid
//! cookie creates the connection then. Established connections are handed
//! to the listener's application by `events`.
//!
//! Shared listeners (service mode, a pre-forking server): a forked child
//! joins its parent's listener (`Command::JoinListener`) and becomes one
//! more member of a group; the port maps to the group's head. Each SYN
//! picks one member ([`Protocols::pick_member`]), whose segment gives the
//! connection its rings and whose accept queue receives it: a member with
//! a waiter armed (a thread blocked in accept, or asleep in epoll/poll/
//! select: the notify flags say so) first, then members that have
//! accepted before, by shortest queue; a member that never accepted (a
//! master that only waits for its workers) only when no other can take
//! it. A member that closes (or whose process ends) leaves the group; the
//! connections it had not handed over are reset, as Linux resets a closed
//! listener's queue; the port stays bound until the last member goes.
//!
//! SO_REUSEPORT groups ([`Protocols::join_reuseport`]): an application's
//! listeners that all set SO_REUSEPORT on one address and port form a group
//! the same way, and a SYN picks its member by a hash of the peer's address
//! and port, among the members on their home engine first
//! ([`Protocols::pick_reuseport`]).
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `egress`, `sockets`, `ip6`, `isn`, `cookies`.

use crate::sockets::{Conn, Listener, Socket};
use crate::tcp::Tcb;
use crate::Protocols;
use appif::command::Owner;
use appif::errno;
use appif::seg::AcceptQueue;
use appif::socket::{ReusePort, SockId, SockState, StatusHandle};
use core::net::{IpAddr, SocketAddr};
use nic::TxQueue;
use std::sync::Arc;
use wire::tcp::TcpRepr;

impl Protocols {
    /// A SYN for a listener: a new connection in SYN-RECEIVED, bounded by
    /// the listener's backlog and the socket table.
    /// `local`: our address and port the SYN came to.
    pub(crate) fn passive_open<T: TxQueue>(
        &mut self,
        lslot: u32,
        local: SocketAddr,
        remote: SocketAddr,
        syn: &TcpRepr,
        tx: &mut T,
    ) {
        let lslot = self.pick_member(lslot, remote);
        let Some(Some(Socket::Listener(l))) = self.sockets.slots.get_mut(lslot as usize) else {
            return;
        };
        if l.orphaned || l.accept.len() >= l.accept.capacity() {
            // The application is not taking its connections: drop the SYN, as
            // Linux does (sk_acceptq_is_full, ListenOverflows); the client
            // sends it again. A handshake completed into a full queue would
            // have to be reset.
            self.stats.drop_tcp_accept_queue_full += 1;
            return;
        }
        // Every handshake under way must find room in the accept queue when
        // it completes (Linux checks it at the SYN and again at the ACK).
        if l.pending >= l.backlog || l.accept.len() + l.pending >= l.accept.capacity() {
            if self.cfg.syn_cookies {
                self.send_cookie_synack(local, remote, syn, tx);
            } else {
                self.stats.drop_tcp_backlog_full += 1;
            }
            return;
        }
        if self.sockets.is_full() || !self.routable(remote.ip()) {
            self.stats.drop_tcp_table_full += 1;
            return;
        }
        let iss = self.isn.isn(local, remote, self.now);
        self.new_passive(lslot, local, remote, syn, iss);
    }

    /// True when packets to `ip` have a next hop (IPv6: only with IPv6 on).
    pub(crate) fn routable(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.egress.next_hop(a).is_some(),
            IpAddr::V6(a) => self.ip6.as_ref().is_some_and(|e6| e6.next_hop(a).is_some()),
        }
    }

    /// The MSS we offer a connection to `remote`, bytes: the configured
    /// one, and at most the path MTU less the IP and TCP headers (40 bytes
    /// over IPv4, 60 over IPv6; RFC 1191 §3, RFC 8200 §5, RFC 9293 §3.7.1).
    pub(crate) fn mss_for(&self, remote: SocketAddr) -> u16 {
        let m = match remote.ip() {
            IpAddr::V4(a) => self.egress.path_mtu(a, self.now).saturating_sub(40),
            IpAddr::V6(a) => self.pmtu_v6(a).saturating_sub(60),
        };
        self.cfg.tcp.mss.min(u16::try_from(m).unwrap_or(u16::MAX))
    }

    /// The generation of `remote`'s family's path MTU table (0 while IPv6
    /// is off), for a new connection's [`crate::sockets::Conn::pmtu_gen`]:
    /// its MSS comes from [`Protocols::mss_for`] at this generation.
    pub(crate) fn pmtu_generation(&self, remote: SocketAddr) -> u32 {
        match remote.ip() {
            IpAddr::V4(_) => self.egress.pmtu.generation(),
            IpAddr::V6(_) => self.ip6.as_ref().map_or(0, |e6| e6.pmtu.generation()),
        }
    }

    /// A connection in SYN-RECEIVED for `syn` with our ISN `iss`, owned by
    /// the listener in `lslot` until accepted. Returns its slot.
    fn new_passive(
        &mut self,
        lslot: u32,
        local: SocketAddr,
        remote: SocketAddr,
        syn: &TcpRepr,
        iss: wire::SeqNum,
    ) -> Option<u32> {
        // Only a plain SYN opens a connection (before any ring is taken).
        let f = syn.flags;
        if !f.syn() || f.rst() || f.ack() || f.fin() {
            return None;
        }
        // The rings come from where the listener's application lives.
        let (owner, buffers, mapped, ip6) = match self.sockets.slots.get(lslot as usize) {
            Some(Some(Socket::Listener(l))) => (
                l.owner,
                l.buffers,
                l.local.is_ipv6() && remote.is_ipv4(),
                l.ip6,
            ),
            _ => (Owner::LOCAL, (0, 0), false, Default::default()),
        };
        let segment = match self.sockets.slots.get_mut(lslot as usize) {
            Some(Some(Socket::Listener(l))) => match &mut l.accept {
                AcceptQueue::AppSegment(a) => Some(a),
                AcceptQueue::Local(_) => None,
            },
            _ => None,
        };
        let (id, shared, eng_tx, eng_rx, app_ends) = match segment {
            Some(a) => {
                let Some(c) = a.claim() else {
                    self.stats.drop_tcp_backlog_full += 1;
                    return None;
                };
                (c.id, c.shared, c.tx, c.rx, None)
            }
            None => {
                let (init, max) = (self.cfg.ring_bytes, self.cfg.ring_max_bytes);
                let (app_tx, eng_tx) = appif::bytes::growable_ring(init, max);
                let (eng_rx, app_rx) = appif::bytes::growable_ring(init, max);
                let id = self.sockets.engine_id();
                let shared = appif::socket::StatusHandle::local();
                (id, shared, eng_tx, eng_rx, Some(Box::new((app_tx, app_rx))))
            }
        };
        let mut cfg = self.cfg.tcp.clone();
        cfg.mss = self.mss_for(remote);
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
            owner,
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
            mapped,
            pmtu_gen: self.pmtu_generation(remote),
            flow_label: if remote.is_ipv6() {
                self.isn.flow_label(local, remote)
            } else {
                0
            },
            ip6,
            counted: Default::default(),
            former: None,
        };
        if let Some(Some(Socket::Listener(l))) = self.sockets.slots.get_mut(lslot as usize) {
            l.pending += 1;
        }
        let slot = self.sockets.insert(id, Socket::Tcp(Box::new(conn)))?;
        self.sockets.insert_flow(remote, syn.dst_port, slot);
        self.stats.tcp_passive_opens += 1;
        self.mark_dirty(slot);
        self.arm_timer(slot);
        Some(slot)
    }

    /// Answers a SYN without keeping state: the SYN-ACK's ISN is a cookie
    /// (RFC 4987 §3.6) carrying the MSS; no window scale, SACK or timestamps.
    fn send_cookie_synack<T: TxQueue>(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        syn: &TcpRepr,
        tx: &mut T,
    ) {
        let our_mss = self.mss_for(remote);
        let peer_mss = syn.options.mss.unwrap_or(536).min(our_mss);
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
        synack.options.mss = Some(our_mss);
        if self.send_tcp_ctl(local, remote, &synack, 0, tx) {
            self.stats.tcp_syncookies_sent += 1;
        }
    }

    /// An ACK that may answer a cookie SYN-ACK: when the cookie checks out,
    /// the connection is created as if its SYN had been queued, and the ACK
    /// (with any data) completes it. Returns false when it is no cookie.
    pub(crate) fn cookie_open(
        &mut self,
        lslot: u32,
        local: SocketAddr,
        remote: SocketAddr,
        ack: &TcpRepr,
        payload: &[u8],
    ) -> bool {
        if !self.cfg.syn_cookies {
            return false;
        }
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
        let lslot = self.pick_member(lslot, remote);
        let full = |l: &Listener| l.orphaned || l.accept.len() >= l.accept.capacity();
        if matches!(self.sockets.slots.get(lslot as usize), Some(Some(Socket::Listener(l))) if full(l))
        {
            // No room to hand the connection over: the ACK is dropped, as
            // Linux drops it (ListenOverflows); the client sends it again
            // and the cookie still checks out then.
            self.stats.drop_tcp_accept_queue_full += 1;
            return true;
        }
        let Some(slot) = self.new_passive(lslot, local, remote, &syn, iss) else {
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

impl Protocols {
    /// The member of the listener group headed by `head` that takes the
    /// next connection (`head` itself when it has no group): among members
    /// with room in their backlog, one with a waiter armed, else one that
    /// has accepted before, else one that never did; within a rank the
    /// fewest connections pending, ties taken in turn. A SO_REUSEPORT group
    /// picks by the peer instead ([`Protocols::pick_reuseport`]).
    /// O(members), no allocation.
    pub(crate) fn pick_member(&mut self, head: u32, remote: SocketAddr) -> u32 {
        let slots = &mut self.sockets.slots;
        let (n, turn) = match slots.get(head as usize) {
            Some(Some(Socket::Listener(l))) if l.reuseport.is_some() && !l.members.is_empty() => {
                return self.pick_reuseport(head, remote);
            }
            Some(Some(Socket::Listener(l))) if !l.members.is_empty() => {
                (l.members.len() + 1, l.turn as usize)
            }
            _ => return head,
        };
        let mut best: Option<(u8, usize, u32)> = None;
        for k in 0..n {
            let i = (turn + k) % n;
            let slot = match (i, slots.get(head as usize)) {
                (0, _) => head,
                (_, Some(Some(Socket::Listener(h)))) => match h.members.get(i - 1) {
                    Some(&m) => m,
                    None => continue,
                },
                _ => break,
            };
            let Some(Some(Socket::Listener(m))) = slots.get(slot as usize) else {
                continue;
            };
            if m.pending >= m.backlog || m.orphaned {
                continue;
            }
            let rank = accept_rank(m);
            if best.is_none_or(|(r, p, _)| (rank, m.pending) < (r, p)) {
                best = Some((rank, m.pending, slot));
            }
        }
        if let Some(Some(Socket::Listener(h))) = slots.get_mut(head as usize) {
            h.turn = h.turn.wrapping_add(1);
        }
        best.map_or(head, |(_, _, s)| s)
    }

    /// `Command::JoinListener`: the socket `id` of `owner` becomes a member
    /// of the group of listener `group` (its head, or any member), with the
    /// group's address and buffer sizes. Closed with EINVAL when `group`
    /// is no listener, ENOBUFS when the socket table is full.
    pub(crate) fn join_listener(
        &mut self,
        (id, owner): (SockId, Owner),
        shared: Arc<StatusHandle>,
        group: SockId,
        accept: AcceptQueue,
    ) {
        let target = self.sockets.ids.get(&group).copied();
        let found = target.and_then(|t| match self.sockets.slots.get(t as usize) {
            Some(Some(Socket::Listener(l))) => Some(l.head.unwrap_or(t)),
            _ => None,
        });
        match found {
            Some(head) => self.add_member(head, (id, owner), shared, accept, None),
            None => shared.set_closed(errno::EINVAL),
        }
    }

    /// SO_REUSEPORT: when `reuseport` is set and `owner` has a SO_REUSEPORT
    /// listener on `local`'s port, with the same address family, address
    /// and IPV6_V6ONLY, the listener `id` becomes one more member of its
    /// group (with its own accept queue and backlog) and None is returned.
    /// Otherwise `accept` comes back for an ordinary listen, which fails
    /// with EADDRINUSE when the port is taken (by another application, or
    /// a listener without SO_REUSEPORT, as on Linux).
    pub(crate) fn join_reuseport(
        &mut self,
        (id, owner): (SockId, Owner),
        shared: &Arc<StatusHandle>,
        (local, v6only): (SocketAddr, bool),
        accept: AcceptQueue,
        reuseport: Option<ReusePort>,
    ) -> Option<AcceptQueue> {
        let listeners = if local.is_ipv4() {
            &self.sockets.listeners
        } else {
            &self.sockets.listeners6
        };
        let head = match (reuseport, listeners.get(&local.port())) {
            (Some(_), Some(&h)) if local.port() != 0 => h,
            _ => return Some(accept),
        };
        let joins = match self.sockets.slots.get(head as usize) {
            Some(Some(Socket::Listener(h))) => {
                h.reuseport.is_some()
                    && h.owner == owner
                    && !h.orphaned
                    && h.v6only == v6only
                    && h.local.is_ipv4() == local.is_ipv4()
                    // One IPv4 address per stack; IPv6 ones must match.
                    && (local.is_ipv4() || h.local.ip() == local.ip())
            }
            _ => false,
        };
        if !joins {
            return Some(accept);
        }
        self.add_member(head, (id, owner), shared.clone(), accept, reuseport);
        None
    }

    /// Listener `id` of `owner` becomes a member of the group headed by
    /// `head` (a listener), with the head's address and buffer sizes.
    /// Closed with ENOBUFS when the socket table is full.
    fn add_member(
        &mut self,
        head: u32,
        (id, owner): (SockId, Owner),
        shared: Arc<StatusHandle>,
        accept: AcceptQueue,
        reuseport: Option<ReusePort>,
    ) {
        let Some(Some(Socket::Listener(h))) = self.sockets.slots.get(head as usize) else {
            return shared.set_closed(errno::EINVAL);
        };
        let (local, v6only, buffers, ip6) = (h.local, h.v6only, h.buffers, h.ip6);
        let l = Listener {
            id,
            owner,
            shared: shared.clone(),
            local,
            v6only,
            backlog: accept.capacity(),
            accept,
            pending: 0,
            buffers,
            ip6,
            members: Vec::new(),
            head: Some(head),
            turn: 0,
            orphaned: false,
            reuseport,
        };
        let Some(slot) = self.sockets.insert(id, Socket::Listener(Box::new(l))) else {
            return shared.set_closed(errno::ENOBUFS);
        };
        if let Some(Some(Socket::Listener(h))) = self.sockets.slots.get_mut(head as usize) {
            h.members.push(slot);
        }
        shared.set_addrs(local, appif::socket::unspecified_like(local));
        shared.set_state(SockState::Open);
    }

    /// The member of SO_REUSEPORT group `head` that takes a connection from
    /// `remote`: among the members with room in their backlog, those on
    /// their home engine ([`ReusePort::home`]) first, then those that take
    /// connections (ranked as [`Protocols::pick_member`] ranks them: a
    /// member that never accepts, such as a forked worker's copy of another
    /// worker's listener, only when no other can); among the best, a hash
    /// of the peer's address and port, so the SYNs of one peer port go to
    /// one member (Linux's reuseport_select_sock). O(members), no
    /// allocation.
    pub(crate) fn pick_reuseport(&self, head: u32, remote: SocketAddr) -> u32 {
        let slots = &self.sockets.slots;
        let Some(Some(Socket::Listener(h))) = slots.get(head as usize) else {
            return head;
        };
        // (slot, key) of member i with room; the smallest key is best.
        let member = |i: usize| -> Option<(u32, (bool, u8))> {
            let slot = if i == 0 { head } else { *h.members.get(i - 1)? };
            match slots.get(slot as usize) {
                Some(Some(Socket::Listener(m))) if !m.orphaned && m.pending < m.backlog => {
                    let away = !m.reuseport.is_some_and(|r| r.home);
                    Some((slot, (away, accept_rank(m))))
                }
                _ => None,
            }
        };
        let n = h.members.len() + 1;
        let Some(best) = (0..n).filter_map(member).map(|(_, k)| k).min() else {
            return head;
        };
        let count = (0..n)
            .filter_map(member)
            .filter(|&(_, k)| k == best)
            .count();
        let pick = peer_hash(remote) as usize % count.max(1);
        (0..n)
            .filter_map(member)
            .filter(|&(_, k)| k == best)
            .nth(pick)
            .map_or(head, |(slot, _)| slot)
    }

    /// Takes the listener in `slot` out of its group before it is removed:
    /// a member leaves its head's list; a head hands the port and the
    /// other members to the first of them. Nothing for a lone listener.
    pub(crate) fn leave_group(&mut self, slot: u32) {
        let slots = &mut self.sockets.slots;
        let (head, members) = match slots.get_mut(slot as usize) {
            Some(Some(Socket::Listener(l))) => (l.head.take(), core::mem::take(&mut l.members)),
            _ => return,
        };
        if let Some(h) = head {
            if let Some(Some(Socket::Listener(hl))) = slots.get_mut(h as usize) {
                hl.members.retain(|&m| m != slot);
            }
            return;
        }
        let Some((&first, rest)) = members.split_first() else {
            return;
        };
        for &m in rest {
            if let Some(Some(Socket::Listener(ml))) = slots.get_mut(m as usize) {
                ml.head = Some(first);
            }
        }
        if let Some(Some(Socket::Listener(fl))) = slots.get_mut(first as usize) {
            fl.head = None;
            fl.members = rest.to_vec();
            let port = fl.local.port();
            let fam = crate::sockets::families(fl.local, fl.v6only);
            self.sockets
                .register_port(crate::sockets::Ports::Listeners, port, fam, first);
        }
    }
}

/// How readily listener `m` takes a connection (0 best): a waiter armed (a
/// thread blocked in accept, or asleep in epoll/poll/select), then one
/// that has accepted before (or is this process's own), then one that
/// never accepted (a master that only waits for its workers).
fn accept_rank(m: &Listener) -> u8 {
    match &m.accept {
        AcceptQueue::AppSegment(q) if m.shared.notify.has_sleepers() || q.app_waiting() => 0,
        AcceptQueue::AppSegment(q) if q.has_accepted() => 1,
        AcceptQueue::AppSegment(_) => 2,
        AcceptQueue::Local(_) => 1,
    }
}

/// A hash of a peer's address and port (Fibonacci hashing of their
/// folded bits), to spread a SO_REUSEPORT group's connections.
fn peer_hash(remote: SocketAddr) -> u32 {
    let ip = match remote.ip() {
        IpAddr::V4(a) => u32::from(a),
        IpAddr::V6(a) => a
            .octets()
            .chunks_exact(4)
            .fold(0, |h, w| h ^ u32::from_be_bytes([w[0], w[1], w[2], w[3]])),
    };
    let x = (u64::from(ip) << 16 | u64::from(remote.port())).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 32) as u32
}

/// The window of a cookie SYN-ACK: unscaled, at most the RX ring.
fn cookie_window(ring_bytes: usize) -> u16 {
    ring_bytes.min(usize::from(u16::MAX)) as u16
}
