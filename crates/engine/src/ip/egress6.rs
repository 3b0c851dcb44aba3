//! The IPv6 link and network layers on the way out (issue 25): our
//! addresses and their Duplicate Address Detection state, next-hop
//! determination (RFC 4861 §5.2), the neighbor cache (`neighbor`),
//! Neighbor Solicitations and Advertisements, the path MTU table (`pmtu`)
//! and Ethernet framing (multicast destinations go to their 33:33 MAC,
//! RFC 2464 §7).

use crate::config::{link_local_from_mac, Ipv6Config};
use crate::ip::egress::MIN_FRAME;
use crate::ip::egress::{send_waiting, transmit_tcp_gather, transmit_tcp_gso};
use crate::ip::family::{Route, TcpEgress, TcpOffloads, TcpOut, Via};
use crate::ip::pmtu::{PmtuTable, PMTU_ENTRIES};
use crate::link::arp::FRAME_CAP;
use crate::link::neighbor::{NdAction, NeighborCache, RETRANS_TIMER};
use crate::obs::stats::Stats;
use crate::time::Instant;
use core::net::Ipv6Addr;
use nic::TxQueue;
use wire::ethernet::{self, EthernetRepr, ETHERTYPE_IPV6};
use wire::ipv6::{self, Ipv6Repr, NEXT_ICMPV6};
use wire::ndisc::{self, NdiscOption, NdiscRepr};
use wire::MacAddr;

/// Bytes of Ethernet and fixed IPv6 header in front of every IPv6 payload.
pub const HEADERS6: usize = ethernet::HEADER_LEN + ipv6::HEADER_LEN;
/// Hop Limit of the packets we originate (Linux's default).
pub const HOP_LIMIT: u8 = 64;
/// Bytes an IPv6 header has beyond an IPv4 one without options: taken off
/// the port's largest GSO payload so that a frame stays within it.
const IPV6_EXTRA: usize = ipv6::HEADER_LEN - wire::ipv4::HEADER_LEN;

/// Where an address of ours stands (RFC 4862 §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrState {
    /// Under Duplicate Address Detection: its solicitation goes out at
    /// the first housekeeping pass (`sent` None), and it becomes
    /// [`AddrState::Preferred`] a [`RETRANS_TIMER`] later unless a
    /// conflict is seen. Not usable meanwhile.
    Tentative {
        /// When the DAD solicitation went out.
        sent: Option<Instant>,
    },
    /// Usable.
    Preferred,
    /// Found in use by another node: never used (RFC 4862 §5.4.5).
    Duplicate,
}

/// One address of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addr6 {
    /// The address.
    pub addr: Ipv6Addr,
    /// Prefix length in bits (64 for the link-local address).
    pub prefix_len: u8,
    /// Its DAD state.
    pub state: AddrState,
}

/// Our IPv6 interface: addresses, router, neighbors, path MTUs.
pub struct Egress6 {
    /// Our MAC address.
    pub mac: MacAddr,
    /// The link-local address, then the global one if configured.
    pub addrs: [Option<Addr6>; 2],
    /// The default router for off-link destinations.
    pub gateway: Option<Ipv6Addr>,
    /// The link MTU, bytes of IPv6 packet.
    pub mtu: usize,
    /// The neighbor cache (RFC 4861 §5.1).
    pub neighbors: NeighborCache,
    /// Path MTUs learned from Packet Too Big (RFC 8201).
    pub pmtu: PmtuTable<Ipv6Addr>,
    /// The port's TCP offloads, as IPv4's egress has them.
    pub offloads: TcpOffloads,
}

/// True for a link-local unicast address, fe80::/10 (RFC 4291 §2.5.6).
pub fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// True when `a` and `b` share their first `prefix_len` bits.
fn same_prefix(a: Ipv6Addr, b: Ipv6Addr, prefix_len: u8) -> bool {
    let bits = u32::from(prefix_len.min(128));
    if bits == 0 {
        return true;
    }
    let mask = u128::MAX << (128 - bits);
    (u128::from(a) ^ u128::from(b)) & mask == 0
}

