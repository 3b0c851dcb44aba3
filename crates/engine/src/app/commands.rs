//! Application commands: open, bind, listen, send, close, socket options.
//! Each is validated against the socket table; a command naming a socket
//! the engine does not know is counted and ignored.
//!
//! The engine state its `impl Protocols` touches, besides `cfg`, `stats`
//! and `now`: `sockets`, `egress`, `ip6`, `commands`, `woke`, `isn`,
//! `trace`, `handoff`.

use crate::sockets::{families, Conn, Ip6Header, Listener, Ports, Socket, Sockets, UdpSock};
use crate::tcp::{State, Tcb};
use crate::{Protocols, CMD_BURST};
use appif::cc::CcKind;
use appif::command::{Command, Owner};
use appif::seg::AcceptQueue;
use appif::socket::{ReusePort, SockId, SockState, StatusHandle};
use appif::{bytes, errno};
use core::net::{IpAddr, SocketAddr};
use nic::TxQueue;
use std::sync::Arc;

impl Protocols {
    /// Takes up to a burst of application commands.
    pub(crate) fn take_commands<T: TxQueue>(&mut self, tx: &mut T) -> usize {
        let mut n = 0;
        while n < CMD_BURST {
            let Some(cmd) = self.commands.pop() else {
                break;
            };
            n += 1;
            self.command(cmd, tx);
        }
        n
    }

    fn slot_of(&mut self, id: SockId) -> Option<u32> {
        let s = self.sockets.ids.get(&id).copied();
        if s.is_none() {
            self.stats.cmd_unknown_socket += 1;
        }
        s
    }

    /// The slot and the TCP connection of socket `id`, if it is one (an
    /// unknown id is counted as `slot_of` does).
    fn conn_of(&mut self, id: SockId) -> Option<(u32, &mut Conn)> {
        let slot = self.slot_of(id)?;
        Some((slot, self.sockets.conn(slot)?))
    }

    /// Carries out one application command: each has its function below.
    pub(crate) fn command<T: TxQueue>(&mut self, cmd: Command, tx: &mut T) {
        if matches!(
            cmd,
            Command::Connect { .. }
                | Command::Listen { .. }
                | Command::JoinListener { .. }
                | Command::Adopt { .. }
                | Command::UdpBind { .. }
        ) {
            // The socket leaves Opening (open, connecting, or closed with an
            // error): wake readiness waiters too, not only its own.
            self.woke = true;
        }
        match cmd {
            Command::Connect {
                id,
                owner,
                shared,
                local_port,
                remote,
                tx: txr,
                rx,
                nodelay,
            } => self.on_connect((id, owner), shared, local_port, remote, (txr, rx), nodelay),
            Command::Listen {
                id,
                owner,
                shared,
                local,
                v6only,
                accept,
                reuseport,
            } => self.on_listen((id, owner), shared, (local, v6only), accept, reuseport),
            Command::JoinListener {
                id,
                owner,
                shared,
                group,
                accept,
            } => self.join_listener((id, owner), shared, group, accept),
            Command::Adopt {
                id,
                owner,
                shared,
                from,
            } => self.on_adopt((id, owner), shared, from),
            Command::UdpBind {
                id,
                owner,
                shared,
                local,
                v6only,
                tx: txr,
                rx,
            } => self.on_udp_bind((id, owner), shared, local, v6only, txr, rx),
            Command::Send { id } => self.on_send(id, tx),
            Command::Recvd { id } => self.on_recvd(id),
            Command::Shutdown { id } => self.on_shutdown(id),
            Command::Close { id } => self.on_close(id),
            Command::Abort { id } => self.on_abort(id),
            Command::SetKeepalive { id, on } => self.on_set_keepalive(id, on),
            Command::SetKeepaliveParams {
                id,
                idle_s,
                interval_s,
                count,
            } => self.on_set_keepalive_params(id, idle_s, interval_s, count),
            Command::SetCongestion { id, cc } => self.on_set_congestion(id, cc),
            Command::SetBuffers { id, rcv, snd } => self.on_set_buffers(id, rcv, snd),
            Command::SetIpv6Header {
                id,
                tclass,
                hop_limit,
            } => self.on_set_ipv6_header(id, Ip6Header { tclass, hop_limit }),
            Command::SetNodelay { id, on } => self.on_set_nodelay(id, on),
            Command::SetUserTimeout { id, ms } => {
                if let Some((_, c)) = self.conn_of(id) {
                    c.tcb
                        .set_user_timeout(core::time::Duration::from_millis(u64::from(ms)));
                }
            }
        }
    }

