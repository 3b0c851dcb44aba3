use super::*;
use crate::gso::tests::{data, pseudo_only, tcp_frame};
use crate::gso::write_segment;
use crate::TxQueue;
use payload::testing::wrapped;

const MSS: usize = 1448;

/// What the peer receives when one end sends `payload` in one frame
/// with a lent payload, read at flush (`gather`) or copied at once.
fn sent_lent(payload: &[u8], gather: bool) -> Vec<Vec<u8>> {
    let (mut a, mut b) = pair(Impairments::none(), Impairments::none(), 1);
    a.set_tso(true);
    a.set_gather(gather);
    assert_eq!(a.capabilities().tx_gather, gather);
    let f = pseudo_only(&tcp_frame(1, 2, 0x10, payload, &[], 5));
    let hlen = 54;
    let lent = wrapped(payload, payload.len() / 2);
    assert!(a
        .tx()
        .transmit_gather(hlen, lent, MSS, |h| { h.copy_from_slice(&f[..hlen]) }));
    a.tx().flush();
    let mut got = vec![];
    b.rx_burst(64, |frame, _| got.push(frame.to_vec()));
    got
}

#[test]
fn lent_and_copied_payloads_reach_the_peer_as_the_same_segments() {
    for len in [5 * MSS + 100, 3 * MSS, 700] {
        let payload = data(len, 3);
        let full = tcp_frame(1, 2, 0x10, &payload, &[], 5);
        let want: Vec<Vec<u8>> = (0..len.div_ceil(MSS))
            .map(|i| {
                let mut o = vec![0; MEM_MAX_FRAME];
                let n = write_segment(&full, MSS, i, &mut o);
                o.truncate(n);
                o
            })
            .collect();
        assert_eq!(sent_lent(&payload, true), want, "{len} bytes, lent");
        assert_eq!(sent_lent(&payload, false), want, "{len} bytes, copied");
    }
}

mod multi_queue;
