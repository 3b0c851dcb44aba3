//! Every raw pointer from C is turned into a Rust reference here, and only
//! here: a null pointer becomes EFAULT, a wrong address family
//! EAFNOSUPPORT. The caller's promise (a pointer is valid for the length
//! it gives) is the `# Safety` contract of the exported functions.

use crate::error::{Error, Result};
use core::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::ffi::c_void;

/// The C `struct cs_event` (see include/corestack.h): 16 bytes, 8-aligned.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CsEvent {
    /// CS_POLLIN | CS_POLLOUT | CS_POLLHUP bits.
    pub events: u32,
    /// The value given to `cs_poller_ctl` for this descriptor.
    pub data: u64,
}

const _: () = assert!(core::mem::size_of::<CsEvent>() == 16);

/// `len` bytes at `buf` to read from. A null `buf` is EFAULT unless `len` is 0.
///
/// # Safety
/// `buf` must be null or valid for reads of `len` bytes, not written by
/// anyone else for the duration of the call.
pub(crate) unsafe fn bytes<'a>(buf: *const c_void, len: usize) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(Error::errno(libc::EFAULT));
    }
    if len > isize::MAX as usize {
        return Err(Error::errno(libc::EINVAL));
    }
    // SAFETY: non-null, and the caller promises `len` readable bytes that
    // nobody writes during the call; len <= isize::MAX was checked.
    Ok(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) })
}

/// `len` bytes at `buf` to write into. A null `buf` is EFAULT unless `len` is 0.
///
/// # Safety
/// `buf` must be null or valid for writes of `len` bytes, not accessed by
/// anyone else for the duration of the call.
pub(crate) unsafe fn bytes_mut<'a>(buf: *mut c_void, len: usize) -> Result<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(Error::errno(libc::EFAULT));
    }
    if len > isize::MAX as usize {
        return Err(Error::errno(libc::EINVAL));
    }
    // SAFETY: non-null, and the caller promises `len` writable bytes that
    // nobody else touches during the call; len <= isize::MAX was checked.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) })
}

/// Reads a socket address: a `struct sockaddr_in` (AF_INET) or, when its
/// family field says AF_INET6, a `struct sockaddr_in6` (RFC 3493 §3.3;
/// flow information and scope id are not used). Errors: EFAULT for null,
/// EAFNOSUPPORT for another family.
///
/// # Safety
/// `a` must be null or point to a readable `struct sockaddr_in`, or to a
/// readable `struct sockaddr_in6` when its family is AF_INET6.
pub(crate) unsafe fn read_addr(a: *const libc::sockaddr_in) -> Result<SocketAddr> {
    if a.is_null() {
        return Err(Error::errno(libc::EFAULT));
    }
    // SAFETY: non-null and the caller promises a readable sockaddr_in;
    // read_unaligned accepts any alignment.
    let sa = unsafe { a.read_unaligned() };
    match i32::from(sa.sin_family) {
        libc::AF_INET => Ok(SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)),
            u16::from_be(sa.sin_port),
        ))),
        libc::AF_INET6 => {
            // SAFETY: the family says sockaddr_in6, which the caller then
            // promises is readable.
            let s6 = unsafe { a.cast::<libc::sockaddr_in6>().read_unaligned() };
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(s6.sin6_addr.s6_addr),
                u16::from_be(s6.sin6_port),
                0,
                0,
            )))
        }
        _ => Err(Error::msg(
            libc::EAFNOSUPPORT,
            "sin_family must be AF_INET or AF_INET6",
        )),
    }
}

