//! TCP header (RFC 9293 §3.1) and options: MSS, window scale, SACK-permitted,
//! SACK, timestamps (RFC 7323), NOP and EOL.
//!
//! # Parsing
//!
//! [`TcpRepr::parse`] takes the IP payload. The data offset must be at least
//! 5 and the header must fit the segment; everything after the header is the
//! payload. Options (RFC 9293 §3.1, "Options"): EOL ends the list, NOP is one
//! byte, every other option carries a length byte that must be at least 2
//! and keep the option inside the header. A known option with the wrong
//! length (MSS 4, WS 3, SACK-permitted 2, timestamps 10, SACK 2 + 8n with
//! n ≥ 1) is [`Error::Malformed`]; unknown kinds are skipped (RFC 9293
//! §3.2: a TCP MUST ignore options it does not implement). Options are
//! accepted on any segment; whether one is meaningful there (MSS and window
//! scale only on SYN) is the engine's decision. SACK blocks past the fourth
//! are ignored. Reserved bits are ignored.
//!
//! # Emitting
//!
//! [`TcpRepr::emit_header`] writes the header and the options set in the
//! repr, in the order Linux uses (so headers compare byte for byte):
//!
//! ```text
//! MSS                              kind 2, 4 bytes
//! SACK_PERM, TS   | NOP, NOP, TS   kind 4 + kind 8, 12 bytes
//! NOP, NOP, SACK_PERM              (only without TS), 4 bytes
//! NOP, WS                          kind 3, 4 bytes
//! NOP, NOP, SACK(n)                kind 5, 4 + 8n bytes
//! ```
//!
//! Every group is a multiple of 4 bytes, so no padding is needed. The option
//! space is 40 bytes: SACK blocks that do not fit after the other options are
//! left out (3 fit with timestamps, 4 without), and
//! [`TcpRepr::header_len`] counts only what is written. The checksum is
//! filled separately by [`fill_checksum`] once the payload is in place.

use crate::checksum::{self, IpAddress};
use crate::field::{checked_len, put_u16, put_u32, u16_at, u32_at};
use crate::ipv4::PROTO_TCP;
use crate::seq::SeqNum;
use crate::{Error, Result};

/// Length of a TCP header without options in bytes (the minimum).
pub const HEADER_LEN: usize = 20;
/// Largest TCP header in bytes (data offset 15).
pub const MAX_HEADER_LEN: usize = 60;
/// Largest option space in bytes.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - HEADER_LEN;
/// Most SACK blocks a header can carry (RFC 2018 §3).
pub const MAX_SACK_BLOCKS: usize = 4;

const OPT_EOL: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_MSS: u8 = 2;
const OPT_WS: u8 = 3;
const OPT_SACK_PERM: u8 = 4;
const OPT_SACK: u8 = 5;
const OPT_TS: u8 = 8;

/// For each `name = BIT;`, `pub fn name(self) -> bool`: whether that bit
/// of the flags is set.
macro_rules! flag_tests {
    ($($(#[$doc:meta])* $name:ident = $bit:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(self) -> bool {
                self.0 & Self::$bit != 0
            }
        )*
    };
}

/// TCP header flags, as the bits of byte 13 of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: u8 = 0x01;
    /// Synchronize sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push function.
    pub const PSH: u8 = 0x08;
    /// Acknowledgment field is significant.
    pub const ACK: u8 = 0x10;
    /// Urgent pointer field is significant.
    pub const URG: u8 = 0x20;
    /// ECN-Echo (RFC 3168).
    pub const ECE: u8 = 0x40;
    /// Congestion window reduced (RFC 3168).
    pub const CWR: u8 = 0x80;

    flag_tests! {
        /// FIN is set.
        fin = FIN;
        /// SYN is set.
        syn = SYN;
        /// RST is set.
        rst = RST;
        /// PSH is set.
        psh = PSH;
        /// ACK is set.
        ack = ACK;
        /// URG is set.
        urg = URG;
        /// ECE is set.
        ece = ECE;
        /// CWR is set.
        cwr = CWR;
    }
}

