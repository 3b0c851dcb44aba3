//! Options of the Hop-by-Hop and Destination Options headers (RFC 8200
//! §4.2): type-length-value items, Pad1 and PadN, and the action the two
//! top bits of an unrecognized option's type ask for.

use crate::{Error, Result};

/// Option type of Pad1: one byte of padding, no length or data (RFC 8200 §4.2).
pub const OPT_PAD1: u8 = 0;
/// Option type of PadN: two or more bytes of padding (RFC 8200 §4.2).
pub const OPT_PADN: u8 = 1;

/// What a node that does not recognize an option must do, from the two
/// highest-order bits of its type (RFC 8200 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptionAction {
    /// `00`: skip over the option and continue processing the header.
    Skip,
    /// `01`: discard the packet.
    Discard,
    /// `10`: discard the packet and send an ICMPv6 Parameter Problem, code 2,
    /// to the source, whatever the destination.
    DiscardSendParamProblem,
    /// `11`: discard the packet and send an ICMPv6 Parameter Problem, code 2,
    /// only if the destination was not a multicast address.
    DiscardSendParamProblemUnlessMulticast,
}

impl OptionAction {
    /// The action encoded in the top two bits of `option_type`.
    pub fn of_type(option_type: u8) -> OptionAction {
        match option_type >> 6 {
            0 => OptionAction::Skip,
            1 => OptionAction::Discard,
            2 => OptionAction::DiscardSendParamProblem,
            _ => OptionAction::DiscardSendParamProblemUnlessMulticast,
        }
    }

    /// True if a Parameter Problem should be sent for a packet to a
    /// multicast (`dst_is_multicast`) or unicast destination.
    pub fn sends_param_problem(self, dst_is_multicast: bool) -> bool {
        match self {
            OptionAction::Skip | OptionAction::Discard => false,
            OptionAction::DiscardSendParamProblem => true,
            OptionAction::DiscardSendParamProblemUnlessMulticast => !dst_is_multicast,
        }
    }
}

/// One option TLV (RFC 8200 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Option<'a> {
    /// Option Type; [`OPT_PAD1`] and [`OPT_PADN`] are padding.
    pub option_type: u8,
    /// Option Data: empty for Pad1, Opt Data Len bytes otherwise.
    pub data: &'a [u8],
    /// Offset in bytes of the Option Type byte from the start of the
    /// extension header (add the header's offset in the packet for an
    /// ICMPv6 Parameter Problem pointer).
    pub offset: usize,
}

impl Ipv6Option<'_> {
    /// True for Pad1 and PadN.
    pub fn is_padding(&self) -> bool {
        self.option_type == OPT_PAD1 || self.option_type == OPT_PADN
    }

    /// The action if this option is not recognized (top two type bits).
    pub fn action(&self) -> OptionAction {
        OptionAction::of_type(self.option_type)
    }

    /// The third-highest type bit: the option data may change en route
    /// (it is then zeroed for an Authentication Header computation).
    pub fn may_change(&self) -> bool {
        self.option_type & 0x20 != 0
    }

    /// Length in bytes of the whole TLV: 1 for Pad1, `2 + data.len()`
    /// otherwise.
    pub fn len(&self) -> usize {
        if self.option_type == OPT_PAD1 {
            1
        } else {
            2 + self.data.len()
        }
    }

    /// Always false: a TLV is at least one byte (present for clippy's
    /// `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Iterator over the option TLVs of an options area (the bytes of a
/// Hop-by-Hop or Destination Options header after its first two).
///
/// Yields `Err(`[`Error::Malformed`]`)` once, then stops, if an option's
/// length byte is missing or its data runs past the area.
#[derive(Debug, Clone)]
pub struct Ipv6OptionIter<'a> {
    area: &'a [u8],
    at: usize,
    /// Offset of `area` from the start of its extension header.
    base: usize,
}

impl<'a> Ipv6OptionIter<'a> {
    /// Iterates the TLVs of `area`, reporting offsets as `base + index`
    /// (base 2 for the options area of an extension header).
    pub fn new(area: &'a [u8], base: usize) -> Self {
        Ipv6OptionIter { area, at: 0, base }
    }
}

