//! The rows of the table segments: connections ([`ConnRow`], [`ConnState`]) and
//! applications ([`AppRow`]), each a fixed number of u64 words.
#![deny(unsafe_code)]

use super::{APP_WORDS, ROW_WORDS};

/// What a connection-table row is: a UDP socket, a TCP listener, or a TCP
/// connection in one of the states of RFC 9293 §3.3.2. Published as one
/// byte (the discriminant); a reader converts it back with
/// [`ConnState::try_from`], which refuses codes no writer produces (a
/// garbled or newer segment), and [`ConnRow::decode`] shows those as
/// [`ConnState::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum ConnState {
    /// A UDP socket.
    #[default]
    Udp = 0,
    /// A TCP listener.
    Listener = 1,
    /// TCP CLOSED (a connection that ended but is still held).
    Closed = 2,
    /// TCP LISTEN (never a connection's state; kept for the numbering).
    Listen = 3,
    /// TCP SYN-SENT.
    SynSent = 4,
    /// TCP SYN-RECEIVED.
    SynReceived = 5,
    /// TCP ESTABLISHED.
    Established = 6,
    /// TCP FIN-WAIT-1.
    FinWait1 = 7,
    /// TCP FIN-WAIT-2.
    FinWait2 = 8,
    /// TCP CLOSE-WAIT.
    CloseWait = 9,
    /// TCP CLOSING.
    Closing = 10,
    /// TCP LAST-ACK.
    LastAck = 11,
    /// TCP TIME-WAIT.
    TimeWait = 12,
    /// A code no writer of this version produces.
    Unknown = 255,
}

impl TryFrom<u8> for ConnState {
    /// The code itself.
    type Error = u8;

    /// The state published as `code`. Errors: a code that is no state
    /// (255 included: `Unknown` is never published).
    fn try_from(code: u8) -> Result<ConnState, u8> {
        use ConnState::*;
        Ok(match code {
            0 => Udp,
            1 => Listener,
            2 => Closed,
            3 => Listen,
            4 => SynSent,
            5 => SynReceived,
            6 => Established,
            7 => FinWait1,
            8 => FinWait2,
            9 => CloseWait,
            10 => Closing,
            11 => LastAck,
            12 => TimeWait,
            _ => return Err(code),
        })
    }
}

impl ConnState {
    /// The published code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// True for a TCP connection (any TCP state, not a listener or UDP).
    pub fn is_tcp_connection(self) -> bool {
        !matches!(
            self,
            ConnState::Udp | ConnState::Listener | ConnState::Unknown
        )
    }

    /// The name `ss` uses: "UDP", "LISTEN", "ESTAB", "SYN-SENT", ...; "?"
    /// for [`ConnState::Unknown`].
    pub fn name(self) -> &'static str {
        use ConnState::*;
        match self {
            Udp => "UDP",
            Listener | Listen => "LISTEN",
            Closed => "CLOSED",
            SynSent => "SYN-SENT",
            SynReceived => "SYN-RECV",
            Established => "ESTAB",
            FinWait1 => "FIN-WAIT-1",
            FinWait2 => "FIN-WAIT-2",
            CloseWait => "CLOSE-WAIT",
            Closing => "CLOSING",
            LastAck => "LAST-ACK",
            TimeWait => "TIME-WAIT",
            Unknown => "?",
        }
    }

    /// Linux's number for the state (`TCP_ESTABLISHED` = 1, ... as in
    /// `struct tcp_info`'s `tcpi_state`); `TCP_CLOSE` (7) for UDP and
    /// unknown codes.
    pub fn linux_tcp_state(self) -> u8 {
        use ConnState::*;
        match self {
            Established => 1,
            SynSent => 2,
            SynReceived => 3,
            FinWait1 => 4,
            FinWait2 => 5,
            TimeWait => 6,
            CloseWait => 8,
            LastAck => 9,
            Listener | Listen => 10,
            Closing => 11,
            Udp | Closed | Unknown => 7,
        }
    }
}

/// Bytes of a process name in a [`ConnRow`] (Linux's `TASK_COMM_LEN`).
pub const COMM_LEN: usize = 16;

