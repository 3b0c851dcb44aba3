//! Several NIC queues behind one engine: when an interface has more queues
//! than there are engines, engine `e` takes queues `e, e + N, e + 2N, …`,
//! so that every queue is read (a queue without a socket would pass its
//! frames to the kernel). Frames from every queue go to the engine's
//! handler; what the engine sends goes out on its first queue, and answers
//! sent while reading another queue (with that queue's tx side) are flushed
//! at the end of its burst. An engine that naps sleeps on one epoll fd
//! watching every queue's fd.

use crate::{Capabilities, Port, RxDrops, TxQueue};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// The queues one engine reads: the first one's tx side is the engine's.
#[derive(Debug)]
pub struct PortGroup<P: Port> {
    ports: Vec<P>,
    /// Readable when any queue is (None with one queue, or when a queue
    /// has no fd).
    epoll: Option<OwnedFd>,
}

impl<P: Port> PortGroup<P> {
    /// The group of `ports` (at least one). Errors: the errno of creating
    /// the epoll fd that stands for several queues' fds (EMFILE, ENOMEM).
    pub fn new(ports: Vec<P>) -> std::io::Result<PortGroup<P>> {
        assert!(!ports.is_empty(), "a port group needs a port");
        let fds: Option<Vec<RawFd>> = ports.iter().map(|p| p.rx_fd()).collect();
        let epoll = match fds {
            Some(fds) if fds.len() > 1 => Some(crate::sys::epoll_readable(&fds)?),
            _ => None,
        };
        Ok(PortGroup { ports, epoll })
    }

    /// The queues, the engine's own first.
    pub fn ports(&self) -> &[P] {
        &self.ports
    }
}

impl<P: Port> Port for PortGroup<P> {
    type Tx = P::Tx;

    fn rx_burst<F: FnMut(&[u8], &mut P::Tx)>(&mut self, max: usize, mut handle: F) -> usize {
        let mut n = 0;
        for (i, p) in self.ports.iter_mut().enumerate() {
            if n >= max {
                break;
            }
            let got = p.rx_burst(max - n, &mut handle);
            if i > 0 && got > 0 {
                // Answers queued on this queue's tx side while reading it.
                p.tx().flush();
            }
            n += got;
        }
        n
    }

    fn tx(&mut self) -> &mut P::Tx {
        self.ports[0].tx()
    }

    fn mac(&self) -> [u8; 6] {
        self.ports[0].mac()
    }

    fn mtu(&self) -> usize {
        self.ports[0].mtu()
    }

    fn capabilities(&self) -> Capabilities {
        self.ports[0].capabilities()
    }

    fn rx_fd(&self) -> Option<RawFd> {
        match &self.epoll {
            Some(ep) => Some(ep.as_raw_fd()),
            None if self.ports.len() == 1 => self.ports[0].rx_fd(),
            None => None,
        }
    }

    fn rx_drops(&self) -> RxDrops {
        self.ports.iter().fold(RxDrops::default(), |a, p| {
            let d = p.rx_drops();
            RxDrops {
                ring_full: a.ring_full + d.ring_full,
                fill_empty: a.fill_empty + d.fill_empty,
                other: a.other + d.other,
            }
        })
    }
}

/// Deals `ports` (queue `q` at index `q`) to `engines` groups: group `e`
/// gets queues `e, e + engines, …`. Fewer ports than engines leaves the
/// last groups out. Errors: as [`PortGroup::new`].
pub fn deal<P: Port>(ports: Vec<P>, engines: usize) -> std::io::Result<Vec<PortGroup<P>>> {
    let engines = engines.max(1);
    let mut hands: Vec<Vec<P>> = (0..engines).map(|_| Vec::new()).collect();
    for (q, p) in ports.into_iter().enumerate() {
        hands[q % engines].push(p);
    }
    hands
        .into_iter()
        .filter(|h| !h.is_empty())
        .map(PortGroup::new)
        .collect()
}

