//! The rows of `corestack ss`: a socket's (a TCP connection with its
//! windows and timers, a listener, a UDP socket) and a TIME-WAIT record's,
//! as [`Engine::for_each_socket`](crate::Engine::for_each_socket) lists
//! them for the published connection table. Reads the socket table,
//! allocates nothing.

use crate::ip::family::Family;
use crate::sockets::{Socket, Sockets};
use crate::tcp::twtable::TwRecord;
use crate::tcp::State;
use core::net::SocketAddr;
use observe::stats_shm::{ConnRow, ConnState};

/// The `corestack ss` row of `sock` (a TIME-WAIT record's is [`Sockets::time_wait_row`]'s).
pub(crate) fn socket_row(sock: &Socket) -> ConnRow {
    // A listener's or UDP socket's peer: the wildcard of its family.
    let any = |local: core::net::SocketAddr| match local {
        core::net::SocketAddr::V4(_) => {
            core::net::SocketAddrV4::new(core::net::Ipv4Addr::UNSPECIFIED, 0).into()
        }
        core::net::SocketAddr::V6(_) => {
            core::net::SocketAddr::from((core::net::Ipv6Addr::UNSPECIFIED, 0))
        }
    };
    // A listener's or UDP socket's row: no remote end, no TCP state.
    let owner = sock.owner().0;
    let unconnected = |local: core::net::SocketAddr, state| ConnRow {
        local,
        remote: any(local),
        state,
        owner,
        ..ConnRow::default()
    };
    match sock {
        Socket::Tcp(c) => {
            let t = &c.tcb;
            let clamp = |v: usize| v.min(u32::MAX as usize) as u32;
            ConnRow {
                local: t.local(),
                remote: t.remote(),
                state: t.state().published(),
                srtt_us: t.srtt_us().min(u64::from(u32::MAX)) as u32,
                rto_ms: t.rto().as_millis().min(u128::from(u32::MAX)) as u32,
                cwnd: clamp(t.cwnd()),
                ssthresh: clamp(t.ssthresh()),
                in_flight: clamp(t.bytes_in_flight()),
                snd_wnd: clamp(t.snd_wnd()),
                rcv_wnd: clamp(t.rcv_wnd()),
                mss: t.mss().min(usize::from(u16::MAX)) as u16,
                retransmits: t.stats().retransmits,
                owner,
                bytes_out: c.tx.position(),
                bytes_in: c.rx.position(),
                ..ConnRow::default()
            }
        }
        Socket::Listener(l) => unconnected(l.local, ConnState::Listener),
        Socket::Udp(u) => ConnRow {
            bytes_out: u.tx.position(),
            bytes_in: u.rx.position(),
            ..unconnected(u.local, ConnState::Udp)
        },
    }
}

impl Sockets {
    /// Positions of the TIME-WAIT records for `ss` (FIFO entries, IPv4's
    /// then IPv6's; some stale).
    pub(crate) fn time_wait_positions(&self) -> usize {
        self.tw.positions() + self.tw6.positions()
    }

    /// The `corestack ss` row of the record at position `i`, if it holds one.
    pub(crate) fn time_wait_row(&self, i: usize) -> Option<ConnRow> {
        let n4 = self.tw.positions();
        if i < n4 {
            self.tw.at(i).map(|(r, port, rec)| tw_row(r, port, rec))
        } else {
            self.tw6
                .at(i - n4)
                .map(|(r, port, rec)| tw_row(r, port, rec))
        }
    }
}

/// The `corestack ss` row of a TIME-WAIT record.
fn tw_row<F: Family>(remote: SocketAddr, local_port: u16, rec: &TwRecord<F>) -> ConnRow {
    ConnRow {
        local: rec.local.socket(local_port),
        remote,
        state: State::TimeWait.published(),
        owner: rec.owner.0,
        rcv_wnd: rec.tw.rcv_wnd,
        ..Default::default()
    }
}
