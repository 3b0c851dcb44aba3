//! Segmentation offload in software for ports without a per-frame transmit
//! ring: a batch of frames for one `sendmmsg` on an AF_PACKET socket with
//! virtio-net headers (`PACKET_VNET_HDR`), in which consecutive full-sized
//! TCP/IPv4 segments of one connection are merged into one GSO frame of up
//! to [`MAX_GSO_FRAME`] bytes.
//!
//! The kernel (software GSO, or the NIC's TSO) cuts a merged frame back into
//! exactly the segments the engine built: `tcp_gso_segment` gives segment
//! *i* the sequence number `seq + i·gso_size`, IP identification `id + i`,
//! CWR only on the first and PSH/FIN only on the last, and fresh checksums.
//! So a segment joins the open frame only if it is what that cutting would
//! produce next: same Ethernet, IP and TCP header except sequence number,
//! identification and length; the expected sequence number and
//! identification; a payload no larger than the first one's; PSH or FIN
//! only on the last. Everything else (ARP, UDP, pure ACKs, SYN, RST,
//! retransmissions out of order, CWR) is sent as it is.
//!
//! A frame queued with [`GsoBatch::push_gather`] keeps its payload where it
//! lies ([`TxPayload`]): only its headers are in the batch, and the payload
//! follows them as a second iovec. Such frames are never merged.
//!
//! Nothing here allocates after [`GsoBatch::new`].

use crate::payload::TxPayload;

/// Bytes of `struct virtio_net_hdr` in front of every frame.
pub const VNET_HDR_LEN: usize = 10;
/// Largest merged Ethernet frame, bytes (IPv4 total length stays below 64 KiB).
pub const MAX_GSO_FRAME: usize = 65_000;
/// Largest TCP payload of one frame pushed with [`GsoBatch::push_gso`]:
/// room for the largest headers (14 + 20 + 60 bytes) in [`MAX_GSO_FRAME`].
pub const MAX_GSO_PAYLOAD: usize = MAX_GSO_FRAME - 94;
/// Most segments in one merged frame.
pub const MAX_GSO_SEGS: u32 = 64;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the device fills the checksum at
/// `csum_start + csum_offset`.
const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
const GSO_TCPV4: u8 = 1;

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
/// Offset of the TCP header in a frame without IP options.
const TCP_AT: usize = ETH_LEN + IP_LEN;
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const URG: u8 = 0x20;
const CWR: u8 = 0x80;
/// Smallest payload that opens a merged frame: the next segment's headers
/// are written over the tail of the previous payload, so it must be longer
/// than a header.
const MIN_GSO_SIZE: usize = 256;

/// The merged frame still taking segments (always the last in the batch).
#[derive(Debug, Clone, Copy)]
struct Open {
    /// Offset of the frame (after its virtio-net header) in the buffer.
    start: usize,
    /// Offset just past the frame's last byte.
    end: usize,
    /// Ethernet + IP + TCP header bytes.
    hlen: usize,
    /// Payload bytes of each segment but the last (`gso_size`).
    seg: usize,
    segs: u32,
    next_seq: u32,
    next_ident: u16,
}

/// One queued frame.
#[derive(Debug)]
struct Frame {
    /// Offset of the virtio-net header in the buffer.
    at: usize,
    /// Bytes in the buffer, the virtio-net header included.
    len: usize,
    /// The rest of the frame, sent from where it lies.
    payload: Option<TxPayload>,
}

/// Frames queued for one `sendmmsg`, each preceded by its virtio-net header.
#[derive(Debug)]
pub struct GsoBatch {
    buf: Box<[u8]>,
    frames: Vec<Frame>,
    /// Offset past the last frame.
    tail: usize,
    open: Option<Open>,
    tcp_checksum: bool,
    merged: u64,
}

impl GsoBatch {
    /// A batch of at most `max_frames` frames in `bytes` bytes of buffer.
    /// With `tcp_checksum`, every TCP/IPv4 frame carries only the
    /// pseudo-header sum in its checksum field (see
    /// [`crate::Capabilities::tx_tcp_checksum`]) and its virtio-net header
    /// asks the kernel to complete it; without, frames come with full
    /// checksums and only merged ones get a checksum request.
    pub fn new(bytes: usize, max_frames: usize, tcp_checksum: bool) -> GsoBatch {
        GsoBatch {
            buf: vec![0; bytes].into_boxed_slice(),
            frames: Vec::with_capacity(max_frames),
            tail: 0,
            open: None,
            tcp_checksum,
            merged: 0,
        }
    }

    /// Queues one frame: `fill` writes it at the start of a buffer of
    /// `max_len` bytes and returns its length (0 cancels). Returns false,
    /// without calling `fill`, when the batch is full. Merges the frame into
    /// the open GSO frame when it continues it (see the module docs).
    pub fn push<F: FnOnce(&mut [u8]) -> usize>(&mut self, max_len: usize, fill: F) -> bool {
        if let Some(o) = self.open {
            let off = o.end - o.hlen;
            // Room for the frame written over the tail and, if it does not
            // continue, for moving it behind the open frame.
            if o.end + VNET_HDR_LEN + max_len <= self.buf.len() {
                let mut stash = [0u8; 128];
                stash[..o.hlen].copy_from_slice(&self.buf[off..o.end]);
                let n = fill(&mut self.buf[off..off + max_len]).min(max_len);
                if n == 0 {
                    self.buf[off..o.end].copy_from_slice(&stash[..o.hlen]);
                    return true;
                }
                if let Some(last) = self.continues(&o, off, n) {
                    // The new header goes; its payload already sits right
                    // behind the open frame's.
                    let flags = self.buf[off + TCP_AT + 13];
                    self.buf[off..o.end].copy_from_slice(&stash[..o.hlen]);
                    self.extend(o, off + n, flags, last);
                    return true;
                }
                // Not a continuation: move it behind the open frame, which
                // gets its tail back and is closed.
                let at = o.end + VNET_HDR_LEN;
                self.buf.copy_within(off..off + n, at);
                self.buf[off..o.end].copy_from_slice(&stash[..o.hlen]);
                self.close();
                if self.frames.len() == self.frames.capacity() {
                    return false; // cannot happen: close() left room
                }
                self.queue(at, n);
                return true;
            }
            self.close();
        }
        let at = self.tail + VNET_HDR_LEN;
        if self.frames.len() == self.frames.capacity() || at + max_len > self.buf.len() {
            return false;
        }
        let n = fill(&mut self.buf[at..at + max_len]).min(max_len);
        if n > 0 {
            self.queue(at, n);
        }
        true
    }