    /// `Connect`: an active open from `local_port` (0: an ephemeral one)
    /// to `remote`, over the engine's ends of the socket's byte rings, for
    /// socket `id` of `owner`.
    fn on_connect(
        &mut self,
        (id, owner): (SockId, Owner),
        shared: Arc<StatusHandle>,
        local_port: u16,
        remote: SocketAddr,
        (txr, rx): (bytes::Reader, bytes::Writer),
        nodelay: bool,
    ) {
        let remote = appif::socket::from_mapped(remote);
        // Our source address: IPv4's one, or the IPv6 one RFC 6724 picks.
        let src = match remote.ip() {
            IpAddr::V4(_) => Some(IpAddr::V4(self.egress.ip)),
            IpAddr::V6(r) => self
                .ip6
                .as_ref()
                .and_then(|e6| e6.source_for(r))
                .map(IpAddr::V6),
        };
        let Some(src) = src.filter(|_| self.routable(remote.ip())) else {
            shared.set_closed(errno::ENETUNREACH);
            return;
        };
        if self.sockets.is_full() {
            self.stats.drop_tcp_table_full += 1;
            shared.set_closed(errno::ENOBUFS);
            return;
        }
        let port = match self.connect_port(remote, local_port) {
            Ok(p) => p,
            Err(e) => return shared.set_closed(e),
        };
        if let Some(old) = self.sockets.flow(remote, port) {
            self.stats.tcp_time_wait_recycled += 1;
            self.drop_conn(old);
        } else if self.end_time_wait(remote, port) {
            self.stats.tcp_time_wait_recycled += 1;
        }
        let local = SocketAddr::new(src, port);
        let mut cfg = self.cfg.tcp.clone();
        cfg.mss = self.mss_for(remote);
        cfg.nodelay = nodelay;
        cfg.rcv_buf = rx.capacity();
        cfg.rcv_buf_max = cfg.rcv_buf_max.min(rx.reserved());
        cfg.snd_buf_max = cfg.snd_buf_max.min(txr.reserved());
        let iss = self.isn.isn(local, remote, self.now);
        let mut tcb = Tcb::connect(&cfg, local, remote, iss, self.now);
        tcb.set_ts_offset(self.isn.ts_offset(local, remote));
        shared.set_addrs(local, remote);
        shared.set_state(SockState::Connecting);
        let conn = Conn {
            id,
            owner,
            shared,
            tcb,
            tx: txr,
            rx,
            app_ends: None,
            listener: None,
            app_closed: false,
            timer_at: None,
            dirty: false,
            growth: Default::default(),
            mapped: false,
            pmtu_gen: self.pmtu_generation(remote),
            flow_label: if remote.is_ipv6() {
                self.isn.flow_label(local, remote)
            } else {
                0
            },
            ip6: Default::default(),
            counted: Default::default(),
            former: None,
        };
        if let Some(slot) = self.sockets.insert(id, Socket::Tcp(Box::new(conn))) {
            self.sockets.insert_flow(remote, port, slot);
            self.stats.tcp_active_opens += 1;
            self.mark_dirty(slot);
        }
    }

