//! The sender's retransmission queue and SACK scoreboard (RFC 6675 §3,
//! RFC 8985 §5.2): one entry per segment sent and not yet cumulatively
//! acknowledged, in sequence order, with its last transmit time and
//! SACKED / LOST / RETRANS marks.
//!
//! A ring allocated when the Tcb is created; it grows (a new allocation,
//! entries copied in order) only when the Tcb asks, when a larger send
//! buffer needs more segments in flight: a few times per connection. When
//! it is full no new data is sent until ACKs free entries (the capacity
//! bounds segments in flight).
//!
//! Byte counters kept in step with the marks give RFC 6675's `pipe` in O(1):
//! pipe = in flight - SACKed - LOST + RETRANS (a lost segment's
//! retransmission is in flight again; as Linux's `tcp_packets_in_flight`).

use wire::SeqNum;

use crate::time::Instant;

use super::rate::RateStamp;

/// Selectively acknowledged by the receiver.
pub(crate) const SACKED: u8 = 1;
/// Deemed lost (RFC 6675 IsLost, RACK, or RTO) and owed a retransmission
/// unless RETRANS is also set.
pub(crate) const LOST: u8 = 2;
/// A retransmission of this segment is in flight.
pub(crate) const RETRANS: u8 = 4;
/// The segment carries our FIN (its last sequence number).
pub(crate) const FIN: u8 = 8;
/// Retransmitted at least once (RACK's and Karn's ambiguity).
pub(crate) const EVER_RETRANS: u8 = 16;

/// One segment in flight: `[start, end)` in sequence space (a FIN counts one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TxSeg {
    pub(crate) start: SeqNum,
    pub(crate) end: SeqNum,
    /// Time of the last (re)transmission.
    pub(crate) xmit: Instant,
    pub(crate) flags: u8,
    /// The connection's delivery state at that (re)transmission (delivery
    /// rate estimation, `rate`).
    pub(crate) stamp: RateStamp,
}

impl TxSeg {
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }
    pub(crate) fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
    /// Payload bytes (the length without the FIN).
    pub(crate) fn data_len(&self) -> usize {
        self.len() - usize::from(self.has(FIN))
    }
    /// Lost and not yet retransmitted.
    pub(crate) fn owed(&self) -> bool {
        self.flags & (LOST | RETRANS | SACKED) == LOST
    }
}

const EMPTY: TxSeg = TxSeg {
    start: SeqNum(0),
    end: SeqNum(0),
    xmit: Instant(0),
    flags: 0,
    stamp: RateStamp {
        delivered: 0,
        delivered_time: Instant(0),
        first_sent: Instant(0),
        app_limited: false,
    },
};

/// Entries allocated with a queue's first segment: what a request and
/// response exchange keeps in flight, without growing.
const FIRST_ENTRIES: usize = 4;

/// The retransmission queue. Indices given to and taken from callers are
/// positions from the oldest entry (0) up.
#[derive(Debug)]
pub(crate) struct Scoreboard {
    /// The entries: empty until the first segment (and again after
    /// [`Scoreboard::release`]), then doubling as the flight needs, up to
    /// `cap`.
    ring: Vec<TxSeg>,
    /// Entries it may hold.
    cap: usize,
    head: usize,
    len: usize,
    sacked_bytes: usize,
    lost_bytes: usize,
    retrans_bytes: usize,
    /// Entries with LOST and neither RETRANS nor SACKED.
    owed: usize,
    /// Entries with EVER_RETRANS.
    ever_retrans: usize,
    /// No owed entry lies below this position (a search hint).
    owed_hint: usize,
    /// Bytes ever deemed lost (an entry becoming owed a retransmission,
    /// a lost retransmission again), since the connection began (Linux's
    /// `tp->lost`, in bytes); wraps at 2^64.
    lost_total: u64,
}

