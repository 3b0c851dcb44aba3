//! The network layer, IPv4 and IPv6. On the way in (`rx`, `rx6`): a frame's
//! Ethernet header picks ARP, IPv4 or IPv6; the packet is checked, put back
//! together from its fragments (`frag`, `frag6`, over the contexts and hole
//! lists they share in `reasm`), and handed on by protocol to ICMP (`icmp`,
//! `icmpv6`, which also feeds the path MTU table), UDP or TCP. On the way
//! out (`egress`, `egress6`): routing on the configured prefix and gateway,
//! the next hop's MAC from the link layer, the IP and Ethernet headers, the
//! path MTU (`pmtu`). `family` is the trait that lets the code common to
//! both families (the TCP demux, the flow table) be written once.
//!
//! State owned here: the egress paths with their caches and path MTU
//! tables (`Protocols::egress`, `Protocols::ip6`) and the reassembly
//! contexts (`Protocols::frag`, `Protocols::frag6`).

pub mod egress;
pub mod egress6;
pub(crate) mod family;
pub mod frag;
pub mod frag6;
pub(crate) mod icmp;
pub(crate) mod icmpv6;
pub mod pmtu;
pub(crate) mod reasm;
pub(crate) mod rx;
pub(crate) mod rx6;
