//! The engine's settings.

use crate::tcp::TcpConfig;
use core::net::{Ipv4Addr, Ipv6Addr};
use wire::MacAddr;

/// First and last ephemeral port (Linux ip_local_port_range defaults): the
/// default of [`EngineConfig::ephemeral_ports`] and a new socket table's range.
pub const EPHEMERAL: (u16, u16) = (32768, 60999);

/// How the loop that runs an engine waits for work: one type for the
/// library, the daemon's configuration file (`[polling] policy = ".."`) and
/// every command line (`--poll`). Inline mode's waiting thread, embedded
/// mode's engine thread and the daemon follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum PollPolicy {
    /// Spin, then sleep on the NIC queue's fd after an idle spell (50 µs
    /// unless configured); a command's doorbell wakes it early.
    #[default]
    Adaptive,
    /// Spin without pause.
    Busy,
    /// Sleep on the NIC queue's fd whenever an iteration finds no work.
    Interrupt,
}

impl PollPolicy {
    /// The name in files and on command lines.
    pub fn name(self) -> &'static str {
        match self {
            PollPolicy::Adaptive => "adaptive",
            PollPolicy::Busy => "busy",
            PollPolicy::Interrupt => "interrupt",
        }
    }
}

impl core::fmt::Display for PollPolicy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Our IPv4 address.
    pub ip: Ipv4Addr,
    /// Subnet prefix length in bits.
    pub prefix_len: u8,
    /// Next hop for destinations off the subnet.
    pub gateway: Option<Ipv4Addr>,
    /// TCP defaults for every connection.
    pub tcp: TcpConfig,
    /// First and last local port of active opens (Linux's
    /// `ip_local_port_range`; default 32768 to 60999).
    pub ephemeral_ports: (u16, u16),
    /// Sockets of all kinds, including connections in TIME-WAIT, at most: a
    /// limit, not a size (the table grows on demand). Default 1 000 000.
    pub max_sockets: usize,
    /// RX and TX ring size in bytes of connections the engine accepts,
    /// when they start (embedded and inline mode; service-mode rings come
    /// from the application's segment).
    pub ring_bytes: usize,
    /// The most a ring of a connection the engine accepts may grow to,
    /// bytes (receive-window auto-tuning and send-buffer growth, see
    /// [`TcpConfig::rcv_buf_max`] and [`TcpConfig::snd_buf_max`]); that
    /// much address space is reserved per ring, memory is used only as the
    /// ring grows. Default 8 MiB.
    pub ring_max_bytes: usize,
    /// Ring memory each application may add by growing its connections'
    /// rings beyond their starting sizes, bytes; past it a connection
    /// keeps the rings it has. Default 256 MiB.
    pub buffer_growth_limit: usize,
    /// Frames received per iteration at most.
    pub rx_burst: usize,
    /// ARP cache entries.
    pub arp_entries: usize,
    /// Frames that may wait for ARP resolution.
    pub arp_waiting: usize,
    /// ICMP error messages per second at most (like Linux icmp_ratelimit).
    pub icmp_errors_per_sec: u32,
    /// Verify checksums of received packets in software.
    pub verify_checksums: bool,
    /// Answer SYNs with SYN cookies when a listener's SYN queue is full
    /// (RFC 4987; Linux tcp_syncookies=1) instead of dropping them.
    pub syn_cookies: bool,
    /// IPv6 (issue 25): None (the default) keeps IPv6 off, and IPv6 frames
    /// are dropped as an unsupported ethertype, as before IPv6 existed.
    pub ipv6: Option<Ipv6Config>,
}

/// IPv6 settings of an engine ([`EngineConfig::ipv6`]). The link-local
/// address always exists (derived from the MAC when not given); the
/// global address is optional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Config {
    /// A global (or unique local) address and its prefix length in bits:
    /// destinations inside the prefix are on-link (RFC 4861 §5.2).
    pub global: Option<(Ipv6Addr, u8)>,
    /// The link-local address; None: fe80::/64 with the modified EUI-64
    /// interface identifier of the port's MAC ([`link_local_from_mac`]).
    pub link_local: Option<Ipv6Addr>,
    /// The default router for destinations off-link (usually its
    /// link-local address).
    pub gateway: Option<Ipv6Addr>,
    /// Duplicate Address Detection (RFC 4862 §5.4) at start: each address
    /// is tentative until one Neighbor Solicitation from `::` went
    /// unanswered for a second, and refused if a Neighbor Advertisement
    /// (or another node's DAD solicitation) for it arrives. Default off:
    /// addresses are usable at once.
    pub dad: bool,
    /// Neighbor cache entries (RFC 4861 §5.1).
    pub neighbor_entries: usize,
    /// Packets that may wait for neighbor resolution (RFC 4861 §7.2.2).
    pub neighbor_waiting: usize,
}

impl Default for Ipv6Config {
    fn default() -> Self {
        Ipv6Config {
            global: None,
            link_local: None,
            gateway: None,
            dad: false,
            neighbor_entries: 256,
            neighbor_waiting: 64,
        }
    }
}

/// The link-local address fe80::/64 with the modified EUI-64 interface
/// identifier of `mac` (RFC 4291 §2.5.1 and appendix A, RFC 2464 §4-5):
/// the MAC's halves around ff:fe, the universal/local bit inverted.
pub fn link_local_from_mac(mac: MacAddr) -> Ipv6Addr {
    let m = mac.0;
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        m[0] ^ 0x02,
        m[1],
        m[2],
        0xff,
        0xfe,
        m[3],
        m[4],
        m[5],
    ])
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            ip: Ipv4Addr::UNSPECIFIED,
            prefix_len: 24,
            gateway: None,
            tcp: TcpConfig::default(),
            max_sockets: 1_000_000,
            ephemeral_ports: EPHEMERAL,
            ring_bytes: 256 * 1024,
            ring_max_bytes: 8 << 20,
            buffer_growth_limit: 256 << 20,
            rx_burst: 64,
            arp_entries: 256,
            arp_waiting: 64,
            icmp_errors_per_sec: 1000,
            verify_checksums: true,
            syn_cookies: true,
            ipv6: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_is_modified_eui64_of_the_mac() {
        // RFC 4291 appendix A: 34-56-78-9A-BC-DE → 3656:78ff:fe9a:bcde.
        let mac = MacAddr([0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde]);
        assert_eq!(
            link_local_from_mac(mac),
            "fe80::3656:78ff:fe9a:bcde".parse::<Ipv6Addr>().unwrap()
        );
    }
}