/// `name` as a [`ConnRow`] keeps it: its first [`COMM_LEN`] bytes (cut at a
/// character boundary), NUL-padded.
pub fn comm_bytes(name: &str) -> [u8; COMM_LEN] {
    let mut b = [0u8; COMM_LEN];
    let mut end = name.len().min(COMM_LEN);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    b[..end].copy_from_slice(&name.as_bytes()[..end]);
    b
}

/// One row of the connection table, as `corestack ss` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnRow {
    /// Local address and port.
    pub local: core::net::SocketAddr,
    /// Remote address and port (0.0.0.0:0 for listeners and UDP).
    pub remote: core::net::SocketAddr,
    /// UDP, TCP listener, or the TCP connection's state.
    pub state: ConnState,
    /// Smoothed RTT, µs.
    pub srtt_us: u32,
    /// Retransmission timeout, ms.
    pub rto_ms: u32,
    /// Congestion window, bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes.
    pub ssthresh: u32,
    /// Bytes sent and not yet acknowledged.
    pub in_flight: u32,
    /// Peer's receive window, bytes.
    pub snd_wnd: u32,
    /// Our receive window, bytes.
    pub rcv_wnd: u32,
    /// Effective MSS, bytes.
    pub mss: u16,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// The service-mode association (application) that owns the socket;
    /// 0 for the sockets of an embedded or inline engine.
    pub owner: u32,
    /// Bytes the application wrote that the engine consumed from the
    /// socket's TX ring since the ring was set up (TCP: acknowledged by the
    /// peer; UDP: sent, each datagram counting its ring header too); wraps
    /// at 2^64. 0 for listeners.
    pub bytes_out: u64,
    /// Bytes the engine delivered into the socket's RX ring since the ring
    /// was set up (UDP: each datagram counting its ring header too); wraps
    /// at 2^64. 0 for listeners.
    pub bytes_in: u64,
    /// The process the socket belongs to: the engine's own for an
    /// embedded or inline engine, the application's (from its control
    /// connection's peer credentials) in service mode; 0 when unknown.
    pub pid: u32,
    /// The engine that holds the socket (its index among the process's
    /// engines, 0 when it has one); set by the publisher, not the engine.
    /// Published in the high half of the `owner` word (a segment of an
    /// older writer reads as engine 0).
    pub engine: u32,
    /// That process's name ([`comm_bytes`]: the application's hello name in
    /// service mode, `/proc/self/comm` otherwise), NUL-padded; see
    /// [`ConnRow::process_name`]. The application's own text: escape it
    /// before printing.
    pub comm: [u8; COMM_LEN],
}

impl Default for ConnRow {
    fn default() -> Self {
        let any = core::net::SocketAddr::from((core::net::Ipv4Addr::UNSPECIFIED, 0));
        ConnRow {
            local: any,
            remote: any,
            state: ConnState::Udp,
            srtt_us: 0,
            rto_ms: 0,
            cwnd: 0,
            ssthresh: 0,
            in_flight: 0,
            snd_wnd: 0,
            rcv_wnd: 0,
            mss: 0,
            retransmits: 0,
            owner: 0,
            bytes_out: 0,
            bytes_in: 0,
            pid: 0,
            engine: 0,
            comm: [0; COMM_LEN],
        }
    }
}

/// Set in an address word when the address is IPv6 (its 16 bytes are in
/// the row's last words).
const V6_BIT: u64 = 1 << 56;

/// An address as its word (IPv4 address << 16 | port, [`V6_BIT`] for
/// IPv6) and, for IPv6, the address's two words.
fn addr_words(a: core::net::SocketAddr) -> (u64, [u64; 2]) {
    match a {
        core::net::SocketAddr::V4(a) => (
            (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port()),
            [0, 0],
        ),
        core::net::SocketAddr::V6(a) => {
            let v = u128::from(*a.ip());
            (V6_BIT | u64::from(a.port()), [(v >> 64) as u64, v as u64])
        }
    }
}

/// The address of word `w` (and the IPv6 words `v6` when it says IPv6).
fn word_addr(w: u64, v6: [u64; 2]) -> core::net::SocketAddr {
    if w & V6_BIT != 0 {
        let ip = (u128::from(v6[0]) << 64) | u128::from(v6[1]);
        core::net::SocketAddr::from((core::net::Ipv6Addr::from(ip), w as u16))
    } else {
        let ip = core::net::Ipv4Addr::from(((w >> 16) & 0xffff_ffff) as u32);
        core::net::SocketAddr::from((ip, w as u16))
    }
}

