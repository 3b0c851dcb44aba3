//! Socket addresses as applications pass them (`struct sockaddr_in`,
//! `struct sockaddr_in6` as bytes) and as corestack sees them
//! (`SocketAddr`).
//!
//! Inside the shim an address is kept in its canonical form: IPv4 traffic
//! as `SocketAddr::V4` (also on an AF_INET6 socket, where the application
//! sees it v4-mapped, `::ffff:a.b.c.d`, RFC 4291 §2.5.5.2), IPv6 traffic
//! as `SocketAddr::V6`. [`encode`] turns it back into the family of the
//! socket that reports it.
#![forbid(unsafe_code)]

use appif::errno::Errno;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

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
    /// The address corestack uses for this one on a socket of `family`,
    /// in canonical form: AF_INET as is; on AF_INET6 a v4-mapped address
    /// as its IPv4 address (such traffic goes over IPv4, RFC 3493 §3.7),
    /// any other IPv6 address (`::` included) as IPv6. None: a family that
    /// does not match the socket's (or AF_UNSPEC).
    pub fn core(&self, family: i32) -> Option<SocketAddr> {
        match (*self, family) {
            (Sa::V4(a), libc::AF_INET) => Some(SocketAddr::V4(a)),
            (Sa::V6(ip, port, _, scope), libc::AF_INET6) => Some(match ip.to_ipv4_mapped() {
                Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
                None => SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope)),
            }),
            _ => None,
        }
    }
}

/// `a` in canonical form: an IPv4-mapped IPv6 address as its IPv4
/// address, anything else as is (scope ids are dropped by the engine and
/// not compared here).
pub fn canonical(a: SocketAddr) -> SocketAddr {
    appif::socket::from_mapped(a)
}

/// True when `a` and `b` name the same peer (canonical addresses and
/// ports; IPv6 scope ids and flow info ignored).
pub fn same_peer(a: SocketAddr, b: SocketAddr) -> bool {
    let (a, b) = (canonical(a), canonical(b));
    a.ip() == b.ip() && a.port() == b.port()
}

/// The bytes of `a` as a socket of `family` reports it: a `sockaddr_in`
/// (an IPv6 `a` has no IPv4 form: 0.0.0.0), or for AF_INET6 a
/// `sockaddr_in6` (flow info 0) holding the IPv6 address, or for IPv4 the
/// v4-mapped address (`::` for 0.0.0.0). `scope` is the scope id a
/// link-local IPv6 address gets when `a` has none (the interface index).
/// Returns the buffer and the address's full length.
pub fn encode(a: SocketAddr, family: i32, scope: u32) -> ([u8; 28], usize) {
    let mut b = [0u8; 28];
    if family == libc::AF_INET6 {
        b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&a.port().to_be_bytes());
        let (ip, sid) = match canonical(a) {
            SocketAddr::V4(v4) if v4.ip().is_unspecified() => (Ipv6Addr::UNSPECIFIED, 0),
            SocketAddr::V4(v4) => (v4.ip().to_ipv6_mapped(), 0),
            SocketAddr::V6(v6) => {
                let sid = match v6.scope_id() {
                    0 if v6.ip().is_unicast_link_local() => scope,
                    s => s,
                };
                (*v6.ip(), sid)
            }
        };
        b[8..24].copy_from_slice(&ip.octets());
        b[24..28].copy_from_slice(&sid.to_ne_bytes());
        (b, 28)
    } else {
        b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&a.port().to_be_bytes());
        if let IpAddr::V4(ip) = canonical(a).ip() {
            b[4..8].copy_from_slice(&ip.octets());
        }
        (b, 16)
    }
}

/// The wildcard of `a`'s family on `port` (0.0.0.0 or `::`).
pub fn wildcard_like(a: SocketAddr, port: u16) -> SocketAddr {
    match a {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn sockaddr_in_round_trips() {
        let a = sa("10.1.2.3:8080");
        let (b, n) = encode(a, libc::AF_INET, 0);
        assert_eq!(n, 16);
        assert_eq!(parse(&b[..n]).unwrap().core(libc::AF_INET), Some(a));
    }

    #[test]
    fn sockaddr_in6_round_trips_with_its_scope_and_flow_info_zero() {
        let a = sa("[fd00:1::2]:443");
        let (b, n) = encode(a, libc::AF_INET6, 7);
        assert_eq!(n, 28);
        assert_eq!(&b[4..8], &[0; 4], "flow info");
        assert_eq!(
            parse(&b[..n]),
            Ok(Sa::V6("fd00:1::2".parse().unwrap(), 443, 0, 0))
        );
        // A link-local address gets the interface's index, unless it had one.
        let ll = sa("[fe80::1]:22");
        let (b, n) = encode(ll, libc::AF_INET6, 7);
        assert_eq!(
            parse(&b[..n]),
            Ok(Sa::V6("fe80::1".parse().unwrap(), 22, 0, 7))
        );
        let scoped = SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().unwrap(), 22, 0, 3));
        let (b, n) = encode(scoped, libc::AF_INET6, 7);
        assert_eq!(parse(&b[..n]).unwrap().core(libc::AF_INET6), Some(scoped));
    }

    #[test]
    fn an_ipv4_peer_of_an_inet6_socket_is_v4_mapped() {
        let (b, n) = encode(sa("10.9.1.2:7"), libc::AF_INET6, 0);
        let parsed = parse(&b[..n]).unwrap();
        assert_eq!(
            parsed,
            Sa::V6("::ffff:10.9.1.2".parse().unwrap(), 7, 0, 0),
            "seen as ::ffff:a.b.c.d"
        );
        // And a v4-mapped address given to corestack goes over IPv4.
        assert_eq!(parsed.core(libc::AF_INET6), Some(sa("10.9.1.2:7")));
        // 0.0.0.0 on an AF_INET6 socket reads as `::`.
        let (b, n) = encode(sa("0.0.0.0:80"), libc::AF_INET6, 0);
        assert_eq!(parse(&b[..n]), Ok(Sa::V6(Ipv6Addr::UNSPECIFIED, 80, 0, 0)));
    }

    #[test]
    fn inet6_wildcard_stays_ipv6_and_families_must_match() {
        let (b, n) = encode(sa("[::]:80"), libc::AF_INET6, 0);
        let p = parse(&b[..n]).unwrap();
        assert_eq!(p.core(libc::AF_INET6), Some(sa("[::]:80")));
        assert_eq!(p.core(libc::AF_INET), None);
        assert_eq!(
            Sa::V4("10.0.0.1:1".parse().unwrap()).core(libc::AF_INET6),
            None
        );
    }

    #[test]
    fn peers_compare_across_the_mapped_form() {
        assert!(same_peer(sa("[::ffff:10.0.0.1]:5"), sa("10.0.0.1:5")));
        assert!(!same_peer(sa("[fd00::1]:5"), sa("[fd00::1]:6")));
    }

    #[test]
    fn short_or_foreign_addresses_are_refused() {
        assert_eq!(parse(&[2, 0, 0]), Err(libc::EINVAL));
        assert_eq!(parse(&[1, 0, 0, 0]), Err(libc::EAFNOSUPPORT));
    }
}