impl Egress6 {
    /// The interface `mac` configured by `cfg`, with link MTU `mtu`.
    pub fn new(mac: MacAddr, cfg: &Ipv6Config, mtu: usize) -> Egress6 {
        let state = if cfg.dad {
            AddrState::Tentative { sent: None }
        } else {
            AddrState::Preferred
        };
        let ll = Addr6 {
            addr: cfg.link_local.unwrap_or_else(|| link_local_from_mac(mac)),
            prefix_len: 64,
            state,
        };
        let global = cfg.global.map(|(addr, prefix_len)| Addr6 {
            addr,
            prefix_len: prefix_len.min(128),
            state,
        });
        Egress6 {
            mac,
            addrs: [Some(ll), global],
            gateway: cfg.gateway,
            mtu,
            neighbors: NeighborCache::new(cfg.neighbor_entries, cfg.neighbor_waiting),
            pmtu: PmtuTable::new(PMTU_ENTRIES),
            offloads: TcpOffloads::default(),
        }
    }

    /// Our addresses in any state.
    pub fn addresses(&self) -> impl Iterator<Item = &Addr6> {
        self.addrs.iter().flatten()
    }

    /// The state of `a` if it is one of our addresses.
    pub fn state_of(&self, a: Ipv6Addr) -> Option<AddrState> {
        self.addresses().find(|x| x.addr == a).map(|x| x.state)
    }

    /// True when `a` is one of our usable unicast addresses.
    pub fn is_ours(&self, a: Ipv6Addr) -> bool {
        self.state_of(a) == Some(AddrState::Preferred)
    }

    /// True for the multicast groups we listen to: all-nodes and the
    /// solicited-node group of each address not refused (tentative ones
    /// included, RFC 4862 §5.4.2).
    pub fn in_group(&self, a: Ipv6Addr) -> bool {
        a == ndisc::ALL_NODES
            || self
                .addresses()
                .any(|x| x.state != AddrState::Duplicate && ndisc::solicited_node(x.addr) == a)
    }

    /// True when `dst` is on-link: link-local, or inside a configured
    /// prefix (RFC 4861 §5.2).
    pub fn on_link(&self, dst: Ipv6Addr) -> bool {
        is_link_local(dst)
            || self
                .addresses()
                .any(|x| !is_link_local(x.addr) && same_prefix(x.addr, dst, x.prefix_len))
    }

    /// The next hop toward unicast `dst`: itself when on-link, else the
    /// default router.
    pub fn next_hop(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        if self.on_link(dst) {
            Some(dst)
        } else {
            self.gateway
        }
    }

