//! Receive-side scaling: which engine owns a flow.
//!
//! Every flow has one owner engine, `reta[toeplitz(key, tuple) % 128]`
//! (Microsoft's RSS hash; the 128 buckets are flow groups that a later
//! rebalance can move). The key is F-Stack's `6d 5a` repeated: with a key
//! whose bits repeat every 16, the Toeplitz hash of an input depends only
//! on the XOR of its 16-bit words (its *fold*), so the hash is symmetric
//! (both directions of a flow land on the same engine) and an active
//! open finds a local port on its own engine by trying ports, each try a
//! table lookup ([`Steering::fold`], [`Steering::owner_of_fold`]).
//!
//! A NIC whose RSS can be programmed gets the same key and table
//! (`ethtool -X IF hkey …`), so the hardware and the engines agree; where
//! it cannot (veth, TAP, `mem` without steering) the engine that receives
//! a frame it does not own hands it to the owner.
//!
//! Source: Microsoft, "RSS hashing functions" and "Verifying the RSS hash
//! calculation"; TAS flow groups; F-Stack `ff_rss_check`.

use core::net::{Ipv4Addr, Ipv6Addr};

/// Buckets of the indirection table (RETA).
pub const RETA_SIZE: usize = 128;

/// The symmetric key: `6d 5a` repeated, 40 bytes (enough for an IPv6 4-tuple).
pub const SYMMETRIC_KEY: [u8; 40] = {
    let mut k = [0u8; 40];
    let mut i = 0;
    while i < 40 {
        k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    k
};

/// Microsoft's default RSS key, the one its verification vectors use.
pub const MS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The Toeplitz hash of `input` under `key`: for every set bit of the
/// input (most significant first), the 32 key bits starting at that bit's
/// position are XORed into the result. Key bits past its end count as 0,
/// so `key` should hold `input.len() + 4` bytes.
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let key_bit = |i: usize| -> u32 {
        key.get(i / 8)
            .map_or(0, |b| u32::from((b >> (7 - i % 8)) & 1))
    };
    let mut window = (0..32).fold(0u32, |w, i| (w << 1) | key_bit(i));
    let mut hash = 0;
    for (i, byte) in input.iter().enumerate() {
        for b in 0..8 {
            if byte & (0x80 >> b) != 0 {
                hash ^= window;
            }
            window = (window << 1) | key_bit(32 + i * 8 + b);
        }
    }
    hash
}

/// The owner of every flow: the symmetric hash and an indirection table
/// of [`RETA_SIZE`] buckets over `engines` engines. Immutable once built;
/// cheap to share (about 2 KiB).
#[derive(Clone, Debug)]
pub struct Steering {
    /// Bucket → engine.
    reta: [u8; RETA_SIZE],
    engines: usize,
    /// The hash of a fold's high byte and low byte (the Toeplitz hash is
    /// linear: hash(fold) = hi[fold >> 8] ^ lo[fold & 0xff]).
    hi: [u32; 256],
    lo: [u32; 256],
}

impl Steering {
    /// `engines` engines (1..=255), bucket `b` on engine `b % engines`.
    pub fn new(engines: usize) -> Steering {
        let engines = engines.clamp(1, 255);
        let mut reta = [0u8; RETA_SIZE];
        for (b, e) in reta.iter_mut().enumerate() {
            *e = (b % engines) as u8;
        }
        let mut hi = [0u32; 256];
        let mut lo = [0u32; 256];
        for v in 0..256u16 {
            hi[v as usize] = toeplitz(&SYMMETRIC_KEY, &(v << 8).to_be_bytes());
            lo[v as usize] = toeplitz(&SYMMETRIC_KEY, &v.to_be_bytes());
        }
        Steering {
            reta,
            engines,
            hi,
            lo,
        }
    }

    /// The number of engines.
    pub fn engines(&self) -> usize {
        self.engines
    }

    /// The indirection table: bucket → engine.
    pub fn reta(&self) -> &[u8; RETA_SIZE] {
        &self.reta
    }

    /// The fold of a 4-tuple of either family (either direction): the
    /// XOR of its 16-bit words. `a` and `b` are the addresses' octets (4
    /// for IPv4, 16 for IPv6, network order); the key's 16-bit period
    /// makes the Toeplitz hash of the 12- or 36-byte tuple depend on the
    /// fold alone.
    #[inline]
    pub fn fold<const N: usize>(a: [u8; N], b: [u8; N], port_a: u16, port_b: u16) -> u16 {
        let mut f = port_a ^ port_b;
        // A plain counted loop over a constant N: unrolled to 2 or 8 XORs.
        let mut i = 0;
        while i + 1 < N {
            f ^= u16::from_be_bytes([a[i], a[i + 1]]) ^ u16::from_be_bytes([b[i], b[i + 1]]);
            i += 2;
        }
        f
    }