    /// The local port a connection to `remote` gets: `local_port`, or an
    /// ephemeral one when it is 0. A 4-tuple in TIME-WAIT may be taken again
    /// when its timestamps keep the incarnations apart (RFC 6191; Linux with
    /// tcp_tw_reuse = 1): a client that closes first does not run out of
    /// ports. Errors: EADDRNOTAVAIL (no ephemeral port free), EADDRINUSE.
    fn connect_port(&mut self, remote: SocketAddr, local_port: u16) -> Result<u16, i32> {
        let now = self.now;
        let time_wait = self.cfg.tcp.time_wait;
        let taken = |s: &Sockets, p: u16| match s.flow(remote, p) {
            Some(slot) => !matches!(
                s.slots.get(slot as usize),
                Some(Some(Socket::Tcp(c))) if c.tcb.time_wait_reusable(now)
            ),
            // A TIME-WAIT record, as the Conn it replaced.
            None => match remote {
                SocketAddr::V4(r) => s.tw.get(*r.ip(), r.port(), p).map(|x| x.tw),
                SocketAddr::V6(r) => s.tw6.get(*r.ip(), r.port(), p).map(|x| x.tw),
            }
            .is_some_and(|tw| !tw.reusable(now, time_wait)),
        };
        if local_port == 0 {
            // Among several engines, a port whose flow this engine owns.
            let (h, ip) = (&self.handoff, self.egress.ip);
            let src6 = self.ip6.as_ref().and_then(|e6| match remote.ip() {
                IpAddr::V6(r) => e6.source_for(r),
                IpAddr::V4(_) => None,
            });
            let elsewhere = |p: u16| {
                h.as_ref().is_some_and(|h| {
                    let owner = match (remote.ip(), src6) {
                        (IpAddr::V4(r), _) => h.steering().owner_v4(ip, r, p, remote.port()),
                        (IpAddr::V6(r), Some(l)) => h.steering().owner_v6(l, r, p, remote.port()),
                        (IpAddr::V6(_), None) => h.me(),
                    };
                    owner != h.me()
                })
            };
            let fam = (remote.is_ipv4(), remote.is_ipv6());
            self.sockets
                .ephemeral_port(|s, p| {
                    taken(s, p) || s.port_taken(Ports::Listeners, p, fam) || elsewhere(p)
                })
                .ok_or(errno::EADDRNOTAVAIL)
        } else if taken(&self.sockets, local_port) {
            Err(errno::EADDRINUSE)
        } else {
            Ok(local_port)
        }
    }

    /// `Listen`: listener `id` of `owner` on `local` whose accepted
    /// connections go to `accept` (its capacity is the backlog). With
    /// SO_REUSEPORT it joins the group of `owner`'s SO_REUSEPORT listeners
    /// on the same address and port when there is one
    /// ([`Protocols::join_reuseport`]).
    fn on_listen(
        &mut self,
        (id, owner): (SockId, Owner),
        shared: Arc<StatusHandle>,
        (local, v6only): (SocketAddr, bool),
        accept: AcceptQueue,
        reuseport: Option<ReusePort>,
    ) {
        let Some(accept) =
            self.join_reuseport((id, owner), &shared, (local, v6only), accept, reuseport)
        else {
            return;
        };
        let status = shared.clone();
        self.bind_socket(id, &status, local, v6only, Ports::Listeners, |local| {
            let backlog = accept.capacity();
            Socket::Listener(Box::new(Listener {
                id,
                owner,
                shared,
                local,
                v6only,
                accept,
                pending: 0,
                backlog,
                buffers: (0, 0),
                ip6: Default::default(),
                members: Vec::new(),
                head: None,
                turn: 0,
                orphaned: false,
                reuseport,
            }))
        });
    }

    /// `UdpBind`: UDP socket `id` of `owner` on `local` over the engine's
    /// ends of its rings.
    fn on_udp_bind(
        &mut self,
        (id, owner): (SockId, Owner),
        shared: Arc<StatusHandle>,
        local: SocketAddr,
        v6only: bool,
        txr: bytes::Reader,
        rx: bytes::Writer,
    ) {
        let status = shared.clone();
        self.bind_socket(id, &status, local, v6only, Ports::Udp, |local| {
            Socket::Udp(Box::new(UdpSock {
                id,
                owner,
                shared,
                local,
                v6only,
                tx: txr,
                rx,
                ip6: Default::default(),
                former: None,
            }))
        });
    }