    /// Our source address for a packet to `dst` (RFC 6724 in short: the
    /// link-local address for link-local and link-scope multicast
    /// destinations, else the global one when usable, else link-local).
    pub fn source_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let usable = |i: usize| {
            self.addrs[i]
                .filter(|x| x.state == AddrState::Preferred)
                .map(|x| x.addr)
        };
        let link_scope = is_link_local(dst) || dst.segments()[0] & 0xff0f == 0xff02;
        if link_scope {
            usable(0).or_else(|| usable(1))
        } else {
            usable(1).or_else(|| usable(0))
        }
    }

    /// The path MTU toward `dst`: the learned estimate, else the link MTU.
    pub fn pmtu(&self, dst: Ipv6Addr, now: Instant) -> usize {
        self.pmtu.path_mtu(dst, now, self.mtu)
    }

    /// Sends one IPv6 packet from `src` to `dst` with a `payload_len`-byte
    /// payload that `fill` writes (extension headers, if any, included;
    /// `next_header` names the first). A multicast `dst` goes to its
    /// 33:33 MAC; a unicast one through its next hop, resolved by Neighbor
    /// Discovery first if needed (the frame waits). Returns false when the
    /// packet was dropped (counted).
    #[allow(clippy::too_many_arguments)]
    pub fn send_ipv6<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        now: Instant,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        next_header: u8,
        hop_limit: u8,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        let ip = Ipv6Repr {
            src,
            dst,
            next_header,
            hop_limit,
            traffic_class: 0,
            flow_label: 0,
            payload_len,
        };
        self.send_repr(tx, stats, now, &ip, fill)
    }

    /// [`Egress6::send_ipv6`] for a packet described by `ip` in full: its
    /// Traffic Class (DSCP and ECN, RFC 8200 §7) and Flow Label (RFC 6437)
    /// included, `ip.payload_len` bytes written by `fill`.
    pub fn send_repr<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        now: Instant,
        ip: &Ipv6Repr,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        let (dst, payload_len) = (ip.dst, ip.payload_len);
        if ipv6::HEADER_LEN + payload_len > self.mtu {
            stats.drop_ipv6_too_big += 1;
            return false;
        }
        let ip = *ip;
        if dst.is_multicast() {
            return self.send_to_mac(tx, stats, ndisc::multicast_mac(dst), &ip, fill);
        }
        let Some(next_hop) = self.next_hop(dst) else {
            stats.drop_ipv6_no_route += 1;
            return false;
        };
        if let Some(mac) = self.neighbors.lookup(next_hop, now) {
            return self.send_to_mac(tx, stats, mac, &ip, fill);
        }
        let frame_len = (HEADERS6 + payload_len).max(MIN_FRAME);
        if frame_len > FRAME_CAP {
            stats.drop_nd_pending_full += 1;
            return false;
        }
        let src_mac = self.mac;
        let queued = self.neighbors.enqueue(next_hop, now, |buf| {
            build(buf, MacAddr::ZERO, src_mac, &ip, fill);
            frame_len
        });
        match queued {
            Some(true) => {
                self.send_ns(tx, stats, next_hop, None, false);
                true
            }
            Some(false) => true,
            None => {
                stats.drop_nd_pending_full += 1;
                false
            }
        }
    }

    /// Sends the IPv6 packet `ip` in a frame to `dst_mac` now, its payload
    /// written by `fill`. Returns false when the port had no buffer
    /// (counted).
    pub fn send_to_mac<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        dst_mac: MacAddr,
        ip: &Ipv6Repr,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        let frame_len = (HEADERS6 + ip.payload_len).max(MIN_FRAME);
        let src_mac = self.mac;
        let sent = tx.transmit(frame_len, |buf| {
            build(buf, dst_mac, src_mac, ip, fill);
            frame_len
        });
        stats.count_tx(sent, 1, frame_len)
    }

    /// The MAC address of the next hop to `dst` if it is known now (a
    /// frame to it goes out at once, not through the neighbor queue).
    pub fn resolved(&mut self, dst: Ipv6Addr, now: Instant) -> Option<MacAddr> {
        let hop = self.next_hop(dst)?;
        self.neighbors.lookup(hop, now)
    }

    /// Sends a Neighbor Solicitation for `target` (RFC 4861 §7.2.2):
    /// multicast to its solicited-node group, or a unicast probe to
    /// `unicast`; for Duplicate Address Detection (`dad`) from the
    /// unspecified address without a Source Link-Layer Address option
    /// (RFC 4862 §5.4.2), else from our address toward the target with one.
    pub fn send_ns<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        target: Ipv6Addr,
        unicast: Option<MacAddr>,
        dad: bool,
    ) {
        let src = if dad {
            Ipv6Addr::UNSPECIFIED
        } else {
            match self.source_for(target) {
                Some(s) => s,
                None => {
                    stats.drop_ipv6_no_route += 1;
                    return;
                }
            }
        };
        let mut opt = [0u8; 8];
        let options: &[u8] = if dad {
            &[]
        } else {
            NdiscOption::SourceLinkLayerAddr(self.mac).emit(&mut opt);
            &opt
        };
        let (dst, dst_mac) = match unicast {
            Some(mac) => (target, mac),
            None => {
                let group = ndisc::solicited_node(target);
                (group, ndisc::multicast_mac(group))
            }
        };
        let ns = NdiscRepr::NeighborSolicit { target, options };
        if self.send_nd(tx, stats, dst_mac, src, dst, &ns) {
            stats.nd_ns_tx += 1;
        }
    }

    /// Sends a Neighbor Advertisement for our address `target` (RFC 4861
    /// §7.2.4) to `dst` at `dst_mac`, with flags S (`solicited`) and O and
    /// our Target Link-Layer Address.
    pub fn send_na<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        dst_mac: MacAddr,
        dst: Ipv6Addr,
        target: Ipv6Addr,
        solicited: bool,
    ) {
        let mut opt = [0u8; 8];
        NdiscOption::TargetLinkLayerAddr(self.mac).emit(&mut opt);
        let na = NdiscRepr::NeighborAdvert {
            router_flag: false,
            solicited_flag: solicited,
            override_flag: true,
            target,
            options: &opt,
        };
        if self.send_nd(tx, stats, dst_mac, target, dst, &na) {
            stats.nd_na_tx += 1;
        }
    }

    /// Sends the ND message `msg` with Hop Limit 255 (RFC 4861 §7.1).
    fn send_nd<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        dst_mac: MacAddr,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        msg: &NdiscRepr<'_>,
    ) -> bool {
        let ip = Ipv6Repr {
            src,
            dst,
            next_header: NEXT_ICMPV6,
            hop_limit: ndisc::HOP_LIMIT,
            traffic_class: 0,
            flow_label: 0,
            payload_len: msg.buffer_len(),
        };
        self.send_to_mac(tx, stats, dst_mac, &ip, |buf| {
            msg.emit(src, dst, buf);
        })
    }

    /// Sends the frames that waited for `ip`, now known to be at `mac`.
    pub fn flush_waiting<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        ip: Ipv6Addr,
        mac: MacAddr,
    ) {
        self.neighbors
            .take_waiting(ip, |frame| send_waiting(tx, stats, mac, frame));
    }

    /// Neighbor Discovery timers (solicitations, probes, neighbors given
    /// up on) and Duplicate Address Detection (RFC 4862 §5.4: one
    /// solicitation per tentative address, DupAddrDetectTransmits 1, then
    /// the address is usable a RetransTimer later).
    pub fn poll_nd<T: TxQueue>(&mut self, tx: &mut T, stats: &mut Stats, now: Instant) {
        let mut solicits = [(Ipv6Addr::UNSPECIFIED, None); 16];
        let mut n = 0;
        self.neighbors.poll(now, |a| match a {
            NdAction::Solicit { target, unicast } => {
                if n < solicits.len() {
                    solicits[n] = (target, unicast);
                    n += 1;
                }
            }
            NdAction::Unresolved(dropped) => stats.drop_nd_unresolved += dropped as u64,
        });
        for &(target, unicast) in &solicits[..n] {
            self.send_ns(tx, stats, target, unicast, false);
        }
        for i in 0..self.addrs.len() {
            let Some(a) = self.addrs[i] else { continue };
            match a.state {
                AddrState::Tentative { sent: None } => {
                    self.send_ns(tx, stats, a.addr, None, true);
                    self.set_state(a.addr, AddrState::Tentative { sent: Some(now) });
                }
                AddrState::Tentative { sent: Some(at) }
                    if now.saturating_since(at) >= RETRANS_TIMER =>
                {
                    self.set_state(a.addr, AddrState::Preferred);
                }
                _ => {}
            }
        }
    }

    /// Sets the state of our address `a`.
    pub fn set_state(&mut self, a: Ipv6Addr, state: AddrState) {
        for x in self.addrs.iter_mut().flatten() {
            if x.addr == a {
                x.state = state;
            }
        }
    }
}

