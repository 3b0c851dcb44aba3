//! Socket options: what corestack honours, records, or refuses.
//!
//! Every option set on a socket that still has its kernel socket (an
//! undecided socket, or the wildcard's kernel side) is set on the kernel
//! socket too, so a hand-over to the kernel keeps it. An undecided socket
//! answers every option as the kernel does. Once on corestack:
//!
//! | option | corestack |
//! |---|---|
//! | SO_REUSEADDR | recorded (reported back) |
//! | SO_REUSEPORT | applied to TCP listeners: this process's listeners that set it share their address and port, each connection going to one of them by a hash of the peer (with several engines, to one opened by a thread of the engine that owns the flow, when there is one); reported back; UDP: recorded only |
//! | SO_KEEPALIVE | applied |
//! | TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT | applied (whole seconds) |
//! | TCP_NODELAY | applied |
//! | SO_LINGER | `{1, 0}`: close resets (RST); other values: recorded, close never blocks (the data is still delivered) |
//! | SO_SNDBUF, SO_RCVBUF | TCP: applied (the receive window stops growing at SO_RCVBUF, auto-tuning off; the send buffer is SO_SNDBUF; on a listener, for the connections it accepts); reported doubled, as Linux does (unset: the rings' size now); UDP: recorded only |
//! | SO_RCVTIMEO, SO_SNDTIMEO | applied by the shim (EAGAIN on expiry; EDOM for a bad timeval) |
//! | SO_ERROR, SO_TYPE, SO_DOMAIN, SO_PROTOCOL, SO_ACCEPTCONN | answered (get only; set: ENOPROTOOPT) |
//! | TCP_INFO | answered from the engine's published connection table (at most 10 ms old): state, rtt, rttvar (derived from RTO), cwnd, ssthresh, mss, retransmits |
//! | TCP_CONGESTION | reno, cubic, dctcp applied; others ENOENT |
//! | TCP_MAXSEG | get: the MSS; set: recorded, not applied |
//! | IP_TOS | recorded and reported back; segments go out with TOS 0 |
//! | IPV6_V6ONLY | applied (decides whether `::` serves IPv4; default `/proc/sys/net/ipv6/bindv6only`; EINVAL once bound, as Linux) |
//! | IPV6_TCLASS, IPV6_UNICAST_HOPS | applied: the socket's IPv6 packets carry that Traffic Class (its ECN bits stay the engine's) and Hop Limit, from the next packet on; a listener's connections inherit them; reported back (EINVAL outside -1..=255; -1: the default, 0 and 64; a hop limit of 0 sends 64) |
//! | IPV6_RECVPKTINFO | UDP: applied; recvmsg gives an IPV6_PKTINFO control message (the local address the datagram was sent to, v4-mapped for IPv4, and the interface index) for datagrams corestack delivered |
//! | IPV6_PKTINFO (sendmsg control message) | UDP: accepted when its address is `::` or the address corestack sends from to that peer (and its index 0 or the interface's); another address: EINVAL |
//! | other IPPROTO_IPV6 options, or any on an AF_INET socket | ENOPROTOOPT (a wildcard socket's kernel side takes them, said once) |
//! | TCP_CORK | applied by the client library: while set, writes do not tell the engine to send (until half the send buffer is queued); clearing it sends what is queued. Linux's 200 ms ceiling is not kept |
//! | TCP_QUICKACK | recorded and reported back as Linux does (1 until set to 0); ACKs are not delayed by corestack |
//! | TCP_DEFER_ACCEPT | recorded; reported back rounded up to Linux's retransmission steps (5 reads back 7); connections are handed to accept at once |
//! | TCP_USER_TIMEOUT | applied (milliseconds; EINVAL below 0) |
//! | anything else | ENOPROTOOPT, said once on stderr per option; on a wildcard socket the kernel side takes it (said once); set before the bind/connect decision, the kernel's answer, and said on stderr when the socket goes to corestack without it |
//!
//! docs/shim.md has the same table.
#![forbid(unsafe_code)]