    /// `Send`: new bytes (TCP, sent with the next output) or datagrams (UDP,
    /// sent now) wait in the TX ring.
    fn on_send<T: TxQueue>(&mut self, id: SockId, tx: &mut T) {
        let Some(slot) = self.slot_of(id) else { return };
        match &self.sockets.slots[slot as usize] {
            Some(Socket::Tcp(c)) => {
                let (local, remote) = (c.tcb.local().port(), c.tcb.remote().port());
                // Bytes beyond those in flight: this command's, not yet
                // sent (output for another reason may have sent them).
                let unsent = c.tx.len() > c.tcb.bytes_in_flight();
                self.trace.send_taken(slot, local, remote, unsent);
                self.mark_dirty(slot);
            }
            Some(Socket::Udp(_)) => {
                self.udp_send(slot, tx);
                // TX space freed: readiness waiters (poll, epoll) too.
                self.woke = true;
            }
            _ => {}
        }
    }

    /// `Recvd`: the application read; the receive window may open.
    fn on_recvd(&mut self, id: SockId) {
        if let Some((slot, c)) = self.conn_of(id) {
            let free = c.rx.free();
            if c.tcb.on_app_read(free) {
                self.mark_dirty(slot);
            }
        }
    }

    /// `Shutdown`: FIN after the TX ring drains.
    fn on_shutdown(&mut self, id: SockId) {
        if let Some((slot, c)) = self.conn_of(id) {
            c.tcb.close();
            self.mark_dirty(slot);
            self.arm_timer(slot);
        }
    }

    /// `Close`: the application is gone from the socket.
    fn on_close(&mut self, id: SockId) {
        let Some(slot) = self.slot_of(id) else { return };
        self.close(slot);
    }

    /// `Abort`: close with a reset (SO_LINGER with a zero timeout).
    fn on_abort(&mut self, id: SockId) {
        let Some(slot) = self.slot_of(id) else { return };
        if let Some(c) = self.sockets.conn(slot) {
            // Counted as unread data: close() resets (RFC 9293 §3.10.5).
            c.tcb.abort();
        }
        self.close(slot);
    }

    /// `SetKeepalive`: SO_KEEPALIVE on or off.
    fn on_set_keepalive(&mut self, id: SockId, on: bool) {
        if let Some((slot, c)) = self.conn_of(id) {
            c.tcb.set_keepalive(on);
            self.arm_timer(slot);
        }
    }

    /// `SetKeepaliveParams`: TCP_KEEPIDLE, TCP_KEEPINTVL and TCP_KEEPCNT
    /// (each at least 1).
    fn on_set_keepalive_params(&mut self, id: SockId, idle_s: u32, interval_s: u32, count: u32) {
        if let Some((slot, c)) = self.conn_of(id) {
            c.tcb.set_keepalive_params(
                core::time::Duration::from_secs(u64::from(idle_s.max(1))),
                core::time::Duration::from_secs(u64::from(interval_s.max(1))),
                count.max(1),
            );
            self.arm_timer(slot);
        }
    }

    /// `SetCongestion`: TCP_CONGESTION.
    fn on_set_congestion(&mut self, id: SockId, cc: CcKind) {
        if let Some((_, c)) = self.conn_of(id) {
            c.tcb.set_cc(cc);
        }
    }