    /// Queues one TCP/IPv4 frame the engine built larger than the MTU, to be
    /// cut into segments of `gso_size` payload bytes (see
    /// [`crate::TxQueue::transmit_gso`]); `fill` as for [`GsoBatch::push`].
    /// Frames that are not TCP/IPv4, or carry at most `gso_size` bytes, go
    /// as they are. A frame of whole segments without PSH or FIN stays open
    /// for the segments that follow it.
    pub fn push_gso<F: FnOnce(&mut [u8]) -> usize>(
        &mut self,
        max_len: usize,
        gso_size: usize,
        fill: F,
    ) -> bool {
        self.close();
        let at = self.tail + VNET_HDR_LEN;
        let max_len = max_len.min(MAX_GSO_FRAME);
        if self.frames.len() == self.frames.capacity() || at + max_len > self.buf.len() {
            return false;
        }
        let n = fill(&mut self.buf[at..at + max_len]).min(max_len);
        if n == 0 {
            return true;
        }
        self.queue(at, n);
        let f = &self.buf[at..at + n];
        let Some((hlen, ip_end)) = tcp_extent(f) else {
            return true;
        };
        if gso_size == 0 || ip_end != n || n <= hlen + gso_size {
            return true;
        }
        let payload = n - hlen;
        let segs = payload.div_ceil(gso_size) as u32;
        let flags = f[TCP_AT + 13];
        let o = Open {
            start: at,
            end: at + n,
            hlen,
            seg: gso_size,
            segs,
            next_seq: be32(f, TCP_AT + 4).wrapping_add(payload as u32),
            next_ident: be16(f, 18).wrapping_add(segs as u16),
        };
        let whole = payload.is_multiple_of(gso_size)
            && flags & (FIN | SYN | RST | PSH | URG | CWR) == 0
            && gso_size >= MIN_GSO_SIZE
            && self.frames.len() < self.frames.capacity();
        self.merged += u64::from(segs - 1);
        self.open = Some(o);
        if !whole {
            self.close();
        }
        true
    }

    /// Queues one TCP/IPv4 frame without copying its payload: `fill` writes
    /// its `header_len` bytes of Ethernet, IPv4 (no options) and TCP
    /// headers, with the IP total length and the TCP pseudo-header sum of
    /// the whole frame (`header_len + payload.len()` bytes), and `payload`
    /// follows them on the wire. With `gso_size` > 0 and a longer payload,
    /// the kernel cuts the frame into segments of `gso_size` payload bytes
    /// (see [`crate::TxQueue::transmit_gso`]). The batch keeps `payload`
    /// until [`GsoBatch::clear`]; the bytes must not change before the batch
    /// is sent. Returns false, without calling `fill`, when the batch is
    /// full, and false after it when the headers are not TCP/IPv4 of that
    /// length (nothing is queued).
    pub fn push_gather<F: FnOnce(&mut [u8])>(
        &mut self,
        header_len: usize,
        payload: TxPayload,
        gso_size: usize,
        fill: F,
    ) -> bool {
        self.close();
        let at = self.tail + VNET_HDR_LEN;
        if self.frames.len() == self.frames.capacity() || at + header_len > self.buf.len() {
            return false;
        }
        fill(&mut self.buf[at..at + header_len]);
        let h = &self.buf[at..at + header_len];
        let total = header_len + payload.len();
        let ok = tcp_ipv4(h) == Some(TCP_AT)
            && TCP_AT + usize::from(h[TCP_AT + 12] >> 4) * 4 == header_len
            && ETH_LEN + usize::from(be16(h, 16)) == total
            && total <= MAX_GSO_FRAME;
        if !ok {
            return false;
        }
        let segs = payload.segments(gso_size);
        let v = &mut self.buf[at - VNET_HDR_LEN..at];
        v.fill(0);
        v[0] = F_NEEDS_CSUM;
        if segs > 1 {
            v[1] = GSO_TCPV4;
            v[2..4].copy_from_slice(&(header_len as u16).to_ne_bytes());
            v[4..6].copy_from_slice(&(gso_size as u16).to_ne_bytes());
            self.merged += segs as u64 - 1;
        }
        v[6..8].copy_from_slice(&(TCP_AT as u16).to_ne_bytes());
        v[8..10].copy_from_slice(&16u16.to_ne_bytes());
        self.frames.push(Frame {
            at: at - VNET_HDR_LEN,
            len: header_len + VNET_HDR_LEN,
            payload: Some(payload),
        });
        self.tail = at + header_len;
        true
    }

    /// Records the frame at `at..at + n` as sent as it is, and opens it for
    /// merging if it can start a GSO frame.
    fn queue(&mut self, at: usize, n: usize) {
        let csum_start = if self.tcp_checksum {
            tcp_ipv4(&self.buf[at..at + n])
        } else {
            None
        };
        let h = &mut self.buf[at - VNET_HDR_LEN..at];
        h.fill(0);
        if let Some(start) = csum_start {
            h[0] = F_NEEDS_CSUM;
            h[6..8].copy_from_slice(&(start as u16).to_ne_bytes());
            h[8..10].copy_from_slice(&16u16.to_ne_bytes());
        }
        self.frames.push(Frame {
            at: at - VNET_HDR_LEN,
            len: n + VNET_HDR_LEN,
            payload: None,
        });
        self.tail = at + n;
        self.open = opens(&self.buf[at..at + n]).map(|(hlen, seq, ident)| Open {
            start: at,
            end: at + n,
            hlen,
            seg: n - hlen,
            segs: 1,
            next_seq: seq.wrapping_add((n - hlen) as u32),
            next_ident: ident.wrapping_add(1),
        });
        if self.frames.len() == self.frames.capacity() {
            self.open = None;
        }
    }

