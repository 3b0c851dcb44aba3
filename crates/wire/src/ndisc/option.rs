//! Neighbor Discovery options (RFC 4861 §4.6): type, length in 8-byte units
//! (never 0), value. Link-layer addresses are Ethernet's (RFC 2464 §6: one
//! unit, 6 bytes of address).

use core::net::Ipv6Addr;

use crate::ethernet::MacAddr;
use crate::field::{put_u32, u32_at};
use crate::ipv6::addr_at;
use crate::{Error, Result};

/// Option type: Source Link-Layer Address (RFC 4861 §4.6.1).
pub const OPT_SOURCE_LL_ADDR: u8 = 1;
/// Option type: Target Link-Layer Address (RFC 4861 §4.6.1).
pub const OPT_TARGET_LL_ADDR: u8 = 2;
/// Option type: Prefix Information (RFC 4861 §4.6.2).
pub const OPT_PREFIX_INFO: u8 = 3;
/// Option type: Redirected Header (RFC 4861 §4.6.3).
pub const OPT_REDIRECTED_HEADER: u8 = 4;
/// Option type: MTU (RFC 4861 §4.6.4).
pub const OPT_MTU: u8 = 5;

/// Prefix Information flag: on-link (L).
const PREFIX_FLAG_ON_LINK: u8 = 0x80;
/// Prefix Information flag: autonomous address-configuration (A).
const PREFIX_FLAG_AUTONOMOUS: u8 = 0x40;

/// The body of a Prefix Information option (RFC 4861 §4.6.2; 32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrefixInfo {
    /// Prefix Length in bits (0..=128).
    pub prefix_len: u8,
    /// L flag: the prefix can be used for on-link determination.
    pub on_link: bool,
    /// A flag: the prefix can be used for stateless address
    /// autoconfiguration (RFC 4862).
    pub autonomous: bool,
    /// Valid Lifetime in seconds (0xffff_ffff: infinity).
    pub valid_lifetime: u32,
    /// Preferred Lifetime in seconds (0xffff_ffff: infinity).
    pub preferred_lifetime: u32,
    /// Prefix; bits past `prefix_len` are sent as carried.
    pub prefix: Ipv6Addr,
}

/// One Neighbor Discovery option.
///
/// Valid (round-trips through [`emit`](Self::emit) and [`NdiscOptionIter`]):
/// for `RedirectedHeader` a multiple of 8 bytes of data, for `Unknown`
/// `2 + data.len()` a multiple of 8 (and at most 2040); emit zero-pads
/// others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdiscOption<'a> {
    /// Type 1: the sender's Ethernet address.
    SourceLinkLayerAddr(MacAddr),
    /// Type 2: the target's Ethernet address.
    TargetLinkLayerAddr(MacAddr),
    /// Type 3.
    PrefixInformation(PrefixInfo),
    /// Type 4: the start of the redirected packet (IP header and data),
    /// after the six reserved bytes.
    RedirectedHeader(&'a [u8]),
    /// Type 5: the link MTU in bytes.
    Mtu(u32),
    /// Any other type; hosts ignore it (RFC 4861 §4.6).
    Unknown {
        /// Option type.
        option_type: u8,
        /// Every byte after type and length.
        data: &'a [u8],
    },
}

