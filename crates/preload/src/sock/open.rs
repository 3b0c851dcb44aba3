//! Binding, listening, accepting and connecting: where a socket goes (corestack, the kernel, or both).

use super::*;

/// The smallest accept queue a corestack listener gets, whatever listen's
/// backlog (Python's socketserver asks for 5).
pub const MIN_BACKLOG: usize = 128;

impl Sock {
    /// bind(2). `raw` is the application's address bytes.
    pub fn bind(&self, me: &Arc<Obj>, fd: c_int, sa: Sa, raw: &[u8]) -> R<()> {
        let mut st = lock(&self.state);
        match &mut *st {
            State::Fresh { bound: None } => {}
            State::Kernel => {
                drop(st);
                return k::bind(fd, raw);
            }
            _ => return Err(libc::EINVAL),
        }
        if self.family == libc::AF_INET6 && self.v6only() && is_mapped(sa) {
            return Err(libc::EINVAL); // an IPv6-only socket has no IPv4 address (Linux)
        }
        let core = sa.core(self.family);
        let place = match core.map_or(Place::Kernel, |a| stack::bind_place(a.ip())) {
            // IPv6 only, on a stack without IPv6: nothing for corestack.
            Place::Both if self.ipv6_only_without_ipv6() => Place::Kernel,
            place => place,
        };
        match place {
            Place::Kernel => {
                k::bind(fd, raw)?;
                self.go_kernel(&mut st, me);
                Ok(())
            }
            Place::Core => {
                let a = core.ok_or(libc::EINVAL)?;
                match self.ty {
                    Ty::Stream => {
                        self.local_change();
                        *st = State::Fresh {
                            bound: Some((a, false)),
                        };
                        Ok(())
                    }
                    Ty::Dgram => {
                        let u = self.udp_bind(a)?;
                        self.local_change();
                        *st = State::Udp {
                            u,
                            local: a,
                            dual: false,
                            peer: None,
                            kpeer: false,
                        };
                        self.report_unhonoured("bind");
                        Ok(())
                    }
                }
            }
            Place::Both => {
                let a = core.ok_or(libc::EINVAL)?;
                k::bind(fd, raw)?;
                let port = kernel_port(fd).unwrap_or(a.port());
                let a = addr::wildcard_like(a, port);
                match self.ty {
                    Ty::Stream => {
                        self.local_change();
                        *st = State::Fresh {
                            bound: Some((a, true)),
                        };
                        Ok(())
                    }
                    Ty::Dgram => {
                        let u = match self.udp_bind(a) {
                            Ok(u) => u,
                            Err(libc::EAFNOSUPPORT) => {
                                // As for a listener: the kernel side alone.
                                kernel_only_said();
                                self.go_kernel(&mut st, me);
                                return Ok(());
                            }
                            Err(e) => return Err(e),
                        };
                        k::set_nonblocking(fd, true)?;
                        self.local_change();
                        *st = State::Udp {
                            u,
                            local: a,
                            dual: true,
                            peer: None,
                            kpeer: false,
                        };
                        drop(st);
                        self.report_unhonoured("bind");
                        self.resettle.store(true, Ordering::Release);
                        Ok(())
                    }
                }
            }
        }
    }