/// TCP output over IPv6 (`tcp::tx`): a flow is the header of its
/// packets, its Traffic Class's ECN bits clear; segments the port cuts
/// carry no checksum (the port writes the pseudo-header sum of each),
/// copied ones carry it in full.
impl TcpEgress for Egress6 {
    type Addr = Ipv6Addr;
    type Flow = Ipv6Repr;
    const HEADERS: usize = HEADERS6;

    fn peer(flow: &Ipv6Repr) -> Ipv6Addr {
        flow.dst
    }

    fn send_tcp<T: TxQueue>(
        &mut self,
        tx: &mut T,
        stats: &mut Stats,
        seg: TcpOut<Ipv6Repr>,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        let ip = packet(&seg.flow, seg.ecn, seg.tcp_len);
        let src_mac = self.mac;
        let emit = |buf: &mut [u8], dst_mac| emit_headers(buf, dst_mac, src_mac, &ip);
        match seg.via {
            Via::Lent(dst_mac, payload) => {
                let emit = |buf: &mut [u8]| emit(buf, dst_mac);
                let ends = (ip.src, ip.dst);
                transmit_tcp_gather(tx, stats, HEADERS6, ends, seg.gso, payload, emit, fill)
            }
            Via::Cut(dst_mac) => {
                let emit = |buf: &mut [u8]| emit(buf, dst_mac);
                transmit_tcp_gso(tx, stats, HEADERS6, seg.gso, seg.tcp_len, emit, fill)
            }
            Via::Copied(now) => self.send_repr(tx, stats, now, &ip, |buf| {
                fill(buf);
                wire::tcp::fill_checksum(buf, ip.src, ip.dst);
            }),
        }
    }

