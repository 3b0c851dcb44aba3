//! Initial sequence numbers (RFC 6528).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::{IpAddr, SocketAddr};

use wire::SeqNum;

use crate::time::Instant;

/// RFC 6528 §3: ISN = M + F(localip, localport, remoteip, remoteport, secretkey),
/// M a timer ticking every 4 µs, F a keyed hash (SipHash keyed from std's
/// per-process random `RandomState`).
#[derive(Debug, Clone)]
pub struct IsnGenerator {
    key: RandomState,
}

impl Default for IsnGenerator {
    fn default() -> Self {
        Self::new()
    }
}

impl IsnGenerator {
    /// A generator with a fresh random secret key.
    pub fn new() -> Self {
        IsnGenerator {
            key: RandomState::new(),
        }
    }

    /// The ISN for a connection of this 4-tuple at time `now` (IPv4 or
    /// IPv6: the hash covers the whole addresses).
    pub fn isn(
        &self,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        now: Instant,
    ) -> SeqNum {
        let (local, remote) = (local.into(), remote.into());
        let mut h = self.key.build_hasher();
        hash_ip(local.ip(), &mut h);
        local.port().hash(&mut h);
        hash_ip(remote.ip(), &mut h);
        remote.port().hash(&mut h);
        let f = h.finish() as u32;
        let m = (now.as_nanos() / 4_000) as u32;
        SeqNum(m.wrapping_add(f))
    }

    /// A timestamp clock offset for connections between these two hosts
    /// (RFC 7323 §5.4): a keyed hash of the addresses, so TSvals reveal
    /// neither our clock nor a relation between hosts, yet stay monotonic
    /// across connections to the same peer (PAWS across incarnations), as
    /// Linux does. Pass it to [`Tcb::set_ts_offset`](super::Tcb::set_ts_offset).
    pub fn ts_offset(&self, local: impl Into<SocketAddr>, remote: impl Into<SocketAddr>) -> u32 {
        let (local, remote) = (local.into(), remote.into());
        let mut h = self.key.build_hasher();
        b"tsoffset".hash(&mut h);
        hash_ip(local.ip(), &mut h);
        hash_ip(remote.ip(), &mut h);
        h.finish() as u32
    }

    /// The IPv6 flow label of a connection of this 4-tuple (RFC 6437 §3:
    /// a keyed hash of the 5-tuple, uniformly spread over 20 bits, never
    /// 0, the same for every packet of the flow).
    pub fn flow_label(&self, local: SocketAddr, remote: SocketAddr) -> u32 {
        let mut h = self.key.build_hasher();
        b"flowlabel".hash(&mut h);
        hash_ip(local.ip(), &mut h);
        local.port().hash(&mut h);
        hash_ip(remote.ip(), &mut h);
        remote.port().hash(&mut h);
        match (h.finish() as u32) & 0x000f_ffff {
            0 => 1,
            l => l,
        }
    }
}

/// Feeds `ip`'s octets to `h` (4 for IPv4, as before IPv6 existed; 16 for IPv6).
fn hash_ip(ip: IpAddr, h: &mut impl Hasher) {
    match ip {
        IpAddr::V4(a) => a.octets().hash(h),
        IpAddr::V6(a) => a.octets().hash(h),
    }
}
