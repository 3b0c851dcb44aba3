//! The environment's reader: `CORESTACK_*` variables into a
//! [`StackConfig`], one parser for the shim and the C API.
//!
//! | variable | meaning |
//! |---|---|
//! | `CORESTACK_SOCKET` | service mode: a `corestack run` daemon's control socket (the others are not read) |
//! | `CORESTACK_IFACE` | interface to drive (embedded and inline mode) |
//! | `CORESTACK_IP` | `ADDR/PREFIX`, corestack's IPv4 address, e.g. `10.0.0.2/24` (required with `CORESTACK_IFACE`) |
//! | `CORESTACK_GATEWAY` | IPv4 next hop beyond the subnet (optional) |
//! | `CORESTACK_IP6` | `ADDR/PREFIX`, corestack's IPv6 address, e.g. `fd00:1::2/64` (optional: turns IPv6 on) |
//! | `CORESTACK_GATEWAY6` | IPv6 default router, usually its link-local address (optional) |
//! | `CORESTACK_DRIVER` | `af_xdp` (default; also `afxdp`) or `tap` |
//! | `CORESTACK_INLINE` | `1` (or `yes`, `true`): no engine thread, waiting threads run the engine; `0` (default, or `no`, `false`) |
//! | `CORESTACK_CORES` | engines, one per NIC queue, 1..=255 (default 1) |
//! | `CORESTACK_POLL` | `adaptive` (default), `busy` or `interrupt` |
//! | `CORESTACK_IDLE_US` | adaptive polling: µs without work before the engine (or inline mode's waiter) sleeps, 0..=1000000 (default 50) |
//!
//! A variable that is unset or blank is not given. The variables the
//! library reads when an engine starts (`CORESTACK_ENGINE_CPUS`,
//! `CORESTACK_ENGINE_CPU`, `CORESTACK_AF_XDP_TX`, `CORESTACK_SPIN_US`) are
//! read there, not here.

use core::net::{Ipv4Addr, Ipv6Addr};
use core::str::FromStr;

use super::{ConfigError, StackConfig};
use crate::{Driver, PollPolicy};

impl StackConfig {
    /// Reads the process's environment; see [`StackConfig::from_vars`].
    pub fn from_env() -> Result<Option<StackConfig>, ConfigError> {
        StackConfig::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads the `CORESTACK_*` variables through `var` (the environment,
    /// or a test's map). Ok(None): neither `CORESTACK_SOCKET` nor
    /// `CORESTACK_IFACE` is set, so corestack is not asked for.
    ///
    /// Errors: a [`ConfigError`] naming the first variable that is missing
    /// (`CORESTACK_IP` with `CORESTACK_IFACE`) or malformed, and what it
    /// expects.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<StackConfig>, ConfigError> {
        let var = |name: &str| {
            var(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        if let Some(path) = var("CORESTACK_SOCKET") {
            return Ok(Some(StackConfig {
                service: Some(path.into()),
                ..StackConfig::default()
            }));
        }
        let Some(iface) = var("CORESTACK_IFACE") else {
            return Ok(None);
        };
        let Some(ip) = var("CORESTACK_IP") else {
            return Err(ConfigError::new(
                "CORESTACK_IP",
                "CORESTACK_IP is not set: give the stack its address as ADDR/PREFIX, e.g. 10.0.0.2/24"
                    .into(),
            ));
        };
        let (ip, prefix) = cidr::<Ipv4Addr>("CORESTACK_IP", &ip, 32, "10.0.0.2/24")?;
        let ip6 = match var("CORESTACK_IP6") {
            Some(v) => Some(cidr::<Ipv6Addr>("CORESTACK_IP6", &v, 128, "fd00:1::2/64")?),
            None => None,
        };
        let driver = match var("CORESTACK_DRIVER").as_deref() {
            None | Some("af_xdp") | Some("afxdp") => Driver::AfXdp,
            Some("tap") => Driver::Tap,
            Some(other) => return Err(unknown("CORESTACK_DRIVER", other, "af_xdp or tap")),
        };
        let inline = match var("CORESTACK_INLINE").as_deref() {
            None | Some("0") | Some("no") | Some("false") => false,
            Some("1") | Some("yes") | Some("true") => true,
            Some(other) => return Err(unknown("CORESTACK_INLINE", other, "0 or 1")),
        };
        let poll = match var("CORESTACK_POLL").as_deref() {
            None | Some("adaptive") => PollPolicy::Adaptive,
            Some("busy") => PollPolicy::Busy,
            Some("interrupt") => PollPolicy::Interrupt,
            Some(other) => {
                return Err(unknown(
                    "CORESTACK_POLL",
                    other,
                    "adaptive, busy or interrupt",
                ))
            }
        };
        let idle_us = match var("CORESTACK_IDLE_US") {
            None => super::IDLE_US_DEFAULT,
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|us| *us <= 1_000_000)
                .ok_or_else(|| {
                    ConfigError::new(
                        "CORESTACK_IDLE_US",
                        format!("CORESTACK_IDLE_US={v:?} is not a number of µs from 0 to 1000000"),
                    )
                })?,
        };
        let engines = match var("CORESTACK_CORES") {
            None => 1,
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=appif::socket::MAX_ENGINES).contains(n))
                .ok_or_else(|| {
                    ConfigError::new(
                        "CORESTACK_CORES",
                        format!(
                            "CORESTACK_CORES={v:?} is not a number of engines from 1 to {}",
                            appif::socket::MAX_ENGINES
                        ),
                    )
                })?,
        };
        Ok(Some(StackConfig {
            iface,
            driver,
            ip,
            prefix,
            gateway: address::<Ipv4Addr>("CORESTACK_GATEWAY", var("CORESTACK_GATEWAY"), "IPv4")?,
            ip6,
            gateway6: address::<Ipv6Addr>("CORESTACK_GATEWAY6", var("CORESTACK_GATEWAY6"), "IPv6")?,
            inline,
            engines,
            poll,
            idle_us,
            ..StackConfig::default()
        }))
    }
}