use crate::sock::{Sock, Ty, R};
use crate::sys::k;
use appif::errno::Errno;
use core::ffi::c_int;
use core::sync::atomic::AtomicBool;
use core::time::Duration;
use corestack::CcKind;

/// Linux's default hop limit (net.ipv6.conf.*.hop_limit).
pub const DEFAULT_HOPS: i32 = 64;

fn int(val: &[u8]) -> R<i32> {
    if val.len() < 4 {
        return Err(libc::EINVAL);
    }
    Ok(i32::from_ne_bytes([val[0], val[1], val[2], val[3]]))
}

fn timeval(val: &[u8]) -> R<Option<Duration>> {
    if val.len() < 16 {
        return Err(libc::EINVAL);
    }
    let sec = i64::from_ne_bytes(val[..8].try_into().map_err(|_| libc::EINVAL)?);
    let usec = i64::from_ne_bytes(val[8..16].try_into().map_err(|_| libc::EINVAL)?);
    if !(0..1_000_000).contains(&usec) {
        return Err(libc::EDOM);
    }
    if sec < 0 || (sec == 0 && usec == 0) {
        return Ok(None);
    }
    Ok(Some(
        Duration::from_secs(sec as u64) + Duration::from_micros(usec as u64),
    ))
}

fn cc_name(cc: CcKind) -> &'static str {
    cc.linux_name()
}

static WARNED: [AtomicBool; 8] = [const { AtomicBool::new(false) }; 8];
static KERNEL_ONLY: [AtomicBool; 8] = [const { AtomicBool::new(false) }; 8];

/// [`record`]'s answer for an option corestack does not know (not an
/// errno: [`set`] decides what the application sees).
const UNKNOWN: Errno = -1;

/// Linux's `secs_to_retrans` for TCP_DEFER_ACCEPT (initial timeout 1 s,
/// doubling up to 120 s): the retransmissions that cover `secs`.
fn secs_to_retrans(secs: i32) -> u8 {
    if secs <= 0 {
        return 0;
    }
    let (mut timeout, mut period, mut res) = (1i32, 1i32, 1u8);
    while secs > period && res < 255 {
        res += 1;
        timeout = (timeout * 2).min(120);
        period += timeout;
    }
    res
}

/// Linux's `retrans_to_secs`: the seconds `retrans` retransmissions take.
fn retrans_to_secs(retrans: u8) -> i32 {
    if retrans == 0 {
        return 0;
    }
    let (mut timeout, mut period) = (1i32, 1i32);
    for _ in 1..retrans {
        timeout = (timeout * 2).min(120);
        period += timeout;
    }
    period
}

fn refuse(level: c_int, name: c_int) -> Errno {
    let i = (name as usize ^ level as usize) % WARNED.len();
    crate::sys::log_once(
        &WARNED[i],
        &format!(
            "socket option level {level} name {name} is not supported on corestack sockets: ENOPROTOOPT (see the option table in docs/shim.md)"
        ),
    );
    libc::ENOPROTOOPT
}

