//! Starting and stopping the process's stack: `cs_init`, `cs_fini`,
//! `cs_last_error`, configured by the environment.
//!
//! | variable | meaning |
//! |---|---|
//! | `CORESTACK_SOCKET` | path of a `corestack run` daemon's control socket: service mode (the others are ignored) |
//! | `CORESTACK_IFACE` | interface to drive (embedded mode, required) |
//! | `CORESTACK_IP` | `ADDR/PREFIX`, e.g. `10.0.0.2/24` (embedded mode, required) |
//! | `CORESTACK_DRIVER` | `af_xdp` (default) or `tap` |
//! | `CORESTACK_GATEWAY` | next hop for destinations outside the subnet (optional) |
//! | `CORESTACK_INLINE` | `1`: no engine thread; threads that wait run the engine (default `0`) |

use crate::error::{Error, Result};
use core::net::Ipv4Addr;
use corestack::{Driver, Stack};
use std::ffi::{c_char, c_int};

/// How to start the stack, as the environment says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Config {
    /// Connect to a running daemon (the client library reads `CORESTACK_SOCKET`).
    Service,
    Embedded {
        iface: String,
        ip: Ipv4Addr,
        prefix: u8,
        driver: Driver,
        gateway: Option<Ipv4Addr>,
        inline: bool,
    },
}

fn invalid(msg: String) -> Error {
    Error::msg(libc::EINVAL, msg)
}

/// Reads the configuration through `var` (the environment, or a test's
/// map). Errors: EINVAL, with a message naming the variable, for a missing
/// or malformed one.
pub(crate) fn config_from(var: impl Fn(&str) -> Option<String>) -> Result<Config> {
    let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    if var("CORESTACK_SOCKET").is_some() {
        return Ok(Config::Service);
    }
    let iface = var("CORESTACK_IFACE").ok_or_else(|| {
        invalid(
            "CORESTACK_IFACE is not set: name the interface to drive (and CORESTACK_IP=ADDR/PREFIX), \
             or set CORESTACK_SOCKET to use a running `corestack run` daemon"
                .into(),
        )
    })?;
    let ip = var("CORESTACK_IP").ok_or_else(|| {
        invalid(
            "CORESTACK_IP is not set: give the stack its address as ADDR/PREFIX, e.g. 10.0.0.2/24"
                .into(),
        )
    })?;
    let (ip, prefix) = ip
        .trim()
        .split_once('/')
        .and_then(|(a, p)| Some((a.parse().ok()?, p.parse::<u8>().ok().filter(|p| *p <= 32)?)))
        .ok_or_else(|| {
            invalid(format!(
                "CORESTACK_IP={ip:?} is not ADDR/PREFIX, e.g. 10.0.0.2/24"
            ))
        })?;
    let driver = match var("CORESTACK_DRIVER").as_deref().map(str::trim) {
        None | Some("af_xdp") | Some("afxdp") => Driver::AfXdp,
        Some("tap") => Driver::Tap,
        Some(other) => {
            return Err(invalid(format!(
                "CORESTACK_DRIVER={other:?} is unknown: use af_xdp or tap"
            )))
        }
    };
    let gateway = match var("CORESTACK_GATEWAY") {
        None => None,
        Some(g) => Some(
            g.trim()
                .parse()
                .map_err(|_| invalid(format!("CORESTACK_GATEWAY={g:?} is not an IPv4 address")))?,
        ),
    };
    let inline = match var("CORESTACK_INLINE").as_deref().map(str::trim) {
        None | Some("0") | Some("no") | Some("false") => false,
        Some("1") | Some("yes") | Some("true") => true,
        Some(other) => {
            return Err(invalid(format!(
                "CORESTACK_INLINE={other:?} is unknown: use 0 or 1"
            )))
        }
    };
    Ok(Config::Embedded {
        iface: iface.trim().to_string(),
        ip,
        prefix,
        driver,
        gateway,
        inline,
    })
}

fn start(cfg: Config) -> Result<Stack> {
    let builder = match cfg {
        Config::Service => Stack::builder(),
        Config::Embedded {
            iface,
            ip,
            prefix,
            driver,
            gateway,
            inline,
        } => {
            let b = Stack::builder()
                .iface(&iface)
                .ip(ip, prefix)
                .driver(driver)
                .inline(inline);
            match gateway {
                Some(g) => b.gateway(g),
                None => b,
            }
        }
    };
    Ok(builder.start()?)
}

