//! Data: receive and send on either side, and the kernel-side and ring helpers they share.

use super::*;

impl Sock {
    /// Receives into `bufs` (recv, recvfrom, recvmsg, read, readv) with
    /// `flags` (MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL, MSG_TRUNC).
    pub fn recv(&self, me: &Arc<Obj>, fd: c_int, bufs: &mut [&mut [u8]], flags: c_int) -> R<Recvd> {
        let _ = me;
        if flags & (libc::MSG_OOB | libc::MSG_ERRQUEUE) != 0 && !self.is_fresh() {
            // No urgent data (EINVAL, as Linux without any); nothing is
            // ever queued on the error queue (EAGAIN).
            return Err(if flags & libc::MSG_OOB != 0 {
                libc::EINVAL
            } else {
                libc::EAGAIN
            });
        }
        drive_inline();
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let peek = flags & libc::MSG_PEEK != 0;
        let dontwait = flags & libc::MSG_DONTWAIT != 0 || self.nonblocking();
        let waitall = flags & libc::MSG_WAITALL != 0 && !peek && self.ty == Ty::Stream;
        let deadline = Deadline::after(self.rcvtimeo());
        let mut got = 0usize;
        loop {
            let (probe, kfd) = {
                let mut st = lock(&self.state);
                match &mut *st {
                    State::Stream(s) => {
                        let n = if peek {
                            peek_into(s, bufs)
                        } else {
                            match read_into(s, bufs, got) {
                                Ok(n) => n,
                                Err(e) if got > 0 => {
                                    let _ = e;
                                    0
                                }
                                Err(e) => return Err(e),
                            }
                        };
                        got += n;
                        let status = s.status();
                        let eof = status.rx_bytes == 0
                            && (status.rx_fin
                                || status.closed
                                || self.rd_shut.load(Ordering::Relaxed));
                        if got > 0 && (!waitall || got == total || eof) {
                            return Ok(Recvd {
                                n: got,
                                full: got,
                                from: Sender::None,
                            });
                        }
                        if total == 0 {
                            return Ok(Recvd {
                                n: 0,
                                full: 0,
                                from: Sender::None,
                            });
                        }
                        if eof {
                            if status.closed && status.error != 0 && got == 0 {
                                let e = s.take_error();
                                if e != 0 {
                                    return Err(e);
                                }
                            }
                            return Ok(Recvd {
                                n: got,
                                full: got,
                                from: Sender::None,
                            });
                        }
                        if status.connecting {
                            if dontwait {
                                return Err(libc::EAGAIN);
                            }
                        } else if matches!(status, Status { closed: true, .. }) {
                            return Ok(Recvd {
                                n: got,
                                full: got,
                                from: Sender::None,
                            });
                        }
                        (s.probe(), None)
                    }
                    State::Udp {
                        u,
                        dual,
                        peer,
                        kpeer,
                        ..
                    } => {
                        // Connected: only the peer's side delivers.
                        let kside = *dual && peer.is_none();
                        let core = !*kpeer;
                        if *dual && !kside {
                            kernel_drain(fd);
                        }
                        if !core {
                            udp_drain(u);
                        }
                        let dual = kside;
                        let kfirst = dual && self.kernel_first.fetch_xor(true, Ordering::Relaxed);
                        if kfirst {
                            if let Some(r) = kernel_recv(fd, bufs, flags)? {
                                return Ok(r);
                            }
                        }
                        if core {
                            if let Some(r) = udp_recv(u, bufs, peek, *peer) {
                                return Ok(r);
                            }
                        }
                        if dual && !kfirst {
                            if let Some(r) = kernel_recv(fd, bufs, flags)? {
                                return Ok(r);
                            }
                        }
                        if self.rd_shut.load(Ordering::Relaxed) {
                            return Ok(Recvd {
                                n: 0,
                                full: 0,
                                from: Sender::None,
                            });
                        }
                        (u.probe(), dual.then_some((fd, libc::POLLIN)))
                    }
                    State::Fresh { .. } | State::Kernel => {
                        drop(st);
                        return kernel_recv_blocking(fd, bufs, flags);
                    }
                    State::Listener { .. } | State::ListenerShut { .. } => {
                        return Err(libc::ENOTCONN)
                    }
                }
            };
            if dontwait {
                return if got > 0 {
                    Ok(Recvd {
                        n: got,
                        full: got,
                        from: Sender::None,
                    })
                } else {
                    Err(libc::EAGAIN)
                };
            }
            let rd_shut = &self.rd_shut;
            match self.wait(&probe, kfd, deadline, true, |s: &Status| {
                s.readable || rd_shut.load(Ordering::Relaxed)
            }) {
                Ok(()) => {}
                Err(e) if got > 0 => {
                    let _ = e;
                    return Ok(Recvd {
                        n: got,
                        full: got,
                        from: Sender::None,
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends `bufs` (send, sendto, sendmsg, write, writev) with `flags`
    /// (MSG_DONTWAIT, MSG_NOSIGNAL, MSG_MORE: accepted, no corking) to `to`
    /// (UDP; None: the connected peer). EPIPE raises SIGPIPE unless
    /// MSG_NOSIGNAL.
    pub fn send(
        &self,
        me: &Arc<Obj>,
        fd: c_int,
        bufs: &[&[u8]],
        flags: c_int,
        to: Option<(Sa, &[u8])>,
    ) -> R<usize> {
        if flags & libc::MSG_OOB != 0 && !self.is_fresh() {
            return Err(libc::EOPNOTSUPP);
        }
        drive_inline();
        let r = match self.ty {
            Ty::Stream => self.send_tcp(fd, bufs, flags),
            Ty::Dgram => self.send_udp(me, fd, bufs, flags, to),
        };
        if r == Err(libc::EPIPE) && flags & libc::MSG_NOSIGNAL == 0 {
            crate::sys::raise_sigpipe();
        }
        r
    }

    pub(super) fn send_tcp(&self, fd: c_int, bufs: &[&[u8]], flags: c_int) -> R<usize> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let dontwait = flags & libc::MSG_DONTWAIT != 0 || self.nonblocking();
        let deadline = Deadline::after(self.sndtimeo());
        let mut sent = 0usize;
        loop {
            let probe = {
                let mut st = lock(&self.state);
                match &mut *st {
                    State::Stream(s) => {
                        if self.wr_shut.load(Ordering::Relaxed) {
                            return if sent > 0 { Ok(sent) } else { Err(libc::EPIPE) };
                        }
                        let status = s.status();
                        if status.connecting {
                            if dontwait {
                                return if sent > 0 {
                                    Ok(sent)
                                } else {
                                    Err(libc::EAGAIN)
                                };
                            }
                        } else {
                            match write_from(s, bufs, sent) {
                                Ok(n) => sent += n,
                                Err(_) if sent > 0 => return Ok(sent),
                                Err(libc::ENOTCONN) if status.closed => {
                                    let e = s.take_error();
                                    return Err(if e != 0 { e } else { libc::EPIPE });
                                }
                                Err(e) => return Err(e),
                            }
                            if sent == total || (dontwait && sent > 0) {
                                return Ok(sent);
                            }
                        }
                        s.probe()
                    }
                    State::Fresh { .. } | State::Kernel => {
                        drop(st);
                        return kernel_send(fd, bufs, flags, None);
                    }
                    // Linux: a listener is not connected, so EPIPE.
                    State::Listener { .. } | State::ListenerShut { .. } => return Err(libc::EPIPE),
                    _ => return Err(libc::ENOTCONN),
                }
            };
            if dontwait {
                return if sent > 0 {
                    Ok(sent)
                } else {
                    Err(libc::EAGAIN)
                };
            }
            match self.wait(&probe, None, deadline, true, |s: &Status| {
                s.writable || s.closed
            }) {
                Ok(()) => {}
                Err(_) if sent > 0 => return Ok(sent),
                Err(e) => return Err(e),
            }
        }
    }

    pub(super) fn send_udp(
        &self,
        me: &Arc<Obj>,
        fd: c_int,
        bufs: &[&[u8]],
        flags: c_int,
        to: Option<(Sa, &[u8])>,
    ) -> R<usize> {
        let dontwait = flags & libc::MSG_DONTWAIT != 0 || self.nonblocking();
        let deadline = Deadline::after(self.sndtimeo());
        let data: std::borrow::Cow<'_, [u8]> = if bufs.len() == 1 {
            std::borrow::Cow::Borrowed(bufs[0])
        } else {
            std::borrow::Cow::Owned(bufs.concat())
        };
        loop {
            let probe = {
                let mut st = lock(&self.state);
                let dst = match to {
                    Some((sa, _)) => sa.core(self.family),
                    None => None,
                };
                match &mut *st {
                    State::Fresh { .. } => {
                        let Some((sa, raw)) = to else {
                            drop(st);
                            return kernel_send(fd, bufs, flags, None);
                        };
                        if self.family == libc::AF_INET6 && self.v6only() && open::is_mapped(sa) {
                            return Err(libc::ENETUNREACH); // IPv6-only to IPv4 (Linux)
                        }
                        let Some(d) = dst.filter(|d| stack::routes(d.ip())) else {
                            self.go_kernel(&mut st, me);
                            drop(st);
                            return kernel_send(fd, bufs, flags, Some(raw));
                        };
                        let (u, local, dual) = self.udp_auto_bind(fd, d)?;
                        self.local_change();
                        *st = State::Udp {
                            u,
                            local,
                            dual,
                            peer: None,
                            kpeer: false,
                        };
                        self.report_unhonoured("sendto");
                        if dual {
                            self.resettle.store(true, Ordering::Release);
                        }
                        continue;
                    }
                    State::Udp {
                        u,
                        local,
                        dual,
                        peer,
                        kpeer,
                    } => {
                        let target = match (to, *peer) {
                            (Some(_), _) => dst,
                            (None, Some(p)) => Some(p),
                            (None, None) if *kpeer => {
                                drop(st);
                                return kernel_send(fd, bufs, flags, None);
                            }
                            (None, None) => return Err(libc::EDESTADDRREQ),
                        };
                        match target.filter(|d| stack::routes(d.ip())) {
                            Some(d)
                                if !reaches(u.local_addr().unwrap_or(*local), self.v6only(), d) =>
                            {
                                // Linux: ENETUNREACH from an IPv6-only
                                // socket to an IPv4 (v4-mapped) peer, and
                                // between an address of one family and a
                                // peer of the other.
                                return Err(libc::ENETUNREACH);
                            }
                            Some(d) => {
                                if data.len() > u.max_payload() {
                                    return Err(libc::EMSGSIZE);
                                }
                                match u.send_to(&data, d) {
                                    Ok(n) => return Ok(n),
                                    Err(e) if would_block(&e) => {}
                                    Err(e) => return Err(errno::of(&e)),
                                }
                            }
                            None if *dual => {
                                drop(st);
                                return kernel_send(fd, bufs, flags, to.map(|(_, raw)| raw));
                            }
                            None => {
                                static SAID: AtomicBool = AtomicBool::new(false);
                                crate::sys::log_once(&SAID, "UDP sendto from a socket bound to corestack's own address to an address corestack does not route (loopback, another subnet): ENETUNREACH (bind to 0.0.0.0 to reach both)");
                                return Err(libc::ENETUNREACH);
                            }
                        }
                        u.probe()
                    }
                    State::Kernel => {
                        drop(st);
                        return kernel_send(fd, bufs, flags, to.map(|(_, raw)| raw));
                    }
                    _ => return Err(libc::EOPNOTSUPP),
                }
            };
            if dontwait {
                return Err(libc::EAGAIN);
            }
            self.wait(&probe, None, deadline, true, |s: &Status| s.writable)?;
        }
    }
}

/// True when a UDP socket bound to `local` (IPV6_V6ONLY `v6only`) can
/// send to `dst` (canonical form): an IPv4 socket or a dual-stack `::`
/// to IPv4, an IPv6 one to IPv6.
fn reaches(local: SocketAddr, v6only: bool, dst: SocketAddr) -> bool {
    match (local.ip(), dst) {
        (IpAddr::V4(_), SocketAddr::V4(_)) => true,
        (IpAddr::V6(l), SocketAddr::V4(_)) => l.is_unspecified() && !v6only,
        (IpAddr::V6(_), SocketAddr::V6(_)) => true,
        (IpAddr::V4(_), SocketAddr::V6(_)) => false,
    }
}

pub(super) fn kernel_port(fd: c_int) -> Option<u16> {
    let (b, len) = k::getsockname(fd).ok()?;
    match addr::parse(&b[..len]).ok()? {
        Sa::V4(a) => Some(a.port()),
        Sa::V6(_, p, _, _) => Some(p),
        Sa::Unspec => None,
    }
}

pub(super) fn kernel_accept(fd: c_int, flags: c_int) -> R<Option<Accepted>> {
    match k::accept4(fd, flags) {
        Ok((nfd, addr)) => {
            if let Some(old) = obj::forget(nfd) {
                drop(old);
            }
            ACCEPTED.fetch_add(1, Ordering::Relaxed);
            Ok(Some(Accepted::Kernel { fd: nfd, addr }))
        }
        Err(libc::EAGAIN) => Ok(None),
        Err(e) => Err(e),
    }
}

/// An AF_UNSPEC address: connect(2) with it dissolves a UDP association.
pub(super) const UNSPEC: [u8; 16] = [0; 16];

/// The most datagrams one drain drops (bounded; the next recv drops more).
pub(super) const DRAIN_MAX: usize = 256;

/// Drops the datagrams waiting on the kernel side (a connected dual
/// socket's side that does not hold the peer).
pub(super) fn kernel_drain(fd: c_int) {
    let mut none = [0u8; 0];
    for _ in 0..DRAIN_MAX {
        if k::recvfrom(fd, &mut none, libc::MSG_DONTWAIT).is_err() {
            break;
        }
    }
}

/// Drops the datagrams waiting on the corestack side (a socket connected
/// to a peer only the kernel side reaches).
pub(super) fn udp_drain(u: &mut UdpSocket) {
    let mut none = [0u8; 0];
    for _ in 0..DRAIN_MAX {
        if u.try_recv(&mut none, false).is_none() {
            break;
        }
    }
}

pub(super) fn kernel_recv(fd: c_int, bufs: &mut [&mut [u8]], flags: c_int) -> R<Option<Recvd>> {
    match kernel_recv_flags(fd, bufs, flags | libc::MSG_DONTWAIT) {
        Ok(r) => Ok(Some(r)),
        Err(libc::EAGAIN) => Ok(None),
        Err(e) => Err(e),
    }
}

pub(super) fn kernel_recv_blocking(fd: c_int, bufs: &mut [&mut [u8]], flags: c_int) -> R<Recvd> {
    kernel_recv_flags(fd, bufs, flags)
}

pub(super) fn kernel_recv_flags(fd: c_int, bufs: &mut [&mut [u8]], flags: c_int) -> R<Recvd> {
    if bufs.len() <= 1 {
        let mut empty = [0u8; 0];
        let buf: &mut [u8] = match bufs.first_mut() {
            Some(b) => b,
            None => &mut empty,
        };
        let (n, a) = k::recvfrom(fd, buf, flags)?;
        let copied = n.min(buf.len());
        return Ok(Recvd {
            n: copied,
            full: n,
            from: Sender::Kernel(a),
        });
    }
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let mut tmp = vec![0u8; total];
    let (n, a) = k::recvfrom(fd, &mut tmp, flags)?;
    let copied = scatter(&tmp[..n.min(total)], bufs);
    Ok(Recvd {
        n: copied,
        full: n,
        from: Sender::Kernel(a),
    })
}

pub(super) fn kernel_send(fd: c_int, bufs: &[&[u8]], flags: c_int, to: Option<&[u8]>) -> R<usize> {
    if bufs.len() == 1 {
        return k::sendto(fd, bufs[0], flags, to);
    }
    k::sendto(fd, &bufs.concat(), flags, to)
}

pub(super) fn scatter(data: &[u8], bufs: &mut [&mut [u8]]) -> usize {
    let mut off = 0;
    for b in bufs.iter_mut() {
        let n = (data.len() - off).min(b.len());
        b[..n].copy_from_slice(&data[off..off + n]);
        off += n;
        if off == data.len() {
            break;
        }
    }
    off
}

pub(super) fn peek_into(s: &TcpStream, bufs: &mut [&mut [u8]]) -> usize {
    if bufs.len() == 1 {
        return s.peek(bufs[0]);
    }
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let mut tmp = vec![0u8; total];
    let n = s.peek(&mut tmp);
    scatter(&tmp[..n], bufs)
}

/// Reads into `bufs` past the first `skip` bytes (already filled).
pub(super) fn read_into(s: &mut TcpStream, bufs: &mut [&mut [u8]], skip: usize) -> R<usize> {
    past_skip(bufs, skip, |b, from| s.read(&mut b[from..]))
}

/// Writes `bufs` past the first `skip` bytes (already sent); returns how many.
pub(super) fn write_from(s: &mut TcpStream, bufs: &[&[u8]], skip: usize) -> R<usize> {
    past_skip(bufs, skip, |b, from| s.write(&b[from..]))
}

/// Runs `io(buffer, from)` on each of `bufs` past the first `skip` bytes (already done),
/// from where the done part ends in it, until one moves less than asked (0: end of
/// stream); returns the bytes moved. A would-block, or an error after some bytes, ends it
/// with those; an error before any is its errno.
fn past_skip<B: AsRef<[u8]>>(
    bufs: impl IntoIterator<Item = B>,
    skip: usize,
    mut io: impl FnMut(B, usize) -> std::io::Result<usize>,
) -> R<usize> {
    let mut n = 0;
    let mut off = 0;
    for b in bufs {
        let len = b.as_ref().len();
        if off + len <= skip {
            off += len;
            continue;
        }
        let from = skip.saturating_sub(off);
        off += len;
        match io(b, from) {
            Ok(k) => {
                n += k;
                if k < len - from {
                    return Ok(n);
                }
            }
            Err(e) if would_block(&e) => return Ok(n),
            Err(_) if n > 0 => return Ok(n),
            Err(e) => return Err(errno::of(&e)),
        }
    }
    Ok(n)
}

pub(super) fn udp_recv(
    u: &mut UdpSocket,
    bufs: &mut [&mut [u8]],
    peek: bool,
    peer: Option<SocketAddr>,
) -> Option<Recvd> {
    // Bounded by the ring: every skipped datagram is consumed.
    loop {
        let (n, full, from) = if bufs.len() == 1 {
            u.try_recv(bufs[0], peek)?
        } else {
            let total: usize = bufs.iter().map(|b| b.len()).sum();
            let mut tmp = vec![0u8; total];
            let (n, full, from) = u.try_recv(&mut tmp, peek)?;
            scatter(&tmp[..n], bufs);
            (n, full, from)
        };
        let from = addr::canonical(from);
        if peer.is_some_and(|p| !addr::same_peer(p, from)) {
            if peek {
                let mut none = [0u8; 0];
                u.try_recv(&mut none, false);
            }
            continue;
        }
        return Some(Recvd {
            n,
            full,
            from: Sender::Core(from),
        });
    }
}
