//! Neighbor Discovery for IPv6 (RFC 4861 §4): Router Solicitation and
//! Advertisement, Neighbor Solicitation and Advertisement, Redirect, their
//! options ([`option`]), and the multicast addresses ND sends to.
//!
//! ND messages are ICMPv6 messages (types 133-137). [`NdiscRepr::parse`]
//! takes the whole ICMPv6 message and the IPv6 source and destination, and
//! applies the validity checks of RFC 4861 §6.1 and §7.1 and §8.1 that do not
//! need the IP header's hop limit: checksum (optional), code 0, minimum
//! length, no option of length 0, and the per-message address rules. The
//! caller checks that the IP Hop Limit is [`HOP_LIMIT`] (255). Options are
//! kept as the raw option bytes and read with [`NdiscRepr::options`]; build
//! them for sending with [`NdiscOption::emit`].

pub mod option;

pub use option::{NdiscOption, NdiscOptionIter, PrefixInfo};

use core::net::Ipv6Addr;

use crate::ethernet::MacAddr;
use crate::field::{put_u16, put_u32, u16_at, u32_at};
use crate::icmpv6::{
    self, TYPE_NEIGHBOR_ADVERT, TYPE_NEIGHBOR_SOLICIT, TYPE_REDIRECT, TYPE_ROUTER_ADVERT,
    TYPE_ROUTER_SOLICIT,
};
use crate::ipv6::addr_at;
use crate::{Error, Result};

/// IP Hop Limit every ND message is sent with and must arrive with (RFC
/// 4861 §6.1, §7.1, §8.1): proof that it was not forwarded.
pub const HOP_LIMIT: u8 = 255;
/// All-nodes link-local multicast address ff02::1 (RFC 4291 §2.7.1).
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// All-routers link-local multicast address ff02::2 (RFC 4291 §2.7.1).
pub const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

/// Router Advertisement flag: managed address configuration (M).
pub const RA_FLAG_MANAGED: u8 = 0x80;
/// Router Advertisement flag: other configuration (O).
pub const RA_FLAG_OTHER: u8 = 0x40;

/// Neighbor Advertisement flags byte: router (R).
const NA_FLAG_ROUTER: u8 = 0x80;
/// Neighbor Advertisement flags byte: solicited (S).
const NA_FLAG_SOLICITED: u8 = 0x40;
/// Neighbor Advertisement flags byte: override (O).
const NA_FLAG_OVERRIDE: u8 = 0x20;

/// The solicited-node multicast address of `addr` (RFC 4291 §2.7.1):
/// ff02::1:ff00:0/104 with the low 24 bits of `addr`.
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, o[13], o[14], o[15],
    ])
}

/// True if `addr` is a solicited-node multicast address (ff02::1:ffXX:XXXX).
pub fn is_solicited_node(addr: Ipv6Addr) -> bool {
    addr.octets()[..13] == solicited_node(Ipv6Addr::UNSPECIFIED).octets()[..13]
}