    /// Whether the frame at `off..off + n` (its header written over the
    /// open frame's tail) is the open frame's next segment; Some(true) if
    /// it must also be its last.
    fn continues(&self, o: &Open, off: usize, n: usize) -> Option<bool> {
        let first = &self.buf[o.start..o.start + o.hlen];
        let new = &self.buf[off..off + n];
        if n <= o.hlen || off + n - o.start > MAX_GSO_FRAME || o.segs >= MAX_GSO_SEGS {
            return None;
        }
        let payload = n - o.hlen;
        let t = TCP_AT;
        let same = |r: std::ops::Range<usize>| new[r.clone()] == first[r];
        let ok = same(0..ETH_LEN + 2) // Ethernet, version/IHL, TOS
            && usize::from(be16(new, 16)) == n - ETH_LEN
            && be16(new, 18) == o.next_ident
            && same(20..24) // flags/fragment, TTL, protocol
            && same(26..t + 4) // addresses, ports
            && be32(new, t + 4) == o.next_seq
            && same(t + 8..t + 13) // ack, data offset
            && new[t + 13] & !(PSH | FIN) == first[t + 13]
            && same(t + 14..t + 16) // window
            && same(t + 18..o.hlen) // urgent pointer, options
            && payload <= o.seg;
        ok.then_some(payload < o.seg || new[t + 13] & (PSH | FIN) != 0)
    }

    /// Appends the segment whose payload ends at `end` (TCP flags `flags`)
    /// to the open frame.
    fn extend(&mut self, mut o: Open, end: usize, flags: u8, last: bool) {
        let payload = end - o.end;
        // PSH/FIN of the last segment go in the merged header: the kernel
        // clears them on every segment but the last.
        self.buf[o.start + TCP_AT + 13] |= flags & (PSH | FIN);
        o.end = end;
        o.segs += 1;
        o.next_seq = o.next_seq.wrapping_add(payload as u32);
        o.next_ident = o.next_ident.wrapping_add(1);
        self.tail = o.end;
        if let Some(f) = self.frames.last_mut() {
            f.len = o.end - f.at;
        }
        self.merged += 1;
        self.open = Some(o);
        if last {
            self.close();
        }
    }

    /// Closes the open frame: for a merged one, its virtio-net header
    /// (GSO TCPv4, checksum offset), IP total length and checksum, and the
    /// TCP pseudo-header checksum that `CHECKSUM_PARTIAL` expects.
    fn close(&mut self) {
        let Some(o) = self.open.take() else {
            return;
        };
        if o.segs < 2 {
            return;
        }
        let f = &mut self.buf[o.start..o.end];
        let ip_len = f.len() - ETH_LEN;
        f[16..18].copy_from_slice(&(ip_len as u16).to_be_bytes());
        f[24..26].fill(0);
        let ip_sum = !fold(sum(&f[ETH_LEN..TCP_AT], 0));
        f[24..26].copy_from_slice(&ip_sum.to_be_bytes());
        let tcp_len = f.len() - TCP_AT;
        let pseudo = sum(&f[26..34], 6 + tcp_len as u32);
        f[TCP_AT + 16..TCP_AT + 18].copy_from_slice(&fold(pseudo).to_be_bytes());
        let h = &mut self.buf[o.start - VNET_HDR_LEN..o.start];
        h[0] = F_NEEDS_CSUM;
        h[1] = GSO_TCPV4;
        h[2..4].copy_from_slice(&(o.hlen as u16).to_ne_bytes());
        h[4..6].copy_from_slice(&(o.seg as u16).to_ne_bytes());
        h[6..8].copy_from_slice(&(TCP_AT as u16).to_ne_bytes());
        h[8..10].copy_from_slice(&16u16.to_ne_bytes());
    }

    /// Closes the open frame; call before sending the batch.
    pub fn finish(&mut self) {
        self.close();
    }

    /// The queued frames in order: the bytes in the batch, starting with the
    /// virtio-net header, and the payload that follows them if the frame
    /// was queued with [`GsoBatch::push_gather`].
    pub fn frames(&self) -> impl Iterator<Item = (&[u8], Option<&TxPayload>)> + '_ {
        self.frames
            .iter()
            .map(|f| (&self.buf[f.at..f.at + f.len], f.payload.as_ref()))
    }

    /// True when a frame of up to `max_len` bytes surely fits (a frame
    /// slot, and room for it twice: written over the open frame's tail,
    /// then moved behind it).
    pub fn fits(&self, max_len: usize) -> bool {
        self.frames.len() + 1 < self.frames.capacity()
            && self.tail + 2 * (VNET_HDR_LEN + max_len) <= self.buf.len()
    }

    /// Number of queued frames (merged ones count once).
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Segments sent inside another segment's frame so far (merged here or
    /// handed over in a GSO frame).
    pub fn merged(&self) -> u64 {
        self.merged
    }

    /// Empties the batch (after it was sent), releasing the payloads.
    pub fn clear(&mut self) {
        self.frames.clear();
        self.tail = 0;
        self.open = None;
    }
}

/// Segmentation in software, as `tcp_gso_segment` does it: how many
/// segments of `gso_size` payload bytes the TCP/IPv4 `frame` makes (1 if it
/// is not TCP/IPv4 without IP options, or carries at most `gso_size`).
pub fn segment_count(frame: &[u8], gso_size: usize) -> usize {
    match tcp_extent(frame) {
        Some((hlen, ip_end)) if gso_size > 0 && ip_end > hlen + gso_size => {
            (ip_end - hlen).div_ceil(gso_size)
        }
        _ => 1,
    }
}

