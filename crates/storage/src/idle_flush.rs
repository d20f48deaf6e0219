//! Writes memtables out to table files once writes go quiet.
//!
//! fjall flushes a keyspace's memtable only when it fills (64 MiB), so after a load up to
//! that much of every keyspace stays in the memtable, a skip list: scanning it costs
//! about twice as much per document as scanning a table file (a pointer chase and two
//! reference-counted clones per entry), and the journal holding it is replayed at the
//! next start. A background thread therefore rotates every memtable of at least
//! [`MIN_BYTES`] once no write has been applied for [`QUIET`]; fjall's flush workers
//! write it out as usual (nothing here writes data, so durability is unchanged).
//!
//! Releasing the flushed memtable: lsm-tree 3.1 keeps every "super version" (memtables
//! plus table list) that a snapshot might still read, and drops old ones only when a
//! flush, a compaction or a memtable rotation runs its version GC with fjall's snapshot
//! watermark. The flush of a rotated memtable appends a version at the next sequence
//! number, which that flush's own GC (watermark from before it) cannot pass, so the
//! version still holding the flushed memtable (a full memtable per keyspace at most)
//! stays until the next write fills a memtable — indefinitely on a server that only
//! reads. Once every flush is done, a round that finds old versions in any keyspace
//! (of its own flushes, or of one fjall made during the writes) therefore writes one
//! marker into a private keyspace ([`GC_SPACE`]) and rotates it: rotation raises fjall's
//! watermark past the flushes' versions (when no snapshot is open) and collects the
//! versions of every keyspace, which drops the flushed memtables. fjall computes the
//! watermark and does the collecting itself (no public call does it without a write);
//! the marker (one key, overwritten each time) costs a tiny table file per round. When
//! versions remain after it (a flush worker still publishing its version, a snapshot
//! open), the collection is tried again a few times with doubling pauses.
//!
//! Invariant: the thread holds no lock while it waits, and it ends before the engine it
//! watches is dropped (`IdleFlush` is the engine's first field, and dropping it joins).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fjall::{AbstractTree, Keyspace};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::fjall_engine::{SpaceGuard, Spaces};

/// The private keyspace the version GC's marker is written to; never a user space
/// (`Fjall` refuses the name and leaves it out of its space list).
pub(crate) const GC_SPACE: &str = "$ponder-version-gc";

/// The longest a round waits for fjall's flush workers before it gives up the GC (the
/// next round tries again).
const FLUSH_WAIT: Duration = Duration::from_secs(60);

/// What the thread works with, besides the stop signal.
pub(crate) struct Watched {
    /// The engine's user spaces.
    pub(crate) spaces: Arc<RwLock<Spaces>>,
    /// The engine's count of applied batches.
    pub(crate) applied: Arc<AtomicU64>,
    /// Held for a round's rotations, so no keyspace is created or dropped under it.
    pub(crate) ddl: Arc<Mutex<()>>,
    /// The [`GC_SPACE`] keyspace.
    pub(crate) gc_space: Keyspace,
    /// The engine's free-space check, in front of the marker write.
    pub(crate) space: Arc<SpaceGuard>,
    /// The engine's directory (for the free-space check).
    pub(crate) path: PathBuf,
}

/// How long no write may have been applied before memtables are flushed. Short, so that
/// a load's last memtable is written out (and released) before the reads after it have
/// filled the caches: with 1 s, the first second of YCSB C after a load held both.
pub(crate) const QUIET: Duration = Duration::from_millis(250);

/// Smaller memtables are left alone: they cost little to scan, and flushing each would
/// leave many small table files for compaction to merge.
pub(crate) const MIN_BYTES: u64 = 4 << 20;

