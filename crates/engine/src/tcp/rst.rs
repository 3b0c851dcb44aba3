//! Replies to segments for a connection that does not exist (RFC 9293 §3.10.7.1).

use wire::tcp::{TcpFlags, TcpRepr};
use wire::SeqNum;

/// The RST to send in answer to `seg`, which arrived for no connection (a
/// closed port, or a non-SYN to a listening port). RFC 9293 §3.10.7.1:
/// an incoming RST is discarded (`None`); if `seg` has ACK, the reply is
/// `<SEQ=SEG.ACK><CTL=RST>`; otherwise `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`,
/// where SEG.LEN counts payload bytes plus SYN and FIN. Ports are swapped;
/// the caller swaps the addresses.
pub fn reply_rst(seg: &TcpRepr) -> Option<TcpRepr> {
    if seg.flags.rst() {
        return None;
    }
    let base = TcpRepr {
        src_port: seg.dst_port,
        dst_port: seg.src_port,
        ..TcpRepr::default()
    };
    if seg.flags.ack() {
        Some(TcpRepr {
            seq: seg.ack,
            flags: TcpFlags(TcpFlags::RST),
            ..base
        })
    } else {
        let len = seg.payload_len + usize::from(seg.flags.syn()) + usize::from(seg.flags.fin());
        Some(TcpRepr {
            seq: SeqNum(0),
            ack: seg.seq + len,
            flags: TcpFlags(TcpFlags::RST | TcpFlags::ACK),
            ..base
        })
    }
}

/// An RST queued for the next `poll_output`: `<SEQ=seq>[<ACK=ack>]<CTL=RST>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PendingRst {
    pub(super) seq: SeqNum,
    pub(super) ack: Option<SeqNum>,
}
