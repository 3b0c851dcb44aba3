//! Ethernet II frames (IEEE 802.3 with an EtherType, RFC 894): destination
//! MAC, source MAC, EtherType, payload. The frame check sequence is not part
//! of the frames corestack sees. 802.1Q tags are not interpreted: a tagged
//! frame parses with ethertype 0x8100 and the caller drops it.

use core::fmt;

use crate::field::{put_u16, u16_at};
use crate::{Error, Result};

/// Length of an Ethernet II header in bytes.
pub const HEADER_LEN: usize = 14;
/// EtherType of IPv4 (RFC 894).
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP (RFC 826).
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv6 (RFC 2464 §3).
pub const ETHERTYPE_IPV6: u16 = 0x86DD;

/// A 48-bit IEEE 802 MAC address. Displays as `aa:bb:cc:dd:ee:ff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// 00:00:00:00:00:00 (the target hardware address of an ARP request).
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// True for ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// True when the group bit (least significant bit of the first octet) is
    /// set; broadcast is also multicast.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// True when the group bit is clear (an individual address).
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// An Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination MAC address.
    pub dst: MacAddr,
    /// Source MAC address.
    pub src: MacAddr,
    /// EtherType, e.g. [`ETHERTYPE_IPV4`].
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Parses the header of `frame` and returns it with the payload (every
    /// byte after the 14-byte header, including any padding).
    ///
    /// Errors: [`Error::Truncated`] if `frame` is shorter than 14 bytes.
    pub fn parse(frame: &[u8]) -> Result<(EthernetRepr, &[u8])> {
        if frame.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let mut dst = [0u8; 6];
        let mut src = [0u8; 6];
        dst.copy_from_slice(&frame[0..6]);
        src.copy_from_slice(&frame[6..12]);
        let repr = EthernetRepr {
            dst: MacAddr(dst),
            src: MacAddr(src),
            ethertype: u16_at(frame, 12),
        };
        Ok((repr, &frame[HEADER_LEN..]))
    }

    /// Writes the 14-byte header at the start of `buf`.
    ///
    /// Panics if `buf` is shorter than [`HEADER_LEN`] (a caller bug).
    pub fn emit(&self, buf: &mut [u8]) {
        buf[0..6].copy_from_slice(&self.dst.0);
        buf[6..12].copy_from_slice(&self.src.0);
        put_u16(buf, 12, self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 16] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x99, 0x00, 0x01, 0x08, 0x06, 0xaa,
        0xbb,
    ];

    #[test]
    fn arp_frame_parses_header_and_payload() {
        let (repr, payload) = EthernetRepr::parse(&FRAME).unwrap();
        assert_eq!(repr.dst, MacAddr::BROADCAST);
        assert_eq!(repr.src, MacAddr([2, 0, 0, 0x99, 0, 1]));
        assert_eq!(repr.ethertype, ETHERTYPE_ARP);
        assert_eq!(payload, &[0xaa, 0xbb]);
    }

    #[test]
    fn ipv6_ethertype_parses() {
        let mut frame = FRAME;
        frame[12..14].copy_from_slice(&[0x86, 0xdd]);
        let (repr, _) = EthernetRepr::parse(&frame).unwrap();
        assert_eq!(repr.ethertype, ETHERTYPE_IPV6);
    }

    #[test]
    fn repr_emit_then_parse_round_trips() {
        let (repr, _) = EthernetRepr::parse(&FRAME).unwrap();
        let mut buf = [0u8; HEADER_LEN];
        repr.emit(&mut buf);
        assert_eq!(buf, FRAME[..HEADER_LEN]);
        assert_eq!(EthernetRepr::parse(&buf).unwrap(), (repr, &[][..]));
    }

    #[test]
    fn short_frame_any_length_is_truncated() {
        for len in 0..HEADER_LEN {
            assert_eq!(EthernetRepr::parse(&FRAME[..len]), Err(Error::Truncated));
        }
    }

    #[test]
    fn mac_display_is_lowercase_colon_hex() {
        let mac = MacAddr([0xaa, 0xbb, 0xcc, 0x0d, 0xee, 0xff]);
        assert_eq!(mac.to_string(), "aa:bb:cc:0d:ee:ff");
    }

    #[test]
    fn mac_kinds_are_classified() {
        assert!(MacAddr::BROADCAST.is_broadcast());
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(MacAddr([0x01, 0, 0x5e, 0, 0, 1]).is_multicast());
        assert!(!MacAddr([0x01, 0, 0x5e, 0, 0, 1]).is_broadcast());
        assert!(MacAddr([0x02, 0, 0, 0, 0, 1]).is_unicast());
        assert!(!MacAddr::BROADCAST.is_unicast());
        assert_eq!(MacAddr::default(), MacAddr::ZERO);
    }
}
