//! [`Fjall`]: the production [`Engine`], backed by one fjall 3.x `Database`.
//!
//! Durability configuration (verified against fjall 3.1.13's source):
//!
//! * `manual_journal_persist` is left at its default (`false`), so each
//!   committed batch is written into the journal and flushed to the OS with
//!   `PersistMode::Buffer` — one `write(2)`, **no fsync**. Applied data thus
//!   survives `kill -9` of the process even before `persist`, but not a power
//!   loss. fjall 3 has no background/periodic fsync thread, so nothing else
//!   adds latency to `apply` (apart from the journal mutex being held while a
//!   `persist` or a journal rotation fsyncs).
//! * [`Engine::persist`] flushes the journal's userspace buffer and `fsync`s the
//!   active journal file, as `Database::persist(PersistMode::SyncAll)` does, but
//!   without holding fjall's journal lock during the fsync (`journal_sync`), so
//!   writers keep applying meanwhile. Sealed journals were already `fsync`ed on
//!   rotation, and memtable flushes write fsynced tables, so after `persist`
//!   returns every earlier apply survives power loss. Journal recovery truncates a torn trailing
//!   batch (checksummed start/end markers), keeping batches atomic.
//! * An fsync/write failure poisons the fjall database: later writes and
//!   persists fail with [`StorageError::Poisoned`] until the process restarts
//!   (fjall 3.1.13 sets a sticky flag in `Batch::commit`/`Database::persist`;
//!   reads are not affected, and recovery on the next open truncates a torn
//!   trailing batch). A journal write hitting `ENOSPC` is such a failure.
//! * To keep a full disk from poisoning the database, `apply` and
//!   `create_space` first check the free space of the data directory's file
//!   system (`statvfs`, re-read at most every [`SPACE_CHECK_INTERVAL`] or
//!   when the running estimate drops under the reserve) and refuse the write
//!   with [`StorageError::DiskFull`] while fewer than the reserve
//!   ([`Fjall::set_min_free_bytes`], default [`DEFAULT_MIN_FREE_BYTES`]) bytes
//!   are free. Nothing is written, so writes resume by themselves once space
//!   is freed. The reserve also leaves fjall room to flush memtables.

use crate::accounting::{Charged, EngineScope};
use crate::idle_flush::{IdleFlush, Watched, GC_SPACE};
use crate::journal_sync::JournalSync;
use crate::{
    check_space_name, key_unstorable, range_is_empty, Bytes, Engine, KvIter, Snapshot,
    StorageError, ValueIter, WriteBatch,
};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, Readable};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default free space a write may not eat into (see [`Fjall::set_min_free_bytes`]).
pub const DEFAULT_MIN_FREE_BYTES: u64 = 64 << 20;

/// How long a free-space reading is trusted (less written bytes) before `statvfs` again.
pub const SPACE_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Open keyspace handles by space name; replaced wholesale (copy-on-write) on DDL.
pub(crate) type Spaces = Arc<HashMap<String, Keyspace>>;

/// The fjall-backed storage engine. One fjall keyspace per space.
pub struct Fjall {
    /// First, so that its thread is stopped before anything else is dropped.
    _idle: IdleFlush,
    db: Database,
    path: PathBuf,
    /// Read-locked by `apply` for the whole commit so a concurrent
    /// `drop_space` cannot slip between handle lookup and commit.
    pub(crate) spaces: Arc<RwLock<Spaces>>,
    /// Serialises `create_space` / `drop_space` (and `IdleFlush`'s rounds with them).
    ddl: Arc<Mutex<()>>,
    /// Number of successful applies so far (also watched by `IdleFlush`).
    applied: Arc<AtomicU64>,
    /// Value of `applied` read just before the last successful fsync began.
    durable: Mutex<u64>,
    /// Fsyncs the journal outside fjall's journal lock.
    journal: JournalSync,
    /// Refuses writes while the disk is (nearly) full.
    space: Arc<SpaceGuard>,
}

/// The free-space check in front of every write (see the module notes).
pub(crate) struct SpaceGuard {
    /// The reserve in bytes; 0 disables the check.
    min_free: AtomicU64,
    /// The last `statvfs` reading, less the bytes admitted since.
    reading: Mutex<Option<(Instant, u64)>>,
}

impl SpaceGuard {
    /// Admits a write of about `bytes` bytes into the file system holding `path`.
    pub(crate) fn admit(&self, path: &Path, bytes: u64) -> Result<(), StorageError> {
        let reserve = self.min_free.load(Ordering::Relaxed);
        if reserve == 0 {
            return Ok(());
        }
        let mut reading = self.reading.lock();
        let fresh = match *reading {
            Some((at, avail)) if at.elapsed() < SPACE_CHECK_INTERVAL => {
                Some(avail).filter(|a| *a >= reserve.saturating_add(bytes))
            }
            _ => None,
        };
        let avail = match fresh {
            Some(a) => a,
            None => {
                let a = available_bytes(path)?;
                *reading = Some((Instant::now(), a));
                a
            }
        };
        if avail < reserve.saturating_add(bytes) {
            return Err(StorageError::DiskFull {
                available: avail,
                reserve,
            });
        }
        if let Some((_, a)) = reading.as_mut() {
            *a = a.saturating_sub(bytes);
        }
        Ok(())
    }
}

