//! Socket addresses as applications pass them (`struct sockaddr_in`,
//! `struct sockaddr_in6` as bytes) and as corestack sees them (IPv4).
//!
//! An AF_INET6 socket reaches corestack only through IPv4: a v4-mapped
//! address (`::ffff:a.b.c.d`) stands for the IPv4 one, and `::` for the
//! IPv4 wildcard unless IPV6_V6ONLY is set. Every other IPv6 address stays
//! in the kernel.
#![forbid(unsafe_code)]

use core::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};

/// A parsed socket address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sa {
    /// AF_INET.
    V4(SocketAddrV4),
    /// AF_INET6 (address, port, flow info, scope id).
    V6(Ipv6Addr, u16, u32, u32),
    /// AF_UNSPEC (connect(2) with it dissolves a UDP association).
    Unspec,
}

/// Why an address could not be read (the errno Linux gives).
pub type Errno = i32;

/// Parses `b` (the bytes the application passed, its length being the
/// `socklen_t`). Errors: EINVAL when too short for its family,
/// EAFNOSUPPORT for a family other than AF_INET, AF_INET6, AF_UNSPEC.
pub fn parse(b: &[u8]) -> Result<Sa, Errno> {
    if b.len() < 2 {
        return Err(libc::EINVAL);
    }
    let family = i32::from(u16::from_ne_bytes([b[0], b[1]]));
    match family {
        libc::AF_INET => {
            if b.len() < 16 {
                return Err(libc::EINVAL);
            }
            let port = u16::from_be_bytes([b[2], b[3]]);
            let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
            Ok(Sa::V4(SocketAddrV4::new(ip, port)))
        }
        libc::AF_INET6 => {
            if b.len() < 24 {
                return Err(libc::EINVAL);
            }
            let port = u16::from_be_bytes([b[2], b[3]]);
            let flow = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
            let mut o = [0u8; 16];
            o.copy_from_slice(&b[8..24]);
            let scope = if b.len() >= 28 {
                u32::from_ne_bytes([b[24], b[25], b[26], b[27]])
            } else {
                0
            };
            Ok(Sa::V6(Ipv6Addr::from(o), port, flow, scope))
        }
        libc::AF_UNSPEC => Ok(Sa::Unspec),
        _ => Err(libc::EAFNOSUPPORT),
    }
}

impl Sa {
    /// The IPv4 address this stands for on a socket of `family`: AF_INET
    /// as is; on AF_INET6 a v4-mapped address, or `::` as 0.0.0.0 unless
    /// `v6only`. None: an address only the kernel can serve (or a family
    /// that does not match the socket's).
    pub fn v4(&self, family: i32, v6only: bool) -> Option<SocketAddrV4> {
        match (*self, family) {
            (Sa::V4(a), libc::AF_INET) => Some(a),
            (Sa::V6(ip, port, _, _), libc::AF_INET6) => {
                if let Some(v4) = ip.to_ipv4_mapped() {
                    return Some(SocketAddrV4::new(v4, port));
                }
                (ip.is_unspecified() && !v6only)
                    .then(|| SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))
            }
            _ => None,
        }
    }
}

/// The bytes of `a` as a socket of `family` reports it: a `sockaddr_in`,
/// or for AF_INET6 a `sockaddr_in6` holding the v4-mapped address (`::`
/// for 0.0.0.0). Returns the buffer and the address's full length.
pub fn encode(a: SocketAddrV4, family: i32) -> ([u8; 28], usize) {
    let mut b = [0u8; 28];
    if family == libc::AF_INET6 {
        b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&a.port().to_be_bytes());
        let ip = if a.ip().is_unspecified() {
            Ipv6Addr::UNSPECIFIED
        } else {
            a.ip().to_ipv6_mapped()
        };
        b[8..24].copy_from_slice(&ip.octets());
        (b, 28)
    } else {
        b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&a.port().to_be_bytes());
        b[4..8].copy_from_slice(&a.ip().octets());
        (b, 16)
    }
}

/// An address corestack reported, as the shim's IPv4 sockets hold it: an
/// IPv4 address, or the IPv4 address an IPv4-mapped one maps (the shim
/// opens no IPv6 socket on corestack: real IPv6 goes to the kernel).
pub fn v4_of(a: SocketAddr) -> SocketAddrV4 {
    match appif::socket::from_mapped(a) {
        SocketAddr::V4(v4) => v4,
        SocketAddr::V6(v6) => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, v6.port()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddr_in_round_trips() {
        let a: SocketAddrV4 = "10.1.2.3:8080".parse().unwrap();
        let (b, n) = encode(a, libc::AF_INET);
        assert_eq!(parse(&b[..n]), Ok(Sa::V4(a)));
    }

    #[test]
    fn v6_wildcard_serves_v4_unless_v6only() {
        let (b, n) = encode("0.0.0.0:80".parse().unwrap(), libc::AF_INET6);
        let sa = parse(&b[..n]).unwrap();
        assert_eq!(
            sa.v4(libc::AF_INET6, false),
            Some("0.0.0.0:80".parse().unwrap())
        );
        assert_eq!(sa.v4(libc::AF_INET6, true), None);
    }

    #[test]
    fn v4_mapped_is_ipv4() {
        let (b, n) = encode("10.9.1.2:7".parse().unwrap(), libc::AF_INET6);
        let sa = parse(&b[..n]).unwrap();
        assert_eq!(
            sa.v4(libc::AF_INET6, true),
            Some("10.9.1.2:7".parse().unwrap())
        );
    }

    #[test]
    fn short_or_foreign_addresses_are_refused() {
        assert_eq!(parse(&[2, 0, 0]), Err(libc::EINVAL));
        assert_eq!(parse(&[1, 0, 0, 0]), Err(libc::EAFNOSUPPORT));
    }
}