impl ConnRow {
    /// The row as [`ROW_WORDS`] words.
    pub fn encode(&self) -> [u64; ROW_WORDS] {
        let (local, local6) = addr_words(self.local);
        let (remote, remote6) = addr_words(self.remote);
        [
            local | (u64::from(self.state.code()) << 48),
            remote,
            u64::from(self.srtt_us) | (u64::from(self.rto_ms) << 32),
            u64::from(self.cwnd) | (u64::from(self.ssthresh) << 32),
            u64::from(self.in_flight) | (u64::from(self.snd_wnd) << 32),
            u64::from(self.rcv_wnd) | (u64::from(self.mss) << 32),
            self.retransmits,
            u64::from(self.owner) | (u64::from(self.engine) << 32),
            self.bytes_out,
            self.bytes_in,
            u64::from(self.pid),
            u64::from_le_bytes(self.comm[..8].try_into().expect("8 bytes")),
            u64::from_le_bytes(self.comm[8..].try_into().expect("8 bytes")),
            local6[0],
            local6[1],
            remote6[0],
            remote6[1],
        ]
    }

    /// The process name (up to the first NUL; invalid UTF-8 replaced).
    pub fn process_name(&self) -> String {
        let end = self.comm.iter().position(|&c| c == 0).unwrap_or(COMM_LEN);
        String::from_utf8_lossy(&self.comm[..end]).into_owned()
    }

    /// The row from [`ROW_WORDS`] words; missing words (a short slice)
    /// read as 0.
    pub fn decode(w: &[u64]) -> ConnRow {
        let mut full = [0u64; ROW_WORDS];
        let n = w.len().min(ROW_WORDS);
        full[..n].copy_from_slice(&w[..n]);
        let w = &full;
        let half = |x: u64, hi: bool| if hi { (x >> 32) as u32 } else { x as u32 };
        let mut comm = [0u8; COMM_LEN];
        comm[..8].copy_from_slice(&w[11].to_le_bytes());
        comm[8..].copy_from_slice(&w[12].to_le_bytes());
        ConnRow {
            local: word_addr(w[0] & (V6_BIT | 0xffff_ffff_ffff), [w[13], w[14]]),
            remote: word_addr(w[1], [w[15], w[16]]),
            state: ConnState::try_from((w[0] >> 48) as u8).unwrap_or(ConnState::Unknown),
            srtt_us: half(w[2], false),
            rto_ms: half(w[2], true),
            cwnd: half(w[3], false),
            ssthresh: half(w[3], true),
            in_flight: half(w[4], false),
            snd_wnd: half(w[4], true),
            rcv_wnd: half(w[5], false),
            mss: (w[5] >> 32) as u16,
            retransmits: w[6],
            owner: w[7] as u32,
            engine: (w[7] >> 32) as u32,
            bytes_out: w[8],
            bytes_in: w[9],
            pid: w[10] as u32,
            comm,
        }
    }
}

/// Bytes of an application's name an [`AppRow`] keeps (the control
/// protocol's own limit, `ctl::NAME_MAX`).
pub const APP_NAME_MAX: usize = appif::ctl::NAME_MAX;

/// One application of `corestack run` (a service-mode association), as
/// `corestack stat` shows it.
///
/// Layout ([`APP_WORDS`] words): `assoc | pid << 32`, `uid`, the name in 4
/// words (32 bytes, NUL-padded, little-endian), `commands`, `opens`,
/// `closes`, `refused`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppRow {
    /// The association id (1, 2, ... in order of arrival); it is the
    /// `owner` of the application's sockets in [`ConnRow`].
    pub assoc: u32,
    /// The application's process id (from its control socket's peer
    /// credentials).
    pub pid: i32,
    /// The application's effective user id (same source).
    pub uid: u32,
    /// The name the application gave in its hello; at most
    /// [`APP_NAME_MAX`] bytes are kept (cut at a character boundary). It is
    /// the application's own text: escape it before printing.
    pub name: String,
    /// Command descriptors the daemon took from the application.
    pub commands: u64,
    /// Connect, listen and bind descriptors.
    pub opens: u64,
    /// Close descriptors.
    pub closes: u64,
    /// Opens refused for permission (EACCES).
    pub refused: u64,
}