/// Writes segment `i` of [`segment_count`] of `frame` into `out` and
/// returns its length (0 if `out` is too small or `i` out of range): the
/// headers with sequence number `seq + i·gso_size`, IP identification
/// `id + i`, IP total length, CWR only on the first, PSH and FIN only on
/// the last, and full IP and TCP checksums (whatever the checksum field of
/// `frame` held). A frame that makes one segment is copied with its TCP
/// checksum completed if it is TCP/IPv4.
pub fn write_segment(frame: &[u8], gso_size: usize, i: usize, out: &mut [u8]) -> usize {
    let count = segment_count(frame, gso_size);
    let Some((hlen, ip_end)) = tcp_extent(frame) else {
        if i > 0 || out.len() < frame.len() {
            return 0;
        }
        out[..frame.len()].copy_from_slice(frame);
        return frame.len();
    };
    if count == 1 {
        // Padding (a minimum-size frame) stays; the checksum covers the
        // IP datagram only.
        if i > 0 || out.len() < frame.len() {
            return 0;
        }
        out[..frame.len()].copy_from_slice(frame);
        fill_checksums(&mut out[..ip_end]);
        return frame.len();
    }
    let payload = &frame[hlen..ip_end];
    let from = i * gso_size;
    if i >= count || from > payload.len() {
        return 0;
    }
    let p = &payload[from..payload.len().min(from + gso_size)];
    let n = hlen + p.len();
    if out.len() < n {
        return 0;
    }
    let s = &mut out[..n];
    s[..hlen].copy_from_slice(&frame[..hlen]);
    s[hlen..].copy_from_slice(p);
    s[16..18].copy_from_slice(&((n - ETH_LEN) as u16).to_be_bytes());
    let ident = be16(frame, 18).wrapping_add(i as u16);
    s[18..20].copy_from_slice(&ident.to_be_bytes());
    let seq = be32(frame, TCP_AT + 4).wrapping_add(from as u32);
    s[TCP_AT + 4..TCP_AT + 8].copy_from_slice(&seq.to_be_bytes());
    if i > 0 {
        s[TCP_AT + 13] &= !CWR;
    }
    if i + 1 < count {
        s[TCP_AT + 13] &= !(PSH | FIN);
    }
    fill_checksums(s);
    n
}

/// Full IP header and TCP checksums of `s`, exactly one TCP/IPv4 datagram
/// (without IP options) in an Ethernet frame.
fn fill_checksums(s: &mut [u8]) {
    s[24..26].fill(0);
    let ip_sum = !fold(sum(&s[ETH_LEN..TCP_AT], 0));
    s[24..26].copy_from_slice(&ip_sum.to_be_bytes());
    s[TCP_AT + 16..TCP_AT + 18].fill(0);
    let pseudo = sum(&s[26..34], 6 + (s.len() - TCP_AT) as u32);
    let tcp_sum = !fold(sum(&s[TCP_AT..], pseudo));
    s[TCP_AT + 16..TCP_AT + 18].copy_from_slice(&tcp_sum.to_be_bytes());
}

/// For a whole TCP segment over IPv4 without IP options: its Ethernet +
/// IP + TCP header length and the end of its IP datagram (the frame may be
/// longer: padding).
fn tcp_extent(f: &[u8]) -> Option<(usize, usize)> {
    if tcp_ipv4(f) != Some(TCP_AT) {
        return None;
    }
    let ip_end = ETH_LEN + usize::from(be16(f, 16));
    let hlen = TCP_AT + usize::from(f[TCP_AT + 12] >> 4) * 4;
    (hlen >= TCP_AT + 20 && hlen <= ip_end && ip_end <= f.len()).then_some((hlen, ip_end))
}

/// If `f` is a whole TCP segment over IPv4: the offset of its TCP header.
fn tcp_ipv4(f: &[u8]) -> Option<usize> {
    if f.len() < TCP_AT + 20 || f[12..14] != [0x08, 0x00] || f[14] >> 4 != 4 || f[23] != 6 {
        return None;
    }
    let start = ETH_LEN + usize::from(f[14] & 0x0f) * 4;
    let whole = be16(f, 20) & 0x3fff == 0;
    (whole && start >= TCP_AT && start + 20 <= f.len()).then_some(start)
}

/// If `f` can start a GSO frame: (header bytes, sequence number, IP
/// identification). It must be TCP over IPv4 without options or
/// fragmentation, carry at least [`MIN_GSO_SIZE`] payload bytes, and have
/// only ACK (and ECE) among its flags.
fn opens(f: &[u8]) -> Option<(usize, u32, u16)> {
    let (hlen, ip_end) = tcp_extent(f)?;
    let flags = f[TCP_AT + 13];
    let whole = ip_end == f.len() && flags & (FIN | SYN | RST | PSH | URG | CWR) == 0;
    (whole && f.len() >= hlen + MIN_GSO_SIZE).then(|| (hlen, be32(f, TCP_AT + 4), be16(f, 18)))
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// One's-complement sum of 16-bit big-endian words (RFC 1071), unfolded.
fn sum(data: &[u8], initial: u32) -> u32 {
    let mut s = u64::from(initial);
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        s += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        s += u64::from(*b) << 8;
    }
    while s >> 32 != 0 {
        s = (s & 0xffff_ffff) + (s >> 32);
    }
    s as u32
}