    /// [`Steering::fold`] of an IPv4 4-tuple.
    #[inline]
    pub fn fold_v4(a: Ipv4Addr, b: Ipv4Addr, port_a: u16, port_b: u16) -> u16 {
        Self::fold(a.octets(), b.octets(), port_a, port_b)
    }

    /// [`Steering::fold`] of an IPv6 4-tuple.
    #[inline]
    pub fn fold_v6(a: Ipv6Addr, b: Ipv6Addr, port_a: u16, port_b: u16) -> u16 {
        Self::fold(a.octets(), b.octets(), port_a, port_b)
    }

    /// The engine owning the flow between `a:port_a` and `b:port_b` (the
    /// same both ways), either family: `a` and `b` as for [`Steering::fold`].
    #[inline]
    pub fn owner<const N: usize>(&self, a: [u8; N], b: [u8; N], port_a: u16, port_b: u16) -> usize {
        self.owner_of_fold(Self::fold(a, b, port_a, port_b))
    }

    /// [`Steering::owner`] of an IPv6 flow.
    #[inline]
    pub fn owner_v6(&self, a: Ipv6Addr, b: Ipv6Addr, port_a: u16, port_b: u16) -> usize {
        self.owner(a.octets(), b.octets(), port_a, port_b)
    }

    /// The symmetric Toeplitz hash of a fold: equal to
    /// `toeplitz(&SYMMETRIC_KEY, tuple)` of any tuple with that fold.
    #[inline]
    pub fn hash_of_fold(&self, fold: u16) -> u32 {
        self.hi[usize::from(fold >> 8)] ^ self.lo[usize::from(fold & 0xff)]
    }

    /// The engine owning a fold.
    #[inline]
    pub fn owner_of_fold(&self, fold: u16) -> usize {
        usize::from(self.reta[self.hash_of_fold(fold) as usize % RETA_SIZE])
    }

    /// [`Steering::owner`] of an IPv4 flow.
    #[inline]
    pub fn owner_v4(&self, a: Ipv4Addr, b: Ipv4Addr, port_a: u16, port_b: u16) -> usize {
        self.owner(a.octets(), b.octets(), port_a, port_b)
    }

    /// The symmetric hash of an Ethernet frame, as a NIC's RSS computes
    /// it: the IPv4 4-tuple of an unfragmented TCP or UDP datagram, the
    /// address pair of any other IPv4 packet (fragments included, so all
    /// of a datagram's fragments land together). None: not IPv4 (ARP, …),
    /// or too short to say.
    pub fn frame_hash(&self, frame: &[u8]) -> Option<u32> {
        let (src, dst, ports) = ipv4_tuple(frame)?;
        let (pa, pb) = ports.unwrap_or((0, 0));
        Some(self.hash_of_fold(Self::fold_v4(src, dst, pa, pb)))
    }

    /// The queue a NIC with this table would put `frame` in: the owner of
    /// its [`Steering::frame_hash`], or queue 0 for frames without one.
    pub fn frame_queue(&self, frame: &[u8]) -> usize {
        self.frame_hash(frame)
            .map_or(0, |h| usize::from(self.reta[h as usize % RETA_SIZE]))
    }
}

/// What programming a NIC's RSS with corestack's hash came to
/// ([`program_nic`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NicRss {
    /// The NIC hashes with [`SYMMETRIC_KEY`] (the Toeplitz function) and an
    /// indirection table of `entries` entries that sends every bucket to
    /// its owner's first queue: frames should land on their owner (the
    /// engines' `rx_foreign` counter says whether they do).
    Programmed {
        /// Entries of the NIC's indirection table.
        entries: u32,
    },
    /// The NIC's RSS cannot take it, for the reason given: the engine that
    /// receives a frame it does not own hands it over.
    Refused(String),
}

impl core::fmt::Display for NicRss {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NicRss::Programmed { entries } => write!(
                f,
                "RSS programmed with corestack's symmetric key and a {entries}-entry table: frames land on their owner's queue"
            ),
            NicRss::Refused(why) => write!(
                f,
                "RSS not programmed ({why}): frames that land on another engine are handed over"
            ),
        }
    }
}

impl Steering {
    /// The NIC's indirection table of `entries` entries for this steering,
    /// each entry the queue of its bucket's owner (engine `e` reads queue
    /// `e` first); None when a table of that size cannot agree with the
    /// [`RETA_SIZE`] buckets (the NIC takes `hash % entries`).
    pub fn nic_table(&self, entries: usize) -> Option<Vec<u32>> {
        if entries == 0 {
            return None;
        }
        let table: Vec<u32> = (0..entries)
            .map(|i| u32::from(self.reta[i % RETA_SIZE]))
            .collect();
        // hash % entries must pick the owner hash % RETA_SIZE picks.
        let agrees = entries.is_multiple_of(RETA_SIZE)
            || (RETA_SIZE.is_multiple_of(entries)
                && (0..RETA_SIZE).all(|b| self.reta[b] == self.reta[b % entries]));
        agrees.then_some(table)
    }
}