/// Bytes available to unprivileged writers in the file system holding `path`.
#[cfg(unix)]
pub(crate) fn available_bytes(path: &Path) -> Result<u64, StorageError> {
    let st = rustix::fs::statvfs(path).map_err(std::io::Error::from)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// How much room a data directory takes and how much its file system has left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskUsage {
    /// Bytes of the regular files under the directory.
    pub used_bytes: u64,
    /// Bytes available to unprivileged writers in its file system.
    pub free_bytes: u64,
}

/// The disk usage of the engine's directory `path` (for `/metrics`). Walks the
/// directory (fjall keeps a few hundred files at most); unreadable entries count 0.
pub fn disk_usage(path: &Path) -> Result<DiskUsage, StorageError> {
    fn walk(dir: &Path, depth: usize) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
                Ok(t) if t.is_dir() && depth < 8 => walk(&e.path(), depth + 1),
                _ => 0,
            })
            .sum()
    }
    Ok(DiskUsage {
        used_bytes: walk(path, 0),
        free_bytes: available_bytes(path)?,
    })
}

/// Free space is not checked on other platforms.
#[cfg(not(unix))]
pub(crate) fn available_bytes(_path: &Path) -> Result<u64, StorageError> {
    Ok(u64::MAX)
}

/// Data blocks of a new keyspace, in bytes (fjall's default is 4 KiB). Scans pay per
/// block (a cache lookup, an iterator over the block), and a 4 KiB block holds only
/// three of YCSB's 1.1 KB documents: 16 KiB took the analytic scan from 0.91 to 0.83 µs
/// of server CPU per document, with point reads unchanged (docs/decisions.md).
/// fjall records the size when a keyspace is created; existing keyspaces keep theirs.
const DATA_BLOCK_BYTES: u32 = 16 << 10;

/// The memtable size at which fjall rotates a keyspace's memtable and flushes it
/// (fjall's default). Up to two are in memory at once while one is flushed; 16 MiB cut
/// YCSB A's peak memory (284–290 MB against about 370 with a 128 MB cache) but, with
/// the other memory settings of that trial, the bulk load's server CPU per document
/// rose from about 16 to 21 µs (docs/decisions.md, "memtable size"). Recorded at
/// creation, as above.
const MEMTABLE_BYTES: u64 = 64 << 20;

/// The options every keyspace is created with.
fn space_options() -> KeyspaceCreateOptions {
    KeyspaceCreateOptions::default()
        .data_block_size_policy(fjall::config::BlockSizePolicy::all(DATA_BLOCK_BYTES))
        .max_memtable_size(MEMTABLE_BYTES)
}

impl Fjall {
    /// Opens (or creates) the database in directory `path` with a block cache
    /// of `cache_bytes`, reopening every existing space.
    pub fn open(path: &Path, cache_bytes: u64) -> Result<Self, StorageError> {
        let db = Database::builder(path).cache_size(cache_bytes).open()?;
        let mut spaces = HashMap::new();
        for name in db.list_keyspace_names() {
            let name: &str = &name;
            if name == GC_SPACE {
                continue;
            }
            let ks = db.keyspace(name, space_options)?;
            spaces.insert(name.to_owned(), ks);
        }
        let gc_space = db.keyspace(GC_SPACE, KeyspaceCreateOptions::default)?;
        let spaces = Arc::new(RwLock::new(Arc::new(spaces)));
        let applied = Arc::new(AtomicU64::new(0));
        let ddl = Arc::new(Mutex::new(()));
        let space = Arc::new(SpaceGuard {
            min_free: AtomicU64::new(DEFAULT_MIN_FREE_BYTES),
            reading: Mutex::new(None),
        });
        Ok(Self {
            _idle: IdleFlush::start(Watched {
                spaces: Arc::clone(&spaces),
                applied: Arc::clone(&applied),
                ddl: Arc::clone(&ddl),
                gc_space,
                space: Arc::clone(&space),
                path: path.to_path_buf(),
            }),
            db,
            path: path.to_path_buf(),
            spaces,
            ddl,
            applied,
            durable: Mutex::new(0),
            journal: JournalSync::new(path),
            space,
        })
    }

