//! ARP for IPv4 over Ethernet (RFC 826): the 28-byte packet with hardware
//! type 1, protocol type 0x0800, hardware length 6, protocol length 4, and
//! the request (1) and reply (2) operations. Anything else is
//! [`Error::Unsupported`]. Trailing bytes (Ethernet padding) are ignored.

use core::net::Ipv4Addr;

use crate::ethernet::{MacAddr, ETHERTYPE_IPV4};
use crate::field::{put_u16, u16_at};
use crate::{Error, Result};

/// Length of an Ethernet/IPv4 ARP packet in bytes.
pub const PACKET_LEN: usize = 28;

/// Hardware type of Ethernet.
const HTYPE_ETHERNET: u16 = 1;

/// The ARP operation (RFC 826 `ar$op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOp {
    /// ares_op$REQUEST = 1.
    Request,
    /// ares_op$REPLY = 2.
    Reply,
}

impl ArpOp {
    /// The value of the operation field.
    pub fn code(self) -> u16 {
        match self {
            ArpOp::Request => 1,
            ArpOp::Reply => 2,
        }
    }
}

/// An Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Request or reply.
    pub op: ArpOp,
    /// Sender hardware address (`ar$sha`).
    pub sender_mac: MacAddr,
    /// Sender protocol address (`ar$spa`).
    pub sender_ip: Ipv4Addr,
    /// Target hardware address (`ar$tha`); zero in a request (RFC 826 leaves it unspecified; Linux sends zero).
    pub target_mac: MacAddr,
    /// Target protocol address (`ar$tpa`).
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// A request (RFC 826) from `sender_mac` / `sender_ip` for the hardware
    /// address of `target_ip`, with a zero target hardware address.
    pub fn request(sender_mac: MacAddr, sender_ip: Ipv4Addr, target_ip: Ipv4Addr) -> Self {
        ArpRepr {
            op: ArpOp::Request,
            sender_mac,
            sender_ip,
            target_mac: MacAddr::ZERO,
            target_ip,
        }
    }

    /// Parses an ARP packet (the Ethernet payload).
    ///
    /// Errors: [`Error::Truncated`] if shorter than [`PACKET_LEN`];
    /// [`Error::Unsupported`] if the hardware/protocol type or lengths are
    /// not Ethernet/IPv4, or the operation is neither request nor reply.
    pub fn parse(packet: &[u8]) -> Result<ArpRepr> {
        if packet.len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        if u16_at(packet, 0) != HTYPE_ETHERNET
            || u16_at(packet, 2) != ETHERTYPE_IPV4
            || packet[4] != 6
            || packet[5] != 4
        {
            return Err(Error::Unsupported);
        }
        let op = match u16_at(packet, 6) {
            1 => ArpOp::Request,
            2 => ArpOp::Reply,
            _ => return Err(Error::Unsupported),
        };
        Ok(ArpRepr {
            op,
            sender_mac: mac_at(packet, 8),
            sender_ip: ip_at(packet, 14),
            target_mac: mac_at(packet, 18),
            target_ip: ip_at(packet, 24),
        })
    }

    /// Writes the 28-byte packet at the start of `buf`.
    ///
    /// Panics if `buf` is shorter than [`PACKET_LEN`] (a caller bug).
    pub fn emit(&self, buf: &mut [u8]) {
        put_u16(buf, 0, HTYPE_ETHERNET);
        put_u16(buf, 2, ETHERTYPE_IPV4);
        buf[4] = 6;
        buf[5] = 4;
        put_u16(buf, 6, self.op.code());
        buf[8..14].copy_from_slice(&self.sender_mac.0);
        buf[14..18].copy_from_slice(&self.sender_ip.octets());
        buf[18..24].copy_from_slice(&self.target_mac.0);
        buf[24..28].copy_from_slice(&self.target_ip.octets());
    }
}

fn mac_at(buf: &[u8], at: usize) -> MacAddr {
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&buf[at..at + 6]);
    MacAddr(mac)
}

fn ip_at(buf: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(buf[at], buf[at + 1], buf[at + 2], buf[at + 3])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ArpRepr {
        ArpRepr::request(
            MacAddr([2, 0, 0, 0x99, 0, 1]),
            Ipv4Addr::new(10, 99, 0, 1),
            Ipv4Addr::new(10, 99, 0, 2),
        )
    }

    #[test]
    fn request_emit_matches_rfc826_layout() {
        let mut buf = [0u8; PACKET_LEN];
        request().emit(&mut buf);
        assert_eq!(
            buf,
            [
                0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0x99, 0, 1, 10, 99, 0, 1, 0, 0, 0, 0, 0, 0, 10,
                99, 0, 2
            ]
        );
    }

    #[test]
    fn request_and_reply_round_trip() {
        for op in [ArpOp::Request, ArpOp::Reply] {
            let repr = ArpRepr { op, ..request() };
            let mut buf = [0u8; PACKET_LEN + 18]; // with Ethernet padding
            repr.emit(&mut buf);
            assert_eq!(ArpRepr::parse(&buf), Ok(repr));
        }
    }

    #[test]
    fn short_packet_any_length_is_truncated() {
        let mut buf = [0u8; PACKET_LEN];
        request().emit(&mut buf);
        for len in 0..PACKET_LEN {
            assert_eq!(ArpRepr::parse(&buf[..len]), Err(Error::Truncated));
        }
    }

    #[test]
    fn other_types_or_operation_are_unsupported() {
        let mut good = [0u8; PACKET_LEN];
        request().emit(&mut good);
        for (at, value) in [(1, 6u8), (2, 0x86), (4, 8), (5, 16), (7, 3), (7, 0)] {
            let mut bad = good;
            bad[at] = value;
            assert_eq!(ArpRepr::parse(&bad), Err(Error::Unsupported), "byte {at}");
        }
    }
}
