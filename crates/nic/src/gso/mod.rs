//! Segmentation offload in software for ports without a per-frame transmit
//! ring: a batch of frames for one `sendmmsg` on an AF_PACKET socket with
//! virtio-net headers (`PACKET_VNET_HDR`), in which consecutive full-sized
//! TCP segments of one connection, over IPv4 or IPv6, are merged into one
//! GSO frame of up to [`MAX_GSO_FRAME`] bytes.
//!
//! The kernel (software GSO, or the NIC's TSO) cuts a merged frame back into
//! exactly the segments the engine built: `tcp_gso_segment` gives segment
//! *i* the sequence number `seq + i·gso_size`, IPv4 identification `id + i`,
//! CWR only on the first and PSH/FIN only on the last, and fresh checksums.
//! So a segment joins the open frame only if it is what that cutting would
//! produce next: same Ethernet, IP and TCP header except sequence number,
//! identification and length; the expected sequence number and
//! identification; a payload no larger than the first one's; PSH or FIN
//! only on the last. An IPv4 segment has no IP options and is not a
//! fragment; an IPv6 one has TCP right after the fixed header (no extension
//! headers), and its traffic class and flow label must match too. Everything else (ARP, UDP, pure ACKs, SYN, RST,
//! retransmissions out of order, CWR) is sent as it is.
//!
//! A frame queued with [`GsoBatch::push_gather`] keeps its payload where it
//! lies ([`TxPayload`]): only its headers are in the batch, and the payload
//! follows them as a second iovec. Such frames are never merged.
//!
//! Nothing here allocates after [`GsoBatch::new`].

