//! The contract between a Tcb and the engine: connection states, why a
//! connection ended, the events it reports, the application's rings as TCP
//! sees them, and the segments it emits.

use wire::tcp::TcpRepr;

/// Connection states (RFC 9293 §3.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// No connection (initial, or after the end).
    Closed,
    /// Waiting for a SYN (used by listeners; a Tcb never is in it).
    Listen,
    /// Our SYN sent, waiting for the peer's SYN.
    SynSent,
    /// SYNs exchanged, waiting for the ACK of ours.
    SynReceived,
    /// Open; data flows both ways.
    Established,
    /// We closed; our FIN not yet acknowledged.
    FinWait1,
    /// We closed and our FIN is acknowledged; waiting for the peer's FIN.
    FinWait2,
    /// The peer closed; waiting for our application to close.
    CloseWait,
    /// Both closed at once; waiting for the ACK of our FIN.
    Closing,
    /// The peer closed first, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both FINs acknowledged; waiting 2*MSL for stray segments.
    TimeWait,
}

impl State {
    /// The state as the connection table publishes it (for `corestack ss`).
    pub fn published(self) -> observe::stats_shm::ConnState {
        use observe::stats_shm::ConnState as C;
        match self {
            State::Closed => C::Closed,
            State::Listen => C::Listen,
            State::SynSent => C::SynSent,
            State::SynReceived => C::SynReceived,
            State::Established => C::Established,
            State::FinWait1 => C::FinWait1,
            State::FinWait2 => C::FinWait2,
            State::CloseWait => C::CloseWait,
            State::Closing => C::Closing,
            State::LastAck => C::LastAck,
            State::TimeWait => C::TimeWait,
        }
    }

    /// True once both ISNs are known and acknowledged by us (every state
    /// after SYN-SENT except CLOSED).
    pub fn is_synchronized(self) -> bool {
        !matches!(self, State::Closed | State::Listen | State::SynSent)
    }
}

/// Why a connection ended; the engine maps it to one errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Orderly close (LAST-ACK acked, TIME-WAIT expired, RST while closing).
    Normal,
    /// The peer reset an established connection (ECONNRESET).
    Reset,
    /// RST in answer to our SYN (ECONNREFUSED).
    Refused,
    /// Retransmissions exhausted (ETIMEDOUT).
    TimedOut,
}

/// What happened to the connection during one call, for the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Events {
    /// The handshake completed (now ESTABLISHED or beyond).
    pub connected: bool,
    /// New bytes (or the FIN) are readable in the RecvBuffer.
    pub readable: bool,
    /// Acknowledged bytes were consumed from the SendBuffer (space freed).
    pub writable: bool,
    /// The peer's FIN arrived in order: no more data will come.
    pub peer_fin: bool,
    /// The connection is over; the Tcb is CLOSED and can be freed.
    pub closed: Option<CloseReason>,
}

/// The application's TX byte ring as TCP sees it: offset 0 is the first
/// unacknowledged data byte (snd_una once the SYN is acknowledged).
pub trait SendBuffer {
    /// Bytes written by the application and not yet acknowledged.
    fn len(&self) -> usize;
    /// Copies bytes starting `offset` bytes after the start into `dst`;
    /// returns how many were copied.
    fn read_at(&self, offset: usize, dst: &mut [u8]) -> usize;
    /// Drops the first `n` bytes (they were acknowledged).
    fn consume(&mut self, n: usize);
    /// Bytes `offset..offset + len` where they lie, for a port that sends
    /// them without copying ([`nic::TxQueue::transmit_gather`]); None when
    /// the buffer cannot lend them (the caller copies with `read_at`).
    fn payload(&self, offset: usize, len: usize) -> Option<nic::TxPayload> {
        let _ = (offset, len);
        None
    }
    /// True if nothing is buffered.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The application's RX byte ring as TCP sees it: only in-order bytes go here.
pub trait RecvBuffer {
    /// Free space in bytes.
    fn free(&self) -> usize;
    /// Appends up to `data.len()` bytes; returns how many were taken.
    fn write(&mut self, data: &[u8]) -> usize;
}

/// One segment to send. The engine writes the headers from `repr` and copies
/// `repr.payload_len` bytes from the SendBuffer starting at `payload_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Header fields and options; `payload_len` is the payload size in bytes.
    pub repr: TcpRepr,
    /// Offset of the payload in the SendBuffer, bytes (0 when there is none).
    pub payload_offset: usize,
    /// Send with the IP ECN field ECT(0) (RFC 3168 §6.1.1: new data of a
    /// connection that negotiated ECN; never SYNs, pure ACKs or
    /// retransmissions). When false the field is Not-ECT (0).
    pub ect: bool,
    /// 0 for one segment; else the MSS in bytes: the payload is several
    /// MSS-sized segments that the port cuts apart (TSO/GSO), each with
    /// this header and its own sequence number.
    pub gso_size: usize,
}

impl Segment {
    /// A segment of headers only (no payload, Not-ECT, one segment).
    pub(crate) fn bare(repr: TcpRepr) -> Segment {
        Segment {
            repr,
            payload_offset: 0,
            ect: false,
            gso_size: 0,
        }
    }

    /// Segments on the wire: 1, or the payload in `gso_size` pieces.
    pub fn segments(&self) -> usize {
        if self.gso_size == 0 {
            1
        } else {
            self.repr.payload_len.div_ceil(self.gso_size)
        }
    }
}
