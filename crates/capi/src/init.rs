//! Starting and stopping the process's stack: `cs_init`, `cs_fini`,
//! `cs_last_error`, configured by the environment as the shim is: the
//! same `CORESTACK_*` variables, read by the library's one reader
//! (`corestack::StackConfig::from_env`; the table is in
//! include/corestack.h).
//!
//! | variable | meaning |
//! |---|---|
//! | `CORESTACK_SOCKET` | path of a `corestack run` daemon's control socket: service mode (the others are ignored) |
//! | `CORESTACK_IFACE` | interface to drive (embedded mode, required) |
//! | `CORESTACK_IP` | `ADDR/PREFIX`, e.g. `10.0.0.2/24` (embedded mode, required) |
//! | `CORESTACK_GATEWAY` | next hop for destinations outside the subnet (optional) |
//! | `CORESTACK_IP6` | `ADDR/PREFIX`, corestack's IPv6 address, e.g. `fd00:1::2/64` (optional: turns IPv6 on) |
//! | `CORESTACK_GATEWAY6` | IPv6 default router (optional; usually its link-local address) |
//! | `CORESTACK_DRIVER` | `af_xdp` (default) or `tap` |
//! | `CORESTACK_INLINE` | `1`: no engine thread; threads that wait run the engine (default `0`) |
//! | `CORESTACK_CORES` | engines, one per NIC queue, 1..=255 (default 1) |
//! | `CORESTACK_POLL` | `adaptive` (default), `busy` or `interrupt` |

use crate::error::{Error, Result};
use corestack::{Stack, StackConfig};
use std::ffi::{c_char, c_int};

fn invalid(msg: String) -> Error {
    Error::msg(libc::EINVAL, msg)
}

/// Reads the configuration through `var` (the environment, or a test's
/// map) with the library's one reader ([`StackConfig::from_vars`]).
/// Errors: EINVAL, with a message naming the variable, for a missing or
/// malformed one.
pub(crate) fn config_from(var: impl Fn(&str) -> Option<String>) -> Result<StackConfig> {
    StackConfig::from_vars(var)
        .map_err(|e| invalid(e.message))?
        .ok_or_else(|| {
            invalid(
                "CORESTACK_IFACE is not set: name the interface to drive (and CORESTACK_IP=ADDR/PREFIX), \
                 or set CORESTACK_SOCKET to use a running `corestack run` daemon"
                    .into(),
            )
        })
}

fn start(cfg: StackConfig) -> Result<Stack> {
    Ok(cfg.builder().start()?)
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
    use core::net::{Ipv4Addr, Ipv6Addr};
    use corestack::{Driver, PollPolicy};
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<StackConfig> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        config_from(|k| m.get(k).cloned())
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
            StackConfig {
                iface: "veth1".into(),
                ip: Ipv4Addr::new(10, 1, 2, 3),
                prefix: 24,
                ..StackConfig::default()
            }
        );
        assert_eq!((c.driver, c.inline, c.engines), (Driver::AfXdp, false, 1));
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
        assert_eq!(c.driver, Driver::Tap);
        assert_eq!(c.gateway, Some(Ipv4Addr::new(10, 1, 0, 1)));
        assert!(c.inline);
        assert_eq!(c.prefix, 16);
    }

    #[test]
    fn ip6_gateway6_cores_and_poll_are_read_as_the_shim_reads_them() {
        let c = cfg(&[
            ("CORESTACK_IFACE", "veth1"),
            ("CORESTACK_IP", "10.1.2.3/24"),
            ("CORESTACK_IP6", "fd00:1::2/64"),
            ("CORESTACK_GATEWAY6", "fe80::1"),
            ("CORESTACK_CORES", "2"),
            ("CORESTACK_POLL", "interrupt"),
        ])
        .unwrap();
        assert_eq!(c.ip6, Some(("fd00:1::2".parse::<Ipv6Addr>().unwrap(), 64)));
        assert_eq!(c.gateway6, Some("fe80::1".parse::<Ipv6Addr>().unwrap()));
        assert_eq!(c.engines, 2);
        assert_eq!(c.poll, PollPolicy::Interrupt);
    }

    #[test]
    fn missing_or_malformed_variables_are_einval_naming_the_variable() {
        let iface_ip = |extra: (&'static str, &'static str)| {
            vec![
                ("CORESTACK_IFACE", "eth0"),
                ("CORESTACK_IP", "10.0.0.1/8"),
                extra,
            ]
        };
        for (vars, name) in [
            (vec![], "CORESTACK_IFACE"),
            (vec![("CORESTACK_IFACE", "eth0")], "CORESTACK_IP"),
            (
                vec![("CORESTACK_IFACE", "eth0"), ("CORESTACK_IP", "10.0.0.1")],
                "CORESTACK_IP",
            ),
            (
                vec![("CORESTACK_IFACE", "eth0"), ("CORESTACK_IP", "10.0.0.1/33")],
                "CORESTACK_IP",
            ),
            (iface_ip(("CORESTACK_DRIVER", "dpdk")), "CORESTACK_DRIVER"),
            (iface_ip(("CORESTACK_IP6", "fd00::2")), "CORESTACK_IP6"),
            (iface_ip(("CORESTACK_GATEWAY6", "x")), "CORESTACK_GATEWAY6"),
            (iface_ip(("CORESTACK_CORES", "0")), "CORESTACK_CORES"),
        ] {
            let e = cfg(&vars).unwrap_err();
            assert_eq!(e.errno, libc::EINVAL);
            assert!(e.msg.as_deref().unwrap_or("").contains(name), "{e:?}");
        }
    }
}