/// Writes `addr` to `out` (network byte order): an IPv4 address as a
/// `struct sockaddr_in`, an IPv6 one as a `struct sockaddr_in6`; a null
/// `out` is skipped (the caller did not ask).
///
/// # Safety
/// `out` must be null or point to a writable `struct sockaddr_in`, or a
/// writable `struct sockaddr_in6` when `addr` is IPv6 (the socket was
/// bound or connected with AF_INET6, or accepted by such a listener).
pub(crate) unsafe fn write_addr(out: *mut libc::sockaddr_in, addr: SocketAddr) {
    if out.is_null() {
        return;
    }
    match addr {
        SocketAddr::V4(addr) => {
            // SAFETY: sockaddr_in is plain old data: all-zero bytes are valid.
            let mut sa: libc::sockaddr_in = unsafe { core::mem::zeroed() };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_port = addr.port().to_be();
            sa.sin_addr.s_addr = u32::from(*addr.ip()).to_be();
            // SAFETY: non-null and the caller promises a writable sockaddr_in;
            // write_unaligned accepts any alignment.
            unsafe { out.write_unaligned(sa) }
        }
        SocketAddr::V6(addr) => {
            // SAFETY: sockaddr_in6 is plain old data: all-zero bytes are valid.
            let mut sa: libc::sockaddr_in6 = unsafe { core::mem::zeroed() };
            sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sa.sin6_port = addr.port().to_be();
            sa.sin6_addr.s6_addr = addr.ip().octets();
            // SAFETY: non-null, and for an IPv6 address the caller promises
            // a writable sockaddr_in6.
            unsafe { out.cast::<libc::sockaddr_in6>().write_unaligned(sa) }
        }
    }
}

/// `max` event records at `evs` to fill. Errors: EINVAL when `max` <= 0,
/// EFAULT for null.
///
/// # Safety
/// `evs` must be null or valid for writes of `max` `struct cs_event`s.
pub(crate) unsafe fn events<'a>(evs: *mut CsEvent, max: i32) -> Result<&'a mut [CsEvent]> {
    if max <= 0 {
        return Err(Error::msg(libc::EINVAL, "max must be at least 1"));
    }
    if evs.is_null() {
        return Err(Error::errno(libc::EFAULT));
    }
    if evs.align_offset(core::mem::align_of::<CsEvent>()) != 0 {
        return Err(Error::msg(libc::EINVAL, "events array is misaligned"));
    }
    // SAFETY: non-null, aligned (checked), and the caller promises `max`
    // writable records that nobody else touches during the call.
    Ok(unsafe { std::slice::from_raw_parts_mut(evs, max as usize) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addr_round_trip_keeps_network_byte_order() {
        let a = SocketAddrV4::new(Ipv4Addr::new(10, 1, 2, 3), 7007);
        // SAFETY: all-zero sockaddr_in is valid.
        let mut sa: libc::sockaddr_in = unsafe { core::mem::zeroed() };
        // SAFETY: `sa` is a live, writable sockaddr_in.
        unsafe { write_addr(&mut sa, a.into()) };
        assert_eq!(sa.sin_port, 7007u16.to_be());
        assert_eq!(
            sa.sin_addr.s_addr,
            u32::from_be_bytes([10, 1, 2, 3]).to_be()
        );
        // SAFETY: `sa` is a live, readable sockaddr_in.
        assert_eq!(unsafe { read_addr(&sa) }.unwrap(), SocketAddr::V4(a));
    }

    #[test]
    fn v6_addr_round_trips_through_sockaddr_in6() {
        let a: SocketAddr = "[fd00:1::2]:7007".parse().unwrap();
        // SAFETY: all-zero sockaddr_in6 is valid.
        let mut sa: libc::sockaddr_in6 = unsafe { core::mem::zeroed() };
        let p = (&mut sa as *mut libc::sockaddr_in6).cast::<libc::sockaddr_in>();
        // SAFETY: `p` points to a live sockaddr_in6, which an IPv6 address needs.
        unsafe { write_addr(p, a) };
        assert_eq!(i32::from(sa.sin6_family), libc::AF_INET6);
        assert_eq!(sa.sin6_port, 7007u16.to_be());
        // SAFETY: as above, readable; its family says sockaddr_in6.
        assert_eq!(unsafe { read_addr(p) }.unwrap(), a);
    }

    #[test]
    fn read_addr_wrong_family_is_eafnosupport_and_null_is_efault() {
        // SAFETY: all-zero sockaddr_in is valid.
        let mut sa: libc::sockaddr_in = unsafe { core::mem::zeroed() };
        sa.sin_family = libc::AF_UNIX as libc::sa_family_t;
        // SAFETY: `sa` is a live, readable sockaddr_in; null is allowed.
        unsafe {
            assert_eq!(read_addr(&sa).unwrap_err().errno, libc::EAFNOSUPPORT);
            assert_eq!(
                read_addr(core::ptr::null()).unwrap_err().errno,
                libc::EFAULT
            );
        }
    }
}