    /// Sets the free space (bytes) that writes may not eat into; 0 turns the
    /// check off (a full disk then poisons the engine until restart).
    pub fn set_min_free_bytes(&self, bytes: u64) {
        self.space.min_free.store(bytes, Ordering::Relaxed);
        *self.space.reading.lock() = None;
    }

    /// The current free-space reserve in bytes.
    pub fn min_free_bytes(&self) -> u64 {
        self.space.min_free.load(Ordering::Relaxed)
    }

    /// The directory this database lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn handle(&self, space: &str) -> Result<Keyspace, StorageError> {
        self.spaces
            .read()
            .get(space)
            .cloned()
            .ok_or_else(|| StorageError::NoSuchSpace(space.to_owned()))
    }

    /// fsyncs the folder holding keyspace directories: fjall fsyncs the new
    /// keyspace's own folder but not the directory entry naming it.
    fn sync_keyspaces_dir(&self) -> Result<(), StorageError> {
        #[cfg(unix)]
        std::fs::File::open(self.path.join("keyspaces"))?.sync_all()?;
        Ok(())
    }
}

impl Engine for Fjall {
    fn create_space(&self, name: &str) -> Result<(), StorageError> {
        check_space_name(name)?;
        if name == GC_SPACE {
            return Err(StorageError::InvalidSpaceName(name.to_owned()));
        }
        let _ddl = self.ddl.lock();
        if self.spaces.read().contains_key(name) {
            return Ok(());
        }
        // A keyspace's folder and config take a few KiB; refuse on a full disk
        // rather than let a failed write poison the database.
        self.space.admit(&self.path, 64 << 10)?;
        // The keyspace config is written to fjall's meta keyspace as an
        // fsynced table, so creation is durable once this returns.
        let ks = self.db.keyspace(name, space_options)?;
        self.sync_keyspaces_dir()?;
        let mut guard = self.spaces.write();
        let mut next = HashMap::clone(&guard);
        next.insert(name.to_owned(), ks);
        *guard = Arc::new(next);
        Ok(())
    }

    fn drop_space(&self, name: &str) -> Result<(), StorageError> {
        let _ddl = self.ddl.lock();
        let ks = {
            let mut guard = self.spaces.write();
            let Some(ks) = guard.get(name).cloned() else {
                return Ok(());
            };
            let mut next = HashMap::clone(&guard);
            next.remove(name);
            *guard = Arc::new(next);
            ks
        };
        // Files are removed once the last handle (e.g. in a snapshot) is gone.
        if let Err(e) = self.db.delete_keyspace(ks.clone()) {
            // Keep the engine's view consistent with fjall's.
            let mut guard = self.spaces.write();
            let mut next = HashMap::clone(&guard);
            next.insert(name.to_owned(), ks);
            *guard = Arc::new(next);
            return Err(e.into());
        }
        Ok(())
    }

    fn space_names(&self) -> Result<Vec<String>, StorageError> {
        let mut names: Vec<String> = self.spaces.read().keys().cloned().collect();
        names.sort();
        Ok(names)
    }

    fn get(&self, space: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let ks = self.handle(space)?;
        if key_unstorable(key) {
            return Ok(None);
        }
        let v = {
            let _engine = EngineScope::enter();
            ks.get(key)?
        };
        Ok(v.map(|v| v.to_vec()))
    }

    fn snapshot(&self) -> Box<dyn Snapshot> {
        // Under the read lock so the handle map and the seqno agree.
        let guard = self.spaces.read();
        let snap = self.db.snapshot();
        let spaces = Arc::clone(&guard);
        drop(guard);
        Box::new(FjallSnapshot { snap, spaces })
    }

    fn apply(&self, batch: WriteBatch) -> Result<(), StorageError> {
        if batch.is_empty() {
            return Ok(());
        }
        batch.validate()?;
        if self.journal.failed() {
            return Err(StorageError::Poisoned);
        }
        self.space.admit(&self.path, batch.approx_bytes())?;
        // The memtable's growth is the engine's memory, not the writer's.
        let _engine = EngineScope::enter();
        let guard = self.spaces.read();
        let mut fb = self.db.batch();
        for (space, ops) in batch.into_spaces() {
            let ks = guard
                .get(&space)
                .ok_or_else(|| StorageError::NoSuchSpace(space.clone()))?;
            for (key, value) in ops {
                match value {
                    Some(value) => fb.insert(ks, key, value),
                    None => fb.remove(ks, key),
                }
            }
        }
        fb.commit()?;
        drop(guard);
        self.applied.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    fn persist(&self) -> Result<(), StorageError> {
        let target = self.applied.load(Ordering::Acquire);
        let mut durable = self.durable.lock();
        if *durable >= target {
            // An fsync that began after our applies already covered them.
            return Ok(());
        }
        let upto = self.applied.load(Ordering::Acquire);
        self.journal.persist(&self.db)?;
        *durable = upto;
        Ok(())
    }
}

/// Values at least this long are handed out as views of fjall's buffers, not copied.
///
/// A value read from a table file is a slice of its data block (4 KiB by default), and
/// the view keeps the whole block alive for as long as the value is held: a scan whose
/// results are kept (sorted, collected into an array) holds at most about five times
/// their size for such values. Shorter values are copied, so that many small results
/// never pin a block each. Copying a large value and its first touch were a tenth of
/// the analytic scan's time (docs/performance.md).
const SHARE_MIN: usize = 1024;

/// A range value as `Bytes`: shared when long (and then charged to its holder, see
/// `accounting`), copied when short (see [`SHARE_MIN`]).
fn shared_value(v: fjall::Slice) -> Bytes {
    if v.len() >= SHARE_MIN {
        Bytes::from_owner(Charged::new(v))
    } else {
        Bytes::copy_from_slice(&v)
    }
}

/// A fjall iterator whose advancing (block reads, cache fills) is the engine's work
/// (`accounting`); what the caller makes of the items is the caller's.
struct InEngine<I>(I);

impl<I: Iterator<Item = fjall::Guard>> Iterator for InEngine<I> {
    type Item = fjall::Result<fjall::KvPair>;

