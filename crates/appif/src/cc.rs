//! The congestion-control choice, one type for the socket option, the
//! command, the daemon's configuration file and every command line.
//!
//! In process ([`crate::command::Command::SetCongestion`]) it travels as the
//! enum; in a service-mode segment ([`crate::seg::Desc::SetCongestion`]) as
//! one byte, [`CcKind::wire`], decoded with the checked [`CcKind::from_wire`]
//! (an unknown byte is a bad descriptor, never a panic).

use core::fmt;

/// Which congestion-control algorithm a connection uses (a socket option,
/// like Linux's `TCP_CONGESTION`). Named `newreno`, `cubic`, `dctcp`, `bbr`
/// in configuration files and on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum CcKind {
    /// NewReno: RFC 5681 slow start / congestion avoidance, RFC 6582 recovery.
    #[cfg_attr(feature = "clap", value(name = "newreno"))]
    NewReno,
    /// CUBIC (RFC 9438), Linux's default.
    #[default]
    Cubic,
    /// DCTCP (RFC 8257): reacts to the fraction of ECN-marked bytes; needs
    /// ECN, which choosing it turns on.
    Dctcp,
    /// BBR v1 (Cardwell et al. 2016, Linux's `bbr`): cwnd and pacing rate
    /// from a model of the path's bottleneck bandwidth and minimum RTT;
    /// loss changes cwnd only for one round trip.
    Bbr,
}

impl CcKind {
    /// Every algorithm, in wire order.
    pub const ALL: [CcKind; 4] = [CcKind::NewReno, CcKind::Cubic, CcKind::Dctcp, CcKind::Bbr];

    /// The name in files and on command lines (`newreno`, `cubic`, `dctcp`,
    /// `bbr`).
    pub fn name(self) -> &'static str {
        match self {
            CcKind::NewReno => "newreno",
            CcKind::Cubic => "cubic",
            CcKind::Dctcp => "dctcp",
            CcKind::Bbr => "bbr",
        }
    }

    /// Linux's name (`TCP_CONGESTION`, `net.ipv4.tcp_congestion_control`):
    /// as [`CcKind::name`] but `reno` for NewReno.
    pub fn linux_name(self) -> &'static str {
        match self {
            CcKind::NewReno => "reno",
            k => k.name(),
        }
    }

    /// The algorithm of a name, Linux's or ours (`reno` and `newreno` both
    /// name NewReno); None for any other.
    pub fn from_name(name: &str) -> Option<CcKind> {
        match name.trim() {
            "reno" => Some(CcKind::NewReno),
            n => CcKind::ALL.into_iter().find(|k| k.name() == n),
        }
    }

    /// The host's default (`/proc/sys/net/ipv4/tcp_congestion_control`), as
    /// a new Linux socket gets it, when it names an algorithm corestack has;
    /// otherwise CUBIC. Reads a file: call it when building a configuration,
    /// not per connection.
    pub fn system_default() -> CcKind {
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
            .ok()
            .and_then(|s| CcKind::from_name(&s))
            .unwrap_or(CcKind::Cubic)
    }

    /// The byte a segment descriptor carries: 0 NewReno, 1 CUBIC, 2 DCTCP,
    /// 3 BBR.
    pub fn wire(self) -> u8 {
        match self {
            CcKind::NewReno => 0,
            CcKind::Cubic => 1,
            CcKind::Dctcp => 2,
            CcKind::Bbr => 3,
        }
    }

    /// The algorithm a descriptor byte names; `None` for any other byte.
    pub fn from_wire(b: u8) -> Option<CcKind> {
        CcKind::ALL.into_iter().find(|k| k.wire() == b)
    }
}

impl fmt::Display for CcKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_ours_and_linux_s_round_trip() {
        for k in CcKind::ALL {
            assert_eq!(CcKind::from_name(k.name()), Some(k));
            assert_eq!(CcKind::from_name(k.linux_name()), Some(k));
        }
        assert_eq!(CcKind::from_name("reno\n"), Some(CcKind::NewReno));
        assert_eq!(CcKind::from_name("vegas"), None);
    }

    #[test]
    fn wire_byte_round_trips_and_unknown_bytes_are_refused() {
        for k in CcKind::ALL {
            assert_eq!(CcKind::from_wire(k.wire()), Some(k));
        }
        assert_eq!(CcKind::ALL.map(CcKind::wire), [0, 1, 2, 3]);
        for b in 4..=u8::MAX {
            assert_eq!(CcKind::from_wire(b), None, "byte {b}");
        }
    }
}
