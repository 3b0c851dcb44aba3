//! The script's socket calls: what each does to the engine's application
//! side (commands, the rings of its sockets) and the result it must return.

use super::*;

impl Runner {
    fn fd_arg(c: &Call) -> Result<i64, String> {
        c.args
            .first()
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| format!("{}: the first argument must be a file descriptor", c.name))
    }

    /// The length a `read` or `write` names, its third argument.
    fn len_arg(c: &Call) -> Result<usize, String> {
        c.args
            .get(2)
            .and_then(|l| l.parse().ok())
            .ok_or_else(|| format!("{}: the third argument must be a length", c.name))
    }

    pub(super) fn call(&mut self, c: &Call) -> Outcome {
        let want = |got: i64, errno: Option<&str>| -> Outcome {
            if got == c.ret && errno == c.errno.as_deref() {
                Ok(())
            } else {
                Err(format!(
                    "{}: expected {} {}, got {got} {}",
                    c.name,
                    c.ret,
                    c.errno.as_deref().unwrap_or(""),
                    errno.unwrap_or("")
                ))
            }
        };
        match c.name.as_str() {
            "socket" => {
                self.fds.insert(c.ret, Fd::Fresh { nodelay: false });
                Ok(())
            }
            "bind" | "fcntl" | "getsockopt" => Ok(()),
            "setsockopt" => self.setsockopt(c),
            "listen" => {
                let fd = Self::fd_arg(c)?;
                let backlog: usize = c.args.get(1).and_then(|b| b.parse().ok()).unwrap_or(1);
                let (accept, accepted) = spsc::channel::<Accepted>(backlog.max(1));
                self.fds.insert(fd, Fd::Listener { accepted });
                self.push(Command::Listen {
                    id: fd as u64,
                    owner: Owner::LOCAL,
                    shared: StatusHandle::local(),
                    local: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, LOCAL_PORT)),
                    v6only: false,
                    accept: AcceptQueue::Local(accept),
                    reuseport: None,
                })
            }
            "accept" => {
                let fd = Self::fd_arg(c)?;
                let Some(Fd::Listener { accepted }) = self.fds.get_mut(&fd) else {
                    return Err(format!("accept: {fd} is not listening"));
                };
                match accepted.pop() {
                    Some(a) => {
                        self.fds.insert(
                            c.ret,
                            Fd::Conn {
                                id: a.id,
                                shared: a.shared,
                                tx: a.tx,
                                rx: a.rx,
                            },
                        );
                        Ok(())
                    }
                    None => want(-1, Some("EAGAIN")),
                }
            }
            "connect" => {
                let fd = Self::fd_arg(c)?;
                let nodelay = matches!(self.fds.get(&fd), Some(Fd::Fresh { nodelay: true }));
                let shared = StatusHandle::local();
                let (app_tx, eng_tx) = bytes::ring(RING);
                let (eng_rx, app_rx) = bytes::ring(RING);
                self.fds.insert(
                    fd,
                    Fd::Conn {
                        id: fd as u64,
                        shared: shared.clone(),
                        tx: app_tx,
                        rx: app_rx,
                    },
                );
                self.push(Command::Connect {
                    id: fd as u64,
                    owner: Owner::LOCAL,
                    shared,
                    local_port: 0,
                    remote: SocketAddr::V4(SocketAddrV4::new(REMOTE, REMOTE_PORT)),
                    tx: eng_tx,
                    rx: eng_rx,
                    nodelay,
                })
            }
            "write" | "send" => {
                let (fd, len) = (Self::fd_arg(c)?, Self::len_arg(c)?);
                let Some(Fd::Conn { id, tx, shared, .. }) = self.fds.get_mut(&fd) else {
                    return Err(format!("write: {fd} is not connected"));
                };
                if shared.state() == SockState::Closed {
                    return want(-1, Some(errno_name(shared.error())));
                }
                let base = tx.position() as usize;
                let data: Vec<u8> = (0..len.min(tx.free())).map(|i| pattern(base + i)).collect();
                let n = tx.write(&data);
                let id = *id;
                self.push(Command::Send { id })?;
                want(n as i64, None)
            }
            "read" | "recv" => {
                let (fd, len) = (Self::fd_arg(c)?, Self::len_arg(c)?);
                let Some(Fd::Conn { id, rx, shared, .. }) = self.fds.get_mut(&fd) else {
                    return Err(format!("read: {fd} is not connected"));
                };
                let mut buf = vec![0u8; len];
                let n = rx.read(&mut buf);
                let id = *id;
                if n > 0 {
                    self.push(Command::Recvd { id })?;
                    return want(n as i64, None);
                }
                if shared.has_flags(FLAG_RX_FIN) {
                    return want(0, None);
                }
                match shared.error() {
                    0 => want(-1, Some("EAGAIN")),
                    e => want(-1, Some(errno_name(e))),
                }
            }
            "close" => {
                let fd = Self::fd_arg(c)?;
                let id = match self.fds.remove(&fd) {
                    Some(Fd::Conn { id, .. }) => id,
                    Some(Fd::Listener { .. }) => fd as u64,
                    Some(Fd::Fresh { .. }) => return Ok(()),
                    None => return Err(format!("close: no socket {fd}")),
                };
                if self.opts.remove(&fd).is_some_and(|o| o.abort) {
                    return self.push(Command::Abort { id });
                }
                self.push(Command::Close { id })
            }
            "shutdown" => {
                let fd = Self::fd_arg(c)?;
                let Some(Fd::Conn { id, .. }) = self.fds.get(&fd) else {
                    return Err(format!("shutdown: {fd} is not connected"));
                };
                let id = *id;
                self.push(Command::Shutdown { id })
            }
            other => Err(format!("the interpreter has no socket call {other:?}")),
        }
    }

    /// `setsockopt(fd, LEVEL, NAME, [v], len)`: TCP_NODELAY, SO_KEEPALIVE, TCP_KEEPIDLE,
    /// TCP_KEEPINTVL, TCP_KEEPCNT, TCP_USER_TIMEOUT (ms), TCP_CONGESTION ("reno", "cubic",
    /// "dctcp", "bbr") on a connection, and SO_LINGER
    /// `{onoff=1, linger=0}` (close then resets); TCP_NODELAY also before `connect`. Other
    /// options are accepted and ignored.
    fn setsockopt(&mut self, c: &Call) -> Outcome {
        let fd = Self::fd_arg(c)?;
        let name = c.args.get(2).map(String::as_str).unwrap_or("");
        let raw = c.args.get(3).map(String::as_str).unwrap_or("");
        let value: u32 = raw
            .trim_matches(|ch| ch == '[' || ch == ']')
            .parse()
            .unwrap_or(0);
        if name == "SO_LINGER" {
            let zero = raw.replace(' ', "").contains("linger=0") && raw.contains("onoff=1");
            self.opts.entry(fd).or_default().abort = zero;
            return Ok(());
        }
        let id = match self.fds.get_mut(&fd) {
            Some(Fd::Fresh { nodelay }) if name == "TCP_NODELAY" => {
                *nodelay = value != 0;
                return Ok(());
            }
            Some(Fd::Conn { id, .. }) => *id,
            Some(_) => return Ok(()),
            None => return Err(format!("setsockopt: no socket {fd}")),
        };
        let o = self.opts.entry(fd).or_default();
        let ka = |o: &SockOpts| Command::SetKeepaliveParams {
            id,
            idle_s: o.keepidle,
            interval_s: o.keepintvl,
            count: o.keepcnt,
        };
        let cmd = match name {
            "TCP_NODELAY" => Command::SetNodelay { id, on: value != 0 },
            "SO_KEEPALIVE" => Command::SetKeepalive { id, on: value != 0 },
            "TCP_KEEPIDLE" => {
                o.keepidle = value;
                ka(o)
            }
            "TCP_KEEPINTVL" => {
                o.keepintvl = value;
                ka(o)
            }
            "TCP_KEEPCNT" => {
                o.keepcnt = value;
                ka(o)
            }
            "TCP_USER_TIMEOUT" => Command::SetUserTimeout { id, ms: value },
            "TCP_CONGESTION" => {
                let cc = match raw.trim_matches('"') {
                    "reno" => engine::tcp::CcKind::NewReno,
                    "cubic" => engine::tcp::CcKind::Cubic,
                    "dctcp" => engine::tcp::CcKind::Dctcp,
                    "bbr" => engine::tcp::CcKind::Bbr,
                    other => return Err(format!("TCP_CONGESTION: no {other:?}")),
                };
                Command::SetCongestion { id, cc }
            }
            _ => return Ok(()),
        };
        self.push(cmd)
    }
}

/// The errno name a script compares with (`appif::errno`'s names; EIO
/// for an errno it has no name for).
fn errno_name(e: i32) -> &'static str {
    appif::errno::name(e).unwrap_or("EIO")
}
