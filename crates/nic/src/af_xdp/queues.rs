//! One XDP program and one XSKMAP per interface, one socket per queue.
//!
//! [`AfXdpPort::open_queues`] binds a socket (each with its own UMEM) to
//! every queue `0..n`, puts each in the XSKMAP at key = its queue id, then
//! loads the steering program (module `prog`) and attaches it once, through
//! a bpf link. The program redirects a frame to the socket of the queue it
//! arrived on (`rx_queue_index`), so each queue's traffic reaches only that
//! queue's port; XDP cannot move a frame to another queue's socket. The
//! link, program and map live in one [`Steering`] shared by the ports: the
//! program stays attached until the last port is dropped.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use super::{
    attach_refused, check_config, permission_or, prog, sys, AfXdpConfig, AfXdpPort, XdpMode, Xsk,
    XDP_PACKET_HEADROOM,
};
use crate::error::Error;

/// `XDP_FLAGS_SKB_MODE` (linux/if_link.h).
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`.
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// The most queues [`AfXdpPort::open_queues`] opens (queue ids stay below
/// the 1024 that `AfXdpConfig::queue_id` allows).
const MAX_QUEUES: usize = 1024;

/// The XDP program of an interface, its XSKMAP and the bpf link that
/// attaches it. Fields drop in order: the link first (detaching the
/// program), then the program, then the map.
#[derive(Debug)]
pub(super) struct Steering {
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
    /// Native or Generic, as attached.
    pub(super) mode: XdpMode,
}

impl AfXdpPort {
    /// Opens `queues` ports on `cfg.ifname`, one per queue `0..queues`
    /// (element `i` is bound to queue `i`), each with its own socket, UMEM
    /// and rings sized by `cfg` (so `queues` times the memory of one port).
    /// One steering program and one XSKMAP (`max(queues, 64)` entries) serve
    /// them all: a frame for `cfg.steer_ip` (or any frame, without one) that
    /// arrives on queue `i` goes to port `i`, everything else to the kernel.
    /// The program stays attached while any of the ports lives; each port
    /// may move to its own thread. `cfg.queue_id` is not used.
    ///
    /// With `queues` = 1 this is [`AfXdpPort::open`] on queue 0.
    ///
    /// # Errors
    /// - "AF_XDP open_queues(0)..." (InvalidConfig) for 0 or more than 1024
    ///   queues;
    /// - "AF_XDP on X needs N queues but it has M: raise them with
    ///   `ethtool -L X combined N` ..." (InvalidConfig) when the driver
    ///   reports fewer rx queues (ETHTOOL_GCHANNELS) than asked for;
    /// - "XDP attach refused on X: ...; use --driver tap" when a socket
    ///   cannot be bound (EINVAL for a queue the interface lacks, when the
    ///   driver does not report its queues) or the program cannot be
    ///   attached: EBUSY/EEXIST (another program is attached), EOPNOTSUPP
    ///   (mode not supported), ENOSPC (veth: this end has fewer rx queues
    ///   than its peer has tx queues);
    /// - otherwise as [`AfXdpPort::open`].
    pub fn open_queues(cfg: &AfXdpConfig, queues: usize) -> Result<Vec<AfXdpPort>, Error> {
        check_config(cfg)?;
        if !(1..=MAX_QUEUES).contains(&queues) {
            return Err(Error::config(format!(
                "AF_XDP open_queues({queues}) on {}: open 1 to {MAX_QUEUES} queues",
                cfg.ifname
            )));
        }
        // Both fit in u32: queues <= 1024.
        let ids: Vec<u32> = (0..queues as u32).collect();
        open_on(cfg, &ids, (queues as u32).max(64))
    }
}

/// The rx queues `ifname` has (`ethtool -l`: combined + rx channels);
/// None when the driver does not say. Errors: as `ioctl(SIOCETHTOOL)`
/// (the interface does not exist).
pub fn rx_queues(ifname: &str) -> Result<Option<u32>, Error> {
    crate::sys::if_rx_queues(ifname)
}

/// Opens one port per queue id in `queue_ids` on `cfg.ifname`, sharing one
/// program and one XSKMAP of `map_entries` entries (more than the largest id).
pub(super) fn open_on(
    cfg: &AfXdpConfig,
    queue_ids: &[u32],
    map_entries: u32,
) -> Result<Vec<AfXdpPort>, Error> {
    let ifname = cfg.ifname.as_str();
    let ifindex = crate::sys::ifindex(ifname)?;
    let mac = crate::sys::if_hwaddr(ifname)?;
    let if_mtu = crate::sys::if_mtu(ifname)? as usize;
    let needed = queue_ids.iter().max().map_or(0, |&q| q + 1);
    // A driver that does not say (or an error) leaves it to the bind.
    if let Ok(Some(have)) = crate::sys::if_rx_queues(ifname) {
        if needed > have {
            return Err(Error::config(format!(
                "AF_XDP on {ifname} needs {needed} queues but it has {have}: raise them with \
                 `ethtool -L {ifname} combined {needed}` (veth: `ethtool -L {ifname} rx {needed} \
                 tx {needed}`, or create it with numrxqueues {needed} numtxqueues {needed} on \
                 both ends)"
            )));
        }
    }
    let frame_size = cfg.frame_size as usize;
    let max_frame_mtu = (frame_size - XDP_PACKET_HEADROOM as usize).saturating_sub(18);
    let mtu = if_mtu.min(max_frame_mtu);

    let mut xsks = Vec::with_capacity(queue_ids.len());
    for &q in queue_ids {
        xsks.push(Xsk::open(cfg, ifindex, q, mtu)?);
    }
    let sockets: Vec<(u32, RawFd)> = xsks
        .iter()
        .map(|x| (x.queue_id, x.xsk.as_raw_fd()))
        .collect();
    let steering = Arc::new(Steering::attach(cfg, ifindex, map_entries, &sockets)?);
    Ok(xsks
        .into_iter()
        .map(|x| AfXdpPort::assemble(x, cfg, ifindex, mac, mtu, steering.clone()))
        .collect())
}

impl Steering {
    /// Creates the XSKMAP with `map_entries` entries, inserts each
    /// `(queue id, socket fd)` of `sockets` (bound already), loads the
    /// steering program and attaches it to `ifindex` in `cfg.mode`.
    fn attach(
        cfg: &AfXdpConfig,
        ifindex: u32,
        map_entries: u32,
        sockets: &[(u32, RawFd)],
    ) -> Result<Steering, Error> {
        let ifname = cfg.ifname.as_str();
        let map = sys::create_xskmap(map_entries).map_err(|e| {
            permission_or("creating the XSKMAP", e, |e| {
                Error::io("creating the XSKMAP", e)
            })
        })?;
        for &(queue_id, fd) in sockets {
            sys::map_update_u32(&map, queue_id, fd as u32).map_err(|e| {
                Error::io(
                    &format!("inserting the AF_XDP socket of queue {queue_id} in the XSKMAP"),
                    e,
                )
            })?;
        }
        let prog = load(cfg, &map)?;

        let attach = |flags: u32| sys::link_xdp(&prog, ifindex, flags);
        let reason = |e: &io::Error, mode: &str| match e.raw_os_error() {
            Some(libc::EBUSY) | Some(libc::EEXIST) => {
                "another XDP program is attached (see `ip link show`)".to_string()
            }
            Some(libc::EOPNOTSUPP) => format!("{mode} XDP is not supported by the driver"),
            Some(libc::ENOSPC) => format!(
                "{mode} XDP needs at least as many rx queues on {ifname} as its veth peer has \
                 tx queues (ENOSPC): give both ends the same numrxqueues and numtxqueues, or \
                 lower the peer's with `ethtool -L PEER tx N`"
            ),
            _ => format!("{mode} attach failed ({e})"),
        };
        let (link, mode) = match cfg.mode {
            XdpMode::Native => match attach(XDP_FLAGS_DRV_MODE) {
                Ok(l) => (l, XdpMode::Native),
                Err(e) => return Err(attach_refused(ifname, &reason(&e, "native"), e)),
            },
            XdpMode::Generic => match attach(XDP_FLAGS_SKB_MODE) {
                Ok(l) => (l, XdpMode::Generic),
                Err(e) => return Err(attach_refused(ifname, &reason(&e, "generic"), e)),
            },
            XdpMode::Auto => match attach(XDP_FLAGS_DRV_MODE) {
                Ok(l) => (l, XdpMode::Native),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST)) => {
                    return Err(attach_refused(ifname, &reason(&e, "native"), e))
                }
                Err(_) => match attach(XDP_FLAGS_SKB_MODE) {
                    Ok(l) => (l, XdpMode::Generic),
                    Err(e) => return Err(attach_refused(ifname, &reason(&e, "generic"), e)),
                },
            },
        };
        Ok(Steering {
            _link: link,
            _prog: prog,
            _map: map,
            mode,
        })
    }
}

/// Loads the steering program for `map`; a verifier rejection is reported
/// with the last line of its log.
fn load(cfg: &AfXdpConfig, map: &OwnedFd) -> Result<OwnedFd, Error> {
    let insns = prog::steering_program(map.as_raw_fd(), cfg.steer_ip, &cfg.steer_ip6);
    match sys::load_xdp_prog(&insns, &mut []) {
        Ok(p) => Ok(p),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => {
            Err(permission_or("loading the XDP program", e, |e| {
                Error::io("loading the XDP program", e)
            }))
        }
        Err(_) => {
            // Load again with the verifier log, for the message.
            let mut log = vec![0u8; 64 * 1024];
            sys::load_xdp_prog(&insns, &mut log).map_err(|e| {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                let last = text
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("");
                attach_refused(&cfg.ifname, &format!("program load failed ({e}) {last}"), e)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn open_queues_zero_or_too_many_is_a_config_error() {
        let cfg = AfXdpConfig {
            ifname: "lo".into(),
            ..AfXdpConfig::default()
        };
        for n in [0, MAX_QUEUES + 1] {
            let err = AfXdpPort::open_queues(&cfg, n).expect_err("accepted");
            assert_eq!(err.kind(), ErrorKind::InvalidConfig);
            assert!(err.to_string().contains("open 1 to 1024 queues"), "{err}");
        }
    }
}
