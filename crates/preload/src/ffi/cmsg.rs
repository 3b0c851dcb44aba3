//! Control messages (ancillary data) on corestack UDP sockets: the
//! IPV6_PKTINFO that recvmsg gives with IPV6_RECVPKTINFO set, and the one
//! sendmsg may carry (RFC 3542 §6).

use super::*;
use core::net::{IpAddr, Ipv6Addr, SocketAddr};

/// Bytes of `struct in6_pktinfo`: the address (16), the interface index (4).
const PKTINFO_LEN: usize = 20;

/// Writes one IPV6_PKTINFO control message (`ip`, `ifindex`) into `m`'s
/// control buffer and sets msg_controllen to what it used; when the
/// buffer is too small (or null) nothing is written, msg_controllen is 0
/// and MSG_CTRUNC is added to msg_flags, as Linux does.
///
/// # Safety
/// `m.msg_control` is null or writable for `m.msg_controllen` bytes.
pub(super) unsafe fn put_pktinfo(m: &mut msghdr, ip: Ipv6Addr, ifindex: u32) {
    // SAFETY: constant computations on a length.
    let (space, len) = unsafe {
        (
            libc::CMSG_SPACE(PKTINFO_LEN as u32) as usize,
            libc::CMSG_LEN(PKTINFO_LEN as u32) as usize,
        )
    };
    if m.msg_control.is_null() || m.msg_controllen < len {
        m.msg_controllen = 0;
        m.msg_flags |= libc::MSG_CTRUNC;
        return;
    }
    // SAFETY: the buffer holds at least one header (checked above).
    let c = unsafe { libc::CMSG_FIRSTHDR(m) };
    if c.is_null() {
        m.msg_controllen = 0;
        m.msg_flags |= libc::MSG_CTRUNC;
        return;
    }
    let mut data = [0u8; PKTINFO_LEN];
    data[..16].copy_from_slice(&ip.octets());
    data[16..].copy_from_slice(&ifindex.to_ne_bytes());
    // SAFETY: `c` is the first header of a buffer of at least `len` bytes;
    // the header and its `PKTINFO_LEN` data bytes lie within it (written
    // unaligned: the application's buffer may not be aligned).
    unsafe {
        core::ptr::write_unaligned(
            c,
            libc::cmsghdr {
                cmsg_len: len as _,
                cmsg_level: libc::IPPROTO_IPV6,
                cmsg_type: libc::IPV6_PKTINFO,
            },
        );
        core::ptr::copy_nonoverlapping(data.as_ptr(), libc::CMSG_DATA(c), PKTINFO_LEN);
    }
    m.msg_controllen = space.min(m.msg_controllen);
}

/// Checks the control messages of a sendmsg on corestack socket `s` to
/// `dst` (canonical; None: not known). Only IPV6_PKTINFO on an AF_INET6
/// UDP socket is taken, and only when corestack sends as it asks: its
/// address `::` or the address corestack sends from to `dst` (its
/// IPv4-mapped form for an IPv4 peer), its interface index 0 or the
/// interface's. Errors: EINVAL for anything else (another address: the
/// engine picks the source by destination and cannot use another; other
/// control messages are not supported), said once.
///
/// # Safety
/// `m` is a readable msghdr whose control buffer is readable for
/// `msg_controllen` bytes.
pub(super) unsafe fn check_send_control(s: &Sock, m: &msghdr, dst: Option<SocketAddr>) -> R<()> {
    if m.msg_control.is_null() || m.msg_controllen == 0 {
        return Ok(());
    }
    // SAFETY: constant computation.
    let head = unsafe { libc::CMSG_LEN(0) } as usize;
    // SAFETY: CMSG_FIRSTHDR reads msg_control/msg_controllen only.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(m) };
    let mut left = 64; // control headers looked at, at most (bounded loop)
    while !c.is_null() && left > 0 {
        left -= 1;
        // SAFETY: CMSG_FIRSTHDR/CMSG_NXTHDR return headers inside the buffer.
        let h = unsafe { core::ptr::read_unaligned(c) };
        let pktinfo = h.cmsg_level == libc::IPPROTO_IPV6
            && h.cmsg_type == libc::IPV6_PKTINFO
            && s.family == libc::AF_INET6
            && s.ty == Ty::Dgram
            && h.cmsg_len as usize >= head + PKTINFO_LEN;
        if !pktinfo {
            static SAID: core::sync::atomic::AtomicBool =
                core::sync::atomic::AtomicBool::new(false);
            sys::log_once(&SAID, "sendmsg with ancillary data other than IPV6_PKTINFO on an AF_INET6 UDP socket is not supported on corestack sockets: EINVAL");
            return Err(libc::EINVAL);
        }
        let mut data = [0u8; PKTINFO_LEN];
        // SAFETY: cmsg_len covers the header and PKTINFO_LEN data bytes
        // (checked above), inside the control buffer.
        unsafe {
            core::ptr::copy_nonoverlapping(libc::CMSG_DATA(c), data.as_mut_ptr(), PKTINFO_LEN)
        };
        let mut a = [0u8; 16];
        a.copy_from_slice(&data[..16]);
        let ip = Ipv6Addr::from(a);
        let ifindex = u32::from_ne_bytes([data[16], data[17], data[18], data[19]]);
        pktinfo_ok(ip, ifindex, dst)?;
        // SAFETY: as CMSG_FIRSTHDR; a header past the buffer comes back null.
        c = unsafe { libc::CMSG_NXTHDR(m, c) };
    }
    Ok(())
}

/// Whether IPV6_PKTINFO (`ip`, `ifindex`) on a datagram to `dst` asks
/// for what corestack does anyway. Errors: EINVAL, said once.
fn pktinfo_ok(ip: Ipv6Addr, ifindex: u32, dst: Option<SocketAddr>) -> R<()> {
    let index_ok = ifindex == 0 || ifindex == stack::ifindex();
    let src = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
    let addr_ok = ip.is_unspecified()
        || match dst {
            Some(d) => stack::source_for(addr::canonical(d).ip()) == src,
            None => match src {
                IpAddr::V4(v4) => v4 == stack::local_ip(),
                IpAddr::V6(v6) => stack::is_own6(v6),
            },
        };
    if index_ok && addr_ok {
        return Ok(());
    }
    static SAID: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    sys::log_once(&SAID, "sendmsg: IPV6_PKTINFO names a source address or interface corestack does not send this datagram from (it picks the source by destination): EINVAL");
    Err(libc::EINVAL)
}