/// The Ethernet multicast address an IPv6 multicast `group` is sent to
/// (RFC 2464 §7): 33:33 followed by the group's last four bytes.
pub fn multicast_mac(group: Ipv6Addr) -> MacAddr {
    let o = group.octets();
    MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// True for a link-local unicast address, fe80::/10 (RFC 4291 §2.5.6).
fn is_link_local(addr: Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

/// A Neighbor Discovery message. `options` holds every byte after the
/// fixed part; after [`parse`](NdiscRepr::parse) it is a well-formed option
/// list. Valid for emitting: `options` is a list of whole options (a
/// multiple of 8 bytes) and the fields pass the checks of `parse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdiscRepr<'a> {
    /// Type 133 (RFC 4861 §4.1).
    RouterSolicit {
        /// Options (Source Link-Layer Address).
        options: &'a [u8],
    },
    /// Type 134 (RFC 4861 §4.2).
    RouterAdvert {
        /// Cur Hop Limit: the hop limit hosts should use, 0 for unspecified.
        cur_hop_limit: u8,
        /// The flags byte: [`RA_FLAG_MANAGED`], [`RA_FLAG_OTHER`], and the
        /// bits later RFCs define (e.g. RFC 4191 preference), as carried.
        flags: u8,
        /// Router Lifetime in seconds; 0: not a default router.
        router_lifetime: u16,
        /// Reachable Time in milliseconds, 0 for unspecified.
        reachable_time: u32,
        /// Retrans Timer in milliseconds, 0 for unspecified.
        retrans_timer: u32,
        /// Options (Source Link-Layer Address, MTU, Prefix Information).
        options: &'a [u8],
    },
    /// Type 135 (RFC 4861 §4.3).
    NeighborSolicit {
        /// Target Address: the address being resolved (never multicast).
        target: Ipv6Addr,
        /// Options (Source Link-Layer Address).
        options: &'a [u8],
    },
    /// Type 136 (RFC 4861 §4.4).
    NeighborAdvert {
        /// R flag: the sender is a router.
        router_flag: bool,
        /// S flag: sent in response to a Neighbor Solicitation.
        solicited_flag: bool,
        /// O flag: override an existing cache entry.
        override_flag: bool,
        /// Target Address (never multicast).
        target: Ipv6Addr,
        /// Options (Target Link-Layer Address).
        options: &'a [u8],
    },
    /// Type 137 (RFC 4861 §4.5).
    Redirect {
        /// Target Address: the better first hop.
        target: Ipv6Addr,
        /// Destination Address: the destination being redirected.
        dst: Ipv6Addr,
        /// Options (Target Link-Layer Address, Redirected Header).
        options: &'a [u8],
    },
}

/// Length in bytes of the fixed part of an ND message of type `msg_type`.
fn fixed_len(msg_type: u8) -> Option<usize> {
    match msg_type {
        TYPE_ROUTER_SOLICIT => Some(8),
        TYPE_ROUTER_ADVERT => Some(16),
        TYPE_NEIGHBOR_SOLICIT | TYPE_NEIGHBOR_ADVERT => Some(24),
        TYPE_REDIRECT => Some(40),
        _ => None,
    }
}

impl<'a> NdiscRepr<'a> {
    /// Parses an ND message (the whole ICMPv6 message) sent from `src` to
    /// `dst`.
    ///
    /// Errors: [`Error::Truncated`] if shorter than the message's fixed part
    /// or an option runs past the end; [`Error::Checksum`] if
    /// `verify_checksum` and the checksum does not verify;
    /// [`Error::Unsupported`] for an ICMPv6 type that is not ND;
    /// [`Error::Malformed`] for a code other than 0, an option of length 0
    /// or a known option of the wrong length, or a broken address rule: a
    /// multicast target (NS, NA), an NS from the unspecified address not to
    /// a solicited-node address or with a Source Link-Layer Address, an RS
    /// from the unspecified address with one, an NA to a multicast address
    /// with S set, an RA or Redirect whose source is not link-local, a
    /// Redirect to a multicast destination or whose target is neither
    /// link-local nor the destination.
    pub fn parse(
        message: &'a [u8],
        src: Ipv6Addr,
        dst: Ipv6Addr,
        verify_checksum: bool,
    ) -> Result<NdiscRepr<'a>> {
        let &msg_type = message.first().ok_or(Error::Truncated)?;
        let fixed = fixed_len(msg_type).ok_or(Error::Unsupported)?;
        if message.len() < fixed {
            return Err(Error::Truncated);
        }
        if verify_checksum && !icmpv6::checksum_valid(message, src, dst) {
            return Err(Error::Checksum);
        }
        if message[1] != 0 {
            return Err(Error::Malformed);
        }
        let options = &message[fixed..];
        let mut has_source_lladdr = false;
        for opt in NdiscOptionIter::new(options) {
            has_source_lladdr |= matches!(opt?, NdiscOption::SourceLinkLayerAddr(_));
        }
        let repr = match msg_type {
            TYPE_ROUTER_SOLICIT => NdiscRepr::RouterSolicit { options },
            TYPE_ROUTER_ADVERT => NdiscRepr::RouterAdvert {
                cur_hop_limit: message[4],
                flags: message[5],
                router_lifetime: u16_at(message, 6),
                reachable_time: u32_at(message, 8),
                retrans_timer: u32_at(message, 12),
                options,
            },
            TYPE_NEIGHBOR_SOLICIT => NdiscRepr::NeighborSolicit {
                target: addr_at(message, 8),
                options,
            },
            TYPE_NEIGHBOR_ADVERT => NdiscRepr::NeighborAdvert {
                router_flag: message[4] & NA_FLAG_ROUTER != 0,
                solicited_flag: message[4] & NA_FLAG_SOLICITED != 0,
                override_flag: message[4] & NA_FLAG_OVERRIDE != 0,
                target: addr_at(message, 8),
                options,
            },
            _ => NdiscRepr::Redirect {
                target: addr_at(message, 8),
                dst: addr_at(message, 24),
                options,
            },
        };
        let from_unspecified = src.is_unspecified();
        let invalid = match repr {
            NdiscRepr::RouterSolicit { .. } => from_unspecified && has_source_lladdr,
            NdiscRepr::RouterAdvert { .. } => !is_link_local(src),
            NdiscRepr::NeighborSolicit { target, .. } => {
                target.is_multicast()
                    || (from_unspecified && (!is_solicited_node(dst) || has_source_lladdr))
            }
            NdiscRepr::NeighborAdvert {
                target,
                solicited_flag,
                ..
            } => target.is_multicast() || (dst.is_multicast() && solicited_flag),
            NdiscRepr::Redirect {
                target,
                dst: redirected,
                ..
            } => {
                !is_link_local(src)
                    || redirected.is_multicast()
                    || (!is_link_local(target) && target != redirected)
            }
        };
        if invalid {
            return Err(Error::Malformed);
        }
        Ok(repr)
    }

    /// ICMPv6 message type of this message.
    pub fn msg_type(&self) -> u8 {
        match self {
            NdiscRepr::RouterSolicit { .. } => TYPE_ROUTER_SOLICIT,
            NdiscRepr::RouterAdvert { .. } => TYPE_ROUTER_ADVERT,
            NdiscRepr::NeighborSolicit { .. } => TYPE_NEIGHBOR_SOLICIT,
            NdiscRepr::NeighborAdvert { .. } => TYPE_NEIGHBOR_ADVERT,
            NdiscRepr::Redirect { .. } => TYPE_REDIRECT,
        }
    }

    /// The option bytes.
    pub fn options_bytes(&self) -> &'a [u8] {
        match *self {
            NdiscRepr::RouterSolicit { options }
            | NdiscRepr::RouterAdvert { options, .. }
            | NdiscRepr::NeighborSolicit { options, .. }
            | NdiscRepr::NeighborAdvert { options, .. }
            | NdiscRepr::Redirect { options, .. } => options,
        }
    }

    /// The options; after a successful [`parse`](Self::parse) none is an
    /// error.
    pub fn options(&self) -> NdiscOptionIter<'a> {
        NdiscOptionIter::new(self.options_bytes())
    }

    /// The first Source Link-Layer Address option, if any.
    pub fn source_lladdr(&self) -> Option<MacAddr> {
        self.options().find_map(|o| match o {
            Ok(NdiscOption::SourceLinkLayerAddr(mac)) => Some(mac),
            _ => None,
        })
    }

    /// The first Target Link-Layer Address option, if any.
    pub fn target_lladdr(&self) -> Option<MacAddr> {
        self.options().find_map(|o| match o {
            Ok(NdiscOption::TargetLinkLayerAddr(mac)) => Some(mac),
            _ => None,
        })
    }

    /// Length in bytes of the message [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        fixed_len(self.msg_type()).unwrap_or(0) + self.options_bytes().len()
    }

    /// Writes the message from `src` to `dst`, reserved bytes zero and
    /// checksum included, at the start of `buf` and returns its length in
    /// bytes ([`buffer_len`](Self::buffer_len)). Send it with IP Hop Limit
    /// [`HOP_LIMIT`].
    ///
    /// Panics if `buf` is shorter than `buffer_len()` (a caller bug).
    pub fn emit(&self, src: Ipv6Addr, dst: Ipv6Addr, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let options = self.options_bytes();
        let fixed = len - options.len();
        let buf = &mut buf[..len];
        buf[..fixed].fill(0);
        buf[0] = self.msg_type();
        match *self {
            NdiscRepr::RouterSolicit { .. } => {}
            NdiscRepr::RouterAdvert {
                cur_hop_limit,
                flags,
                router_lifetime,
                reachable_time,
                retrans_timer,
                ..
            } => {
                buf[4] = cur_hop_limit;
                buf[5] = flags;
                put_u16(buf, 6, router_lifetime);
                put_u32(buf, 8, reachable_time);
                put_u32(buf, 12, retrans_timer);
            }
            NdiscRepr::NeighborSolicit { target, .. } => {
                buf[8..24].copy_from_slice(&target.octets());
            }
            NdiscRepr::NeighborAdvert {
                router_flag,
                solicited_flag,
                override_flag,
                target,
                ..
            } => {
                buf[4] = if router_flag { NA_FLAG_ROUTER } else { 0 }
                    | if solicited_flag { NA_FLAG_SOLICITED } else { 0 }
                    | if override_flag { NA_FLAG_OVERRIDE } else { 0 };
                buf[8..24].copy_from_slice(&target.octets());
            }
            NdiscRepr::Redirect {
                target,
                dst: redirected,
                ..
            } => {
                buf[8..24].copy_from_slice(&target.octets());
                buf[24..40].copy_from_slice(&redirected.octets());
            }
        }
        buf[fixed..].copy_from_slice(options);
        icmpv6::fill_checksum(buf, src, dst);
        len
    }
}

#[cfg(test)]
mod tests;
