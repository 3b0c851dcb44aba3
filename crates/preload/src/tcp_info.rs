//! TCP_INFO and TCP_MAXSEG for corestack connections, from the connection
//! table the engine publishes for `corestack ss` (every 10 ms, in
//! `/dev/shm/corestack-PID.conns` of the engine's process: this one, or in
//! service mode the daemon, whose rows of this association are searched).
//! Without a row (no /dev/shm, not published yet, or outside the 1024-slot
//! window a publication covers) the answer is a zeroed `struct tcp_info`
//! with the state only, taken from the socket's own status.
#![forbid(unsafe_code)]

use crate::sock::Sock;
use observe::stats_shm::{segment_path, ConnRow, StatsReader, CONNS, ROW_WORDS};
use std::sync::Mutex;

static READER: Mutex<Option<StatsReader>> = Mutex::new(None);

/// The published row of the connection `s` (None: not a connection, not
/// published yet, or no segment).
pub fn row(s: &Sock) -> Option<ConnRow> {
    let (local, remote) =
        s.with_stream(|st| Some((st.local_addr().ok()?, st.peer_addr().ok()?)))??;
    let (local, remote) = (
        crate::addr::canonical(local),
        crate::addr::canonical(remote),
    );
    let stack = crate::stack::started()?;
    let (pid, owner) = match (stack.service_daemon_pid(), stack.association()) {
        (Some(pid), Some(assoc)) => (pid, assoc),
        _ => (std::process::id(), 0),
    };
    let mut r = READER.lock().unwrap_or_else(|p| p.into_inner());
    if r.is_none() {
        *r = StatsReader::open(&segment_path(pid, CONNS)).ok();
    }
    let words = r.as_ref()?.read()?;
    let n = (*words.first()? as usize).min(words.len().saturating_sub(1) / ROW_WORDS);
    (0..n)
        .map(|i| ConnRow::decode(&words[1 + i * ROW_WORDS..1 + (i + 1) * ROW_WORDS]))
        .find(|row| {
            row.state.is_tcp_connection()
                && row.owner == owner
                && crate::addr::canonical(row.local) == local
                && crate::addr::canonical(row.remote) == remote
        })
}

/// Bytes of `struct tcp_info` filled (through tcpi_snd_wnd, Linux 5.x).
pub const TCP_INFO_LEN: usize = 232;

/// `struct tcp_info` for socket `s`: state, rto, snd_mss, rcv_mss, unacked,
/// total_retrans, rtt, rttvar (derived from the RTO: (rto - srtt) / 4,
/// RFC 6298's RTO = SRTT + 4 RTTVAR), snd_ssthresh, snd_cwnd (segments),
/// advmss, bytes_acked, bytes_received, snd_wnd, rcv_space. Times in µs.
pub fn bytes(s: &Sock) -> [u8; TCP_INFO_LEN] {
    let mut b = [0u8; TCP_INFO_LEN];
    let Some(r) = row(s) else {
        // Linux's TCP states: 1 ESTABLISHED, 2 SYN_SENT, 7 CLOSE, 10 LISTEN.
        b[0] = if s.is_listener() {
            10
        } else {
            s.with_stream(|st| match corestack::Source::status(st) {
                st if st.connecting => 2,
                st if st.closed => 7,
                _ => 1,
            })
            .unwrap_or(7)
        };
        return b;
    };
    let put32 = |b: &mut [u8; TCP_INFO_LEN], at: usize, v: u32| {
        b[at..at + 4].copy_from_slice(&v.to_ne_bytes())
    };
    let put64 = |b: &mut [u8; TCP_INFO_LEN], at: usize, v: u64| {
        b[at..at + 8].copy_from_slice(&v.to_ne_bytes())
    };
    let mss = u32::from(r.mss).max(1);
    let rto_us = r.rto_ms.saturating_mul(1000);
    b[0] = r.state.linux_tcp_state();
    put32(&mut b, 8, rto_us); // tcpi_rto
    put32(&mut b, 16, mss); // tcpi_snd_mss
    put32(&mut b, 20, mss); // tcpi_rcv_mss
    put32(&mut b, 24, r.in_flight.div_ceil(mss)); // tcpi_unacked
    put32(&mut b, 60, mss + 40); // tcpi_pmtu
    put32(&mut b, 68, r.srtt_us); // tcpi_rtt
    put32(&mut b, 72, rto_us.saturating_sub(r.srtt_us) / 4); // tcpi_rttvar
    put32(&mut b, 76, r.ssthresh / mss); // tcpi_snd_ssthresh
    put32(&mut b, 80, r.cwnd / mss); // tcpi_snd_cwnd
    put32(&mut b, 84, mss); // tcpi_advmss
    put32(&mut b, 96, r.rcv_wnd); // tcpi_rcv_space
    put32(&mut b, 100, r.retransmits.min(u64::from(u32::MAX)) as u32); // tcpi_total_retrans
    put64(&mut b, 120, r.bytes_out); // tcpi_bytes_acked
    put64(&mut b, 128, r.bytes_in); // tcpi_bytes_received
    put32(&mut b, 228, r.snd_wnd); // tcpi_snd_wnd
    b
}
