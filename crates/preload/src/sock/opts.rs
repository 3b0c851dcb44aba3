//! The options of a socket as it records them ([`Opts`]): what a new
//! stream takes from them. `crate::opts` is the setsockopt and getsockopt
//! table that fills and reads them.
#![forbid(unsafe_code)]

use core::ffi::c_int;
use core::time::Duration;
use corestack::{CcKind, TcpStream};

/// The options of a socket, as recorded.
#[derive(Debug, Clone, Default)]
pub struct Opts {
    pub reuseaddr: bool,
    pub reuseport: bool,
    pub keepalive: bool,
    pub keepidle: Option<i32>,
    pub keepintvl: Option<i32>,
    pub keepcnt: Option<i32>,
    pub nodelay: bool,
    /// SO_LINGER's l_linger when l_onoff is set.
    pub linger: Option<i32>,
    pub sndbuf: Option<i32>,
    pub rcvbuf: Option<i32>,
    pub rcvtimeo: Option<Duration>,
    pub sndtimeo: Option<Duration>,
    pub tos: i32,
    pub v6only: bool,
    /// IPV6_TCLASS (0..=255).
    pub tclass: i32,
    /// IPV6_UNICAST_HOPS (None: the default, 64).
    pub unicast_hops: Option<i32>,
    /// IPV6_RECVPKTINFO.
    pub recv_pktinfo: bool,
    pub congestion: Option<CcKind>,
    pub maxseg: Option<i32>,
    /// TCP_CORK.
    pub cork: bool,
    /// TCP_QUICKACK cleared (Linux's "pingpong" mode): reads back 0.
    pub no_quickack: bool,
    /// TCP_DEFER_ACCEPT as Linux keeps it: SYN-ACK retransmissions.
    pub defer_accept: u8,
    /// TCP_USER_TIMEOUT, milliseconds (0: the default).
    pub user_timeout: i32,
    /// Options set while undecided that corestack does not honour
    /// (level, name): said on stderr if the socket goes to corestack.
    pub unhonoured: Vec<(c_int, c_int)>,
}

impl Opts {
    /// The options of a fresh socket of `family`: IPV6_V6ONLY starts as
    /// `/proc/sys/net/ipv6/bindv6only` says (read once; 0 when unreadable).
    pub fn for_family(family: c_int) -> Opts {
        static BINDV6ONLY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let v6only = family == libc::AF_INET6
            && *BINDV6ONLY.get_or_init(|| {
                let _inside = crate::sys::Inside::enter();
                std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only")
                    .is_ok_and(|v| v.trim() == "1")
            });
        Opts {
            v6only,
            ..Opts::default()
        }
    }

    /// What an accepted connection inherits from its listener (all of it,
    /// as Linux clones the listening socket).
    pub fn inherited(&self) -> Opts {
        self.clone()
    }

    /// IPV6_TCLASS and IPV6_UNICAST_HOPS as the engine takes them:
    /// (Traffic Class, Hop Limit), 0 for the defaults.
    pub fn ip6_header(&self) -> (u8, u8) {
        let hops = self.unicast_hops.map_or(0, |h| h.clamp(0, 255) as u8);
        (self.tclass.clamp(0, 255) as u8, hops)
    }

    /// Applies what the engine honours to a new stream.
    pub fn apply_to_stream(&self, s: &mut TcpStream) {
        let (tclass, hops) = self.ip6_header();
        if (tclass, hops) != (0, 0) {
            let _ = s.set_ipv6_header(tclass, hops);
        }
        if self.cork {
            s.set_cork(true);
        }
        if self.nodelay {
            let _ = s.set_nodelay(true);
        }
        if self.keepalive {
            let _ = s.set_keepalive(true);
        }
        if let Some(cc) = self.congestion {
            let _ = s.set_congestion(cc);
        }
        if self.user_timeout > 0 {
            s.set_user_timeout(Duration::from_millis(self.user_timeout as u64));
        }
        if self.keepidle.is_some() || self.keepintvl.is_some() || self.keepcnt.is_some() {
            self.apply_keepalive_params(s);
        }
        let (rcv, snd) = self.buffer_sizes();
        if rcv > 0 {
            let _ = s.set_recv_buffer_size(rcv);
        }
        if snd > 0 {
            let _ = s.set_send_buffer_size(snd);
        }
    }

    /// SO_RCVBUF and SO_SNDBUF as the engine takes them, bytes (0: not
    /// set): the receive window bound and the send buffer, at least 4 KiB.
    pub fn buffer_sizes(&self) -> (usize, usize) {
        let b = |v: Option<i32>| v.map_or(0, |v| (v.max(0) as usize).max(4096));
        (b(self.rcvbuf), b(self.sndbuf))
    }

    /// Says on stderr which options set before the bind/connect decision
    /// this socket, now on corestack, goes without (once per socket; the
    /// kernel took them, corestack does not honour them).
    pub fn report_unhonoured(&mut self, at: &str) {
        for (level, name) in std::mem::take(&mut self.unhonoured) {
            crate::sys::log_line(&format!(
                "setsockopt level {level} name {name} made before {at} is not supported on corestack sockets: the socket went to corestack without it (see the option table in docs/shim.md)"
            ));
        }
    }

    /// TCP_KEEPIDLE / TCP_KEEPINTVL / TCP_KEEPCNT (Linux's defaults for the
    /// ones not set).
    pub fn apply_keepalive_params(&self, s: &TcpStream) {
        let secs = |v: Option<i32>, d: u64| Duration::from_secs(v.map_or(d, |v| v.max(1) as u64));
        s.set_keepalive_params(
            secs(self.keepidle, 7200),
            secs(self.keepintvl, 75),
            self.keepcnt.map_or(9, |c| c.max(1) as u32),
        );
    }
}