    fn route(&mut self, dst: Ipv6Addr, now: Instant) -> Route<'_, Ipv6Addr> {
        let offloads = TcpOffloads {
            // The port's largest payload less what the IPv6 header adds.
            gso_max: self.offloads.gso_max.saturating_sub(IPV6_EXTRA),
            ..self.offloads
        };
        Route {
            next_mac: self.resolved(dst, now),
            offloads,
            link_mtu: self.mtu,
            pmtu: &self.pmtu,
        }
    }
}

/// The header of a packet of `flow` with ECN codepoint `ecn` and a
/// `payload_len`-byte payload.
fn packet(flow: &Ipv6Repr, ecn: u8, payload_len: usize) -> Ipv6Repr {
    Ipv6Repr {
        traffic_class: flow.traffic_class | ecn,
        payload_len,
        ..*flow
    }
}

/// Writes the Ethernet and IPv6 headers of `ip` at the start of `buf`.
fn emit_headers(buf: &mut [u8], dst_mac: MacAddr, src_mac: MacAddr, ip: &Ipv6Repr) {
    EthernetRepr {
        dst: dst_mac,
        src: src_mac,
        ethertype: ETHERTYPE_IPV6,
    }
    .emit(buf);
    ip.emit(&mut buf[ethernet::HEADER_LEN..]);
}

/// Writes the Ethernet header and the IPv6 header `ip` at the start of
/// `buf`, the payload by `fill`, and zero padding to [`MIN_FRAME`].
fn build(
    buf: &mut [u8],
    dst_mac: MacAddr,
    src_mac: MacAddr,
    ip: &Ipv6Repr,
    fill: impl FnOnce(&mut [u8]),
) {
    emit_headers(buf, dst_mac, src_mac, ip);
    let end = HEADERS6 + ip.payload_len;
    fill(&mut buf[HEADERS6..end]);
    let frame_len = end.max(MIN_FRAME);
    buf[end..frame_len].fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn egress(global: Option<(Ipv6Addr, u8)>) -> Egress6 {
        let cfg = Ipv6Config {
            global,
            gateway: Some("fe80::1".parse().unwrap()),
            ..Ipv6Config::default()
        };
        Egress6::new(MacAddr([2, 0, 0, 0, 0, 2]), &cfg, 1500)
    }

    #[test]
    fn next_hop_link_local_and_prefix_on_link_else_gateway() {
        let e = egress(Some(("2001:db8::2".parse().unwrap(), 64)));
        let a = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        assert_eq!(e.next_hop(a("fe80::9")), Some(a("fe80::9")));
        assert_eq!(e.next_hop(a("2001:db8::9")), Some(a("2001:db8::9")));
        assert_eq!(e.next_hop(a("2001:db9::9")), Some(a("fe80::1")));
        assert_eq!(e.source_for(a("fe80::9")), Some(a("fe80::ff:fe00:2")));
        assert_eq!(e.source_for(a("2001:db9::9")), Some(a("2001:db8::2")));
        assert!(e.in_group(ndisc::solicited_node(a("2001:db8::2"))));
        assert!(e.in_group(ndisc::ALL_NODES));
        assert!(!e.in_group(a("ff02::2")));
    }
}