    /// The automatic bind of a UDP socket that first sends to (or
    /// connects to) `dst`, an address corestack routes: the kernel socket
    /// takes an ephemeral port on the wildcard and corestack binds the
    /// same port, so that the socket can also reach loopback and other
    /// addresses through the kernel side, from the same port, as one
    /// Linux socket does. When corestack cannot take that port, corestack
    /// picks its own and the kernel side is not used (`dual` false). An
    /// AF_INET6 socket binds `::` (with its IPV6_V6ONLY). Returns (socket,
    /// local address: the source corestack uses towards `dst`, dual).
    pub(super) fn udp_auto_bind(
        &self,
        fd: c_int,
        dst: SocketAddr,
    ) -> R<(UdpSocket, SocketAddr, bool)> {
        let any = if self.family == libc::AF_INET6 {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
        } else {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
        };
        let (b, n) = addr::encode(any, self.family, 0);
        let src = |port| SocketAddr::new(stack::source_for(dst.ip()), port);
        if k::bind(fd, &b[..n]).is_ok() {
            if let Some(port) = kernel_port(fd) {
                if let Ok(u) = self.udp_bind(addr::wildcard_like(any, port)) {
                    k::set_nonblocking(fd, true)?;
                    return Ok((u, src(port), true));
                }
            }
        }
        let u = self.udp_bind(any)?;
        let port = u.local_addr().map_or(0, |a| a.port());
        Ok((u, src(port), false))
    }

    /// True for an AF_INET6 socket with IPV6_V6ONLY when the stack has no
    /// IPv6: on `::` it has nothing to receive from corestack, so it stays
    /// in the kernel (loopback `::1`, the host's IPv6) and takes no port
    /// on corestack.
    fn ipv6_only_without_ipv6(&self) -> bool {
        self.family == libc::AF_INET6 && self.v6only() && !stack::has_ipv6()
    }

    /// A corestack UDP socket on `a` (IPV6_V6ONLY as set, for `::`).
    pub(super) fn udp_bind(&self, a: SocketAddr) -> R<UdpSocket> {
        let stack = stack::start()?;
        let mut u = UdpSocket::bind_with(stack, a, self.v6only()).map_err(|e| errno::of(&e))?;
        u.set_nonblocking(true).map_err(|e| errno::of(&e))?;
        let (tclass, hops) = self
            .opts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ip6_header();
        if (tclass, hops) != (0, 0) {
            let _ = u.set_ipv6_header(tclass, hops);
        }
        Ok(u)
    }