/// Programs `ifname`'s RSS with this steering's hash (the symmetric key,
/// repeated to the NIC's key size, and the Toeplitz function) and table
/// (ETHTOOL_SRSSH, as `ethtool -X IF hkey … hfunc toeplitz` would), so that
/// the NIC puts each frame on its owner's queue. Never fails: a NIC that
/// cannot take it (veth and tap have no RSS: EOPNOTSUPP; a table size that
/// cannot agree; no permission) is [`NicRss::Refused`] with the reason.
pub fn program_nic(ifname: &str, steering: &Steering) -> NicRss {
    let (entries, key_len) = match crate::sys::if_rss_sizes(ifname) {
        Ok(sizes) => sizes,
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            return NicRss::Refused(format!("{ifname} has no programmable RSS"))
        }
        Err(e) => return NicRss::Refused(format!("reading {ifname}'s RSS: {e}")),
    };
    let Some(table) = steering.nic_table(entries as usize) else {
        return NicRss::Refused(format!(
            "{ifname}'s {entries}-entry indirection table cannot hold {RETA_SIZE} buckets"
        ));
    };
    if (key_len as usize) < 36 {
        return NicRss::Refused(format!(
            "{ifname}'s RSS key has {key_len} bytes, too few for an IPv6 4-tuple"
        ));
    }
    // The key's 16-bit period keeps the hash symmetric at any length.
    let key: Vec<u8> = (0..key_len as usize)
        .map(|i| SYMMETRIC_KEY[i % 2])
        .collect();
    match crate::sys::if_set_rss(ifname, &table, &key) {
        Ok(()) => NicRss::Programmed { entries },
        Err(e) => NicRss::Refused(format!("setting {ifname}'s RSS: {e}")),
    }
}

/// An IPv4 frame's source, destination and, for an unfragmented TCP or
/// UDP datagram, its (source, destination) ports.
pub type Ipv4Tuple = (Ipv4Addr, Ipv4Addr, Option<(u16, u16)>);