/// The AF_XDP queues of `engines` engines (at least 2) on `cfg.ifname`,
/// dealt as [`deal`] does: an XSK on every queue of the interface (a queue
/// without one would pass its frames to the kernel) and at least one per
/// engine, one XDP program for them all; the NIC's RSS programmed with the
/// engines' hash where it can be ([`crate::rss::program_nic`], whose
/// outcome is returned). Embedded mode and the daemon both open their
/// queues here.
///
/// Errors: as [`crate::af_xdp::AfXdpPort::open_queues`] (each message one
/// line saying what to do, e.g. raise the queues with `ethtool -L`, or use
/// --cores 1) and [`PortGroup::new`].
pub fn af_xdp_engines(
    cfg: &crate::af_xdp::AfXdpConfig,
    engines: usize,
) -> std::io::Result<(Vec<PortGroup<crate::af_xdp::AfXdpPort>>, crate::rss::NicRss)> {
    let have = crate::af_xdp::rx_queues(&cfg.ifname)
        .map_err(std::io::Error::from)?
        .unwrap_or(1) as usize;
    let ports = crate::af_xdp::AfXdpPort::open_queues(cfg, have.max(engines))
        .map_err(std::io::Error::from)?;
    let steering = crate::rss::Steering::new(engines);
    let rss = crate::rss::program_nic(&cfg.ifname, &steering);
    Ok((deal(ports, engines)?, rss))
}

/// One queue of the multi-queue tap `ifname` per engine (`engines` of
/// them), as groups of one. Errors: as [`crate::tap::TapPort::open_queues`]
/// (a tap made without `multi_queue`: a message saying how to make one, or
/// to use --cores 1) and [`PortGroup::new`].
pub fn tap_engines(
    ifname: &str,
    engines: usize,
) -> std::io::Result<Vec<PortGroup<crate::tap::TapPort>>> {
    let ports = crate::tap::TapPort::open_queues(ifname, engines).map_err(std::io::Error::from)?;
    deal(ports, engines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impair::Impairments;
    use crate::mem::{multi_pair, Steer};

    fn udp_frame(sport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[..6].copy_from_slice(&crate::mem::MAC_B);
        f[12] = 0x08;
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[14 + 12..14 + 16].copy_from_slice(&[10, 0, 0, 1]);
        f[14 + 16..14 + 20].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&7u16.to_be_bytes());
        f
    }

    /// Four queues dealt to two engines: each engine reads two queues, and
    /// together they read every frame once.
    #[test]
    fn dealt_queues_are_read_by_their_engine_and_none_is_lost() {
        let (mut a, b) = multi_pair(
            Impairments::none(),
            Impairments::none(),
            3,
            1,
            4,
            Steer::AllToZero,
            Steer::RandomPerFrame,
        );
        let mut groups = deal(b, 2).unwrap();
        assert_eq!(groups.len(), 2);
        let queues: Vec<Vec<usize>> = groups
            .iter()
            .map(|g| g.ports().iter().map(|p| p.queue()).collect())
            .collect();
        assert_eq!(queues, vec![vec![0, 2], vec![1, 3]]);
        for s in 0..200u16 {
            let f = udp_frame(1000 + s);
            assert!(a[0].tx().transmit(f.len(), |b| {
                b[..f.len()].copy_from_slice(&f);
                f.len()
            }));
            if s % 64 == 63 {
                a[0].tx().flush();
            }
        }
        a[0].tx().flush();
        let mut seen = vec![0u32; 200];
        let mut per_group = [0usize; 2];
        for (g, group) in groups.iter_mut().enumerate() {
            for _ in 0..10 {
                per_group[g] += group.rx_burst(64, |frame, _| {
                    let s = u16::from_be_bytes([frame[34], frame[35]]) - 1000;
                    seen[usize::from(s)] += 1;
                });
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
        assert!(per_group.iter().all(|&n| n > 0), "{per_group:?}");
    }
}
