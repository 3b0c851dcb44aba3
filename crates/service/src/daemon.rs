//! The daemon on a real interface: opens the port the configuration names
//! (AF_XDP or TAP) and runs the [`Host`] on it until told to stop. This is
//! `corestack run` without its command line.

use crate::config::{Driver, Validated};
use crate::control::ControlSocket;
use crate::engines::serve;
use crate::host::SetupError;
use std::io;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use thiserror::Error;
use tracing::{info, warn};

/// Why the daemon could not start on its interface. Each message says what
/// to do.
#[derive(Debug, Error)]
pub enum RunError {
    /// The interface does not exist in this network namespace (AF_XDP).
    #[error("interface {iface} not found in this network namespace (check `ip link`)")]
    NoInterface {
        /// The interface.
        iface: String,
    },
    /// `CORESTACK_AF_XDP_TX` names no transmit path.
    #[error("CORESTACK_AF_XDP_TX: {0}")]
    TxPath(nic::Error),
    /// Opening the port needs privileges this process lacks.
    #[error("needs root or CAP_NET_ADMIN to drive {iface}: run with sudo ({error})")]
    Permission {
        /// The interface.
        iface: String,
        /// The refusal (EPERM or EACCES).
        error: io::Error,
    },
    /// Opening the port failed otherwise.
    #[error("opening {iface}")]
    Open {
        /// The interface.
        iface: String,
        /// Why.
        source: io::Error,
    },
    /// The host could not be set up around the engine.
    #[error(transparent)]
    Setup(#[from] SetupError),
}

impl RunError {
    /// The error of opening `iface`: privileges, or anything else.
    fn open(e: io::Error, iface: &str) -> RunError {
        let iface = iface.to_string();
        if e.kind() == io::ErrorKind::PermissionDenied {
            RunError::Permission { iface, error: e }
        } else {
            RunError::Open { iface, source: e }
        }
    }
}

/// Opens `cfg.iface` with `cfg.driver` and serves applications on
/// `control` until `stop` is set (see [`crate::Host::run`]), with
/// `cfg.cores` engines ([`serve`]): one on queue 0 of the interface, or
/// several, each on its own queues (AF_XDP: every queue of the interface,
/// dealt among the engines, the NIC's RSS programmed with their hash where
/// it can be; TAP: one queue each of a multi-queue tap). An AF_XDP port
/// steers frames for `cfg.ip` (and, with IPv6,
/// for `cfg.ip6`, the link-local address the engine derives from the
/// interface's MAC, and their solicited-node groups) to the stack and
/// passes the rest to the kernel; a fallback to generic (copy) XDP is
/// logged as a warning.
///
/// Errors: the interface is missing or cannot be opened (or cannot give
/// as many queues as engines: the message says what to do), or the host
/// cannot be set up; nothing was served then.
pub fn run(cfg: Validated, control: ControlSocket, stop: &AtomicBool) -> Result<(), RunError> {
    let iface = cfg.iface.clone();
    match cfg.driver {
        Driver::AfXdp => {
            if !Path::new("/sys/class/net").join(&iface).exists() {
                return Err(RunError::NoInterface { iface });
            }
            let tx_path = nic::af_xdp::TxPath::from_env().map_err(RunError::TxPath)?;
            let steer_ip6 = match cfg.ip6 {
                Some((global, _)) => core::iter::once(global)
                    .chain(iface_mac(&iface).map(engine::link_local_from_mac))
                    .collect(),
                None => Vec::new(),
            };
            let xcfg = nic::af_xdp::AfXdpConfig {
                ifname: iface.clone(),
                steer_ip: Some(cfg.ip),
                steer_ip6,
                tx_path,
                ..Default::default()
            };
            let generic = |p: &nic::af_xdp::AfXdpPort| {
                if p.xdp_mode() == nic::af_xdp::XdpMode::Generic {
                    warn!("af_xdp on {iface} fell back to generic (copy) XDP mode");
                }
            };
            if cfg.cores == 1 {
                let port = nic::af_xdp::AfXdpPort::open(&xcfg)
                    .map_err(|e| RunError::open(io::Error::from(e), &iface))?;
                generic(&port);
                return Ok(serve(vec![port], cfg, control, stop)?);
            }
            let (groups, rss) = nic::group::af_xdp_engines(&xcfg, cfg.cores as usize)
                .map_err(|e| RunError::open(e, &iface))?;
            if let Some(p) = groups.first().and_then(|g| g.ports().first()) {
                generic(p);
            }
            info!(engines = cfg.cores, "NIC RSS: {rss}");
            serve(groups, cfg, control, stop)?;
        }
        Driver::Tap if cfg.cores == 1 => {
            let port = nic::tap::TapPort::open(&iface)
                .map_err(|e| RunError::open(io::Error::from(e), &iface))?;
            serve(vec![port], cfg, control, stop)?;
        }
        Driver::Tap => {
            let groups = nic::group::tap_engines(&iface, cfg.cores as usize)
                .map_err(|e| RunError::open(e, &iface))?;
            serve(groups, cfg, control, stop)?;
        }
    }
    Ok(())
}

/// The MAC address of `iface` (from sysfs), if it has one.
fn iface_mac(iface: &str) -> Option<wire::MacAddr> {
    let text =
        std::fs::read_to_string(Path::new("/sys/class/net").join(iface).join("address")).ok()?;
    let mut mac = [0u8; 6];
    let mut parts = text.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    Some(wire::MacAddr(mac))
}
