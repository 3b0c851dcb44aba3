//! The link layer: finding the MAC address of a next hop. IPv4 asks ARP
//! (`arp`: the cache, and the queue of frames that wait for an answer),
//! IPv6 asks Neighbor Discovery (`nd`: the messages on receive, Duplicate
//! Address Detection; `neighbor`: the cache with its reachability states).
//! The caches are the egress paths' (`ip::egress`, `ip::egress6`), which
//! consult them for every frame sent; what arrives teaches them.

pub mod arp;
pub(crate) mod nd;
pub mod neighbor;