fn fold(mut s: u32) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    const MSS: usize = 1448;

    /// An Ethernet/IPv4/TCP frame with full checksums, as the engine builds
    /// it: `opts` are the TCP option bytes (a multiple of 4).
    pub(crate) fn tcp_frame(
        seq: u32,
        ident: u16,
        flags: u8,
        payload: &[u8],
        opts: &[u8],
        port: u16,
    ) -> Vec<u8> {
        let hlen = TCP_AT + 20 + opts.len();
        let mut f = vec![0u8; hlen + payload.len()];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[8, 0]);
        f[14] = 0x45;
        let ip_len = (f.len() - ETH_LEN) as u16;
        f[16..18].copy_from_slice(&ip_len.to_be_bytes());
        f[18..20].copy_from_slice(&ident.to_be_bytes());
        f[20] = 0x40; // DF
        f[22] = 64;
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 1, 1, 2]);
        f[30..34].copy_from_slice(&[10, 1, 1, 1]);
        let t = TCP_AT;
        f[t..t + 2].copy_from_slice(&port.to_be_bytes());
        f[t + 2..t + 4].copy_from_slice(&80u16.to_be_bytes());
        f[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
        f[t + 8..t + 12].copy_from_slice(&777u32.to_be_bytes());
        f[t + 12] = (((20 + opts.len()) / 4) as u8) << 4;
        f[t + 13] = flags;
        f[t + 14..t + 16].copy_from_slice(&512u16.to_be_bytes());
        f[t + 20..hlen].copy_from_slice(opts);
        f[hlen..].copy_from_slice(payload);
        checksums(&mut f);
        f
    }

    fn checksums(f: &mut [u8]) {
        f[24..26].fill(0);
        let ip = !fold(sum(&f[ETH_LEN..TCP_AT], 0));
        f[24..26].copy_from_slice(&ip.to_be_bytes());
        f[TCP_AT + 16..TCP_AT + 18].fill(0);
        let tcp_len = f.len() - TCP_AT;
        let c = !fold(sum(&f[TCP_AT..], sum(&f[26..34], 6 + tcp_len as u32)));
        f[TCP_AT + 16..TCP_AT + 18].copy_from_slice(&c.to_be_bytes());
    }

    /// What the kernel's GSO makes of a frame from the batch: the frame
    /// itself without a GSO header; else its segments (tcp_gso_segment).
    fn segment(v: &[u8]) -> Vec<Vec<u8>> {
        let (h, f) = v.split_at(VNET_HDR_LEN);
        if h[1] == 0 {
            if h[0] == F_NEEDS_CSUM {
                // The kernel completes the checksum from csum_start on.
                let start = usize::from(u16::from_ne_bytes([h[6], h[7]]));
                let at = start + usize::from(u16::from_ne_bytes([h[8], h[9]]));
                assert_eq!((start, at), (TCP_AT, TCP_AT + 16));
                let pseudo = fold(sum(&f[26..34], 6 + (f.len() - TCP_AT) as u32));
                assert_eq!(be16(f, at), pseudo, "not the pseudo-header sum");
                let mut s = f.to_vec();
                let c = !fold(sum(&s[start..], 0));
                s[at..at + 2].copy_from_slice(&c.to_be_bytes());
                return vec![s];
            }
            assert_eq!(h, &[0; VNET_HDR_LEN], "plain frame with a GSO header");
            return vec![f.to_vec()];
        }
        assert_eq!((h[0], h[1]), (F_NEEDS_CSUM, GSO_TCPV4));
        let hlen = usize::from(u16::from_ne_bytes([h[2], h[3]]));
        let seg = usize::from(u16::from_ne_bytes([h[4], h[5]]));
        assert_eq!(u16::from_ne_bytes([h[6], h[7]]), TCP_AT as u16);
        assert_eq!(u16::from_ne_bytes([h[8], h[9]]), 16);
        // The merged frame itself is consistent: IP length and checksum,
        // and the pseudo-header sum CHECKSUM_PARTIAL expects.
        assert_eq!(usize::from(be16(f, 16)), f.len() - ETH_LEN);
        assert_eq!(fold(sum(&f[ETH_LEN..TCP_AT], 0)), 0xffff);
        let pseudo = fold(sum(&f[26..34], 6 + (f.len() - TCP_AT) as u32));
        assert_eq!(be16(f, TCP_AT + 16), pseudo);
        let payload = &f[hlen..];
        let count = payload.len().div_ceil(seg);
        assert!(count >= 2);
        let seq = be32(f, TCP_AT + 4);
        let ident = be16(f, 18);
        (0..count)
            .map(|i| {
                let p = &payload[i * seg..((i + 1) * seg).min(payload.len())];
                let mut s = f[..hlen].to_vec();
                s.extend_from_slice(p);
                let ip_len = (s.len() - ETH_LEN) as u16;
                s[16..18].copy_from_slice(&ip_len.to_be_bytes());
                s[18..20].copy_from_slice(&ident.wrapping_add(i as u16).to_be_bytes());
                s[TCP_AT + 4..TCP_AT + 8]
                    .copy_from_slice(&seq.wrapping_add((i * seg) as u32).to_be_bytes());
                if i > 0 {
                    s[TCP_AT + 13] &= !CWR;
                }
                if i + 1 < count {
                    s[TCP_AT + 13] &= !(PSH | FIN);
                }
                checksums(&mut s);
                s
            })
            .collect()
    }

    /// `f` with only the pseudo-header sum in a TCP checksum field.
    pub(crate) fn pseudo_only(f: &[u8]) -> Vec<u8> {
        let mut f = f.to_vec();
        if f[23] == 6 {
            let pseudo = fold(sum(&f[26..34], 6 + (f.len() - TCP_AT) as u32));
            f[TCP_AT + 16..TCP_AT + 18].copy_from_slice(&pseudo.to_be_bytes());
        }
        f
    }

    fn push_all(b: &mut GsoBatch, frames: &[Vec<u8>]) -> usize {
        let mut queued = 0;
        for f in frames {
            if !b.push(f.len(), |buf| {
                buf[..f.len()].copy_from_slice(f);
                f.len()
            }) {
                break;
            }
            queued += 1;
        }
        b.finish();
        queued
    }

    fn on_wire(b: &GsoBatch) -> Vec<Vec<u8>> {
        b.frames()
            .flat_map(|(f, payload)| {
                let mut v = f.to_vec();
                if let Some(p) = payload {
                    let at = v.len();
                    v.resize(at + p.len(), 0);
                    assert_eq!(p.copy_to(&mut v[at..]), p.len());
                }
                segment(&v)
            })
            .collect()
    }

    pub(crate) fn data(n: usize, salt: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
            .collect()
    }

    const TS: [u8; 12] = [1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7];

    #[test]
    fn contiguous_segments_merge_into_one_frame_that_segments_back() {
        let frames: Vec<Vec<u8>> = (0..10u32)
            .map(|i| {
                let last = i == 9;
                let flags = if last { 0x10 | PSH } else { 0x10 };
                let len = if last { 700 } else { MSS };
                tcp_frame(
                    1000 + i * MSS as u32,
                    5 + i as u16,
                    flags,
                    &data(len, i as u8),
                    &TS,
                    4000,
                )
            })
            .collect();
        let mut b = GsoBatch::new(1 << 20, 64, false);
        assert_eq!(push_all(&mut b, &frames), 10);
        assert_eq!(b.len(), 1, "one merged frame");
        assert_eq!(b.merged(), 9);
        let v = b.frames().next().unwrap().0;
        assert_eq!(u16::from_ne_bytes([v[4], v[5]]), MSS as u16, "gso_size");
        assert_eq!(v[VNET_HDR_LEN + TCP_AT + 13], 0x10 | PSH);
        assert_eq!(on_wire(&b), frames);
    }

    #[test]
    fn what_does_not_continue_goes_as_it_is() {
        let seg = |seq: u32, ident: u16, flags: u8, len: usize, port: u16| {
            tcp_frame(seq, ident, flags, &data(len, seq as u8), &TS, port)
        };
        let m = MSS as u32;
        let frames = vec![
            seg(0, 1, 0x10, MSS, 1),
            seg(m, 2, 0x10, MSS, 1),
            seg(5 * m, 3, 0x10, MSS, 1), // a gap: retransmission order
            seg(6 * m, 4, 0x10, MSS, 2), // another connection
            seg(7 * m, 5, 0x10, 0, 2),   // pure ACK
            seg(8 * m, 6, 0x10 | CWR, MSS, 1), // CWR never opens
            seg(9 * m, 7, 0x10, MSS, 1),
            seg(10 * m, 9, 0x10, MSS, 1),      // identification skipped
            seg(11 * m, 10, 0x10, MSS + 1, 1), // larger than gso_size
            seg(13 * m, 11, 0x10, 100, 1),     // too short to open
            seg(20 * m, 12, 0x10 | FIN, MSS, 1),
        ];
        let mut b = GsoBatch::new(1 << 20, 64, false);
        assert_eq!(push_all(&mut b, &frames), frames.len());
        assert_eq!(b.merged(), 1, "only the first two merge");
        assert_eq!(on_wire(&b), frames);
    }

    #[test]
    fn changed_options_window_or_ack_end_the_frame() {
        let m = MSS as u32;
        let mut ts2 = TS;
        ts2[7] = 10;
        let a = tcp_frame(0, 1, 0x10, &data(MSS, 1), &TS, 1);
        let b2 = tcp_frame(m, 2, 0x10, &data(MSS, 2), &ts2, 1);
        let mut c = tcp_frame(2 * m, 3, 0x10, &data(MSS, 3), &ts2, 1);
        c[TCP_AT + 14] = 9; // window
        checksums(&mut c);
        let mut d = tcp_frame(3 * m, 4, 0x10, &data(MSS, 4), &ts2, 1);
        d[TCP_AT + 8] = 9; // ack
        checksums(&mut d);
        let frames = vec![a, b2, c, d];
        let mut b = GsoBatch::new(1 << 20, 64, false);
        push_all(&mut b, &frames);
        assert_eq!((b.len(), b.merged()), (4, 0));
        assert_eq!(on_wire(&b), frames);
    }

    #[test]
    fn merged_frames_stay_within_the_size_and_segment_limits() {
        let frames: Vec<Vec<u8>> = (0..200u32)
            .map(|i| tcp_frame(i * 536, i as u16, 0x10, &data(536, i as u8), &[], 7))
            .collect();
        let mut b = GsoBatch::new(1 << 20, 64, false);
        assert_eq!(push_all(&mut b, &frames), 200);
        assert!(b
            .frames()
            .all(|(f, _)| f.len() - VNET_HDR_LEN <= MAX_GSO_FRAME));
        let segs: Vec<usize> = b.frames().map(|(f, _)| segment(f).len()).collect();
        assert!(segs.iter().all(|&s| s as u32 <= MAX_GSO_SEGS), "{segs:?}");
        assert_eq!(segs.iter().sum::<usize>(), 200);
        assert_eq!(on_wire(&b), frames);
    }

    #[test]
    fn a_full_batch_refuses_without_calling_fill_and_keeps_what_it_has() {
        let frames: Vec<Vec<u8>> = (0..8u32)
            .map(|i| tcp_frame(i * 9999, i as u16, 0x10, &data(MSS, i as u8), &TS, 1))
            .collect();
        let mut b = GsoBatch::new(1 << 20, 3, false);
        assert_eq!(push_all(&mut b, &frames), 3);
        assert!(!b.push(100, |_| panic!("fill called on a full batch")));
        assert_eq!(on_wire(&b), frames[..3].to_vec());
        // A buffer too small for one more frame refuses too.
        let mut small = GsoBatch::new(MSS + 200, 64, false);
        assert_eq!(push_all(&mut small, &frames), 1);
        small.clear();
        assert!(small.is_empty());
        assert_eq!(push_all(&mut small, &frames[1..2]), 1);
        assert_eq!(on_wire(&small), frames[1..2].to_vec());
    }

    #[test]
    fn a_cancelled_frame_leaves_the_open_frame_intact() {
        let m = MSS as u32;
        let a = tcp_frame(0, 1, 0x10, &data(MSS, 1), &TS, 1);
        let c = tcp_frame(m, 2, 0x10, &data(MSS, 2), &TS, 1);
        let mut b = GsoBatch::new(1 << 20, 64, false);
        assert!(b.push(a.len(), |buf| {
            buf[..a.len()].copy_from_slice(&a);
            a.len()
        }));
        assert!(b.push(2000, |buf| {
            buf[..100].fill(0xee);
            0
        }));
        push_all(&mut b, std::slice::from_ref(&c));
        assert_eq!(b.merged(), 1);
        assert_eq!(on_wire(&b), vec![a, c]);
    }

    #[test]
    fn a_gso_frame_from_the_engine_goes_out_as_its_segments_and_takes_the_next() {
        let m = MSS as u32;
        let payload = data(10 * MSS, 9);
        let big = pseudo_only(&tcp_frame(1000, 40, 0x10, &payload, &TS, 5));
        let wire_segs: Vec<Vec<u8>> = (0..10u32)
            .map(|i| {
                let p = &payload[i as usize * MSS..(i as usize + 1) * MSS];
                tcp_frame(1000 + i * m, 40 + i as u16, 0x10, p, &TS, 5)
            })
            .collect();
        let next = tcp_frame(1000 + 10 * m, 50, 0x10 | PSH, &data(300, 1), &TS, 5);
        let mut b = GsoBatch::new(1 << 20, 64, true);
        assert!(b.push_gso(big.len(), MSS, |buf| {
            buf[..big.len()].copy_from_slice(&big);
            big.len()
        }));
        push_all(&mut b, &[pseudo_only(&next)]);
        assert_eq!(b.len(), 1, "the next segment joined the GSO frame");
        let mut expect = wire_segs.clone();
        expect.push(next);
        assert_eq!(on_wire(&b), expect);
        // With PSH, or a short tail, the frame closes at once.
        let tail = &payload[..3 * MSS + 10];
        let short = pseudo_only(&tcp_frame(7, 1, 0x10 | PSH, tail, &TS, 5));
        let mut b = GsoBatch::new(1 << 20, 64, true);
        assert!(b.push_gso(short.len(), MSS, |buf| {
            buf[..short.len()].copy_from_slice(&short);
            short.len()
        }));
        let after = tcp_frame(7 + tail.len() as u32, 5, 0x10, &data(MSS, 2), &TS, 5);
        push_all(&mut b, &[pseudo_only(&after)]);
        assert_eq!(b.len(), 2);
        let wire = on_wire(&b);
        assert_eq!(wire.len(), 5);
        assert_eq!(wire[4], after);
        assert_eq!(be16(&wire[3], 16) as usize, 20 + 32 + 10);
        assert_eq!(wire[3][TCP_AT + 13], 0x10 | PSH);
        assert!(wire[..3].iter().all(|w| w[TCP_AT + 13] == 0x10));
    }

    /// Pushes `frame` (pseudo-header sum in its checksum field) with its
    /// payload lent as a wrapped [`TxPayload`]; returns what push_gather did.
    fn push_lent(b: &mut GsoBatch, frame: &[u8], gso_size: usize) -> bool {
        let hlen = TCP_AT + usize::from(frame[TCP_AT + 12] >> 4) * 4;
        let payload = &frame[hlen..];
        let lent = crate::payload::testing::wrapped(payload, payload.len() / 3);
        b.push_gather(hlen, lent, gso_size, |buf| {
            buf.copy_from_slice(&frame[..hlen])
        })
    }

    #[test]
    fn a_lent_payload_goes_out_as_the_copied_frame_would_and_is_never_merged() {
        let m = MSS as u32;
        let payload = data(10 * MSS, 3);
        let big = pseudo_only(&tcp_frame(1000, 40, 0x10, &payload, &TS, 5));
        let next = tcp_frame(1000 + 10 * m, 50, 0x10, &data(MSS, 1), &TS, 5);
        let mut copied = GsoBatch::new(1 << 20, 64, true);
        assert!(copied.push_gso(big.len(), MSS, |buf| {
            buf[..big.len()].copy_from_slice(&big);
            big.len()
        }));
        copied.finish();
        let mut lent = GsoBatch::new(1 << 20, 64, true);
        assert!(push_lent(&mut lent, &big, MSS));
        push_all(&mut lent, &[pseudo_only(&next)]);
        lent.finish();
        assert_eq!(lent.len(), 2, "nothing joins a frame with a lent payload");
        assert_eq!(lent.merged(), 9);
        let mut expect = on_wire(&copied);
        assert_eq!(expect.len(), 10);
        expect.push(next);
        assert_eq!(on_wire(&lent), expect);
        // Only the headers are in the batch.
        let (bytes, p) = lent.frames().next().unwrap();
        assert_eq!(bytes.len(), VNET_HDR_LEN + TCP_AT + 20 + TS.len());
        assert_eq!(p.map(TxPayload::len), Some(10 * MSS));
        // One segment's worth: a checksum request, no GSO.
        let one = pseudo_only(&tcp_frame(5, 6, 0x10 | PSH, &data(700, 2), &TS, 5));
        let mut b = GsoBatch::new(1 << 20, 64, true);
        assert!(push_lent(&mut b, &one, MSS));
        let (bytes, _) = b.frames().next().unwrap();
        assert_eq!(bytes[..2], [F_NEEDS_CSUM, 0]);
        assert_eq!(
            on_wire(&b),
            vec![tcp_frame(5, 6, 0x10 | PSH, &data(700, 2), &TS, 5)]
        );
    }

    #[test]
    fn lent_headers_that_do_not_match_the_payload_queue_nothing() {
        let f = pseudo_only(&tcp_frame(1, 2, 0x10, &data(3 * MSS, 7), &TS, 5));
        let hlen = TCP_AT + 20 + TS.len();
        let lent = || crate::payload::testing::wrapped(&f[hlen..], 10);
        let mut b = GsoBatch::new(1 << 20, 64, true);
        // IP total length one byte short of headers + payload.
        assert!(!b.push_gather(hlen, lent(), MSS, |buf| {
            buf.copy_from_slice(&f[..hlen]);
            buf[17] -= 1;
        }));
        // A header length that is not the TCP data offset.
        assert!(!b.push_gather(hlen - 4, lent(), MSS, |buf| {
            buf.copy_from_slice(&f[..hlen - 4])
        }));
        // Not IPv4.
        assert!(!b.push_gather(hlen, lent(), MSS, |buf| {
            buf.copy_from_slice(&f[..hlen]);
            buf[12] = 0x86;
        }));
        assert!(b.is_empty());
        // A full batch does not call fill.
        let mut full = GsoBatch::new(1 << 20, 1, true);
        assert!(push_lent(&mut full, &f, MSS));
        assert!(!full.push_gather(hlen, lent(), MSS, |_| panic!("fill called")));
        assert_eq!(full.len(), 1);
    }

    #[test]
    fn the_software_segmenter_matches_the_kernel_model() {
        let payload = data(7 * MSS + 5, 4);
        let f = tcp_frame(99, 7, 0x10 | PSH | CWR, &payload, &TS, 3);
        let mut merged = vec![0u8; VNET_HDR_LEN];
        merged[0] = F_NEEDS_CSUM;
        merged[1] = GSO_TCPV4;
        merged[2..4].copy_from_slice(&((TCP_AT + 32) as u16).to_ne_bytes());
        merged[4..6].copy_from_slice(&(MSS as u16).to_ne_bytes());
        merged[6..8].copy_from_slice(&(TCP_AT as u16).to_ne_bytes());
        merged[8..10].copy_from_slice(&16u16.to_ne_bytes());
        let partial = pseudo_only(&f);
        merged.extend_from_slice(&partial);
        let expect = segment(&merged);
        assert_eq!(segment_count(&f, MSS), 8);
        let mut out = [0u8; 2000];
        let got: Vec<Vec<u8>> = (0..8)
            .map(|i| {
                let n = write_segment(&partial, MSS, i, &mut out);
                out[..n].to_vec()
            })
            .collect();
        assert_eq!(got, expect);
        assert_eq!(write_segment(&partial, MSS, 8, &mut out), 0);
        assert_eq!(write_segment(&partial, MSS, 0, &mut out[..100]), 0);
        // One segment: copied, checksum completed; not TCP: copied as it is.
        let one = tcp_frame(5, 1, 0x10, &data(300, 1), &TS, 3);
        let n = write_segment(&pseudo_only(&one), MSS, 0, &mut out);
        assert_eq!(&out[..n], &one[..]);
        // A padded pure ACK keeps its padding, checksum over the datagram.
        let mut ack = tcp_frame(5, 1, 0x10, &[], &[], 3);
        ack.resize(60, 0);
        let n = write_segment(
            &pseudo_only(&ack[..54])
                .iter()
                .chain(&[0; 6])
                .copied()
                .collect::<Vec<u8>>(),
            MSS,
            0,
            &mut out,
        );
        assert_eq!(&out[..n], &ack[..]);
        let mut udp = one.clone();
        udp[23] = 17;
        assert_eq!(segment_count(&udp, MSS), 1);
        let n = write_segment(&udp, MSS, 0, &mut out);
        assert_eq!(&out[..n], &udp[..]);
    }

    /// A seeded stream of what an engine sends: runs of full segments with
    /// short PSH tails, pure ACKs, retransmissions, timestamp ticks, other
    /// connections, UDP. Whatever the batch makes of it, the wire carries
    /// exactly the original frames in order.
    #[test]
    fn seeded_engine_like_streams_reach_the_wire_unchanged() {
        let mut merged = 0;
        for seed in 0..200u64 {
            let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
            let mut frames = Vec::new();
            let mut seq = [rng.gen::<u32>(), rng.gen::<u32>()];
            let mut ident: u16 = rng.gen();
            let mut ts = TS;
            for _ in 0..rng.gen_range(1..150) {
                let c = rng.gen_range(0..2usize);
                ident = ident.wrapping_add(1);
                let f = match rng.gen_range(0..100) {
                    0..=74 => {
                        let s =
                            tcp_frame(seq[c], ident, 0x10, &data(MSS, ident as u8), &ts, c as u16);
                        seq[c] = seq[c].wrapping_add(MSS as u32);
                        s
                    }
                    75..=82 => {
                        let len = rng.gen_range(1..MSS);
                        let s = tcp_frame(seq[c], ident, 0x18, &data(len, 3), &ts, c as u16);
                        seq[c] = seq[c].wrapping_add(len as u32);
                        s
                    }
                    83..=88 => tcp_frame(seq[c], ident, 0x10, &[], &ts, c as u16),
                    89..=92 => {
                        let back = rng.gen_range(1..20u32) * MSS as u32;
                        tcp_frame(
                            seq[c].wrapping_sub(back),
                            ident,
                            0x10,
                            &data(MSS, 4),
                            &ts,
                            c as u16,
                        )
                    }
                    93..=96 => {
                        ts[11] = ts[11].wrapping_add(1);
                        continue;
                    }
                    _ => {
                        let mut u = tcp_frame(0, ident, 0, &data(rng.gen_range(0..600), 5), &[], 9);
                        u[23] = 17; // not TCP: never merged
                        u
                    }
                };
                frames.push(f);
            }
            // The same stream with the TCP checksums left to the kernel.
            let partial: Vec<Vec<u8>> = frames.iter().map(|f| pseudo_only(f)).collect();
            for (offload, input) in [(false, &frames), (true, &partial)] {
                let mut b = GsoBatch::new(4 << 20, 1024, offload);
                assert_eq!(push_all(&mut b, input), frames.len(), "seed {seed}");
                assert_eq!(on_wire(&b), frames, "seed {seed} offload {offload}");
                merged += b.merged();
            }
        }
        assert!(
            merged > 2000,
            "only {merged} segments merged: the streams test little"
        );
    }
}
