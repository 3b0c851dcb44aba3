//! The application's byte rings as TCP sees them: received in-order bytes
//! go into the RX ring's writer ([`RecvBuffer`]); data to send, and to
//! resend until it is acknowledged, is read from the TX ring's reader
//! ([`SendBuffer`]).

use crate::tcp::{RecvBuffer, SendBuffer};
use appif::bytes;

/// The TX ring as TCP sees it: offset 0 is the first unacknowledged byte.
impl SendBuffer for bytes::Reader {
    fn len(&self) -> usize {
        bytes::Reader::len(self)
    }
    fn read_at(&self, offset: usize, dst: &mut [u8]) -> usize {
        self.peek_at(offset, dst)
    }
    fn consume(&mut self, n: usize) {
        bytes::Reader::consume(self, n)
    }
    fn payload(&self, offset: usize, len: usize) -> Option<nic::TxPayload> {
        bytes::Reader::payload(self, offset, len)
    }
}

/// The RX ring as TCP sees it: in-order bytes go here.
impl RecvBuffer for bytes::Writer {
    fn free(&self) -> usize {
        bytes::Writer::free(self)
    }
    fn write(&mut self, data: &[u8]) -> usize {
        bytes::Writer::write(self, data)
    }
}