/// An IPv4 frame's source and destination and, for an unfragmented TCP
/// or UDP datagram, its ports. None for anything else.
pub fn ipv4_tuple(frame: &[u8]) -> Option<Ipv4Tuple> {
    const ETH: usize = 14;
    if frame.len() < ETH + 20 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[ETH..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ip[0] >> 4 != 4 || ihl < 20 {
        return None;
    }
    let at = |i: usize| Ipv4Addr::new(ip[i], ip[i + 1], ip[i + 2], ip[i + 3]);
    let (src, dst) = (at(12), at(16));
    // More fragments, or an offset: ports only in the first fragment.
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
    let l4 = matches!(ip[9], 6 | 17) && !fragment && ip.len() >= ihl + 4;
    let ports = l4.then(|| {
        let p = &ip[ihl..];
        (
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        )
    });
    Some((src, dst, ports))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_nic_table_sends_each_bucket_to_its_owner_or_is_refused_when_it_cannot_agree() {
        let s = super::Steering::new(3);
        let t = s.nic_table(512).expect("512 entries hold 128 buckets");
        assert_eq!(t.len(), 512);
        for (i, q) in t.iter().enumerate() {
            assert_eq!(*q as usize, (i % super::RETA_SIZE) % 3, "entry {i}");
        }
        // 64 entries: hash % 64 and hash % 128 pick the same owner only when
        // bucket b and b + 64 have one owner (2 engines: yes; 3: no).
        assert!(super::Steering::new(2).nic_table(64).is_some());
        assert!(s.nic_table(64).is_none());
        assert!(s.nic_table(96).is_none());
        assert!(s.nic_table(0).is_none());
    }

    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    fn tuple<const N: usize>(src: [u8; N], dst: [u8; N], sport: u16, dport: u16) -> Vec<u8> {
        let mut v = src.to_vec();
        v.extend_from_slice(&dst);
        v.extend_from_slice(&sport.to_be_bytes());
        v.extend_from_slice(&dport.to_be_bytes());
        v
    }

    /// The [`SYMMETRIC_KEY`] hash of the tuple from `a`:`pa` to `b`:`pb`,
    /// asserted equal to that of the way back.
    fn symmetric_hash<const N: usize>(a: [u8; N], b: [u8; N], pa: u16, pb: u16) -> u32 {
        let there = toeplitz(&SYMMETRIC_KEY, &tuple(a, b, pa, pb));
        let back = toeplitz(&SYMMETRIC_KEY, &tuple(b, a, pb, pa));
        assert_eq!(there, back);
        there
    }

    /// Microsoft's verification vectors ("Verifying the RSS hash
    /// calculation"; DPDK `app/test/test_thash.c`): the IPv4 hash of the
    /// addresses alone and with the TCP ports, under the default key.
    #[test]
    fn toeplitz_matches_the_published_ipv4_vectors() {
        /// Source, source port, destination, destination port, the hash
        /// of the addresses, the hash with the ports.
        type Vector = ([u8; 4], u16, [u8; 4], u16, u32, u32);
        #[rustfmt::skip]
        let vectors: [Vector; 5] = [
            ([66, 9, 149, 187], 2794, [161, 142, 100, 80], 1766, 0x323e8fc2, 0x51ccc178),
            ([199, 92, 111, 2], 14230, [65, 69, 140, 83], 4739, 0xd718262a, 0xc626b0ea),
            ([24, 19, 198, 95], 12898, [12, 22, 207, 184], 38024, 0xd2d0a5de, 0x5c2b394a),
            ([38, 27, 205, 30], 48228, [209, 142, 163, 6], 2217, 0x82989176, 0xafc7327f),
            ([153, 39, 163, 191], 44251, [202, 188, 127, 2], 1303, 0x5d1809c5, 0x10e828a2),
        ];
        for (src, sport, dst, dport, ip_only, with_ports) in vectors {
            let t = tuple(src, dst, sport, dport);
            assert_eq!(toeplitz(&MS_KEY, &t[..8]), ip_only, "{src:?} → {dst:?}");
            assert_eq!(
                toeplitz(&MS_KEY, &t),
                with_ports,
                "{src:?}:{sport} → {dst:?}:{dport}"
            );
        }
    }

    /// The one fold serves IPv4's 12-byte and IPv6's 36-byte tuples: its
    /// hash is the Toeplitz hash of the whole tuple, the same both ways.
    #[test]
    fn the_symmetric_key_hashes_both_directions_alike_and_matches_its_fold() {
        let s = Steering::new(4);
        // Tuples spread over the whole space.
        let mut rng = Pcg64::seed_from_u64(0x1234_5678);
        for _ in 0..10_000 {
            let (pa, pb): (u16, u16) = rng.gen();
            let a = Ipv4Addr::from(rng.gen::<u32>());
            let b = Ipv4Addr::from(rng.gen::<u32>());
            let there = symmetric_hash(a.octets(), b.octets(), pa, pb);
            assert_eq!(s.hash_of_fold(Steering::fold_v4(a, b, pa, pb)), there);
            assert_eq!(s.owner_v4(a, b, pa, pb), s.owner_v4(b, a, pb, pa));

            let a = Ipv6Addr::from(rng.gen::<u128>());
            let b = Ipv6Addr::from(rng.gen::<u128>());
            let there = symmetric_hash(a.octets(), b.octets(), pa, pb);
            assert_eq!(s.hash_of_fold(Steering::fold_v6(a, b, pa, pb)), there);
            assert_eq!(s.owner_v6(a, b, pa, pb), s.owner_v6(b, a, pb, pa));
        }
    }

    #[test]
    fn buckets_spread_flows_over_every_engine() {
        for engines in [1, 2, 3, 4, 8] {
            let s = Steering::new(engines);
            let mut per = vec![0usize; engines];
            let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
            for port in 1024..(1024 + 4096) {
                per[s.owner_v4(a, b, port, 80)] += 1;
            }
            let fair = 4096 / engines;
            for (e, n) in per.iter().enumerate() {
                assert!(
                    *n > fair / 2 && *n < fair * 3 / 2,
                    "{engines} engines: engine {e} owns {n} of 4096 flows"
                );
            }
        }
    }

    #[test]
    fn frames_hash_by_4_tuple_and_fragments_by_addresses() {
        let s = Steering::new(4);
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12] = 0x08;
        f[14] = 0x45;
        f[14 + 9] = 6;
        f[14 + 12..14 + 16].copy_from_slice(&[10, 0, 0, 2]);
        f[14 + 16..14 + 20].copy_from_slice(&[10, 0, 0, 1]);
        f[34..36].copy_from_slice(&5000u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1));
        let h = s.hash_of_fold(Steering::fold_v4(a, b, 5000, 80));
        assert_eq!(s.frame_hash(&f), Some(h));
        f[14 + 6] = 0x20; // more fragments
        let h = s.hash_of_fold(Steering::fold_v4(a, b, 0, 0));
        assert_eq!(s.frame_hash(&f), Some(h));
        f[12..14].copy_from_slice(&[0x08, 0x06]); // ARP
        assert_eq!(s.frame_hash(&f), None);
        assert_eq!(s.frame_queue(&f), 0);
        assert_eq!(s.frame_hash(&f[..20]), None);
    }
}