/// setsockopt(2) on socket `s` at `fd`.
pub fn set(s: &Sock, fd: c_int, level: c_int, name: c_int, val: &[u8]) -> R<()> {
    if s.is_fresh() {
        // Undecided: the kernel's answer, recorded for corestack too; one
        // corestack does not know is kept to be said if the socket goes
        // to corestack (it would vanish there).
        k::setsockopt(fd, level, name, val)?;
        match record(s, level, name, val) {
            Err(UNKNOWN) => {
                let mut o = s.opts.lock().unwrap_or_else(|p| p.into_inner());
                if !o.unhonoured.contains(&(level, name)) {
                    o.unhonoured.push((level, name));
                }
            }
            // IPV6_V6ONLY after a bind recorded for corestack.
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        return Ok(());
    }
    match record(s, level, name, val) {
        Ok(()) => {
            if s.has_kernel_side() {
                let _ = k::setsockopt(fd, level, name, val);
            }
            Ok(())
        }
        // A wildcard socket: its kernel side takes what corestack does not
        // know (IP_ADD_MEMBERSHIP, SO_BROADCAST on 0.0.0.0).
        Err(UNKNOWN) if s.has_kernel_side() => {
            k::setsockopt(fd, level, name, val)?;
            let i = (name as usize ^ level as usize) % KERNEL_ONLY.len();
            crate::sys::log_once(
                &KERNEL_ONLY[i],
                &format!(
                    "socket option level {level} name {name} applies to the kernel side of a wildcard socket only (corestack does not support it)"
                ),
            );
            Ok(())
        }
        Err(UNKNOWN) => Err(refuse(level, name)),
        Err(e) => Err(e),
    }
}

/// Records (and applies what the engine honours of) one option.
fn record(s: &Sock, level: c_int, name: c_int, val: &[u8]) -> R<()> {
    let mut o = s.opts.lock().unwrap_or_else(|p| p.into_inner());
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => o.reuseaddr = int(val)? != 0,
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => o.reuseport = int(val)? != 0,
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => {
            o.keepalive = int(val)? != 0;
            let on = o.keepalive;
            drop(o);
            s.with_stream(|st| st.set_keepalive(on));
        }
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            if val.len() < 8 {
                return Err(libc::EINVAL);
            }
            let onoff = int(&val[..4])?;
            let secs = int(&val[4..8])?;
            o.linger = (onoff != 0).then_some(secs.max(0));
        }
        (libc::SOL_SOCKET, libc::SO_SNDBUF | libc::SO_RCVBUF) => {
            let v = int(val)?.max(0);
            if name == libc::SO_SNDBUF {
                o.sndbuf = Some(v);
            } else {
                o.rcvbuf = Some(v);
            }
            let o = o.clone();
            s.apply_buffers(&o);
        }
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => o.rcvtimeo = timeval(val)?,
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => o.sndtimeo = timeval(val)?,
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) if s.ty == Ty::Stream => {
            o.nodelay = int(val)? != 0;
            let on = o.nodelay;
            drop(o);
            s.with_stream(|st| st.set_nodelay(on));
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL | libc::TCP_KEEPCNT)
            if s.ty == Ty::Stream =>
        {
            let v = int(val)?;
            match name {
                libc::TCP_KEEPIDLE => o.keepidle = Some(positive(v, 32767)?),
                libc::TCP_KEEPINTVL => o.keepintvl = Some(positive(v, 32767)?),
                _ => o.keepcnt = Some(positive(v, 127)?),
            }
            let o = o.clone();
            s.with_stream(|st| o.apply_keepalive_params(st));
        }
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) if s.ty == Ty::Stream => o.maxseg = Some(int(val)?),
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) if s.ty == Ty::Stream => {
            let name = val.split(|&b| b == 0).next().unwrap_or(&[]);
            let cc = match name {
                b"reno" => CcKind::NewReno,
                b"cubic" => CcKind::Cubic,
                b"dctcp" => CcKind::Dctcp,
                b"bbr" => CcKind::Bbr,
                _ => return Err(libc::ENOENT),
            };
            o.congestion = Some(cc);
            drop(o);
            s.with_stream(|st| st.set_congestion(cc));
        }
        (libc::IPPROTO_TCP, libc::TCP_CORK) if s.ty == Ty::Stream => {
            o.cork = int(val)? != 0;
            let on = o.cork;
            drop(o);
            s.with_stream(|st| st.set_cork(on));
        }
        (libc::IPPROTO_TCP, libc::TCP_QUICKACK) if s.ty == Ty::Stream => {
            o.no_quickack = int(val)? == 0
        }
        (libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT) if s.ty == Ty::Stream => {
            o.defer_accept = secs_to_retrans(int(val)?)
        }
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) if s.ty == Ty::Stream => {
            let v = int(val)?;
            if v < 0 {
                return Err(libc::EINVAL);
            }
            o.user_timeout = v;
            drop(o);
            s.with_stream(|st| st.set_user_timeout(Duration::from_millis(v as u64)));
        }
        (libc::IPPROTO_IP, libc::IP_TOS) => o.tos = int(val)? & 0xff,
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) if s.family == libc::AF_INET6 => {
            let v = int(val)? != 0;
            drop(o);
            if s.on_corestack() {
                return Err(libc::EINVAL); // bound already (Linux)
            }
            s.opts.lock().unwrap_or_else(|p| p.into_inner()).v6only = v;
        }
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS | libc::IPV6_UNICAST_HOPS)
            if s.family == libc::AF_INET6 =>
        {
            let v = match int(val)? {
                -1 => None,
                v @ 0..=255 => Some(v),
                _ => return Err(libc::EINVAL),
            };
            if name == libc::IPV6_TCLASS {
                o.tclass = v.unwrap_or(0);
            } else {
                o.unicast_hops = v;
            }
            let (tclass, hops) = o.ip6_header();
            drop(o);
            s.apply_ip6_header(tclass, hops);
        }
        (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO) if s.family == libc::AF_INET6 => {
            o.recv_pktinfo = int(val)? != 0
        }
        // Linux: an AF_INET socket knows no IPv6 options.
        (libc::IPPROTO_IPV6, _) if s.family != libc::AF_INET6 => return Err(libc::ENOPROTOOPT),
        (
            libc::SOL_SOCKET,
            libc::SO_TYPE
            | libc::SO_DOMAIN
            | libc::SO_PROTOCOL
            | libc::SO_ACCEPTCONN
            | libc::SO_ERROR,
        ) => return Err(libc::ENOPROTOOPT),
        _ => return Err(UNKNOWN),
    }
    Ok(())
}