impl AppRow {
    /// The row as [`APP_WORDS`] words.
    pub fn encode(&self) -> [u64; APP_WORDS] {
        let mut name = [0u8; 32];
        let mut end = self.name.len().min(APP_NAME_MAX);
        while !self.name.is_char_boundary(end) {
            end -= 1;
        }
        name[..end].copy_from_slice(&self.name.as_bytes()[..end]);
        let mut w = [0u64; APP_WORDS];
        w[0] = u64::from(self.assoc) | (u64::from(self.pid as u32) << 32);
        w[1] = u64::from(self.uid);
        for (i, chunk) in name.chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            w[2 + i] = u64::from_le_bytes(b);
        }
        w[6] = self.commands;
        w[7] = self.opens;
        w[8] = self.closes;
        w[9] = self.refused;
        w
    }

    /// The row from [`APP_WORDS`] words (missing words read as 0). The name
    /// ends at the first NUL or after [`APP_NAME_MAX`] bytes; invalid UTF-8
    /// in it is replaced, not refused.
    pub fn decode(w: &[u64]) -> AppRow {
        let mut full = [0u64; APP_WORDS];
        let n = w.len().min(APP_WORDS);
        full[..n].copy_from_slice(&w[..n]);
        let mut name = [0u8; 32];
        for (i, chunk) in name.chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&full[2 + i].to_le_bytes());
        }
        let field = &name[..APP_NAME_MAX];
        let end = field.iter().position(|&c| c == 0).unwrap_or(APP_NAME_MAX);
        AppRow {
            assoc: full[0] as u32,
            pid: (full[0] >> 32) as u32 as i32,
            uid: full[1] as u32,
            name: String::from_utf8_lossy(&field[..end]).into_owned(),
            commands: full[6],
            opens: full[7],
            closes: full[8],
            refused: full[9],
        }
    }
}

/// The rows of a table segment (CONNS or APPS) as read by
/// [`StatsReader::read`](super::StatsReader::read): the row count in word 0, then rows of `width`
/// words. A count larger than the segment holds is cut to what it holds.
pub fn table_rows(words: &[u64], width: usize) -> impl Iterator<Item = &[u64]> {
    let width = width.max(1);
    let body = words.get(1..).unwrap_or(&[]);
    let n = usize::try_from(words.first().copied().unwrap_or(0))
        .unwrap_or(usize::MAX)
        .min(body.len() / width);
    body[..n * width].chunks_exact(width)
}

#[cfg(test)]
mod row_tests {
    use super::*;

    #[test]
    fn conn_row_round_trips() {
        let r = ConnRow {
            local: "10.0.0.2:80".parse().unwrap(),
            remote: "10.0.0.1:40000".parse().unwrap(),
            state: ConnState::Established,
            srtt_us: 123,
            rto_ms: 200,
            cwnd: 14480,
            ssthresh: u32::MAX,
            in_flight: 2896,
            snd_wnd: 65535,
            rcv_wnd: 262144,
            mss: 1448,
            retransmits: 3,
            owner: 0x3fff_ffff,
            bytes_out: u64::MAX,
            bytes_in: 1 << 40,
            pid: 4_194_304,
            engine: u32::MAX,
            comm: comm_bytes("memcached"),
        };
        assert_eq!(ConnRow::decode(&r.encode()), r);
        assert_eq!(r.process_name(), "memcached");
        assert_eq!(
            ConnRow::decode(&ConnRow::default().encode()),
            ConnRow::default()
        );
    }

    #[test]
    fn conn_rows_of_both_families_round_trip() {
        for (local, remote, state) in [
            (
                "[fd00:1::2]:80",
                "[fd00:1::1]:40000",
                ConnState::Established,
            ),
            ("[::]:7", "[::]:0", ConnState::Listener),
            (
                "10.0.0.2:80",
                "[::ffff:10.0.0.1]:5000",
                ConnState::Established,
            ),
            ("255.255.255.255:65535", "0.0.0.0:0", ConnState::Udp),
        ] {
            let r = ConnRow {
                local: local.parse().unwrap(),
                remote: remote.parse().unwrap(),
                state,
                engine: 3,
                ..ConnRow::default()
            };
            let back = ConnRow::decode(&r.encode());
            assert_eq!(
                (back.local, back.remote),
                (r.local, r.remote),
                "{local} {remote}"
            );
            assert_eq!(back.state, state);
            assert_eq!(back.engine, 3);
        }
    }