/// The running flusher; dropping it stops the thread and waits for it.
pub(crate) struct IdleFlush {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl IdleFlush {
    /// Starts watching the engine's applied count and spaces.
    pub(crate) fn start(watched: Watched) -> Self {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("idle-flush".into())
            .spawn(move || run(&signal, &watched))
            .ok();
        Self { stop, thread }
    }
}

impl Drop for IdleFlush {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits up to `d` for the stop signal; true when stopped.
fn stopped_after(stop: &(Mutex<bool>, Condvar), d: Duration) -> bool {
    let mut stopped = stop.0.lock();
    if !*stopped {
        stop.1.wait_for(&mut stopped, d);
    }
    *stopped
}

fn run(stop: &(Mutex<bool>, Condvar), w: &Watched) {
    let mut seen = w.applied.load(Ordering::Acquire);
    // The count at the last flush round: nothing to do again until it moves.
    let mut flushed = seen;
    let (mut retries_left, mut retry_pause, mut retry_at) = (0, QUIET, Instant::now());
    loop {
        if stopped_after(stop, QUIET) {
            return;
        }
        let now = w.applied.load(Ordering::Acquire);
        if now != seen {
            seen = now;
            continue;
        }
        if now == flushed {
            // A collection that left versions behind (a flush worker still publishing
            // its version, or a snapshot open) is tried again, a bounded number of times
            // with growing pauses: each try costs a tiny table file.
            if retries_left > 0 && Instant::now() >= retry_at {
                retries_left -= 1;
                retry_pause *= 2;
                retry_at = Instant::now() + retry_pause;
                if old_versions(&w.spaces.read()) {
                    collect_versions(w);
                } else {
                    retries_left = 0;
                }
            }
            continue;
        }
        flushed = now;
        retries_left = GC_RETRIES;
        retry_pause = QUIET;
        retry_at = Instant::now() + retry_pause;
        let handles = {
            let _ddl = w.ddl.lock();
            let handles = Arc::clone(&w.spaces.read());
            for ks in handles.values() {
                if ks.tree.active_memtable().size() >= MIN_BYTES {
                    // A failure (a poisoned journal) is reported by the next write.
                    let _ = ks.rotate_memtable();
                }
            }
            handles
        };
        // Wait for fjall's flush workers (no lock held), then collect versions: those
        // of this round's flushes, and of earlier ones (a memtable that filled during
        // the writes was flushed by fjall, and its version waits for a GC as well).
        let deadline = Instant::now() + FLUSH_WAIT;
        let pending = || {
            handles
                .values()
                .any(|ks| ks.tree.sealed_memtable_count() > 0)
        };
        while pending() && Instant::now() < deadline {
            if stopped_after(stop, FLUSH_POLL) {
                return;
            }
        }
        if !pending() && old_versions(&handles) {
            collect_versions(w);
        }
    }
}

/// How many times a round's collection is tried again while old versions remain.
const GC_RETRIES: u32 = 6;

/// Whether any keyspace keeps versions waiting for a GC.
fn old_versions(spaces: &Spaces) -> bool {
    spaces
        .values()
        .any(|ks| ks.tree.version_free_list_len() > 0)
}

/// How often a round looks whether its flushes are done.
const FLUSH_POLL: Duration = Duration::from_millis(20);

/// Makes fjall collect old versions of every keyspace (see the module notes). Skipped
/// when the disk is nearly full: a failed journal write would poison the database.
fn collect_versions(w: &Watched) {
    if w.space.admit(&w.path, 1 << 10).is_err() {
        return;
    }
    if w.gc_space.insert(b"gc", b"").is_ok() {
        // A failure here (a poisoned journal) is reported by the next write.
        let _ = w.gc_space.rotate_memtable();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, Fjall, WriteBatch};

    /// The active memtable's size of `space`.
    fn memtable_bytes(e: &Fjall, space: &str) -> u64 {
        let ks = e.spaces.read().get(space).cloned().expect("space");
        ks.tree.active_memtable().size()
    }

    fn fill(e: &Fjall, space: &str, docs: usize) {
        let mut b = WriteBatch::new();
        for i in 0..docs {
            b.put(space, format!("k{i:08}"), vec![b'x'; 1000]);
        }
        e.apply(b).expect("apply");
    }

    #[test]
    fn a_large_memtable_is_flushed_once_writes_stop_and_a_small_one_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = Fjall::open(dir.path(), 64 << 20).expect("open");
        e.create_space("big").expect("space");
        e.create_space("small").expect("space");
        fill(&e, "big", 8_000);
        fill(&e, "small", 100);
        assert!(memtable_bytes(&e, "big") >= MIN_BYTES);
        let deadline = std::time::Instant::now() + QUIET * 10;
        while memtable_bytes(&e, "big") > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(memtable_bytes(&e, "big"), 0, "flushed");
        assert!(memtable_bytes(&e, "small") > 0, "left alone");
        // Flushed data reads back, and after a reopen too.
        assert_eq!(
            e.get("big", b"k00007999").expect("get").map(|v| v.len()),
            Some(1000)
        );
        drop(e);
        let e = Fjall::open(dir.path(), 64 << 20).expect("reopen");
        assert_eq!(
            e.get("big", b"k00000000").expect("get").map(|v| v.len()),
            Some(1000)
        );
        assert_eq!(
            e.get("small", b"k00000099").expect("get").map(|v| v.len()),
            Some(1000)
        );
    }

    #[test]
    fn a_flushed_memtable_is_released_once_writes_stop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = Fjall::open(dir.path(), 8 << 20).expect("open");
        e.create_space("big").expect("space");
        fill(&e, "big", 8_000);
        let ks = e.spaces.read().get("big").cloned().expect("space");
        let memtable = Arc::downgrade(&ks.tree.active_memtable());
        // Flushed, and no version is left holding the memtable: it is freed.
        // Generous: the loop ends as soon as it holds; a loaded machine delays the flush.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while (memtable.strong_count() > 0 || ks.tree.version_free_list_len() > 0)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(ks.tree.version_free_list_len(), 0, "old versions collected");
        assert_eq!(memtable.strong_count(), 0, "memtable released");
        assert_eq!(
            e.get("big", b"k00004000").expect("get").map(|v| v.len()),
            Some(1000)
        );
        // The collector's keyspace is private: not listed, not creatable, and skipped
        // when the database is opened again.
        assert_eq!(e.space_names().expect("names"), vec!["big".to_owned()]);
        assert!(e.create_space(GC_SPACE).is_err());
        assert!(e.get(GC_SPACE, b"gc").is_err());
        drop(ks);
        drop(e);
        let e = Fjall::open(dir.path(), 8 << 20).expect("reopen");
        assert_eq!(e.space_names().expect("names"), vec!["big".to_owned()]);
        assert_eq!(
            e.get("big", b"k00007999").expect("get").map(|v| v.len()),
            Some(1000)
        );
    }
}