    fn next(&mut self) -> Option<Self::Item> {
        let _engine = EngineScope::enter();
        self.0.next().map(fjall::Guard::into_inner)
    }
}

impl<I: DoubleEndedIterator<Item = fjall::Guard>> DoubleEndedIterator for InEngine<I> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let _engine = EngineScope::enter();
        self.0.next_back().map(fjall::Guard::into_inner)
    }
}

/// A consistent fjall snapshot plus the space handles that existed when it was taken.
struct FjallSnapshot {
    snap: fjall::Snapshot,
    spaces: Spaces,
}

impl FjallSnapshot {
    fn handle(&self, space: &str) -> Result<&Keyspace, StorageError> {
        self.spaces
            .get(space)
            .ok_or_else(|| StorageError::NoSuchSpace(space.to_owned()))
    }

    /// The pairs within `(lower, upper)`, each made into an item by `item`.
    fn pairs<T: 'static>(
        &self,
        space: &str,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        reverse: bool,
        item: fn(fjall::KvPair) -> T,
    ) -> Result<Box<dyn Iterator<Item = Result<T, StorageError>> + Send>, StorageError> {
        let ks = self.handle(space)?;
        if range_is_empty(&lower, &upper) {
            return Ok(Box::new(std::iter::empty()));
        }
        let conv = move |kv: fjall::Result<fjall::KvPair>| kv.map(item).map_err(StorageError::from);
        if reverse {
            return Ok(Box::new(
                InEngine(self.snap.range(ks, (lower, upper)))
                    .rev()
                    .map(conv),
            ));
        }
        // Forward: a bounded fjall range also seeks the upper bound in every table it
        // reads (for reverse iteration), ~20% of a short index read; stopping at the
        // bound here skips those seeks.
        let iter = InEngine(self.snap.range(ks, (lower, Bound::Unbounded)));
        let within = move |kv: &fjall::Result<fjall::KvPair>| match (kv, &upper) {
            (Err(_), _) | (_, Bound::Unbounded) => true,
            (Ok((k, _)), Bound::Included(u)) => **k <= **u,
            (Ok((k, _)), Bound::Excluded(u)) => **k < **u,
        };
        Ok(Box::new(iter.take_while(within).map(conv)))
    }
}

impl Snapshot for FjallSnapshot {
    fn get(&self, space: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let ks = self.handle(space)?;
        if key_unstorable(key) {
            return Ok(None);
        }
        let v = {
            let _engine = EngineScope::enter();
            self.snap.get(ks, key)?
        };
        Ok(v.map(|v| v.to_vec()))
    }

    fn range(
        &self,
        space: &str,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Result<KvIter, StorageError> {
        self.pairs(space, lower, upper, reverse, |(k, v)| {
            (k.to_vec(), shared_value(v))
        })
    }

    fn values(
        &self,
        space: &str,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Result<ValueIter, StorageError> {
        // No key is copied out: a document scan would allocate one per document.
        self.pairs(space, lower, upper, reverse, |(_, v)| shared_value(v))
    }

    fn count_range(
        &self,
        space: &str,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        keep: &dyn Fn(&[u8]) -> bool,
    ) -> Result<u64, StorageError> {
        let ks = self.handle(space)?;
        if range_is_empty(&lower, &upper) {
            return Ok(0);
        }
        let mut n = 0;
        let _engine = EngineScope::enter();
        for g in self.snap.range(ks, (lower, upper)) {
            let (_, v) = g.into_inner().map_err(StorageError::from)?;
            if keep(&v) {
                n += 1;
            }
        }
        Ok(n)
    }
}