/// One SACK block (RFC 2018 §3): the bytes `[left, right)` were received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackBlock {
    /// First sequence number of the block.
    pub left: SeqNum,
    /// Sequence number just past the block.
    pub right: SeqNum,
}

/// The TCP options corestack understands. Unknown options are skipped by
/// their length byte when parsing and never emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpOptions {
    /// Maximum segment size in bytes (kind 2), SYN segments only.
    pub mss: Option<u16>,
    /// Window scale shift count (kind 3, RFC 7323 §2), SYN segments only; 0..=14.
    pub window_scale: Option<u8>,
    /// SACK-permitted (kind 4, RFC 2018), SYN segments only.
    pub sack_permitted: bool,
    /// Timestamps (kind 8, RFC 7323 §3): (TSval, TSecr).
    pub timestamps: Option<(u32, u32)>,
    /// SACK blocks (kind 5); `sack_len` of them are valid, at most 3 with timestamps.
    pub sack: [SackBlock; 4],
    /// Number of valid entries in `sack`.
    pub sack_len: u8,
}

impl TcpOptions {
    /// The valid SACK blocks: `sack[..sack_len]` (at most 4).
    pub fn sack_blocks(&self) -> &[SackBlock] {
        &self.sack[..usize::from(self.sack_len).min(MAX_SACK_BLOCKS)]
    }

    /// Bytes of options other than SACK blocks that `emit_header` writes.
    fn fixed_len(&self) -> usize {
        let mut len = 0;
        if self.mss.is_some() {
            len += 4;
        }
        if self.timestamps.is_some() {
            len += 12; // SACK_PERM+TS or NOP+NOP+TS
        } else if self.sack_permitted {
            len += 4;
        }
        if self.window_scale.is_some() {
            len += 4;
        }
        len
    }

    /// Number of SACK blocks `emit_header` writes: those that fit in the
    /// option space after the other options.
    fn emitted_sack_blocks(&self) -> usize {
        let room = MAX_OPTIONS_LEN - self.fixed_len();
        let fit = room.saturating_sub(4) / 8;
        self.sack_blocks().len().min(fit)
    }

    /// Length in bytes of the options `emit_header` writes (a multiple of 4).
    pub fn emitted_len(&self) -> usize {
        match self.emitted_sack_blocks() {
            0 => self.fixed_len(),
            n => self.fixed_len() + 4 + 8 * n,
        }
    }
}