impl Scoreboard {
    /// Room for `capacity` segments (at least 1), allocated as segments are
    /// pushed: [`FIRST_ENTRIES`] with the first, doubling when full.
    pub(crate) fn new(capacity: usize) -> Self {
        Scoreboard {
            ring: Vec::new(),
            cap: capacity.max(1),
            head: 0,
            len: 0,
            sacked_bytes: 0,
            lost_bytes: 0,
            retrans_bytes: 0,
            owed: 0,
            ever_retrans: 0,
            owed_hint: 0,
            lost_total: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Entries it can hold.
    pub(crate) fn capacity(&self) -> usize {
        self.cap
    }

    /// Grows to room for `capacity` entries (nothing if it has that many
    /// already), keeping every entry and its marks. The entries themselves
    /// are allocated as segments need them.
    pub(crate) fn grow(&mut self, capacity: usize) {
        self.cap = self.cap.max(capacity);
    }

    /// Makes room for one more entry when every allocated one is in use:
    /// twice the entries (at least [`FIRST_ENTRIES`], at most `cap`),
    /// keeping every entry and its marks. Allocates: a few times per busy
    /// period of a connection (its flight growing), never once it is
    /// allocated for its flight.
    fn make_room(&mut self) {
        if self.len < self.ring.len() {
            return;
        }
        let entries = (2 * self.ring.len()).max(FIRST_ENTRIES).min(self.cap);
        let mut ring = Vec::with_capacity(entries);
        ring.extend((0..self.len).map(|i| self.ring[self.idx(i)]));
        ring.resize(entries, EMPTY);
        self.ring = ring;
        self.head = 0;
    }

    /// Frees the entries of an empty queue (an idle connection); the next
    /// segment pushed allocates them again. Returns the bytes freed.
    pub(crate) fn release(&mut self) -> usize {
        if self.len != 0 || self.ring.is_empty() {
            return 0;
        }
        let bytes = self.ring.len() * core::mem::size_of::<TxSeg>();
        self.ring = Vec::new();
        self.head = 0;
        bytes
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub(crate) fn is_full(&self) -> bool {
        self.len == self.cap
    }
    /// Entries that can still be pushed.
    pub(crate) fn room(&self) -> usize {
        self.cap - self.len
    }
    pub(crate) fn sacked_bytes(&self) -> usize {
        self.sacked_bytes
    }
    /// Bytes deemed lost since the connection began (each loss counted
    /// once, a lost retransmission again); for loss rates over an interval.
    pub(crate) fn lost_total(&self) -> u64 {
        self.lost_total
    }
    /// Entries owed a retransmission.
    pub(crate) fn owed(&self) -> usize {
        self.owed
    }
    /// RFC 6675 `pipe` given `flight` = snd_nxt - snd_una bytes.
    pub(crate) fn pipe(&self, flight: usize) -> usize {
        (flight + self.retrans_bytes).saturating_sub(self.sacked_bytes + self.lost_bytes)
    }

    fn idx(&self, i: usize) -> usize {
        (self.head + i) % self.ring.len()
    }

    pub(crate) fn get(&self, i: usize) -> Option<&TxSeg> {
        (i < self.len).then(|| &self.ring[self.idx(i)])
    }

    pub(crate) fn last(&self) -> Option<&TxSeg> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// One past the last sequence number tracked.
    pub(crate) fn end(&self) -> Option<SeqNum> {
        self.last().map(|s| s.end)
    }

    fn account(&mut self, s: TxSeg, add: bool) {
        let n = s.len();
        let upd = |v: &mut usize, on: bool| {
            if on {
                *v = if add { *v + n } else { v.saturating_sub(n) };
            }
        };
        upd(&mut self.sacked_bytes, s.has(SACKED));
        upd(&mut self.lost_bytes, s.has(LOST));
        upd(&mut self.retrans_bytes, s.has(RETRANS));
        let count = |v: &mut usize, on: bool| {
            if on {
                *v = if add { *v + 1 } else { v.saturating_sub(1) };
            }
        };
        count(&mut self.owed, s.owed());
        count(&mut self.ever_retrans, s.has(EVER_RETRANS));
    }

    /// Changes entry `i`'s flags (set, then clear) and its xmit time, keeping
    /// the counters right.
    fn update(&mut self, i: usize, set: u8, clear: u8, xmit: Option<Instant>) {
        if i >= self.len {
            return;
        }
        let k = self.idx(i);
        let old = self.ring[k];
        self.account(old, false);
        let mut new = old;
        new.flags = (new.flags | set) & !clear;
        if let Some(t) = xmit {
            new.xmit = t;
        }
        self.ring[k] = new;
        self.account(new, true);
        if new.owed() && !old.owed() {
            self.lost_total = self.lost_total.wrapping_add(new.len() as u64);
        }
        if new.owed() && i < self.owed_hint {
            self.owed_hint = i;
        }
    }

    /// Appends a segment just sent for the first time. Returns false (and
    /// tracks nothing) if the ring is full or it does not follow the last one.
    pub(crate) fn push(&mut self, start: SeqNum, end: SeqNum, fin: bool, now: Instant) -> bool {
        if self.is_full() || end <= start || self.end().is_some_and(|e| start < e) {
            return false;
        }
        self.make_room();
        let k = self.idx(self.len);
        self.ring[k] = TxSeg {
            start,
            end,
            xmit: now,
            flags: if fin { FIN } else { 0 },
            stamp: EMPTY.stamp,
        };
        self.len += 1;
        true
    }

    /// Splits entry `i` at `at` (strictly inside it) into two entries with
    /// its marks (a FIN stays on the second). Used when the path MTU shrinks
    /// under segments already sent. O(entries after `i`); false, and nothing
    /// changed, when the ring is full or `at` is not inside the entry.
    pub(crate) fn split(&mut self, i: usize, at: SeqNum) -> bool {
        let Some(&s) = self.get(i) else { return false };
        if self.is_full() || at <= s.start || at >= s.end {
            return false;
        }
        self.make_room();
        let mut j = self.len;
        while j > i + 1 {
            let (to, from) = (self.idx(j), self.idx(j - 1));
            self.ring[to] = self.ring[from];
            j -= 1;
        }
        self.len += 1;
        self.account(s, false);
        let first = TxSeg {
            end: at,
            flags: s.flags & !FIN,
            ..s
        };
        let second = TxSeg { start: at, ..s };
        let (k1, k2) = (self.idx(i), self.idx(i + 1));
        self.ring[k1] = first;
        self.ring[k2] = second;
        self.account(first, true);
        self.account(second, true);
        true
    }

    /// Marks LOST every entry longer than `max_len` bytes that is neither
    /// SACKed nor already lost (they were too big for the path). Returns
    /// how many were marked.
    pub(crate) fn mark_oversized_lost(&mut self, max_len: usize) -> usize {
        let mut n = 0;
        for i in 0..self.len {
            let s = self.ring[self.idx(i)];
            if s.data_len() > max_len && s.flags & (SACKED | LOST) == 0 {
                self.update(i, LOST, RETRANS, None);
                n += 1;
            }
        }
        n
    }

    /// Position of the entry holding `seq`.
    pub(crate) fn find(&self, seq: SeqNum) -> Option<usize> {
        // Binary search on start (entries are sorted and disjoint).
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let s = self.ring[self.idx(mid)];
            if s.end <= seq {
                lo = mid + 1;
            } else if s.start > seq {
                hi = mid;
            } else {
                return Some(mid);
            }
        }
        None
    }

    /// Cumulative ACK up to `una`: drops the entries wholly below it and trims
    /// one straddling it. `delivered` sees every entry newly delivered (not
    /// SACKed before) as it was before removal; when no entry carries any
    /// mark (nothing SACKed, lost or ever retransmitted), only the last of
    /// them, which then has both the latest transmit time and the highest
    /// end, all that RACK takes from them (RFC 8985 §6.1).
    pub(crate) fn ack(&mut self, una: SeqNum, mut delivered: impl FnMut(&TxSeg)) {
        if self.sacked_bytes == 0
            && self.lost_bytes == 0
            && self.retrans_bytes == 0
            && self.ever_retrans == 0
        {
            // Clean queue (the common case): entries are in transmit order
            // and no counter moves, so the acknowledged prefix goes at once.
            let (mut lo, mut hi) = (0, self.len);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if self.ring[self.idx(mid)].end <= una {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            if lo > 0 {
                delivered(&self.ring[self.idx(lo - 1)]);
                self.head = self.idx(lo);
                self.len -= lo;
                self.owed_hint = self.owed_hint.saturating_sub(lo);
            }
            if self.len == 0 {
                self.head = 0;
                self.owed_hint = 0;
            } else {
                let k = self.idx(0);
                if self.ring[k].start < una {
                    self.ring[k].start = una;
                }
            }
            return;
        }
        while let Some(&s) = self.get(0) {
            if s.start >= una {
                break;
            }
            if s.end <= una {
                if !s.has(SACKED) {
                    delivered(&s);
                }
                self.account(s, false);
                self.head = (self.head + 1) % self.ring.len();
                self.len -= 1;
                self.owed_hint = self.owed_hint.saturating_sub(1);
                continue;
            }
            // Partly acknowledged: keep the rest as the new first entry.
            let k = self.idx(0);
            self.account(s, false);
            self.ring[k].start = una;
            let t = self.ring[k];
            self.account(t, true);
            break;
        }
        if self.len == 0 {
            self.head = 0;
            self.owed_hint = 0;
        }
    }

    /// Marks SACKED every entry wholly inside `[left, right)`; `newly` sees
    /// each newly SACKed entry. Returns the bytes newly SACKed.
    pub(crate) fn sack(
        &mut self,
        left: SeqNum,
        right: SeqNum,
        mut newly: impl FnMut(&TxSeg),
    ) -> usize {
        if right <= left {
            return 0;
        }
        let mut i = match self.find(left) {
            Some(i) => i,
            None => {
                // `left` lies before the first entry or in no entry: start at
                // the first entry at or after it.
                let mut j = 0;
                while j < self.len && self.ring[self.idx(j)].start < left {
                    j += 1;
                }
                if j == self.len {
                    return 0;
                }
                j
            }
        };
        let mut bytes = 0;
        while let Some(&s) = self.get(i) {
            if s.start >= right {
                break;
            }
            if s.start >= left && s.end <= right && !s.has(SACKED) {
                newly(&s);
                bytes += s.len();
                self.update(i, SACKED, LOST | RETRANS, None);
            }
            i += 1;
        }
        bytes
    }

    /// RFC 6675 IsLost for every un-SACKed entry below the highest SACKed
    /// one: lost once `dupthresh` SACKed segments or more than
    /// (dupthresh - 1) * `mss` SACKed bytes lie above it. Entries already
    /// retransmitted are left alone (RACK or the RTO handle those). Returns
    /// the number newly marked.
    pub(crate) fn mark_lost_by_sack(&mut self, dupthresh: usize, mss: usize) -> usize {
        if self.sacked_bytes == 0 {
            return 0;
        }
        let mut above_segs = 0;
        let mut above_bytes = 0;
        let mut marked = 0;
        for i in (0..self.len).rev() {
            let s = self.ring[self.idx(i)];
            if s.has(SACKED) {
                above_segs += 1;
                above_bytes += s.len();
                continue;
            }
            if above_segs == 0 {
                continue;
            }
            let lost = above_segs >= dupthresh || above_bytes > (dupthresh - 1) * mss;
            if lost && !s.has(LOST) && !s.has(RETRANS) {
                self.update(i, LOST, 0, None);
                marked += 1;
            }
        }
        marked
    }

    /// Marks entry `i` lost (a retransmission already in flight is deemed
    /// lost too: RACK). Returns true if it was not owed before.
    pub(crate) fn mark_lost(&mut self, i: usize) -> bool {
        match self.get(i) {
            Some(s) if !s.has(SACKED) && !s.owed() => {
                self.update(i, LOST, RETRANS, None);
                true
            }
            _ => false,
        }
    }

    /// RTO (RFC 6675 §5.1, RFC 8985 §6.3): every un-SACKed entry is lost.
    pub(crate) fn mark_all_lost(&mut self) {
        for i in 0..self.len {
            self.mark_lost(i);
        }
        self.owed_hint = 0;
    }

    /// Takes back the LOST mark of every entry still owed a retransmission
    /// (the loss was spurious; entries already sent again stay as they are).
    pub(crate) fn clear_owed(&mut self) {
        if self.owed == 0 {
            return;
        }
        for i in 0..self.len {
            if self.ring[self.idx(i)].owed() {
                self.update(i, 0, LOST, None);
            }
        }
    }

    /// Forgets every SACK mark (the receiver reneged, RFC 2018 §8).
    pub(crate) fn clear_sacked(&mut self) {
        if self.sacked_bytes == 0 {
            return;
        }
        for i in 0..self.len {
            if self.ring[self.idx(i)].has(SACKED) {
                self.update(i, 0, SACKED, None);
            }
        }
    }

    /// The entry at `i` was retransmitted at `now`.
    pub(crate) fn retransmitted(&mut self, i: usize, now: Instant) {
        self.update(i, RETRANS | EVER_RETRANS, 0, Some(now));
    }

    /// Records the delivery state at the (re)transmission of entry `i`.
    pub(crate) fn stamp(&mut self, i: usize, stamp: RateStamp) {
        if i < self.len {
            let k = self.idx(i);
            self.ring[k].stamp = stamp;
        }
    }

    /// [`Scoreboard::stamp`] for the entries from position `from` to the last.
    pub(crate) fn stamp_from(&mut self, from: usize, stamp: RateStamp) {
        for i in from..self.len {
            self.stamp(i, stamp);
        }
    }

    /// [`Scoreboard::stamp`] for the last entry.
    #[cfg(test)]
    pub(crate) fn stamp_last(&mut self, stamp: RateStamp) {
        if let Some(i) = self.len.checked_sub(1) {
            self.stamp(i, stamp);
        }
    }

    /// Position of the lowest entry owed a retransmission (RFC 6675 NextSeg
    /// rule 1).
    pub(crate) fn next_owed(&mut self) -> Option<usize> {
        if self.owed == 0 {
            return None;
        }
        for i in self.owed_hint..self.len {
            if self.ring[self.idx(i)].owed() {
                self.owed_hint = i;
                return Some(i);
            }
        }
        for i in 0..self.owed_hint.min(self.len) {
            if self.ring[self.idx(i)].owed() {
                self.owed_hint = i;
                return Some(i);
            }
        }
        None
    }

    /// Same as `next_owed` without moving the hint.
    pub(crate) fn peek_owed(&self) -> Option<usize> {
        if self.owed == 0 {
            return None;
        }
        (self.owed_hint..self.len)
            .chain(0..self.owed_hint.min(self.len))
            .find(|&i| self.ring[self.idx(i)].owed())
    }

    /// RACK loss detection (RFC 8985 §6.2 step 5): every un-SACKed entry
    /// sent before the most recently delivered one (`rack_xmit`, `rack_end`)
    /// and older than `now - wait` is lost. Returns the longest time an
    /// entry sent before it still has to wait (for the reordering timer).
    pub(crate) fn rack_detect(
        &mut self,
        rack_xmit: Instant,
        rack_end: SeqNum,
        wait: core::time::Duration,
        now: Instant,
    ) -> Option<core::time::Duration> {
        let mut timeout = None;
        let ordered = self.ever_retrans == 0;
        for i in 0..self.len {
            let s = self.ring[self.idx(i)];
            let before = s.xmit < rack_xmit || (s.xmit == rack_xmit && s.end <= rack_end);
            if !before {
                if ordered {
                    // Only first transmissions: later entries were sent later.
                    break;
                }
                continue;
            }
            if s.has(SACKED) || s.owed() {
                continue;
            }
            let deadline = s.xmit + wait;
            if deadline <= now {
                self.mark_lost(i);
            } else {
                let rem = deadline - now;
                timeout = Some(timeout.map_or(rem, |t: core::time::Duration| t.max(rem)));
            }
        }
        timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Instant = Instant(1_000_000_000);

    fn board() -> Scoreboard {
        let mut sb = Scoreboard::new(8);
        for i in 0..6u32 {
            assert!(sb.push(SeqNum(i * 100), SeqNum(i * 100 + 100), false, T));
        }
        sb
    }

    #[test]
    fn scoreboard_sack_and_loss_marks_keep_pipe_per_rfc6675() {
        let mut sb = board();
        assert_eq!(sb.pipe(600), 600);
        // SACK segments 2..6: 4 above segment 0 and 1 -> both lost.
        assert_eq!(sb.sack(SeqNum(200), SeqNum(600), |_| {}), 400);
        assert_eq!(sb.mark_lost_by_sack(3, 100), 2);
        assert_eq!(sb.owed(), 2);
        // pipe = 600 - 400 sacked - 200 lost.
        assert_eq!(sb.pipe(600), 0);
        let i = sb.next_owed().unwrap();
        assert_eq!(i, 0);
        sb.retransmitted(i, T);
        assert_eq!(sb.pipe(600), 100);
        assert_eq!(sb.next_owed(), Some(1));
        // Cumulative ACK of everything up to 200 drops two entries.
        sb.ack(SeqNum(200), |_| {});
        assert_eq!(sb.len(), 4);
        assert_eq!(sb.pipe(400), 0);
        assert_eq!(sb.owed(), 0);
    }

    #[test]
    fn scoreboard_full_push_refused_and_partial_ack_trims() {
        let mut sb = board();
        assert!(sb.push(SeqNum(600), SeqNum(700), false, T));
        assert!(sb.push(SeqNum(700), SeqNum(800), true, T));
        assert!(sb.is_full());
        assert!(!sb.push(SeqNum(800), SeqNum(900), false, T));
        sb.ack(SeqNum(150), |_| {});
        assert_eq!(
            sb.get(0).map(|s| (s.start, s.len())),
            Some((SeqNum(150), 50))
        );
        assert_eq!(sb.find(SeqNum(750)), Some(6));
        assert_eq!(sb.last().map(|s| s.data_len()), Some(99));
    }

    #[test]
    fn scoreboard_clean_ack_reports_the_last_entry_and_marked_ack_every_one() {
        let ms = core::time::Duration::from_millis;
        let mut sb = Scoreboard::new(8);
        for i in 0..6u32 {
            sb.push(
                SeqNum(i * 100),
                SeqNum(i * 100 + 100),
                false,
                T + ms(i.into()),
            );
        }
        // Wrap the ring: the acknowledged prefix crosses its end.
        sb.ack(SeqNum(500), |_| {});
        for i in 6..12u32 {
            assert!(sb.push(
                SeqNum(i * 100),
                SeqNum(i * 100 + 100),
                i == 11,
                T + ms(i.into())
            ));
        }
        let mut seen = Vec::new();
        sb.ack(SeqNum(950), |s| seen.push((s.start, s.xmit)));
        assert_eq!(seen, vec![(SeqNum(800), T + ms(8))]);
        assert_eq!(sb.len(), 3);
        assert_eq!(
            sb.get(0).map(|s| (s.start, s.end)),
            Some((SeqNum(950), SeqNum(1000)))
        );
        assert_eq!(sb.pipe(1200 - 950), 250);
        assert_eq!(sb.last().map(|s| s.has(FIN)), Some(true));
        // With a retransmitted entry every delivered entry is reported.
        sb.retransmitted(1, T + ms(20));
        let mut seen = Vec::new();
        sb.ack(SeqNum(1200), |s| seen.push(s.start));
        assert_eq!(seen, vec![SeqNum(950), SeqNum(1000), SeqNum(1100)]);
        assert!(sb.is_empty());
        assert_eq!(sb.pipe(0), 0);
    }

    #[test]
    fn scoreboard_rack_marks_only_segments_sent_before_and_old_enough() {
        let mut sb = Scoreboard::new(4);
        let ms = core::time::Duration::from_millis;
        sb.push(SeqNum(0), SeqNum(100), false, T);
        sb.push(SeqNum(100), SeqNum(200), false, T + ms(5));
        sb.push(SeqNum(200), SeqNum(300), false, T + ms(10));
        sb.sack(SeqNum(200), SeqNum(300), |_| {});
        // Delivered: sent at T+10; wait (RTT + reo_wnd) 8 ms. At T+12 the
        // first (deadline T+8) is lost and the second (deadline T+13) has
        // 1 ms left; at T+13 it is lost too.
        let t = sb.rack_detect(T + ms(10), SeqNum(300), ms(8), T + ms(12));
        assert_eq!(sb.owed(), 1);
        assert_eq!(t, Some(ms(1)));
        sb.rack_detect(T + ms(10), SeqNum(300), ms(8), T + ms(13));
        assert_eq!(sb.owed(), 2);
    }
}