impl<'a> NdiscOption<'a> {
    /// Decodes one option from its type and its whole bytes (`bytes.len()`
    /// is 8 × the length field, at least 8). Known types with the wrong
    /// length are [`Error::Malformed`].
    fn decode(option_type: u8, bytes: &'a [u8]) -> Result<Self> {
        let mac = || {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&bytes[2..8]);
            MacAddr(mac)
        };
        Ok(match (option_type, bytes.len()) {
            (OPT_SOURCE_LL_ADDR, 8) => NdiscOption::SourceLinkLayerAddr(mac()),
            (OPT_TARGET_LL_ADDR, 8) => NdiscOption::TargetLinkLayerAddr(mac()),
            (OPT_PREFIX_INFO, 32) => NdiscOption::PrefixInformation(PrefixInfo {
                prefix_len: bytes[2],
                on_link: bytes[3] & PREFIX_FLAG_ON_LINK != 0,
                autonomous: bytes[3] & PREFIX_FLAG_AUTONOMOUS != 0,
                valid_lifetime: u32_at(bytes, 4),
                preferred_lifetime: u32_at(bytes, 8),
                prefix: addr_at(bytes, 16),
            }),
            (OPT_REDIRECTED_HEADER, _) => NdiscOption::RedirectedHeader(&bytes[8..]),
            (OPT_MTU, 8) => NdiscOption::Mtu(u32_at(bytes, 4)),
            (OPT_SOURCE_LL_ADDR | OPT_TARGET_LL_ADDR | OPT_PREFIX_INFO | OPT_MTU, _) => {
                return Err(Error::Malformed)
            }
            _ => NdiscOption::Unknown {
                option_type,
                data: &bytes[2..],
            },
        })
    }

    /// Length in bytes of the option [`emit`](Self::emit) writes (a
    /// multiple of 8).
    pub fn buffer_len(&self) -> usize {
        match self {
            NdiscOption::SourceLinkLayerAddr(_)
            | NdiscOption::TargetLinkLayerAddr(_)
            | NdiscOption::Mtu(_) => 8,
            NdiscOption::PrefixInformation(_) => 32,
            NdiscOption::RedirectedHeader(data) => 8 + data.len().div_ceil(8) * 8,
            NdiscOption::Unknown { data, .. } => (2 + data.len()).div_ceil(8) * 8,
        }
    }

    /// Writes the option at the start of `buf`, reserved bytes and padding
    /// zero, and returns its length in bytes.
    ///
    /// Panics if `buf` is shorter than [`buffer_len`](Self::buffer_len).
    /// An option longer than 2040 bytes is a caller bug (debug assertion).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        debug_assert!(len <= 255 * 8);
        let buf = &mut buf[..len];
        buf.fill(0);
        buf[1] = (len / 8) as u8;
        buf[0] = match *self {
            NdiscOption::SourceLinkLayerAddr(mac) => {
                buf[2..8].copy_from_slice(&mac.0);
                OPT_SOURCE_LL_ADDR
            }
            NdiscOption::TargetLinkLayerAddr(mac) => {
                buf[2..8].copy_from_slice(&mac.0);
                OPT_TARGET_LL_ADDR
            }
            NdiscOption::PrefixInformation(p) => {
                buf[2] = p.prefix_len;
                buf[3] = if p.on_link { PREFIX_FLAG_ON_LINK } else { 0 }
                    | if p.autonomous {
                        PREFIX_FLAG_AUTONOMOUS
                    } else {
                        0
                    };
                put_u32(buf, 4, p.valid_lifetime);
                put_u32(buf, 8, p.preferred_lifetime);
                buf[16..32].copy_from_slice(&p.prefix.octets());
                OPT_PREFIX_INFO
            }
            NdiscOption::RedirectedHeader(data) => {
                buf[8..8 + data.len()].copy_from_slice(data);
                OPT_REDIRECTED_HEADER
            }
            NdiscOption::Mtu(mtu) => {
                put_u32(buf, 4, mtu);
                OPT_MTU
            }
            NdiscOption::Unknown { option_type, data } => {
                buf[2..2 + data.len()].copy_from_slice(data);
                option_type
            }
        };
        len
    }
}

/// Iterator over the options of a Neighbor Discovery message (every byte
/// after the fixed part).
///
/// Yields one error, then stops: [`Error::Malformed`] for a length of 0
/// (RFC 4861 §6.1.1, §7.1.1: the message must be discarded) or a known
/// option of the wrong length; [`Error::Truncated`] for an option that runs
/// past the message.
#[derive(Debug, Clone)]
pub struct NdiscOptionIter<'a> {
    rest: &'a [u8],
}

impl<'a> NdiscOptionIter<'a> {
    /// Iterates the options in `options`.
    pub fn new(options: &'a [u8]) -> Self {
        NdiscOptionIter { rest: options }
    }
}

impl<'a> Iterator for NdiscOptionIter<'a> {
    type Item = Result<NdiscOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.rest;
        let option_type = *rest.first()?;
        self.rest = &[];
        let Some(&units) = rest.get(1) else {
            return Some(Err(Error::Truncated));
        };
        if units == 0 {
            return Some(Err(Error::Malformed));
        }
        let len = usize::from(units) * 8;
        if len > rest.len() {
            return Some(Err(Error::Truncated));
        }
        let item = NdiscOption::decode(option_type, &rest[..len]);
        if item.is_ok() {
            self.rest = &rest[len..];
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);