/// A parsed TCP header, independent of the buffer it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number of the first octet (or of the SYN).
    pub seq: SeqNum,
    /// Acknowledgment number; meaningful only when `flags.ack()`.
    pub ack: SeqNum,
    /// Control bits.
    pub flags: TcpFlags,
    /// Window field as carried on the wire (unscaled), bytes >> wscale.
    pub window: u16,
    /// Urgent pointer (offset in bytes from `seq`); meaningful only with URG.
    pub urgent: u16,
    /// Options carried in the header.
    pub options: TcpOptions,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl TcpRepr {
    /// Parses a TCP segment; `segment` is exactly the IP payload and
    /// `src`/`dst` the IP addresses for the pseudo-header. Returns the header
    /// and the payload (everything after the header).
    ///
    /// Errors: [`Error::Truncated`] if `segment` is shorter than 20 bytes or
    /// than the data offset says; [`Error::Malformed`] for a data offset
    /// below 5 or a bad option (see the module docs); [`Error::Checksum`] if
    /// `verify_checksum` and the checksum does not verify.
    ///
    /// Either family: over IPv6 the checksum covers the IPv6 pseudo-header
    /// (RFC 8200 §8.1) of `src`/`dst` (the final destination), next header 6.
    #[inline]
    pub fn parse<A: IpAddress>(
        segment: &[u8],
        src: A,
        dst: A,
        verify_checksum: bool,
    ) -> Result<(TcpRepr, &[u8])> {
        let pseudo = verify_checksum.then(|| src.pseudo_header_sum(dst, PROTO_TCP, segment.len()));
        Self::parse_with(segment, pseudo)
    }

    /// Parses `segment`, verifying its checksum against the running
    /// pseudo-header sum `pseudo` when given.
    fn parse_with(segment: &[u8], pseudo: Option<u32>) -> Result<(TcpRepr, &[u8])> {
        if segment.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = checked_len(usize::from(segment[12] >> 4) * 4, HEADER_LEN, segment.len())?;
        if let Some(pseudo) = pseudo {
            if checksum::fold(checksum::sum(segment, pseudo)) != 0 {
                return Err(Error::Checksum);
            }
        }
        let options = parse_options(&segment[HEADER_LEN..header_len])?;
        let repr = TcpRepr {
            src_port: u16_at(segment, 0),
            dst_port: u16_at(segment, 2),
            seq: SeqNum(u32_at(segment, 4)),
            ack: SeqNum(u32_at(segment, 8)),
            flags: TcpFlags(segment[13]),
            window: u16_at(segment, 14),
            urgent: u16_at(segment, 18),
            options,
            payload_len: segment.len() - header_len,
        };
        Ok((repr, &segment[header_len..]))
    }

    /// Length in bytes of the header `emit_header` writes: 20 plus the
    /// options (a multiple of 4, at most 60).
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.emitted_len()
    }

    /// Sequence space the segment occupies (RFC 9293 §3.3.1 SEG.LEN):
    /// payload bytes plus one for SYN and one for FIN.
    pub fn segment_len(&self) -> usize {
        self.payload_len + usize::from(self.flags.syn()) + usize::from(self.flags.fin())
    }

    /// Writes the header and options (checksum field 0) at the start of
    /// `buf` and returns the header length in bytes. Fill the checksum with
    /// [`fill_checksum`] once the payload follows the header.
    ///
    /// Panics if `buf` is shorter than [`header_len`](Self::header_len).
    pub fn emit_header(&self, buf: &mut [u8]) -> usize {
        let header_len = self.header_len();
        let buf = &mut buf[..header_len];
        put_u16(buf, 0, self.src_port);
        put_u16(buf, 2, self.dst_port);
        put_u32(buf, 4, self.seq.0);
        put_u32(buf, 8, self.ack.0);
        buf[12] = ((header_len / 4) as u8) << 4;
        buf[13] = self.flags.0;
        put_u16(buf, 14, self.window);
        put_u16(buf, 16, 0);
        put_u16(buf, 18, self.urgent);
        emit_options(&self.options, &mut buf[HEADER_LEN..]);
        header_len
    }
}

/// Parses the option bytes between the fixed header and the data offset.
fn parse_options(mut opts: &[u8]) -> Result<TcpOptions> {
    let mut out = TcpOptions::default();
    // Each iteration consumes at least one byte: bounded by 40 iterations.
    while let Some(&kind) = opts.first() {
        match kind {
            OPT_EOL => break,
            OPT_NOP => {
                opts = &opts[1..];
                continue;
            }
            _ => {}
        }
        let len = usize::from(*opts.get(1).ok_or(Error::Malformed)?);
        if len < 2 || len > opts.len() {
            return Err(Error::Malformed);
        }
        let body = &opts[2..len];
        match kind {
            OPT_MSS => {
                if body.len() != 2 {
                    return Err(Error::Malformed);
                }
                out.mss = Some(u16_at(body, 0));
            }
            OPT_WS => {
                if body.len() != 1 {
                    return Err(Error::Malformed);
                }
                out.window_scale = Some(body[0]);
            }
            OPT_SACK_PERM => {
                if !body.is_empty() {
                    return Err(Error::Malformed);
                }
                out.sack_permitted = true;
            }
            OPT_TS => {
                if body.len() != 8 {
                    return Err(Error::Malformed);
                }
                out.timestamps = Some((u32_at(body, 0), u32_at(body, 4)));
            }
            OPT_SACK => {
                if body.is_empty() || body.len() % 8 != 0 {
                    return Err(Error::Malformed);
                }
                for block in body.chunks_exact(8) {
                    let n = usize::from(out.sack_len);
                    if n == MAX_SACK_BLOCKS {
                        break;
                    }
                    out.sack[n] = SackBlock {
                        left: SeqNum(u32_at(block, 0)),
                        right: SeqNum(u32_at(block, 4)),
                    };
                    out.sack_len += 1;
                }
            }
            _ => {} // unknown: skipped by its length
        }
        opts = &opts[len..];
    }
    Ok(out)
}

