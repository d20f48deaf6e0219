//! [`Ring`]: the changes of one feed session on a shard's leader that its remote poller
//! has not acknowledged yet, numbered from 1 in the order they were applied (pure).
//!
//! Invariants: the entries are numbered `acked + 1 ..= last` without a hole; a poll
//! "after `x`" acknowledges (drops) everything up to `x`, so a poll answer lost on the
//! way is asked again and answered the same; a poll after a number already
//! acknowledged (a long poll overtaken by the polls of a snapshot, which its poller no
//! longer waits for) is answered from the first change not acknowledged: its answer's
//! numbers say which changes it holds, and the poller skips those it has; the ring
//! never holds more than its entry and byte caps: a push past them breaks it for good
//! (the poller fell behind, its feeds end), it never drops a change silently.

use std::collections::VecDeque;

/// One change as sent between servers: old and new document as JSON text.
pub(crate) type WireChange = (Option<String>, Option<String>);

/// Why a ring cannot answer a poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Behind {
    /// It overflowed its caps: changes were lost.
    Overflow,
    /// The poll asked for changes already acknowledged (or never made).
    Position,
}

/// The unacknowledged changes of one session.
#[derive(Debug)]
pub(crate) struct Ring {
    /// Every change up to this number was acknowledged (dropped).
    acked: u64,
    entries: VecDeque<WireChange>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
    broken: bool,
}

fn size_of(c: &WireChange) -> usize {
    c.0.as_ref().map_or(0, String::len) + c.1.as_ref().map_or(0, String::len) + 16
}

impl Ring {
    /// An empty ring holding at most `max_entries` changes and `max_bytes` of text.
    pub(crate) fn new(max_entries: usize, max_bytes: usize) -> Ring {
        Ring {
            acked: 0,
            entries: VecDeque::new(),
            bytes: 0,
            max_entries: max_entries.max(1),
            max_bytes,
            broken: false,
        }
    }

    /// The number of the last change pushed (0 before any).
    pub(crate) fn last(&self) -> u64 {
        self.acked + self.entries.len() as u64
    }

    /// Whether a change was lost (the ring overflowed).
    pub(crate) fn broken(&self) -> bool {
        self.broken
    }

    /// Marks the ring broken (its source lost changes).
    pub(crate) fn break_off(&mut self) {
        self.broken = true;
        self.entries.clear();
        self.bytes = 0;
    }

    /// Appends a change; breaks the ring when it would exceed its caps.
    pub(crate) fn push(&mut self, change: WireChange) {
        if self.broken {
            return;
        }
        let size = size_of(&change);
        if self.entries.len() >= self.max_entries || self.bytes + size > self.max_bytes {
            self.break_off();
            return;
        }
        self.bytes += size;
        self.entries.push_back(change);
    }

    /// Whether there is a change after `after` not acknowledged yet.
    pub(crate) fn has_after(&self, after: u64) -> bool {
        self.broken || self.last() > after.max(self.acked)
    }

    /// Acknowledges everything up to `after`, then answers the changes after it (after
    /// the last acknowledged one if that is later; at most up to `upto`, at most
    /// `max_entries` of them and, past the first, `max_bytes` of text): the number of
    /// the last one answered, and the changes, which end at that number.
    pub(crate) fn poll(
        &mut self,
        after: u64,
        upto: Option<u64>,
        max_entries: usize,
        max_bytes: usize,
    ) -> Result<(u64, Vec<WireChange>), Behind> {
        if self.broken {
            return Err(Behind::Overflow);
        }
        if after > self.last() {
            return Err(Behind::Position);
        }
        let after = after.max(self.acked);
        while self.acked < after {
            if let Some(c) = self.entries.pop_front() {
                self.bytes -= size_of(&c);
            }
            self.acked += 1;
        }
        let end = upto.unwrap_or(u64::MAX).min(self.last());
        let mut out = Vec::new();
        let mut bytes = 0;
        for c in &self.entries {
            if after + out.len() as u64 >= end || out.len() >= max_entries.max(1) {
                break;
            }
            let size = size_of(c);
            if !out.is_empty() && bytes + size > max_bytes {
                break;
            }
            bytes += size;
            out.push(c.clone());
        }
        Ok((after + out.len() as u64, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(i: u32) -> WireChange {
        (None, Some(format!("{{\"id\":{i}}}")))
    }

    #[test]
    fn polls_answer_in_order_and_acknowledge_what_came_before() {
        let mut r = Ring::new(100, 1 << 20);
        for i in 1..=5 {
            r.push(c(i));
        }
        assert_eq!(r.last(), 5);
        let (last, got) = r.poll(0, None, 2, 1 << 20).unwrap();
        assert_eq!((last, got), (2, vec![c(1), c(2)]));
        // The answer was lost: asking again after 0 gives the same.
        let (last, got) = r.poll(0, None, 2, 1 << 20).unwrap();
        assert_eq!((last, got), (2, vec![c(1), c(2)]));
        let (last, got) = r.poll(2, None, 10, 1 << 20).unwrap();
        assert_eq!((last, got), (5, vec![c(3), c(4), c(5)]));
        // 0..2 are acknowledged now: a poll after 1 (overtaken) is answered after 2.
        assert_eq!(
            r.poll(1, None, 10, 1 << 20).unwrap(),
            (5, vec![c(3), c(4), c(5)])
        );
        assert_eq!(r.poll(6, None, 10, 1 << 20), Err(Behind::Position));
        let (last, got) = r.poll(5, None, 10, 1 << 20).unwrap();
        assert_eq!((last, got.len()), (5, 0));
        assert!(!r.has_after(5));
        // An overtaken poll does not wait for acknowledged changes.
        assert!(!r.has_after(1));
        assert_eq!(r.poll(1, None, 10, 1 << 20).unwrap(), (5, vec![]));
        r.push(c(6));
        assert!(r.has_after(5));
    }

    #[test]
    fn a_poll_stops_at_upto_and_at_its_byte_cap_but_answers_one_change() {
        let mut r = Ring::new(100, 1 << 20);
        for i in 1..=5 {
            r.push(c(i));
        }
        assert_eq!(r.poll(0, Some(3), 10, 1 << 20).unwrap().0, 3);
        assert_eq!(r.poll(3, Some(3), 10, 1 << 20).unwrap(), (3, vec![]));
        // A byte cap smaller than one change still answers one.
        assert_eq!(r.poll(3, None, 10, 1).unwrap(), (4, vec![c(4)]));
    }

    #[test]
    fn overflowing_the_entry_or_byte_cap_breaks_the_ring_for_good() {
        let mut r = Ring::new(3, 1 << 20);
        for i in 1..=3 {
            r.push(c(i));
        }
        assert!(!r.broken());
        r.push(c(4));
        assert!(r.broken());
        assert_eq!(r.poll(0, None, 10, 1 << 20), Err(Behind::Overflow));
        r.push(c(5));
        assert_eq!(r.poll(0, None, 10, 1 << 20), Err(Behind::Overflow));

        let mut r = Ring::new(100, 40);
        r.push(c(1));
        r.push(c(2));
        assert!(r.broken());
        // Acknowledged changes free their room.
        let mut r = Ring::new(2, 1 << 20);
        r.push(c(1));
        r.push(c(2));
        r.poll(2, None, 10, 1 << 20).unwrap();
        r.push(c(3));
        assert!(!r.broken());
        assert_eq!(r.poll(2, None, 10, 1 << 20).unwrap(), (3, vec![c(3)]));
    }
}
