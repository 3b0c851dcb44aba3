//! The engine's side of `corestack capture` (`observe::capture`): while
//! capture is on, every frame received is offered to the process's capture
//! ring as it is taken from the port, and every frame sent goes through
//! [`Captured`], a TX queue that copies what it hands to the port's.
//! Off, `Engine::poll` checks one flag per iteration and runs the plain path.

use nic::{TxPayload, TxQueue};
use observe::capture::{Capturer, Direction};

/// The port's TX queue, copying each frame into the capture ring.
pub(crate) struct Captured<'a, T: TxQueue> {
    pub inner: &'a mut T,
    pub cap: &'a Capturer,
}

/// `fill`, then a copy of the frame it wrote into `cap` (outgoing).
fn copying<'a, F: FnOnce(&mut [u8]) -> usize + 'a>(
    cap: &'a Capturer,
    fill: F,
) -> impl FnOnce(&mut [u8]) -> usize + 'a {
    move |buf| {
        let n = fill(buf);
        if let Some(frame) = buf.get(..n) {
            cap.frame(Direction::Out, frame, None);
        }
        n
    }
}

impl<T: TxQueue> TxQueue for Captured<'_, T> {
    fn transmit<F: FnOnce(&mut [u8]) -> usize>(&mut self, max_len: usize, fill: F) -> bool {
        self.inner.transmit(max_len, copying(self.cap, fill))
    }

    fn transmit_gso<F: FnOnce(&mut [u8]) -> usize>(
        &mut self,
        max_len: usize,
        gso_size: usize,
        fill: F,
    ) -> bool {
        self.inner
            .transmit_gso(max_len, gso_size, copying(self.cap, fill))
    }

    fn transmit_gather<F: FnOnce(&mut [u8])>(
        &mut self,
        header_len: usize,
        payload: TxPayload,
        gso_size: usize,
        fill: F,
    ) -> bool {
        let cap = self.cap;
        let copy = payload.clone();
        self.inner
            .transmit_gather(header_len, payload, gso_size, |buf: &mut [u8]| {
                fill(buf);
                if let Some(header) = buf.get(..header_len) {
                    cap.frame(Direction::Out, header, Some(&copy));
                }
            })
    }

    fn room(&self) -> usize {
        self.inner.room()
    }

    fn flush(&mut self) {
        self.inner.flush()
    }
}