/// Writes the options in the Linux order (see the module docs) into `buf`,
/// which is exactly `options.emitted_len()` bytes long.
fn emit_options(options: &TcpOptions, buf: &mut [u8]) {
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        buf[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    if let Some(mss) = options.mss {
        let m = mss.to_be_bytes();
        put(&[OPT_MSS, 4, m[0], m[1]]);
    }
    if let Some((tsval, tsecr)) = options.timestamps {
        if options.sack_permitted {
            put(&[OPT_SACK_PERM, 2, OPT_TS, 10]);
        } else {
            put(&[OPT_NOP, OPT_NOP, OPT_TS, 10]);
        }
        put(&tsval.to_be_bytes());
        put(&tsecr.to_be_bytes());
    } else if options.sack_permitted {
        put(&[OPT_NOP, OPT_NOP, OPT_SACK_PERM, 2]);
    }
    if let Some(shift) = options.window_scale {
        put(&[OPT_NOP, OPT_WS, 3, shift]);
    }
    let n = options.emitted_sack_blocks();
    if n > 0 {
        put(&[OPT_NOP, OPT_NOP, OPT_SACK, (2 + 8 * n) as u8]);
        for block in &options.sack[..n] {
            put(&block.left.0.to_be_bytes());
            put(&block.right.0.to_be_bytes());
        }
    }
}

/// Computes and stores the checksum of `segment`, which must be exactly the
/// TCP segment (header + payload), using the pseudo-header of `src`/`dst`
/// (RFC 9293 §3.1; over IPv6, RFC 8200 §8.1).
///
/// Panics if `segment` is shorter than 20 bytes.
pub fn fill_checksum<A: IpAddress>(segment: &mut [u8], src: A, dst: A) {
    put_u16(segment, 16, 0);
    let pseudo = src.pseudo_header_sum(dst, PROTO_TCP, segment.len());
    let c = checksum::fold(checksum::sum(segment, pseudo));
    put_u16(segment, 16, c);
}

/// Stores in the checksum field of `segment` (the TCP segment, header +
/// payload) only the pseudo-header sum of `src`/`dst`, folded and not
/// complemented, for a device that completes the checksum over the segment
/// (Linux's CHECKSUM_PARTIAL convention; RFC 9293 §3.1 pseudo-header,
/// RFC 8200 §8.1 over IPv6).
///
/// Panics if `segment` is shorter than 20 bytes.
pub fn fill_pseudo_checksum<A: IpAddress>(segment: &mut [u8], src: A, dst: A) {
    let len = segment.len();
    fill_pseudo_checksum_len(segment, src, dst, len);
}

/// [`fill_pseudo_checksum`] for a segment of `tcp_len` bytes of which
/// `header` holds the start (at least the 20-byte fixed header): the
/// payload lies elsewhere, and whoever completes the checksum sums it.
pub fn fill_pseudo_checksum_len<A: IpAddress>(header: &mut [u8], src: A, dst: A, tcp_len: usize) {
    let pseudo = src.pseudo_header_sum(dst, PROTO_TCP, tcp_len);
    put_u16(header, 16, !checksum::fold(pseudo));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::assert_prefixes_truncated;
    use core::net::Ipv4Addr;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);

    fn syn() -> TcpRepr {
        TcpRepr {
            src_port: 40000,
            dst_port: 6000,
            seq: SeqNum(0x0102_0304),
            ack: SeqNum(0),
            flags: TcpFlags(TcpFlags::SYN),
            window: 64240,
            urgent: 0,
            options: TcpOptions {
                mss: Some(1460),
                window_scale: Some(7),
                sack_permitted: true,
                timestamps: Some((0x1111_1111, 0)),
                ..TcpOptions::default()
            },
            payload_len: 0,
        }
    }

    fn sack(blocks: &[(u32, u32)]) -> TcpOptions {
        let mut o = TcpOptions::default();
        for (i, &(l, r)) in blocks.iter().enumerate() {
            o.sack[i] = SackBlock {
                left: SeqNum(l),
                right: SeqNum(r),
            };
        }
        o.sack_len = blocks.len() as u8;
        o
    }

    /// Emits `repr` with `payload`, fills the checksum, returns the bytes.
    fn segment(repr: &TcpRepr, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; repr.header_len() + payload.len()];
        let hl = repr.emit_header(&mut buf);
        assert_eq!(hl, repr.header_len());
        buf[hl..].copy_from_slice(payload);
        fill_checksum(&mut buf, SRC, DST);
        buf
    }

    fn round_trip(repr: TcpRepr) {
        let payload = vec![0xa5u8; repr.payload_len];
        let buf = segment(&repr, &payload);
        let (parsed, got) = TcpRepr::parse(&buf, SRC, DST, true).unwrap();
        assert_eq!(parsed, repr);
        assert_eq!(got, &payload[..]);
    }

    #[test]
    fn linux_syn_options_emit_in_linux_order() {
        let buf = segment(&syn(), &[]);
        assert_eq!(buf.len(), 40);
        assert_eq!(buf[12], 0xa0);
        assert_eq!(
            buf[20..],
            [2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0x11, 0x11, 0x11, 0x11, 0, 0, 0, 0, 1, 3, 3, 7]
        );
    }

    #[test]
    fn every_option_combination_round_trips() {
        let blocks = [(100, 200), (300, 400), (500, 600), (700, 800)];
        for mask in 0..32u32 {
            for n_sack in 0..=4 {
                let mut o = sack(&blocks[..n_sack]);
                if mask & 1 != 0 {
                    o.mss = Some(536);
                }
                if mask & 2 != 0 {
                    o.window_scale = Some(14);
                }
                if mask & 4 != 0 {
                    o.sack_permitted = true;
                }
                if mask & 8 != 0 {
                    o.timestamps = Some((u32::MAX, 12345));
                }
                let flags = if mask & 16 != 0 {
                    TcpFlags::SYN
                } else {
                    TcpFlags::ACK
                };
                let repr = TcpRepr {
                    options: o,
                    flags: TcpFlags(flags),
                    payload_len: 3,
                    ..syn()
                };
                let fit = o.emitted_sack_blocks();
                assert!(repr.header_len() <= MAX_HEADER_LEN);
                assert_eq!(repr.header_len() % 4, 0);
                if fit == n_sack {
                    round_trip(repr);
                } else {
                    // Blocks that do not fit are dropped, the rest survive.
                    let buf = segment(&repr, &[1, 2, 3]);
                    let (parsed, _) = TcpRepr::parse(&buf, SRC, DST, true).unwrap();
                    assert_eq!(parsed.options.sack_blocks(), &o.sack[..fit]);
                    assert!(fit >= 1);
                }
            }
        }
    }

    #[test]
    fn sack_with_timestamps_fits_three_blocks() {
        let mut o = sack(&[(1, 2), (3, 4), (5, 6), (7, 8)]);
        o.timestamps = Some((1, 2));
        assert_eq!(o.emitted_sack_blocks(), 3);
        let repr = TcpRepr {
            options: o,
            flags: TcpFlags(TcpFlags::ACK),
            ..syn()
        };
        assert_eq!(repr.header_len(), 60);
        o.timestamps = None;
        assert_eq!(o.emitted_sack_blocks(), 4);
    }

    #[test]
    fn no_options_header_is_20_bytes() {
        let repr = TcpRepr {
            options: TcpOptions::default(),
            ..syn()
        };
        assert_eq!(repr.header_len(), HEADER_LEN);
        round_trip(repr);
    }

    #[test]
    fn segment_len_counts_syn_and_fin() {
        let mut repr = syn();
        repr.payload_len = 10;
        assert_eq!(repr.segment_len(), 11);
        repr.flags = TcpFlags(TcpFlags::FIN | TcpFlags::ACK);
        assert_eq!(repr.segment_len(), 11);
        repr.flags = TcpFlags(TcpFlags::SYN | TcpFlags::FIN);
        assert_eq!(repr.segment_len(), 12);
        repr.flags = TcpFlags(TcpFlags::ACK);
        assert_eq!(repr.segment_len(), 10);
    }

    #[test]
    fn short_segment_any_length_is_truncated() {
        let buf = segment(&syn(), &[]);
        assert_prefixes_truncated(&buf, 0..buf.len(), |b| TcpRepr::parse(b, SRC, DST, false));
    }

    #[test]
    fn data_offset_below_5_is_malformed() {
        for off in 0..5u8 {
            let mut buf = segment(&syn(), &[]);
            buf[12] = off << 4;
            assert_eq!(TcpRepr::parse(&buf, SRC, DST, false), Err(Error::Malformed));
        }
    }

    /// A 20-byte-header segment followed by `opts` (padded to 4 with EOL).
    fn with_options(opts: &[u8]) -> Vec<u8> {
        let base = TcpRepr {
            options: TcpOptions::default(),
            ..syn()
        };
        let padded = opts.len().div_ceil(4) * 4;
        let mut buf = vec![0u8; HEADER_LEN + padded];
        base.emit_header(&mut buf);
        buf[12] = (((HEADER_LEN + padded) / 4) as u8) << 4;
        buf[HEADER_LEN..HEADER_LEN + opts.len()].copy_from_slice(opts);
        fill_checksum(&mut buf, SRC, DST);
        buf
    }

    fn parse_opts(opts: &[u8]) -> Result<TcpOptions> {
        TcpRepr::parse(&with_options(opts), SRC, DST, true).map(|(r, _)| r.options)
    }

    #[test]
    fn option_length_0_or_1_is_malformed() {
        assert_eq!(parse_opts(&[30, 0, 0, 0]), Err(Error::Malformed));
        assert_eq!(parse_opts(&[30, 1, 0, 0]), Err(Error::Malformed));
        assert_eq!(parse_opts(&[OPT_MSS, 0, 0, 0]), Err(Error::Malformed));
    }

    #[test]
    fn option_length_past_header_is_malformed() {
        assert_eq!(parse_opts(&[1, 1, 30, 3]), Err(Error::Malformed));
        assert_eq!(
            parse_opts(&[OPT_TS, 10, 0, 0, 0, 0, 0, 0]),
            Err(Error::Malformed)
        );
        // Kind byte in the last position, no room for the length byte.
        assert_eq!(parse_opts(&[1, 1, 1, OPT_MSS]), Err(Error::Malformed));
    }

    #[test]
    fn known_option_with_wrong_length_is_malformed() {
        for opts in [
            &[OPT_MSS, 3, 5, 0][..],
            &[OPT_MSS, 5, 5, 0, 0, 0, 0, 0],
            &[OPT_WS, 4, 7, 0],
            &[OPT_WS, 2, 0, 0],
            &[OPT_SACK_PERM, 3, 0, 0],
            &[OPT_TS, 6, 0, 0, 0, 0, 0, 0],
            &[OPT_SACK, 2, 0, 0],
            &[OPT_SACK, 6, 0, 0, 0, 0],
            &[OPT_SACK, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        ] {
            assert_eq!(parse_opts(opts), Err(Error::Malformed), "{opts:?}");
        }
    }

    #[test]
    fn unknown_option_is_skipped() {
        let o = parse_opts(&[253, 4, 0xde, 0xad, OPT_MSS, 4, 0x05, 0xb4]).unwrap();
        assert_eq!(o.mss, Some(1460));
    }

    #[test]
    fn eol_ends_option_list() {
        // Garbage after EOL is not parsed.
        let o = parse_opts(&[OPT_WS, 3, 7, OPT_EOL, 30, 0, 0, 0]).unwrap();
        assert_eq!(o.window_scale, Some(7));
        assert_eq!(o.mss, None);
    }

    #[test]
    fn two_sack_options_accumulate_four_blocks() {
        // 40 option bytes cannot hold a fifth block (5 × 8 + 2 > 40), so the
        // limit of 4 is only defensive; two options of 2 blocks fill it.
        let mut opts = Vec::new();
        for sack_opt in 0..2u32 {
            opts.extend_from_slice(&[OPT_SACK, 18]);
            for i in 0..2 {
                let l = 1000 * (2 * sack_opt + i + 1);
                opts.extend_from_slice(&l.to_be_bytes());
                opts.extend_from_slice(&(l + 10).to_be_bytes());
            }
        }
        let o = parse_opts(&opts).unwrap();
        assert_eq!(o.sack_len, 4);
        assert_eq!(
            o.sack[0],
            SackBlock {
                left: SeqNum(1000),
                right: SeqNum(1010)
            }
        );
        assert_eq!(
            o.sack[3],
            SackBlock {
                left: SeqNum(4000),
                right: SeqNum(4010)
            }
        );
    }

    #[test]
    fn corrupted_payload_fails_checksum_only_when_verified() {
        let repr = TcpRepr {
            payload_len: 5,
            ..syn()
        };
        let mut buf = segment(&repr, b"hello");
        buf[repr.header_len()] ^= 1;
        assert_eq!(TcpRepr::parse(&buf, SRC, DST, true), Err(Error::Checksum));
        assert!(TcpRepr::parse(&buf, SRC, DST, false).is_ok());
        let buf = segment(&repr, b"hello");
        let other = Ipv4Addr::new(10, 99, 0, 9);
        assert_eq!(TcpRepr::parse(&buf, other, DST, true), Err(Error::Checksum));
    }

    #[test]
    fn a_device_completing_the_pseudo_checksum_gets_the_full_one() {
        for len in [0usize, 1, 5, 1448] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let repr = TcpRepr {
                payload_len: len,
                ..syn()
            };
            let full = segment(&repr, &payload);
            let mut partial = full.clone();
            fill_pseudo_checksum(&mut partial, SRC, DST);
            assert_ne!(partial, full);
            // What the device does: checksum over the segment as it is,
            // stored at offset 16.
            let c = checksum::fold(checksum::sum(&partial, 0));
            put_u16(&mut partial, 16, c);
            assert_eq!(partial, full, "payload {len} bytes");
        }
    }
}