    /// `SetBuffers`: SO_RCVBUF / SO_SNDBUF (0: unchanged); on a listener,
    /// for the connections it will accept.
    fn on_set_buffers(&mut self, id: SockId, rcv: usize, snd: usize) {
        let Some(slot) = self.slot_of(id) else { return };
        match self.sockets.slots.get_mut(slot as usize) {
            Some(Some(Socket::Tcp(c))) => {
                if rcv > 0 {
                    c.tcb.set_rcv_buf(rcv);
                }
                if snd > 0 {
                    c.tcb.set_snd_buf(snd);
                }
                self.tune_buffers(slot);
                self.mark_dirty(slot);
            }
            Some(Some(Socket::Listener(l))) => {
                if rcv > 0 {
                    l.buffers.0 = rcv;
                }
                if snd > 0 {
                    l.buffers.1 = snd;
                }
            }
            _ => {}
        }
    }

    /// `SetIpv6Header`: IPV6_TCLASS and IPV6_UNICAST_HOPS, for the
    /// socket's IPv6 packets from now on; on a listener, for the
    /// connections it accepts.
    fn on_set_ipv6_header(&mut self, id: SockId, h: Ip6Header) {
        let Some(slot) = self.slot_of(id) else { return };
        match self.sockets.slots.get_mut(slot as usize) {
            Some(Some(Socket::Tcp(c))) => c.ip6 = h,
            Some(Some(Socket::Listener(l))) => l.ip6 = h,
            Some(Some(Socket::Udp(u))) => u.ip6 = h,
            _ => {}
        }
    }

    /// `SetNodelay`: TCP_NODELAY.
    fn on_set_nodelay(&mut self, id: SockId, on: bool) {
        if let Some((slot, c)) = self.conn_of(id) {
            c.tcb.set_nodelay(on);
            self.mark_dirty(slot);
        }
    }

    /// Binds listener or UDP socket `id` to `local` in the port tables
    /// `ports` of the families it receives (see `bind_addr` and
    /// [`families`]; an error goes to `shared`), tells the application the
    /// address, and puts the socket `make` builds for it in a slot,
    /// registered under its port: open, or ENOBUFS when no slot is free.
    fn bind_socket(
        &mut self,
        id: SockId,
        shared: &StatusHandle,
        local: SocketAddr,
        v6only: bool,
        ports: Ports,
        make: impl FnOnce(SocketAddr) -> Socket,
    ) {
        let fam = families(local, v6only);
        let local = match self.bind_addr(local, fam, ports) {
            Ok(a) => a,
            Err(e) => return shared.set_closed(e),
        };
        shared.set_addrs(local, appif::socket::unspecified_like(local));
        match self.sockets.insert(id, make(local)) {
            Some(slot) => {
                self.sockets.register_port(ports, local.port(), fam, slot);
                shared.set_state(SockState::Open);
            }
            None => shared.set_closed(errno::ENOBUFS),
        }
    }

    /// The local address a bind to `local` gets: the address asked for
    /// (IPv4: ours whatever was asked; IPv6: `::` or one of ours), and the
    /// port asked for or an ephemeral one free in the port tables `ports`
    /// of the families `fam` (among several engines, a UDP port this
    /// engine owns). A port is taken for a family when a socket of that
    /// family holds it: an IPv4 socket and an IPv6-only one share a port,
    /// a dual-stack one shares it with nobody (Linux).
    /// Errors: EADDRINUSE (port taken or none free), EADDRNOTAVAIL (not our address).
    fn bind_addr(
        &mut self,
        local: SocketAddr,
        fam: (bool, bool),
        ports: Ports,
    ) -> Result<SocketAddr, i32> {
        let ip = match local.ip() {
            IpAddr::V4(a) if !a.is_unspecified() && a != self.egress.ip => {
                return Err(errno::EADDRNOTAVAIL)
            }
            IpAddr::V4(_) => IpAddr::V4(self.egress.ip),
            IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(a),
            IpAddr::V6(a) if self.ip6.as_ref().is_some_and(|e6| e6.state_of(a).is_some()) => {
                IpAddr::V6(a)
            }
            IpAddr::V6(_) => return Err(errno::EADDRNOTAVAIL),
        };
        let in_use = |s: &Sockets, p: u16| s.port_taken(ports, p, fam);
        let h = &self.handoff;
        let elsewhere =
            |p: u16| matches!((h, ports), (Some(h), Ports::Udp) if h.udp_owner(p) != h.me());
        let port = match local.port() {
            0 => self
                .sockets
                .ephemeral_port(|s, p| in_use(s, p) || elsewhere(p))
                .ok_or(errno::EADDRINUSE)?,
            p if in_use(&self.sockets, p) => return Err(errno::EADDRINUSE),
            p => p,
        };
        Ok(SocketAddr::new(ip, port))
    }

