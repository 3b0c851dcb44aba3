//! The `ip` and `gateway` keys: a list of `ADDR/PREFIX` (or one string),
//! at most one address and one gateway per family, checked into a [`Net`].

use super::ConfigError;
use serde::{Deserialize, Deserializer};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The stack's addresses, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Net {
    pub ip: Ipv4Addr,
    pub prefix: u8,
    pub gateway: Option<Ipv4Addr>,
    pub ip6: Option<(Ipv6Addr, u8)>,
    pub gateway6: Option<Ipv6Addr>,
}

/// A TOML string or array of strings, as a list (`ip = "10.0.0.2/24"` is
/// `ip = ["10.0.0.2/24"]`).
pub(super) fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    match OneOrMany::deserialize(d) {
        Ok(OneOrMany::One(s)) => Ok(vec![s]),
        Ok(OneOrMany::Many(v)) => Ok(v),
        Err(_) => Err(serde::de::Error::custom(
            "expected an address string or a list of them, e.g. [\"10.0.0.2/24\", \"fd00::2/64\"]",
        )),
    }
}

/// Checks `ips` (`ADDR/PREFIX` each: one IPv4, required, and at most one
/// IPv6) and `gateways` (at most one per family, each of a family the
/// stack has an address in).
pub(super) fn validate(ips: &[String], gateways: &[String]) -> Result<Net, ConfigError> {
    let mut v4: Option<(&str, Ipv4Addr, u8)> = None;
    let mut v6: Option<(&str, Ipv6Addr, u8)> = None;
    let ips: Vec<&str> = ips
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    if ips.is_empty() {
        return Err(ConfigError::NoIp);
    }
    for text in &ips {
        let Some((a, p)) = text.split_once('/') else {
            return Err(ConfigError::NoPrefix {
                text: (*text).into(),
            });
        };
        if let Ok(addr) = a.parse::<Ipv6Addr>() {
            let prefix = prefix_of(text, p, 128)?;
            if let Some((first, ..)) = v6 {
                return Err(two("ip", first, text));
            }
            v6 = Some((text, validate_ip6(text, addr)?, prefix));
        } else {
            let (addr, prefix) = validate_ip(text, a, p)?;
            if let Some((first, ..)) = v4 {
                return Err(two("ip", first, text));
            }
            v4 = Some((text, addr, prefix));
        }
    }
    let Some((_, ip, prefix)) = v4 else {
        let text = v6.map_or("", |(t, ..)| t);
        return Err(ConfigError::NoIpv4 { text: text.into() });
    };
    let (mut gateway, mut gateway6): (Option<(&str, _)>, Option<(&str, _)>) = (None, None);
    for text in gateways
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
    {
        match text.parse::<IpAddr>() {
            Ok(IpAddr::V4(gw)) => {
                if let Some((first, _)) = gateway {
                    return Err(two("gateway", first, text));
                }
                gateway = Some((text, validate_gateway(text, gw, ip, prefix)?));
            }
            Ok(IpAddr::V6(gw)) => {
                if let Some((first, _)) = gateway6 {
                    return Err(two("gateway", first, text));
                }
                let Some((_, ip6, prefix6)) = v6 else {
                    return Err(ConfigError::Gateway6WithoutIp6 { text: text.into() });
                };
                gateway6 = Some((text, validate_gateway6(text, gw, ip6, prefix6)?));
            }
            Err(_) => return Err(ConfigError::BadGateway { text: text.into() }),
        }
    }
    Ok(Net {
        ip,
        prefix,
        gateway: gateway.map(|g| g.1),
        ip6: v6.map(|(_, a, p)| (a, p)),
        gateway6: gateway6.map(|g| g.1),
    })
}

fn two(key: &'static str, first: &str, second: &str) -> ConfigError {
    ConfigError::TwoOfAFamily {
        key,
        first: first.into(),
        second: second.into(),
    }
}

/// The prefix length `p` of `text`, at most `max` bits.
fn prefix_of(text: &str, p: &str, max: u8) -> Result<u8, ConfigError> {
    match p.parse::<u8>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(ConfigError::BadPrefix {
            text: text.into(),
            prefix: p.into(),
        }),
    }
}

fn validate_ip(text: &str, a: &str, p: &str) -> Result<(Ipv4Addr, u8), ConfigError> {
    let Ok(addr) = a.parse::<Ipv4Addr>() else {
        return Err(ConfigError::BadAddress {
            text: text.into(),
            addr: a.into(),
        });
    };
    let prefix = prefix_of(text, p, 32)?;
    if addr.is_unspecified() || addr.is_broadcast() || addr.is_multicast() || addr.is_loopback() {
        return Err(ConfigError::UnusableAddress { text: text.into() });
    }
    let host = u32::from(addr) & !mask(prefix);
    if prefix <= 30 && (host == 0 || host == !mask(prefix)) {
        return Err(ConfigError::SubnetAddress {
            text: text.into(),
            network: host == 0,
        });
    }
    Ok((addr, prefix))
}

/// A global or unique local unicast address (RFC 4291 §2.5; the
/// link-local one is the engine's, from the MAC).
fn validate_ip6(text: &str, addr: Ipv6Addr) -> Result<Ipv6Addr, ConfigError> {
    if addr.is_unspecified()
        || addr.is_loopback()
        || addr.is_multicast()
        || addr.is_unicast_link_local()
        || addr.to_ipv4_mapped().is_some()
    {
        return Err(ConfigError::UnusableAddress6 { text: text.into() });
    }
    Ok(addr)
}

fn validate_gateway(
    text: &str,
    gw: Ipv4Addr,
    ip: Ipv4Addr,
    prefix: u8,
) -> Result<Ipv4Addr, ConfigError> {
    if gw == ip {
        return Err(ConfigError::GatewayIsOwnAddress { text: text.into() });
    }
    let m = mask(prefix);
    if u32::from(gw) & m != u32::from(ip) & m {
        return Err(ConfigError::GatewayOffSubnet {
            text: text.into(),
            net: Ipv4Addr::from(u32::from(ip) & m).into(),
            prefix,
        });
    }
    Ok(gw)
}

/// An IPv6 router: unicast, not ours, and on-link (link-local, RFC 4861
/// §4.2 routers speak from theirs, or inside our prefix).
fn validate_gateway6(
    text: &str,
    gw: Ipv6Addr,
    ip6: Ipv6Addr,
    prefix: u8,
) -> Result<Ipv6Addr, ConfigError> {
    if gw.is_unspecified() || gw.is_multicast() || gw.is_loopback() {
        return Err(ConfigError::BadGateway { text: text.into() });
    }
    if gw == ip6 {
        return Err(ConfigError::GatewayIsOwnAddress { text: text.into() });
    }
    let m = mask6(prefix);
    if !gw.is_unicast_link_local() && u128::from(gw) & m != u128::from(ip6) & m {
        return Err(ConfigError::GatewayOffSubnet {
            text: text.into(),
            net: Ipv6Addr::from(u128::from(ip6) & m).into(),
            prefix,
        });
    }
    Ok(gw)
}

/// The netmask of a prefix length (0..=32) as a host-order u32.
pub(super) fn mask(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

/// The netmask of an IPv6 prefix length (0..=128).
fn mask6(prefix: u8) -> u128 {
    match prefix {
        0 => 0,
        p => u128::MAX << (128 - u32::from(p.min(128))),
    }
}