/// `name={value:?} is unknown: use {expected}`.
fn unknown(name: &str, value: &str, expected: &str) -> ConfigError {
    ConfigError::new(name, format!("{name}={value:?} is unknown: use {expected}"))
}

/// `ADDR/PREFIX` of one family (prefix at most `max`) from variable `name`.
fn cidr<A: FromStr>(
    name: &str,
    text: &str,
    max: u8,
    example: &str,
) -> Result<(A, u8), ConfigError> {
    text.split_once('/')
        .and_then(|(a, p)| {
            Some((
                a.trim().parse::<A>().ok()?,
                p.trim().parse::<u8>().ok().filter(|p| *p <= max)?,
            ))
        })
        .ok_or_else(|| {
            ConfigError::new(
                name,
                format!("{name}={text:?} is not ADDR/PREFIX (prefix 0..={max}), e.g. {example}"),
            )
        })
}

/// An optional address of one family (`family`: `IPv4`, `IPv6`) from
/// variable `name`.
fn address<A: FromStr>(
    name: &str,
    text: Option<String>,
    family: &str,
) -> Result<Option<A>, ConfigError> {
    match text {
        None => Ok(None),
        Some(t) => t.parse().map(Some).map_err(|_| {
            ConfigError::new(name, format!("{name}={t:?} is not an {family} address"))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&str, &str)]) -> Result<Option<StackConfig>, ConfigError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        StackConfig::from_vars(|k| m.get(k).cloned())
    }

    #[test]
    fn nothing_set_asks_for_no_stack() {
        assert_eq!(read(&[("CORESTACK_IP", "10.0.0.2/24")]), Ok(None));
    }

    #[test]
    fn socket_set_means_service_mode_whatever_else_is_set() {
        let c = read(&[
            ("CORESTACK_SOCKET", " /run/cs.sock "),
            ("CORESTACK_IP", "junk"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.service.as_deref(), Some("/run/cs.sock".as_ref()));
    }

    #[test]
    fn every_variable_is_read() {
        let c = read(&[
            ("CORESTACK_IFACE", " veth1 "),
            ("CORESTACK_IP", "10.1.2.3/16"),
            ("CORESTACK_GATEWAY", "10.1.0.1"),
            ("CORESTACK_IP6", "fd00:1::2/64"),
            ("CORESTACK_GATEWAY6", "fe80::1"),
            ("CORESTACK_DRIVER", "tap"),
            ("CORESTACK_INLINE", "1"),
            ("CORESTACK_CORES", "4"),
            ("CORESTACK_POLL", "busy"),
            ("CORESTACK_IDLE_US", "5"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            c,
            StackConfig {
                iface: "veth1".into(),
                ip: Ipv4Addr::new(10, 1, 2, 3),
                prefix: 16,
                gateway: Some(Ipv4Addr::new(10, 1, 0, 1)),
                ip6: Some(("fd00:1::2".parse().unwrap(), 64)),
                gateway6: Some("fe80::1".parse().unwrap()),
                driver: Driver::Tap,
                inline: true,
                engines: 4,
                poll: PollPolicy::Busy,
                idle_us: 5,
                ..StackConfig::default()
            }
        );
    }

    #[test]
    fn missing_or_malformed_variables_are_refused_by_name() {
        let base = [("CORESTACK_IFACE", "eth0"), ("CORESTACK_IP", "10.0.0.1/8")];
        for (extra, name) in [
            (("CORESTACK_IP", ""), "CORESTACK_IP"),
            (("CORESTACK_IP", "10.0.0.1"), "CORESTACK_IP"),
            (("CORESTACK_IP", "10.0.0.1/33"), "CORESTACK_IP"),
            (("CORESTACK_IP6", "fd00::2/129"), "CORESTACK_IP6"),
            (("CORESTACK_GATEWAY", "10.0.0"), "CORESTACK_GATEWAY"),
            (("CORESTACK_GATEWAY6", "10.0.0.1"), "CORESTACK_GATEWAY6"),
            (("CORESTACK_DRIVER", "dpdk"), "CORESTACK_DRIVER"),
            (("CORESTACK_INLINE", "maybe"), "CORESTACK_INLINE"),
            (("CORESTACK_CORES", "0"), "CORESTACK_CORES"),
            (("CORESTACK_CORES", "256"), "CORESTACK_CORES"),
            (("CORESTACK_POLL", "spin"), "CORESTACK_POLL"),
            (("CORESTACK_IDLE_US", "-1"), "CORESTACK_IDLE_US"),
            (("CORESTACK_IDLE_US", "1000001"), "CORESTACK_IDLE_US"),
        ] {
            let mut vars = base.to_vec();
            vars.retain(|(k, _)| *k != extra.0);
            vars.push(extra);
            let e = read(&vars).unwrap_err();
            assert_eq!(e.name, name);
            assert!(e.message.starts_with(name), "{e}");
            assert!(!e.message.contains('\n'), "{e}");
        }
    }
}
