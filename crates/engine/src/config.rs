//! The engine's settings.

use crate::tcp::TcpConfig;
use core::net::Ipv4Addr;

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
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            ip: Ipv4Addr::UNSPECIFIED,
            prefix_len: 24,
            gateway: None,
            tcp: TcpConfig::default(),
            max_sockets: 1_000_000,
            ephemeral_ports: crate::sockets::EPHEMERAL,
            ring_bytes: 256 * 1024,
            ring_max_bytes: 8 << 20,
            buffer_growth_limit: 256 << 20,
            rx_burst: 64,
            arp_entries: 256,
            arp_waiting: 64,
            icmp_errors_per_sec: 1000,
            verify_checksums: true,
            syn_cookies: true,
        }
    }
}