    /// listen(2): on corestack with room for max(`backlog`, [`MIN_BACKLOG`])
    /// connections (at most 4096, Linux's somaxconn).
    pub fn listen(&self, me: &Arc<Obj>, fd: c_int, backlog: c_int) -> R<()> {
        // At least MIN_BACKLOG: an accept here costs more than the kernel's
        // (a fork-per-connection server forks between two), and a burst
        // that Linux's queue of `backlog` absorbs would overflow it.
        let backlog_n = usize::try_from(backlog)
            .unwrap_or(0)
            .clamp(MIN_BACKLOG, 4096);
        let mut st = lock(&self.state);
        let bound = match &*st {
            State::Fresh { bound } => *bound,
            State::Listener { dual, .. } => {
                if *dual {
                    k::listen(fd, backlog)?;
                }
                return Ok(());
            }
            State::Kernel => {
                drop(st);
                return k::listen(fd, backlog);
            }
            State::Udp { .. } => return Err(libc::EOPNOTSUPP),
            _ => return Err(libc::EINVAL),
        };
        if self.ty == Ty::Dgram {
            return Err(libc::EOPNOTSUPP);
        }
        let (local, dual) = match bound {
            Some((a, kbound)) => (a, kbound),
            None => {
                if self.ipv6_only_without_ipv6() {
                    // Only IPv6 peers, and the stack has no IPv6: the kernel's.
                    k::listen(fd, backlog)?;
                    self.go_kernel(&mut st, me);
                    return Ok(());
                }
                let any = if self.family == libc::AF_INET6 {
                    IpAddr::V6(Ipv6Addr::UNSPECIFIED)
                } else {
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
                };
                (SocketAddr::new(any, 0), true)
            }
        };
        let stack = stack::start()?;
        let local = if dual {
            // The kernel listens first (it autobinds an unbound socket).
            k::listen(fd, backlog)?;
            addr::wildcard_like(local, kernel_port(fd).unwrap_or(local.port()))
        } else {
            local
        };
        let opts = {
            let o = self.opts.lock().unwrap_or_else(|p| p.into_inner());
            ListenOptions {
                backlog: backlog_n,
                v6only: o.v6only,
                reuseport: o.reuseport,
            }
        };
        let mut l = match TcpListener::bind_opts(stack, local, opts) {
            Ok(l) => l,
            Err(e) if dual && errno::of(&e) == libc::EAFNOSUPPORT => {
                // The stack cannot take this socket (a daemon without
                // IPv6): the kernel side, already listening, serves it alone.
                kernel_only_said();
                self.go_kernel(&mut st, me);
                return Ok(());
            }
            Err(e) => return Err(errno::of(&e)),
        };
        l.set_nonblocking(true).map_err(|e| errno::of(&e))?;
        let local = if local.port() == 0 {
            SocketAddr::new(local.ip(), l.local_addr().map_or(0, |a| a.port()))
        } else {
            local
        };
        if dual {
            k::set_nonblocking(fd, true)?;
        }
        let ((rcv, snd), (tclass, hops)) = {
            let o = self.opts.lock().unwrap_or_else(|p| p.into_inner());
            (o.buffer_sizes(), o.ip6_header())
        };
        if rcv > 0 || snd > 0 {
            let _ = l.set_buffer_sizes(rcv, snd);
        }
        if (tclass, hops) != (0, 0) {
            let _ = l.set_ipv6_header(tclass, hops);
        }
        self.local_change();
        *st = State::Listener { l, local, dual };
        drop(st);
        self.report_unhonoured("listen");
        if dual {
            self.resettle.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// accept4(2) with `flags` (SOCK_NONBLOCK, SOCK_CLOEXEC).
    pub fn accept(&self, fd: c_int, flags: c_int) -> R<Accepted> {
        drive_inline();
        let deadline = Deadline::after(self.rcvtimeo());
        loop {
            let (probe, dual) = {
                let mut st = lock(&self.state);
                match &mut *st {
                    State::Listener { l, dual, .. } => {
                        let dual = *dual;
                        let kfirst = dual && self.kernel_first.fetch_xor(true, Ordering::Relaxed);
                        if kfirst {
                            if let Some(a) = kernel_accept(fd, flags)? {
                                return Ok(a);
                            }
                        }
                        match l.accept() {
                            Ok((s, peer)) => {
                                drop(st);
                                let peer = addr::canonical(peer);
                                return self.install_accepted(s, peer, flags);
                            }
                            Err(e) if would_block(&e) => {}
                            Err(e) => return Err(errno::of(&e)),
                        }
                        if dual && !kfirst {
                            if let Some(a) = kernel_accept(fd, flags)? {
                                return Ok(a);
                            }
                        }
                        (l.probe(), dual)
                    }
                    State::Kernel => {
                        drop(st);
                        let (nfd, a) = k::accept4(fd, flags)?;
                        return Ok(Accepted::Kernel { fd: nfd, addr: a });
                    }
                    State::Udp { .. } => return Err(libc::EOPNOTSUPP),
                    _ => return Err(libc::EINVAL),
                }
            };
            if self.nonblocking() {
                return Err(libc::EAGAIN);
            }
            let kfd = dual.then_some((fd, libc::POLLIN));
            self.wait(&probe, kfd, deadline, true, |s: &Status| s.readable)?;
        }
    }

    pub(super) fn install_accepted(
        &self,
        mut s: TcpStream,
        peer: SocketAddr,
        flags: c_int,
    ) -> R<Accepted> {
        let _ = s.set_nonblocking(true);
        ACCEPTED.fetch_add(1, Ordering::Relaxed);
        let opts = self
            .opts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .inherited();
        opts.apply_to_stream(&mut s);
        // On failure `s` drops: the connection closes.
        let placeholder = k::placeholder(flags)?;
        let sock = Sock::new(
            self.family,
            Ty::Stream,
            State::Stream(s),
            flags & libc::SOCK_NONBLOCK != 0,
            opts,
        );
        sock.add_fd(placeholder);
        let obj = Arc::new(Obj::Sock(sock));
        match obj::install(placeholder, obj) {
            Ok(old) => drop(old),
            Err(e) => {
                k::close_fd(placeholder);
                return Err(e);
            }
        }
        Ok(Accepted::Core {
            fd: placeholder,
            peer,
        })
    }

    /// connect(2). `raw` is the application's address bytes.
    pub fn connect(&self, me: &Arc<Obj>, fd: c_int, sa: Sa, raw: &[u8]) -> R<()> {
        match self.ty {
            Ty::Stream => self.connect_tcp(me, fd, sa, raw),
            Ty::Dgram => self.connect_udp(me, fd, sa, raw),
        }
    }

    pub(super) fn connect_tcp(&self, me: &Arc<Obj>, fd: c_int, sa: Sa, raw: &[u8]) -> R<()> {
        let probe = {
            let mut st = lock(&self.state);
            let bound = match &mut *st {
                State::Fresh { bound } => *bound,
                State::Stream(s) => {
                    let status = s.status();
                    if status.connecting {
                        return Err(libc::EALREADY);
                    }
                    if status.closed && status.error != 0 {
                        let e = s.take_error();
                        self.local_change();
                        *st = State::Fresh { bound: None };
                        return Err(if e != 0 { e } else { libc::ECONNABORTED });
                    }
                    return Err(libc::EISCONN);
                }
                State::Kernel => {
                    drop(st);
                    return k::connect(fd, raw);
                }
                State::Listener { .. } | State::ListenerShut { .. } => return Err(libc::EISCONN),
                State::Udp { .. } => return Err(libc::EINVAL),
            };
            if let Sa::Unspec = sa {
                return Err(libc::EAFNOSUPPORT);
            }
            if self.family == libc::AF_INET6 && self.v6only() && is_mapped(sa) {
                return Err(libc::ENETUNREACH); // IPv6-only to an IPv4 peer (Linux)
            }
            let dst = sa.core(self.family);
            let to_core = dst.is_some_and(|d| stack::routes(d.ip()))
                && bound.is_none_or(|(a, _)| stack::is_local(a) && same_family(a, dst));
            let Some(dst) = dst.filter(|_| to_core) else {
                self.go_kernel(&mut st, me);
                drop(st);
                return k::connect(fd, raw);
            };
            if dst.port() == 0 {
                return Err(libc::ECONNREFUSED);
            }
            let stack = stack::start()?;
            let local_port = bound.map_or(0, |(a, _)| a.port());
            let nodelay = self.opts.lock().unwrap_or_else(|p| p.into_inner()).nodelay;
            let mut s = TcpStream::start_connect(stack, dst, local_port, nodelay)
                .map_err(|e| errno::of(&e))?;
            self.opts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .apply_to_stream(&mut s);
            let probe = s.probe();
            self.local_change();
            *st = State::Stream(s);
            self.report_unhonoured("connect");
            probe
        };
        self.resettle.store(true, Ordering::Release);
        if self.nonblocking() {
            return Err(libc::EINPROGRESS);
        }
        let deadline = Deadline::after(self.sndtimeo());
        match self.wait(&probe, None, deadline, true, |s: &Status| !s.connecting) {
            Ok(()) => {}
            Err(libc::EAGAIN) => return Err(libc::EINPROGRESS),
            Err(e) => return Err(e),
        }
        let mut st = lock(&self.state);
        if let State::Stream(s) = &mut *st {
            let status = s.status();
            if status.closed {
                let e = s.take_error();
                self.local_change();
                *st = State::Fresh { bound: None };
                return Err(if e != 0 { e } else { libc::ECONNREFUSED });
            }
        }
        Ok(())
    }

    pub(super) fn connect_udp(&self, me: &Arc<Obj>, fd: c_int, sa: Sa, raw: &[u8]) -> R<()> {
        let mut st = lock(&self.state);
        if let Sa::Unspec = sa {
            match &mut *st {
                State::Udp {
                    peer, dual, kpeer, ..
                } => {
                    *peer = None;
                    *kpeer = false;
                    if *dual {
                        let _ = k::connect(fd, raw);
                    }
                    return Ok(());
                }
                State::Fresh { .. } | State::Kernel => {
                    drop(st);
                    return k::connect(fd, raw);
                }
                _ => return Err(libc::EINVAL),
            }
        }
        if self.family == libc::AF_INET6 && self.v6only() && is_mapped(sa) {
            return Err(libc::ENETUNREACH); // IPv6-only to an IPv4 peer (Linux)
        }
        let dst = sa.core(self.family);
        let routed = dst.filter(|d| stack::routes(d.ip()));
        match &mut *st {
            State::Fresh { .. } => {
                let Some(dst) = routed else {
                    self.go_kernel(&mut st, me);
                    drop(st);
                    return k::connect(fd, raw);
                };
                let (u, local, dual) = self.udp_auto_bind(fd, dst)?;
                if dual {
                    // Filters the kernel side where the kernel can route to
                    // the peer; else recv drops what it delivers.
                    let _ = k::connect(fd, raw);
                }
                self.local_change();
                *st = State::Udp {
                    u,
                    local,
                    dual,
                    peer: Some(dst),
                    kpeer: false,
                };
                drop(st);
                self.report_unhonoured("connect");
                if dual {
                    self.resettle.store(true, Ordering::Release);
                }
                Ok(())
            }
            State::Udp {
                peer, dual, kpeer, ..
            } => match routed {
                Some(d) => {
                    if *dual {
                        // Undo a kernel-side connection, then filter the
                        // kernel side where the kernel routes to the peer.
                        let _ = k::connect(fd, &UNSPEC);
                        let _ = k::connect(fd, raw);
                    }
                    self.local_change();
                    *peer = Some(d);
                    *kpeer = false;
                    Ok(())
                }
                None if *dual => {
                    k::connect(fd, raw)?;
                    self.local_change();
                    *peer = None;
                    *kpeer = true;
                    Ok(())
                }
                None => {
                    static SAID: AtomicBool = AtomicBool::new(false);
                    crate::sys::log_once(&SAID, "UDP connect from a socket bound to corestack's own address to an address corestack does not route (loopback, another subnet): ENETUNREACH (bind to 0.0.0.0 to reach both)");
                    Err(libc::ENETUNREACH)
                }
            },
            State::Kernel => {
                drop(st);
                k::connect(fd, raw)
            }
            _ => Err(libc::EINVAL),
        }
    }
}

/// True when a socket bound to `bound` can reach `dst` (a bind to one of
/// our addresses fixes the family; the wildcard `::` reaches both).
fn same_family(bound: SocketAddr, dst: Option<SocketAddr>) -> bool {
    match (bound, dst) {
        (_, None) => true,
        (b, _) if b.ip().is_unspecified() => b.is_ipv6() || dst.is_some_and(|d| d.is_ipv4()),
        (b, Some(d)) => b.is_ipv4() == d.is_ipv4(),
    }
}

/// True for a v4-mapped IPv6 address (`::ffff:a.b.c.d`).
pub(super) fn is_mapped(sa: Sa) -> bool {
    matches!(sa, Sa::V6(ip, ..) if ip.to_ipv4_mapped().is_some())
}

/// Says once that a wildcard socket stays in the kernel because the stack
/// refused it with EAFNOSUPPORT (a daemon that carries no IPv6).
fn kernel_only_said() {
    static SAID: AtomicBool = AtomicBool::new(false);
    crate::sys::log_once(&SAID, "an AF_INET6 socket on [::]: the stack refused it (EAFNOSUPPORT), so the kernel serves it alone");
}
