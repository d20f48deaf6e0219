//! Checking reads while running: a read must return the value last written
//! to its key (or, for a key not written during the run, the loaded one).
//!
//! Writes and reads race, so a read is only checked when its outcome is
//! certain: no write to the key was in flight when the read started, and
//! none started before it finished (the key's version did not move). A key
//! whose writes overlapped, or whose write failed or timed out, has an
//! unknown value until the next clean write. The tracker keeps a digest of
//! the last written field (YCSB updates write one field) per written key,
//! so its memory grows with the keys written, not with the data set.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::data::mix64;

/// Lock shards (keys are spread by a hash of the record number).
const SHARDS: usize = 64;

/// What is known of a key's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// Field `.0` holds a value with digest `.1`.
    Value(usize, u64),
    /// The key does not exist.
    Absent,
    /// Not known (overlapping or failed writes).
    Unknown,
}

#[derive(Debug, Clone, Copy)]
struct KeyState {
    version: u64,
    in_flight: u32,
    overlapped: bool,
    known: Known,
}

/// The outcome of one checked read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The read returned the expected value.
    Ok,
    /// Could not be checked.
    Unchecked,
    /// The read returned something else.
    Mismatch,
}

/// What a read saw before it started, to be compared when it ends.
#[derive(Debug, Clone, Copy)]
pub struct ReadTicket {
    version: u64,
    clean: bool,
}

/// Per-key write history of one data set on one system.
#[derive(Default)]
pub struct Tracker {
    shards: Vec<Mutex<HashMap<u64, KeyState>>>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker").finish_non_exhaustive()
    }
}

impl Tracker {
    /// An empty tracker: every key holds its loaded value.
    pub fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, key: u64) -> &Mutex<HashMap<u64, KeyState>> {
        &self.shards[(mix64(key) % SHARDS as u64) as usize]
    }

    /// Call before sending a write to `key`.
    pub fn begin_write(&self, key: u64) {
        let mut s = self.shard(key).lock();
        let st = s.entry(key).or_insert(KeyState {
            version: 0,
            in_flight: 0,
            overlapped: false,
            known: Known::Unknown,
        });
        st.version += 1;
        if st.in_flight > 0 {
            st.overlapped = true;
        }
        st.in_flight += 1;
        st.known = Known::Unknown;
    }

    /// Call when the write's answer came: `Some(known)` if it succeeded and
    /// left the key as `known`, `None` if its outcome is uncertain.
    pub fn end_write(&self, key: u64, outcome: Option<Known>) {
        let mut s = self.shard(key).lock();
        if let Some(st) = s.get_mut(&key) {
            st.in_flight = st.in_flight.saturating_sub(1);
            st.version += 1;
            st.known = match outcome {
                Some(k) if !st.overlapped => k,
                _ => Known::Unknown,
            };
            if st.in_flight == 0 {
                st.overlapped = false;
            }
        }
    }

    /// Call before sending a read of `key`.
    pub fn begin_read(&self, key: u64) -> ReadTicket {
        let s = self.shard(key).lock();
        match s.get(&key) {
            None => ReadTicket {
                version: 0,
                clean: true,
            },
            Some(st) => ReadTicket {
                version: st.version,
                clean: st.in_flight == 0,
            },
        }
    }

    /// What the read should have seen: `None` if it cannot be checked,
    /// `Some(None)` if the key was never written (the loaded value),
    /// `Some(Some(known))` otherwise.
    pub fn expected(&self, key: u64, t: ReadTicket) -> Option<Option<Known>> {
        if !t.clean {
            return None;
        }
        let s = self.shard(key).lock();
        match s.get(&key) {
            None if t.version == 0 => Some(None),
            None => None,
            Some(st) if st.version != t.version || st.in_flight > 0 => None,
            Some(st) if st.known == Known::Unknown => None,
            Some(st) => Some(Some(st.known)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_writes_are_checked() {
        let t = Tracker::new();
        let r = t.begin_read(1);
        assert_eq!(t.expected(1, r), Some(None), "never written: loaded value");
        t.begin_write(1);
        t.end_write(1, Some(Known::Value(3, 99)));
        let r = t.begin_read(1);
        assert_eq!(t.expected(1, r), Some(Some(Known::Value(3, 99))));
        t.begin_write(1);
        t.end_write(1, Some(Known::Absent));
        let r = t.begin_read(1);
        assert_eq!(t.expected(1, r), Some(Some(Known::Absent)));
    }

    #[test]
    fn races_are_not_checked() {
        let t = Tracker::new();
        // A write during the read.
        let r = t.begin_read(2);
        t.begin_write(2);
        assert_eq!(t.expected(2, r), None);
        t.end_write(2, Some(Known::Value(0, 1)));
        assert_eq!(t.expected(2, r), None, "version moved");
        // A read starting during a write.
        t.begin_write(2);
        let r = t.begin_read(2);
        t.end_write(2, Some(Known::Value(0, 2)));
        assert_eq!(t.expected(2, r), None);
        // Overlapping writes leave the value unknown until a clean one.
        t.begin_write(2);
        t.begin_write(2);
        t.end_write(2, Some(Known::Value(0, 3)));
        t.end_write(2, Some(Known::Value(0, 4)));
        let r = t.begin_read(2);
        assert_eq!(t.expected(2, r), None);
        t.begin_write(2);
        t.end_write(2, Some(Known::Value(0, 5)));
        let r = t.begin_read(2);
        assert_eq!(t.expected(2, r), Some(Some(Known::Value(0, 5))));
        // A failed write is uncertain.
        t.begin_write(2);
        t.end_write(2, None);
        let r = t.begin_read(2);
        assert_eq!(t.expected(2, r), None);
    }
}