    /// `Adopt`: the TCP connection `from` answers to `id` of `owner` and
    /// reports to `shared` from now on (a forked child took it over); the status
    /// block it had says ENETDOWN to whoever still looks at it and is kept
    /// with the connection (its rings are in that slot). `shared` is
    /// closed with ENETDOWN when `from` is no connection handed to its
    /// application, or the application closed it already; with EBADF when
    /// `id` names a socket already.
    fn on_adopt(&mut self, (id, owner): (SockId, Owner), shared: Arc<StatusHandle>, from: SockId) {
        let slot = self.slot_of(from);
        let sock = slot.and_then(|s| self.sockets.slots.get_mut(s as usize)?.as_mut());
        let takeable = match sock.as_deref() {
            Some(Socket::Tcp(c)) => !(c.unaccepted() || c.app_closed || c.former.is_some()),
            Some(Socket::Udp(u)) => u.former.is_none(),
            _ => false,
        };
        let (Some(slot), Some((current, _)), true) =
            (slot, sock.and_then(Socket::handles_mut), takeable)
        else {
            shared.set_closed(errno::ENETDOWN);
            return;
        };
        shared.copy_from(current);
        let former = std::mem::replace(current, shared);
        if !self.sockets.rekey(slot, id, owner) {
            if let Some((current, _)) = self.sockets.handles_mut(slot) {
                std::mem::replace(current, former).set_closed(errno::EBADF);
            }
            return;
        }
        former.set_flags(appif::socket::FLAG_MOVED);
        former.set_closed(errno::ENETDOWN);
        if let Some((_, kept)) = self.sockets.handles_mut(slot) {
            *kept = Some(former);
        }
        // Anything the parent queued and did not kick goes out now.
        if self.sockets.conn(slot).is_some() {
            self.mark_dirty(slot);
        }
    }

    /// The application is done with the socket in `slot`.
    pub(crate) fn close(&mut self, slot: u32) {
        match self.sockets.slots.get_mut(slot as usize) {
            Some(Some(Socket::Tcp(c))) => {
                c.app_closed = true;
                // RFC 9293 §3.10.4 / Linux: closing with unread data resets;
                // closing in SYN-SENT deletes the connection, nothing sent (a
                // SYN-ACK for it then finds none and is reset).
                let unread = c.rx.len();
                if unread > 0 || c.tcb.state() == State::SynSent {
                    c.tcb.abort();
                } else {
                    c.tcb.close();
                    // Nobody will read any more: FIN-WAIT-2 must not last forever.
                    c.tcb.orphan(self.now);
                }
                if c.tcb.state() == State::Closed && !c.tcb.has_output() {
                    self.drop_conn(slot);
                } else {
                    self.mark_dirty(slot);
                    self.arm_timer(slot);
                }
            }
            Some(Some(Socket::Listener(_))) => {
                // Reset the connections it had not handed over yet.
                for s in 0..self.sockets.slots.len() as u32 {
                    if let Some(c) = self.sockets.conn(s) {
                        if c.listener == Some(slot) {
                            c.listener = None;
                            c.app_closed = true;
                            c.tcb.abort();
                            self.mark_dirty(s);
                        }
                    }
                }
                self.leave_group(slot);
                if let Some(s) = self.sockets.remove(slot) {
                    s.shared().set_closed(0);
                }
            }
            Some(Some(Socket::Udp(_))) => {
                if let Some(s) = self.sockets.remove(slot) {
                    s.shared().set_closed(0);
                }
            }
            _ => {}
        }
    }
}