    fn prefix() -> PrefixInfo {
        PrefixInfo {
            prefix_len: 64,
            on_link: true,
            autonomous: true,
            valid_lifetime: 2_592_000,
            preferred_lifetime: 604_800,
            prefix: "2001:db8:1::".parse().unwrap(),
        }
    }

    #[test]
    fn every_option_round_trips() {
        let quoted = [0x60u8; 48];
        let options = [
            NdiscOption::SourceLinkLayerAddr(MAC),
            NdiscOption::TargetLinkLayerAddr(MAC),
            NdiscOption::PrefixInformation(prefix()),
            NdiscOption::RedirectedHeader(&quoted),
            NdiscOption::Mtu(1500),
            NdiscOption::Unknown {
                option_type: 24,
                data: &[7; 14],
            },
        ];
        let mut buf = [0xeeu8; 256];
        let mut at = 0;
        for opt in options {
            let len = opt.emit(&mut buf[at..]);
            assert_eq!(len, opt.buffer_len());
            assert_eq!(len % 8, 0);
            at += len;
        }
        let parsed: Vec<_> = NdiscOptionIter::new(&buf[..at])
            .map(Result::unwrap)
            .collect();
        assert_eq!(parsed, options);
    }

    #[test]
    fn known_layouts_match_rfc4861() {
        let mut buf = [0u8; 32];
        NdiscOption::SourceLinkLayerAddr(MAC).emit(&mut buf);
        assert_eq!(buf[..8], [1, 1, 2, 0, 0, 0, 0, 1]);
        NdiscOption::Mtu(1500).emit(&mut buf);
        assert_eq!(buf[..8], [5, 1, 0, 0, 0, 0, 0x05, 0xdc]);
        NdiscOption::PrefixInformation(prefix()).emit(&mut buf);
        assert_eq!(
            buf[..16],
            [3, 4, 64, 0xc0, 0, 0x27, 0x8d, 0, 0, 0x09, 0x3a, 0x80, 0, 0, 0, 0]
        );
        assert_eq!(buf[16..20], [0x20, 0x01, 0x0d, 0xb8]);
    }

    #[test]
    fn zero_length_option_is_malformed() {
        let buf = [1u8, 0, 2, 0, 0, 0, 0, 1];
        let items: Vec<_> = NdiscOptionIter::new(&buf).collect();
        assert_eq!(items, [Err(Error::Malformed)]);
        // After a good option too.
        let buf = [5u8, 1, 0, 0, 0, 0, 5, 0xdc, 3, 0];
        let items: Vec<_> = NdiscOptionIter::new(&buf).collect();
        assert_eq!(items, [Ok(NdiscOption::Mtu(1500)), Err(Error::Malformed)]);
    }

    #[test]
    fn option_past_message_is_truncated_at_every_length() {
        let mut buf = [0u8; 32];
        NdiscOption::PrefixInformation(prefix()).emit(&mut buf);
        for len in 1..32 {
            let items: Vec<_> = NdiscOptionIter::new(&buf[..len]).collect();
            assert_eq!(items, [Err(Error::Truncated)], "len {len}");
        }
        assert_eq!(NdiscOptionIter::new(&[]).count(), 0);
    }

    #[test]
    fn known_option_with_wrong_length_is_malformed() {
        for (option_type, units) in [(1u8, 2u8), (2, 3), (3, 1), (3, 5), (5, 2)] {
            let mut buf = [0u8; 40];
            buf[0] = option_type;
            buf[1] = units;
            let items: Vec<_> = NdiscOptionIter::new(&buf[..usize::from(units) * 8]).collect();
            assert_eq!(items, [Err(Error::Malformed)], "type {option_type}");
        }
    }

    #[test]
    fn padding_of_short_variable_options() {
        let opt = NdiscOption::RedirectedHeader(&[1, 2, 3]);
        let mut buf = [0xeeu8; 16];
        assert_eq!(opt.emit(&mut buf), 16);
        assert_eq!(buf, [4, 2, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0]);
        let opt = NdiscOption::Unknown {
            option_type: 200,
            data: &[],
        };
        assert_eq!(opt.emit(&mut buf), 8);
        assert_eq!(buf[..8], [200, 1, 0, 0, 0, 0, 0, 0]);
    }
}
