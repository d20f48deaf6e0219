//! [`Faulty`]: a fault-injecting [`Engine`] wrapper for crash tests.
//!
//! It can fail the next N `apply` or `persist` calls, or "trip" (immediately
//! or after N more successful applies) so that every later write, DDL and
//! persist fails, like a dead disk or a poisoned fjall database. Reads keep
//! working. A failed `apply` applies nothing. It also records which applied
//! batches have not yet been covered by a successful `persist`
//! ([`Faulty::unpersisted`]): the writes a power loss could still erase, which
//! an upper layer must therefore never have acknowledged as durable.

use crate::{Engine, Snapshot, StorageError, WriteBatch};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Sentinel for "no trip scheduled".
const DISARMED: u64 = u64::MAX;

/// A wrapper over engine `E` that injects failures on demand.
pub struct Faulty<E: Engine> {
    inner: E,
    fail_applies: AtomicU64,
    fail_persists: AtomicU64,
    /// Successful applies still allowed before tripping, or [`DISARMED`].
    trip_after: AtomicU64,
    tripped: AtomicBool,
    injected: AtomicU64,
    /// Batches applied but not yet covered by a successful persist.
    unpersisted: Mutex<Log>,
}

/// Applied batches tagged with their apply sequence number, oldest first.
#[derive(Default)]
struct Log {
    next_seq: u64,
    entries: Vec<(u64, WriteBatch)>,
}

/// Atomically decrements a positive counter; true if it was positive.
fn take_one(counter: &AtomicU64) -> bool {
    counter
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .is_ok()
}

impl<E: Engine> Faulty<E> {
    /// Wraps `inner`; no faults are armed.
    pub fn new(inner: E) -> Self {
        Self {
            inner,
            fail_applies: AtomicU64::new(0),
            fail_persists: AtomicU64::new(0),
            trip_after: AtomicU64::new(DISARMED),
            tripped: AtomicBool::new(false),
            injected: AtomicU64::new(0),
            unpersisted: Mutex::new(Log::default()),
        }
    }

    /// The wrapped engine (bypasses fault injection).
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// Makes the next `n` `apply` calls fail with [`StorageError::Injected`]
    /// without applying anything (adds to any already armed).
    pub fn fail_next_applies(&self, n: u64) {
        self.fail_applies.fetch_add(n, Ordering::AcqRel);
    }

    /// Makes the next `n` `persist` calls fail with [`StorageError::Injected`]
    /// without syncing (adds to any already armed).
    pub fn fail_next_persists(&self, n: u64) {
        self.fail_persists.fetch_add(n, Ordering::AcqRel);
    }

    /// From now on every `apply`, `persist`, `create_space` and `drop_space`
    /// fails, until [`Faulty::heal`].
    pub fn trip(&self) {
        self.tripped.store(true, Ordering::Release);
    }

    /// Lets `n` more applies succeed, then trips (see [`Faulty::trip`]).
    pub fn trip_after_applies(&self, n: u64) {
        if n == 0 {
            self.trip();
        } else {
            self.trip_after.store(n, Ordering::Release);
        }
    }

    /// Disarms every pending fault and un-trips.
    pub fn heal(&self) {
        self.fail_applies.store(0, Ordering::Release);
        self.fail_persists.store(0, Ordering::Release);
        self.trip_after.store(DISARMED, Ordering::Release);
        self.tripped.store(false, Ordering::Release);
    }

    /// True once tripped (and not healed).
    pub fn is_tripped(&self) -> bool {
        self.tripped.load(Ordering::Acquire)
    }

    /// Number of failures injected so far.
    pub fn injected_count(&self) -> u64 {
        self.injected.load(Ordering::Acquire)
    }

    /// Batches successfully applied but not yet covered by a successful
    /// `persist`, oldest first: what a crash could lose.
    pub fn unpersisted(&self) -> Vec<WriteBatch> {
        self.unpersisted
            .lock()
            .entries
            .iter()
            .map(|(_, b)| b.clone())
            .collect()
    }

    fn inject(&self, op: &'static str) -> StorageError {
        self.injected.fetch_add(1, Ordering::AcqRel);
        StorageError::Injected(op)
    }

    fn check_tripped(&self, op: &'static str) -> Result<(), StorageError> {
        if self.is_tripped() {
            Err(self.inject(op))
        } else {
            Ok(())
        }
    }
}

impl<E: Engine> Engine for Faulty<E> {
    fn create_space(&self, name: &str) -> Result<(), StorageError> {
        self.check_tripped("create_space")?;
        self.inner.create_space(name)
    }

    fn drop_space(&self, name: &str) -> Result<(), StorageError> {
        self.check_tripped("drop_space")?;
        self.inner.drop_space(name)
    }

    fn space_names(&self) -> Result<Vec<String>, StorageError> {
        self.inner.space_names()
    }

    fn get(&self, space: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.inner.get(space, key)
    }

    fn snapshot(&self) -> Box<dyn Snapshot> {
        self.inner.snapshot()
    }

    fn apply(&self, batch: WriteBatch) -> Result<(), StorageError> {
        self.check_tripped("apply")?;
        if take_one(&self.fail_applies) {
            return Err(self.inject("apply"));
        }
        let trip_now = self
            .trip_after
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n != DISARMED).then(|| n.saturating_sub(1))
            })
            .is_ok_and(|prev| prev <= 1);
        // Hold the log lock across the apply so log order matches apply order.
        let mut log = self.unpersisted.lock();
        let record = batch.clone();
        let res = self.inner.apply(batch);
        if res.is_ok() && !record.is_empty() {
            let seq = log.next_seq;
            log.next_seq += 1;
            log.entries.push((seq, record));
        }
        drop(log);
        if trip_now {
            self.trip_after.store(DISARMED, Ordering::Release);
            self.trip();
        }
        res
    }

    fn persist(&self) -> Result<(), StorageError> {
        self.check_tripped("persist")?;
        if take_one(&self.fail_persists) {
            return Err(self.inject("persist"));
        }
        // Batches logged before the fsync starts are covered by it.
        let covered = self.unpersisted.lock().next_seq;
        self.inner.persist()?;
        self.unpersisted
            .lock()
            .entries
            .retain(|(seq, _)| *seq >= covered);
        Ok(())
    }
}