use payload::TxPayload;

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
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
const GSO_TCPV6: u8 = 4;

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
/// Offset of the TCP header in an IPv4 frame without IP options.
const TCP_AT: usize = ETH_LEN + IP_LEN;
/// Offset of the TCP header in an IPv6 frame without extension headers.
const TCP6_AT: usize = ETH_LEN + 40;
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
    /// Its IP version.
    fam: Family,
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
                    let flags = self.buf[off + o.fam.tcp_at() + 13];
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

    /// Queues one TCP frame (IPv4 or IPv6) the engine built larger than the
    /// MTU, to be cut into segments of `gso_size` payload bytes (see
    /// [`crate::TxQueue::transmit_gso`]); `fill` as for [`GsoBatch::push`].
    /// Frames that are not TCP, or carry at most `gso_size` bytes, go as
    /// they are. A frame of whole segments without PSH or FIN stays open
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
        let Some((fam, hlen, ip_end)) = tcp_extent(f) else {
            return true;
        };
        if gso_size == 0 || ip_end != n || n <= hlen + gso_size {
            return true;
        }
        let payload = n - hlen;
        let segs = payload.div_ceil(gso_size) as u32;
        let t = fam.tcp_at();
        let flags = f[t + 13];
        let o = Open {
            start: at,
            end: at + n,
            fam,
            hlen,
            seg: gso_size,
            segs,
            next_seq: be32(f, t + 4).wrapping_add(payload as u32),
            next_ident: fam.ident(f).wrapping_add(segs as u16),
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

    /// Queues one TCP frame without copying its payload: `fill` writes its
    /// `header_len` bytes of Ethernet, IP (IPv4 without options, or IPv6
    /// without extension headers) and TCP headers, with the IP length and
    /// the TCP pseudo-header sum of the whole frame (`header_len +
    /// payload.len()` bytes), and `payload` follows them on the wire. With `gso_size` > 0 and a longer payload,
    /// the kernel cuts the frame into segments of `gso_size` payload bytes
    /// (see [`crate::TxQueue::transmit_gso`]). The batch keeps `payload`
    /// until [`GsoBatch::clear`]; the bytes must not change before the batch
    /// is sent. Returns false, without calling `fill`, when the batch is
    /// full, and false after it when the headers are not TCP over IP of
    /// that length (nothing is queued).
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
        let Some(fam) = tcp_family(h) else {
            return false;
        };
        let t = fam.tcp_at();
        let ok = t + usize::from(h[t + 12] >> 4) * 4 == header_len
            && fam.ip_end(h) == total
            && total <= MAX_GSO_FRAME;
        if !ok {
            return false;
        }
        let segs = payload.segments(gso_size);
        let v = &mut self.buf[at - VNET_HDR_LEN..at];
        v.fill(0);
        v[0] = F_NEEDS_CSUM;
        if segs > 1 {
            v[1] = fam.gso_type();
            v[2..4].copy_from_slice(&(header_len as u16).to_ne_bytes());
            v[4..6].copy_from_slice(&(gso_size as u16).to_ne_bytes());
            self.merged += segs as u64 - 1;
        }
        v[6..8].copy_from_slice(&(t as u16).to_ne_bytes());
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
        self.open = opens(&self.buf[at..at + n]).map(|(fam, hlen, seq, ident)| Open {
            start: at,
            end: at + n,
            fam,
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
        let t = o.fam.tcp_at();
        let same = |r: std::ops::Range<usize>| new[r.clone()] == first[r];
        let ip = match o.fam {
            Family::V4 => {
                same(0..ETH_LEN + 2) // Ethernet, version/IHL, TOS
                    && be16(new, 18) == o.next_ident
                    && same(20..24) // flags/fragment, TTL, protocol
                    && same(26..t + 4) // addresses, ports
            }
            // Ethernet, version, traffic class, flow label; next header,
            // hop limit, addresses, ports.
            Family::V6 => same(0..ETH_LEN + 4) && same(20..t + 4),
        };
        let ok = ip
            && o.fam.ip_end(new) == n
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
        self.buf[o.start + o.fam.tcp_at() + 13] |= flags & (PSH | FIN);
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
    /// (GSO TCPv4 or TCPv6, checksum offset), IP length (and IPv4 header
    /// checksum), and the TCP pseudo-header checksum that
    /// `CHECKSUM_PARTIAL` expects.
    fn close(&mut self) {
        let Some(o) = self.open.take() else {
            return;
        };
        if o.segs < 2 {
            return;
        }
        let t = o.fam.tcp_at();
        let f = &mut self.buf[o.start..o.end];
        o.fam.set_ip_len(f);
        let pseudo = o.fam.pseudo(f);
        f[t + 16..t + 18].copy_from_slice(&fold(pseudo).to_be_bytes());
        let h = &mut self.buf[o.start - VNET_HDR_LEN..o.start];
        h[0] = F_NEEDS_CSUM;
        h[1] = o.fam.gso_type();
        h[2..4].copy_from_slice(&(o.hlen as u16).to_ne_bytes());
        h[4..6].copy_from_slice(&(o.seg as u16).to_ne_bytes());
        h[6..8].copy_from_slice(&(t as u16).to_ne_bytes());
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
/// segments of `gso_size` payload bytes the TCP `frame` makes (1 if it is
/// not TCP over IPv4 without options or IPv6 without extension headers, or
/// carries at most `gso_size`).
pub fn segment_count(frame: &[u8], gso_size: usize) -> usize {
    match tcp_extent(frame) {
        Some((_, hlen, ip_end)) if gso_size > 0 && ip_end > hlen + gso_size => {
            (ip_end - hlen).div_ceil(gso_size)
        }
        _ => 1,
    }
}

/// Writes segment `i` of [`segment_count`] of `frame` into `out` and
/// returns its length (0 if `out` is too small or `i` out of range): the
/// headers with sequence number `seq + i·gso_size`, IPv4 identification
/// `id + i`, IP length, CWR only on the first, PSH and FIN only on the
/// last, and full IPv4 header and TCP checksums (whatever the checksum
/// field of `frame` held). A frame that makes one segment is copied with
/// its TCP checksum completed if it is TCP.
pub fn write_segment(frame: &[u8], gso_size: usize, i: usize, out: &mut [u8]) -> usize {
    let count = segment_count(frame, gso_size);
    let Some((fam, hlen, ip_end)) = tcp_extent(frame) else {
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
        fill_checksums(fam, &mut out[..ip_end]);
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
    let t = fam.tcp_at();
    s[..hlen].copy_from_slice(&frame[..hlen]);
    s[hlen..].copy_from_slice(p);
    fam.set_ident(s, fam.ident(frame).wrapping_add(i as u16));
    let seq = be32(frame, t + 4).wrapping_add(from as u32);
    s[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
    if i > 0 {
        s[t + 13] &= !CWR;
    }
    if i + 1 < count {
        s[t + 13] &= !(PSH | FIN);
    }
    fill_checksums(fam, s);
    n
}

/// IP length (and IPv4 header checksum) and the full TCP checksum of `s`,
/// exactly one TCP datagram in an Ethernet frame.
fn fill_checksums(fam: Family, s: &mut [u8]) {
    let t = fam.tcp_at();
    fam.set_ip_len(s);
    s[t + 16..t + 18].fill(0);
    let pseudo = fam.pseudo(s);
    let tcp_sum = !fold(sum(&s[t..], pseudo));
    s[t + 16..t + 18].copy_from_slice(&tcp_sum.to_be_bytes());
}

/// The IP version of a frame this module can segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    /// IPv4 without options, not a fragment.
    V4,
    /// IPv6 with TCP right after the fixed header.
    V6,
}

impl Family {
    /// Offset of the TCP header in the frame.
    fn tcp_at(self) -> usize {
        match self {
            Family::V4 => TCP_AT,
            Family::V6 => TCP6_AT,
        }
    }

    /// The virtio-net GSO type.
    fn gso_type(self) -> u8 {
        match self {
            Family::V4 => GSO_TCPV4,
            Family::V6 => GSO_TCPV6,
        }
    }

    /// Where the IP datagram ends by its length field (the frame may be
    /// longer: padding).
    fn ip_end(self, f: &[u8]) -> usize {
        match self {
            Family::V4 => ETH_LEN + usize::from(be16(f, 16)),
            Family::V6 => TCP6_AT + usize::from(be16(f, 18)),
        }
    }

    /// Writes the IP length field for a datagram that ends with `f`, and
    /// the IPv4 header checksum (IPv6 has none).
    fn set_ip_len(self, f: &mut [u8]) {
        let len = f.len();
        match self {
            Family::V4 => {
                f[16..18].copy_from_slice(&((len - ETH_LEN) as u16).to_be_bytes());
                f[24..26].fill(0);
                let ip_sum = !fold(sum(&f[ETH_LEN..TCP_AT], 0));
                f[24..26].copy_from_slice(&ip_sum.to_be_bytes());
            }
            Family::V6 => f[18..20].copy_from_slice(&((len - TCP6_AT) as u16).to_be_bytes()),
        }
    }

    /// The unfolded TCP pseudo-header sum of `f`, whose TCP segment runs to
    /// its end (RFC 9293 §3.1; RFC 8200 §8.1).
    fn pseudo(self, f: &[u8]) -> u32 {
        let tcp_len = (f.len() - self.tcp_at()) as u32;
        match self {
            Family::V4 => sum(&f[26..34], 6 + tcp_len),
            Family::V6 => sum(&f[22..54], 6 + tcp_len),
        }
    }

    /// The IPv4 identification (0 for IPv6, which has none outside a
    /// Fragment header).
    fn ident(self, f: &[u8]) -> u16 {
        match self {
            Family::V4 => be16(f, 18),
            Family::V6 => 0,
        }
    }

    fn set_ident(self, f: &mut [u8], ident: u16) {
        if self == Family::V4 {
            f[18..20].copy_from_slice(&ident.to_be_bytes());
        }
    }
}

/// The family of a frame holding a whole TCP segment this module can
/// segment: IPv4 without options or fragmentation, or IPv6 whose next
/// header is TCP.
fn tcp_family(f: &[u8]) -> Option<Family> {
    if tcp_ipv4(f) == Some(TCP_AT) {
        return Some(Family::V4);
    }
    let v6 = f.len() >= TCP6_AT + 20 && f[12..14] == [0x86, 0xdd] && f[14] >> 4 == 6 && f[20] == 6;
    v6.then_some(Family::V6)
}

/// For a whole TCP segment ([`tcp_family`]): its family, Ethernet + IP +
/// TCP header length and the end of its IP datagram (the frame may be
/// longer: padding).
fn tcp_extent(f: &[u8]) -> Option<(Family, usize, usize)> {
    let fam = tcp_family(f)?;
    let t = fam.tcp_at();
    let ip_end = fam.ip_end(f);
    let hlen = t + usize::from(f[t + 12] >> 4) * 4;
    (hlen >= t + 20 && hlen <= ip_end && ip_end <= f.len()).then_some((fam, hlen, ip_end))
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

/// If `f` can start a GSO frame: (family, header bytes, sequence number,
/// IPv4 identification). It must be a whole TCP segment ([`tcp_family`]),
/// carry at least [`MIN_GSO_SIZE`] payload bytes, and have only ACK (and
/// ECE) among its flags.
fn opens(f: &[u8]) -> Option<(Family, usize, u32, u16)> {
    let (fam, hlen, ip_end) = tcp_extent(f)?;
    let t = fam.tcp_at();
    let flags = f[t + 13];
    let whole = ip_end == f.len() && flags & (FIN | SYN | RST | PSH | URG | CWR) == 0;
    (whole && f.len() >= hlen + MIN_GSO_SIZE).then(|| (fam, hlen, be32(f, t + 4), fam.ident(f)))
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
pub(crate) mod tests;
