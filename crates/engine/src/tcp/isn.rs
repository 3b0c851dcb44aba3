//! Initial sequence numbers (RFC 6528).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::SocketAddrV4;

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

    /// The ISN for a connection of this 4-tuple at time `now`.
    pub fn isn(&self, local: SocketAddrV4, remote: SocketAddrV4, now: Instant) -> SeqNum {
        let mut h = self.key.build_hasher();
        local.ip().octets().hash(&mut h);
        local.port().hash(&mut h);
        remote.ip().octets().hash(&mut h);
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
    pub fn ts_offset(&self, local: SocketAddrV4, remote: SocketAddrV4) -> u32 {
        let mut h = self.key.build_hasher();
        b"tsoffset".hash(&mut h);
        local.ip().octets().hash(&mut h);
        remote.ip().octets().hash(&mut h);
        h.finish() as u32
    }
}