    #[test]
    fn conn_state_codes_convert_back_and_bad_codes_are_refused() {
        for code in 0..=12u8 {
            let s = ConnState::try_from(code).expect("a published code");
            assert_eq!(s.code(), code);
        }
        assert_eq!(ConnState::try_from(13), Err(13));
        assert_eq!(ConnState::try_from(255), Err(255));
        let mut w = ConnRow::default().encode();
        w[0] |= 200 << 48;
        assert_eq!(ConnRow::decode(&w).state, ConnState::Unknown);
        assert_eq!(ConnState::Unknown.name(), "?");
        assert!(ConnState::TimeWait.is_tcp_connection());
        assert!(!ConnState::Listener.is_tcp_connection());
        assert_eq!(ConnState::Established.linux_tcp_state(), 1);
    }

    #[test]
    fn comm_is_cut_to_sixteen_bytes_at_a_character_boundary() {
        let c = comm_bytes("a-very-long-program-name");
        assert_eq!(&c, b"a-very-long-prog");
        let r = ConnRow {
            comm: comm_bytes("ééééééééé"),
            ..ConnRow::default()
        };
        assert_eq!(r.process_name(), "éééééééé", "the ninth é does not fit");
    }

    #[test]
    fn conn_row_short_slice_reads_missing_words_as_zero() {
        let r = ConnRow {
            owner: 7,
            bytes_in: 9,
            ..ConnRow::default()
        };
        let w = r.encode();
        let short = ConnRow::decode(&w[..8]);
        assert_eq!(short.owner, 7);
        assert_eq!(short.bytes_in, 0);
        assert_eq!(ConnRow::decode(&[]), ConnRow::default());
    }

    #[test]
    fn table_rows_cuts_a_count_larger_than_the_segment() {
        let words = [u64::MAX, 1, 2, 3, 4, 5];
        let rows: Vec<&[u64]> = table_rows(&words, 2).collect();
        assert_eq!(rows, vec![&[1u64, 2][..], &[3, 4][..]]);
        let words = [1, 1, 2, 3, 4, 5];
        assert_eq!(table_rows(&words, 2).count(), 1);
        assert_eq!(table_rows(&[], 2).count(), 0);
        assert_eq!(table_rows(&[3], 2).count(), 0);
    }

    #[test]
    fn app_row_round_trips() {
        let r = AppRow {
            assoc: 3,
            pid: -1,
            uid: 1000,
            name: "echo-server".into(),
            commands: u64::MAX,
            opens: 5,
            closes: 4,
            refused: 1,
        };
        assert_eq!(AppRow::decode(&r.encode()), r);
        assert_eq!(
            AppRow::decode(&AppRow::default().encode()),
            AppRow::default()
        );
    }

    #[test]
    fn app_row_long_name_is_cut_at_a_char_boundary() {
        // 30 ASCII bytes then a 2-byte character: 32 bytes, cut before it.
        let name = format!("{}é", "a".repeat(30));
        let r = AppRow {
            name: name.clone(),
            ..AppRow::default()
        };
        let back = AppRow::decode(&r.encode());
        assert_eq!(back.name, "a".repeat(30));
        // Exactly the maximum fits whole.
        let r = AppRow {
            name: "b".repeat(APP_NAME_MAX),
            ..AppRow::default()
        };
        assert_eq!(AppRow::decode(&r.encode()).name, "b".repeat(APP_NAME_MAX));
    }

    #[test]
    fn app_row_from_hostile_words_decodes_without_panicking() {
        // No NUL in the name words and invalid UTF-8: replaced, not refused.
        let w = [u64::MAX; APP_WORDS];
        let r = AppRow::decode(&w);
        assert_eq!(r.assoc, u32::MAX);
        assert_eq!(r.pid, -1);
        assert!(r.name.chars().all(|c| c == char::REPLACEMENT_CHARACTER));
        assert_eq!(AppRow::decode(&w[..3]).commands, 0);
    }
}