#[cfg(test)]
mod tests_v6 {
    use super::*;
    use crate::test_util::{DST6, SRC6};

    #[test]
    fn v6_checksum_round_trips() {
        let repr = TcpRepr {
            src_port: 5,
            dst_port: 6,
            payload_len: 3,
            ..TcpRepr::default()
        };
        let mut buf = [0u8; 23];
        let h = repr.emit_header(&mut buf);
        buf[h..].copy_from_slice(b"abc");
        fill_checksum(&mut buf, SRC6, DST6);
        let (r, p) = TcpRepr::parse(&buf, SRC6, DST6, true).unwrap();
        assert_eq!((r.src_port, p), (5, &b"abc"[..]));
        assert_eq!(TcpRepr::parse(&buf, DST6, SRC6, true).map(|_| ()), Ok(()));
        assert!(TcpRepr::parse(&buf, SRC6, "fd00::9".parse().unwrap(), true).is_err());
        // Partial: the pseudo sum plus the segment's own sum completes it.
        fill_pseudo_checksum(&mut buf, SRC6, DST6);
        let c = checksum::fold(checksum::sum(&buf, 0));
        buf[16..18].copy_from_slice(&c.to_be_bytes());
        assert!(TcpRepr::parse(&buf, SRC6, DST6, true).is_ok());
    }
}