/// Starts the process's stack as the environment says (see the table in
/// include/corestack.h): service mode when `CORESTACK_SOCKET` is set, else
/// embedded mode on `CORESTACK_IFACE` with `CORESTACK_IP`. Does nothing
/// when the stack runs already. Returns 0.
///
/// Errors (the message from `cs_last_error` says what to do): EINVAL for a
/// missing or malformed variable, ENODEV for a missing interface, EPERM
/// without root (CAP_NET_ADMIN), ENOENT / ECONNREFUSED when no daemon
/// listens at `CORESTACK_SOCKET`, others as the driver reports them.
#[no_mangle]
pub extern "C" fn cs_init() -> c_int {
    crate::error::ffi(-1, || {
        crate::table::init(|| start(config_from(|k| std::env::var(k).ok())?))?;
        Ok(0)
    })
}

/// Closes every descriptor and stops the stack (in embedded mode, joins
/// the engine thread once no other thread is inside a call). `cs_init` may
/// start it again. Calls still waiting in other threads return EBADF.
#[no_mangle]
pub extern "C" fn cs_fini() {
    crate::error::ffi((), || {
        crate::table::fini();
        Ok(())
    })
}

/// A one-line message on this thread's last failed call (more than
/// `strerror(errno)` when the library has more to say, e.g. which
/// variable `cs_init` missed); "" before any failure. The string belongs
/// to the library and stays valid until this thread's next failed call.
#[no_mangle]
pub extern "C" fn cs_last_error() -> *const c_char {
    crate::error::last_error()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<Config> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        config_from(|k| m.get(k).cloned())
    }

    #[test]
    fn socket_set_means_service_mode_whatever_else_is_set() {
        let c = cfg(&[
            ("CORESTACK_SOCKET", "/run/cs.sock"),
            ("CORESTACK_IP", "junk"),
        ]);
        assert_eq!(c.unwrap(), Config::Service);
    }

    #[test]
    fn iface_and_ip_give_embedded_af_xdp() {
        let c = cfg(&[
            ("CORESTACK_IFACE", "veth1"),
            ("CORESTACK_IP", "10.1.2.3/24"),
        ])
        .unwrap();
        assert_eq!(
            c,
            Config::Embedded {
                iface: "veth1".into(),
                ip: Ipv4Addr::new(10, 1, 2, 3),
                prefix: 24,
                driver: Driver::AfXdp,
                gateway: None,
                inline: false,
            }
        );
    }

    #[test]
    fn tap_driver_gateway_and_inline_are_read() {
        let c = cfg(&[
            ("CORESTACK_IFACE", "tap0"),
            ("CORESTACK_IP", "10.1.2.3/16"),
            ("CORESTACK_DRIVER", "tap"),
            ("CORESTACK_GATEWAY", "10.1.0.1"),
            ("CORESTACK_INLINE", "1"),
        ])
        .unwrap();
        let Config::Embedded {
            driver,
            gateway,
            inline,
            prefix,
            ..
        } = c
        else {
            panic!("not embedded: {c:?}");
        };
        assert_eq!(driver, Driver::Tap);
        assert_eq!(gateway, Some(Ipv4Addr::new(10, 1, 0, 1)));
        assert!(inline);
        assert_eq!(prefix, 16);
    }

    #[test]
    fn missing_or_malformed_variables_are_einval_naming_the_variable() {
        for (vars, name) in [
            (&[][..], "CORESTACK_IFACE"),
            (&[("CORESTACK_IFACE", "eth0")][..], "CORESTACK_IP"),
            (
                &[("CORESTACK_IFACE", "eth0"), ("CORESTACK_IP", "10.0.0.1")][..],
                "CORESTACK_IP",
            ),
            (
                &[("CORESTACK_IFACE", "eth0"), ("CORESTACK_IP", "10.0.0.1/33")][..],
                "CORESTACK_IP",
            ),
            (
                &[
                    ("CORESTACK_IFACE", "eth0"),
                    ("CORESTACK_IP", "10.0.0.1/8"),
                    ("CORESTACK_DRIVER", "dpdk"),
                ][..],
                "CORESTACK_DRIVER",
            ),
        ] {
            let e = cfg(vars).unwrap_err();
            assert_eq!(e.errno, libc::EINVAL);
            assert!(e.msg.as_deref().unwrap_or("").contains(name), "{e:?}");
        }
    }
}