impl<'a> Iterator for Ipv6OptionIter<'a> {
    type Item = Result<Ipv6Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let at = self.at;
        let option_type = *self.area.get(at)?;
        let offset = self.base + at;
        if option_type == OPT_PAD1 {
            self.at += 1;
            return Some(Ok(Ipv6Option {
                option_type,
                data: &[],
                offset,
            }));
        }
        let end = self
            .area
            .get(at + 1)
            .map(|&len| at + 2 + usize::from(len))
            .filter(|&end| end <= self.area.len());
        match end {
            Some(end) => {
                self.at = end;
                Some(Ok(Ipv6Option {
                    option_type,
                    data: &self.area[at + 2..end],
                    offset,
                }))
            }
            None => {
                self.at = self.area.len();
                Some(Err(Error::Malformed))
            }
        }
    }
}

/// Writes padding of `len` bytes at the start of `buf`: nothing for 0, Pad1
/// for 1, PadN with `len - 2` zero bytes otherwise (RFC 8200 §4.2).
///
/// Panics if `buf` is shorter than `len` or `len` is above 257.
pub fn emit_padding(buf: &mut [u8], len: usize) {
    match len {
        0 => {}
        1 => buf[0] = OPT_PAD1,
        _ => {
            buf[0] = OPT_PADN;
            buf[1] = u8::try_from(len - 2).expect("PadN of at most 257 bytes");
            buf[2..len].fill(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_follow_the_two_top_bits() {
        assert_eq!(OptionAction::of_type(0x05), OptionAction::Skip);
        assert_eq!(OptionAction::of_type(0x7e), OptionAction::Discard);
        assert_eq!(
            OptionAction::of_type(0x8b),
            OptionAction::DiscardSendParamProblem
        );
        assert_eq!(
            OptionAction::of_type(0xc2),
            OptionAction::DiscardSendParamProblemUnlessMulticast
        );
        for multicast in [false, true] {
            assert!(!OptionAction::Skip.sends_param_problem(multicast));
            assert!(!OptionAction::Discard.sends_param_problem(multicast));
            assert!(OptionAction::DiscardSendParamProblem.sends_param_problem(multicast));
        }
        let a = OptionAction::DiscardSendParamProblemUnlessMulticast;
        assert!(a.sends_param_problem(false) && !a.sends_param_problem(true));
    }

    #[test]
    fn iterates_pad1_padn_and_other_options() {
        let area = [0, 1, 2, 0, 0, 0x3e, 1, 0xaa, 0];
        let opts: Vec<_> = Ipv6OptionIter::new(&area, 2).map(Result::unwrap).collect();
        assert_eq!(opts.len(), 4);
        assert_eq!(
            (opts[0].option_type, opts[0].offset, opts[0].len()),
            (0, 2, 1)
        );
        assert_eq!(
            (opts[1].option_type, opts[1].offset, opts[1].len()),
            (1, 3, 4)
        );
        assert_eq!(opts[2].data, &[0xaa]);
        assert_eq!(opts[2].offset, 7);
        assert!(opts[2].may_change() && !opts[2].is_padding());
        assert!(opts[0].is_padding() && opts[1].is_padding() && opts[3].is_padding());
        assert!(!opts[0].is_empty());
    }

    #[test]
    fn option_past_area_is_malformed_once() {
        for area in [&[1u8][..], &[1, 1], &[0x3e, 3, 0, 0], &[0, 0, 7]] {
            let items: Vec<_> = Ipv6OptionIter::new(area, 0).collect();
            assert_eq!(items.last(), Some(&Err(Error::Malformed)), "{area:?}");
            assert_eq!(items.iter().filter(|i| i.is_err()).count(), 1);
        }
    }

    #[test]
    fn padding_of_every_length_iterates_as_padding() {
        for len in 0..=20 {
            let mut buf = [0xffu8; 20];
            emit_padding(&mut buf, len);
            let mut total = 0;
            for opt in Ipv6OptionIter::new(&buf[..len], 0) {
                let opt = opt.unwrap();
                assert!(opt.is_padding());
                total += opt.len();
            }
            assert_eq!(total, len);
        }
    }
}