fn positive(v: i32, max: i32) -> R<i32> {
    if (1..=max).contains(&v) {
        Ok(v)
    } else {
        Err(libc::EINVAL)
    }
}

/// getsockopt(2) on socket `s` at `fd`: writes the value into `out` (cut
/// to its length, as Linux does) and returns the length written.
pub fn get(s: &Sock, fd: c_int, level: c_int, name: c_int, out: &mut [u8]) -> R<usize> {
    if s.is_fresh() {
        return k::getsockopt(fd, level, name, out);
    }
    let o = s.opts.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let put_int = |out: &mut [u8], v: i32| -> usize {
        let b = v.to_ne_bytes();
        let n = out.len().min(4);
        out[..n].copy_from_slice(&b[..n]);
        n
    };
    let put_tv = |out: &mut [u8], d: Option<Duration>| -> usize {
        let d = d.unwrap_or_default();
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&(d.as_secs() as i64).to_ne_bytes());
        b[8..].copy_from_slice(&i64::from(d.subsec_micros()).to_ne_bytes());
        let n = out.len().min(16);
        out[..n].copy_from_slice(&b[..n]);
        n
    };
    let default_buf =
        || 2 * crate::stack::started().map_or(256 * 1024, |st| st.ring_bytes()) as i32;
    let n = match (level, name) {
        (libc::SOL_SOCKET, libc::SO_TYPE) => put_int(
            out,
            match s.ty {
                Ty::Stream => libc::SOCK_STREAM,
                Ty::Dgram => libc::SOCK_DGRAM,
            },
        ),
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => put_int(out, s.family),
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) => put_int(
            out,
            match s.ty {
                Ty::Stream => libc::IPPROTO_TCP,
                Ty::Dgram => libc::IPPROTO_UDP,
            },
        ),
        (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => put_int(out, s.is_listener() as i32),
        (libc::SOL_SOCKET, libc::SO_ERROR) => {
            let e = match s.take_error() {
                Some(e) => e,
                None => return k::getsockopt(fd, level, name, out),
            };
            put_int(out, e)
        }
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => put_int(out, o.reuseaddr as i32),
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => put_int(out, o.reuseport as i32),
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => put_int(out, o.keepalive as i32),
        (libc::SOL_SOCKET, libc::SO_LINGER) => {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&(o.linger.is_some() as i32).to_ne_bytes());
            b[4..].copy_from_slice(&o.linger.unwrap_or(0).to_ne_bytes());
            let n = out.len().min(8);
            out[..n].copy_from_slice(&b[..n]);
            n
        }
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
            let now = s.with_stream(|st| st.send_buffer_size().min(i32::MAX as usize) as i32);
            let now = now.unwrap_or_else(default_buf);
            put_int(out, o.sndbuf.map_or(now, |v| v.saturating_mul(2)))
        }
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
            let now = s.with_stream(|st| st.recv_buffer_size().min(i32::MAX as usize) as i32);
            let now = now.unwrap_or_else(default_buf);
            put_int(out, o.rcvbuf.map_or(now, |v| v.saturating_mul(2)))
        }
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => put_tv(out, o.rcvtimeo),
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => put_tv(out, o.sndtimeo),
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) if s.ty == Ty::Stream => {
            put_int(out, o.nodelay as i32)
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) if s.ty == Ty::Stream => {
            put_int(out, o.keepidle.unwrap_or(7200))
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) if s.ty == Ty::Stream => {
            put_int(out, o.keepintvl.unwrap_or(75))
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) if s.ty == Ty::Stream => {
            put_int(out, o.keepcnt.unwrap_or(9))
        }
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) if s.ty == Ty::Stream => {
            let mss = crate::tcp_info::row(s).map_or(536, |r| i32::from(r.mss));
            put_int(out, mss)
        }
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) if s.ty == Ty::Stream => {
            let name = cc_name(o.congestion.unwrap_or_else(CcKind::system_default));
            let mut b = [0u8; 16];
            b[..name.len()].copy_from_slice(name.as_bytes());
            let n = out.len().min(16);
            out[..n].copy_from_slice(&b[..n]);
            n
        }
        (libc::IPPROTO_TCP, libc::TCP_INFO) if s.ty == Ty::Stream => {
            let b = crate::tcp_info::bytes(s);
            let n = out.len().min(b.len());
            out[..n].copy_from_slice(&b[..n]);
            n
        }
        (libc::IPPROTO_TCP, libc::TCP_CORK) if s.ty == Ty::Stream => put_int(out, o.cork as i32),
        (libc::IPPROTO_TCP, libc::TCP_QUICKACK) if s.ty == Ty::Stream => {
            put_int(out, !o.no_quickack as i32)
        }
        (libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT) if s.ty == Ty::Stream => {
            put_int(out, retrans_to_secs(o.defer_accept))
        }
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) if s.ty == Ty::Stream => {
            put_int(out, o.user_timeout)
        }
        (libc::IPPROTO_IP, libc::IP_TOS) => put_int(out, o.tos),
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) if s.family == libc::AF_INET6 => {
            put_int(out, o.v6only as i32)
        }
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if s.family == libc::AF_INET6 => {
            put_int(out, o.tclass)
        }
        (libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS) if s.family == libc::AF_INET6 => {
            put_int(out, o.unicast_hops.unwrap_or(DEFAULT_HOPS))
        }
        (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO) if s.family == libc::AF_INET6 => {
            put_int(out, o.recv_pktinfo as i32)
        }
        (libc::IPPROTO_IPV6, _) if s.family != libc::AF_INET6 => return Err(libc::ENOPROTOOPT),
        _ => {
            if s.has_kernel_side() {
                return k::getsockopt(fd, level, name, out);
            }
            return Err(refuse(level, name));
        }
    };
    Ok(n)
}
