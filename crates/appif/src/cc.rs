//! The congestion-control choice, one type for the socket option, the
//! command, the daemon's configuration file and every command line.
//!
//! In process ([`crate::socket::Command::SetCongestion`]) it travels as the
//! enum; in a service-mode segment ([`crate::seg::Desc::SetCongestion`]) as
//! one byte, [`CcKind::wire`], decoded with the checked [`CcKind::from_wire`]
//! (an unknown byte is a bad descriptor, never a panic).

use core::fmt;

/// Which congestion-control algorithm a connection uses (a socket option,
/// like Linux's `TCP_CONGESTION`). Named `newreno`, `cubic`, `dctcp` in
/// configuration files and on the command line.
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
}

impl CcKind {
    /// Every algorithm, in wire order.
    pub const ALL: [CcKind; 3] = [CcKind::NewReno, CcKind::Cubic, CcKind::Dctcp];

    /// The name in files and on command lines (`newreno`, `cubic`, `dctcp`;
    /// Linux's `tcp_congestion_control` names).
    pub fn name(self) -> &'static str {
        match self {
            CcKind::NewReno => "newreno",
            CcKind::Cubic => "cubic",
            CcKind::Dctcp => "dctcp",
        }
    }

    /// The byte a segment descriptor carries: 0 NewReno, 1 CUBIC, 2 DCTCP.
    pub fn wire(self) -> u8 {
        match self {
            CcKind::NewReno => 0,
            CcKind::Cubic => 1,
            CcKind::Dctcp => 2,
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
    fn wire_byte_round_trips_and_unknown_bytes_are_refused() {
        for k in CcKind::ALL {
            assert_eq!(CcKind::from_wire(k.wire()), Some(k));
        }
        assert_eq!(CcKind::ALL.map(CcKind::wire), [0, 1, 2]);
        for b in 3..=u8::MAX {
            assert_eq!(CcKind::from_wire(b), None, "byte {b}");
        }
    }
}
