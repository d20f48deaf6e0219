//! Fsyncing fjall's journal without holding its lock.
//!
//! fjall's `Database::persist(SyncAll)` flushes the journal's buffer and fsyncs the
//! active journal file while holding the journal writer's mutex, which every batch
//! commit also takes: for the whole fsync (milliseconds) no write can be applied, so
//! the threads evaluating writes stop while the disk works instead of preparing the
//! next group. [`JournalSync::persist`] does the two steps apart: the buffer is handed
//! to the OS under the lock (`PersistMode::Buffer`: one `write(2)`), then the active
//! journal file is fsynced through a descriptor of our own, with no fjall lock held.
//!
//! Why that is as durable as fjall's own persist (fjall 3.1.13's source):
//! * Journals are files `<n>.jnl` in the database folder; the active one has the
//!   largest `n`. An fsync through any descriptor of a file writes back all of its
//!   dirty pages (Linux), so it covers bytes written through fjall's descriptor.
//! * A rotation (`journal::writer::Writer::rotate`) fsyncs the old journal before it
//!   creates the next one. Bytes handed over before we list the folder are therefore
//!   either in the file we find (and fsync) or in an older journal that a rotation
//!   already fsynced. Sealed journals need nothing more, as with fjall's persist.
//! * `fdatasync` suffices: it writes back the file's data and whatever metadata reading
//!   it back needs (its size, should an append have grown it; fjall preallocates
//!   journals, so usually nothing), and skips the modification time, an inode write
//!   per fsync that recovery never reads.
//! * A failed fsync is sticky: after one, the kernel may have dropped the dirty pages,
//!   and a later fsync could succeed without them. [`JournalSync`] then refuses every
//!   later persist (and the engine every write), as fjall poisons itself.
//!
//! Invariant: one persist at a time (the engine calls it under its `durable` lock); a
//! missing or unreadable journal folder falls back to fjall's own locked persist.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use fjall::{Database, PersistMode};
use parking_lot::Mutex;

use crate::StorageError;

/// Fsyncs fjall's active journal outside fjall's journal lock.
pub(crate) struct JournalSync {
    folder: PathBuf,
    /// The active journal's number and an open descriptor of it.
    open: Mutex<Option<(u64, File)>>,
    failed: AtomicBool,
}

impl JournalSync {
    /// For the fjall database in `folder`.
    pub(crate) fn new(folder: &Path) -> Self {
        Self {
            folder: folder.to_path_buf(),
            open: Mutex::new(None),
            failed: AtomicBool::new(false),
        }
    }

    /// Whether an fsync has failed (the engine then refuses writes).
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Makes every batch committed before the call durable.
    pub(crate) fn persist(&self, db: &Database) -> Result<(), StorageError> {
        if self.failed() {
            return Err(StorageError::Poisoned);
        }
        db.persist(PersistMode::Buffer)?;
        let Some(active) = active_journal(&self.folder) else {
            return Ok(db.persist(PersistMode::SyncAll)?);
        };
        let mut open = self.open.lock();
        if open.as_ref().map(|(n, _)| *n) != Some(active) {
            match File::open(journal_path(&self.folder, active)) {
                Ok(f) => *open = Some((active, f)),
                // Rotated away between listing and opening: fjall's way is still right.
                Err(_) => return Ok(db.persist(PersistMode::SyncAll)?),
            }
        }
        let Some((_, file)) = open.as_ref() else {
            return Ok(db.persist(PersistMode::SyncAll)?);
        };
        if let Err(e) = file.sync_data() {
            self.failed.store(true, Ordering::Release);
            return Err(StorageError::Io(e));
        }
        Ok(())
    }
}

/// The largest journal number in `folder`, if any.
fn active_journal(folder: &Path) -> Option<u64> {
    std::fs::read_dir(folder)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name();
            name.to_str()?.strip_suffix(".jnl")?.parse::<u64>().ok()
        })
        .max()
}

fn journal_path(folder: &Path, n: u64) -> PathBuf {
    folder.join(format!("{n}.jnl"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, Fjall, WriteBatch};

    /// Bytes no compressor shrinks, so they appear as they are in the journal.
    fn noise(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn holds(folder: &Path, n: u64, bytes: &[u8]) -> bool {
        let text = std::fs::read(journal_path(folder, n)).expect("journal");
        text.windows(bytes.len()).any(|w| w == bytes)
    }

    /// The journal this finds is the one the writes went to, before and after a
    /// reopen.
    #[test]
    fn the_active_journal_is_the_one_being_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        for round in 0..2u64 {
            let e = Fjall::open(dir.path(), 1 << 20).expect("open");
            if round == 0 {
                e.create_space("s").expect("space");
            }
            let value = noise(round + 7, 4_000);
            let mut b = WriteBatch::new();
            b.put("s", format!("k{round}").into_bytes(), value.clone());
            e.apply(b).expect("apply");
            e.persist().expect("persist");
            let active = active_journal(dir.path()).expect("a journal");
            assert!(holds(dir.path(), active, &value[..64]), "round {round}");
        }
    }

    #[test]
    fn no_journal_folder_means_no_active_journal() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(active_journal(&dir.path().join("missing")), None);
        std::fs::write(dir.path().join("7.jnl.tmp"), b"").expect("write");
        std::fs::write(dir.path().join("x.jnl"), b"").expect("write");
        std::fs::write(dir.path().join("3.jnl"), b"").expect("write");
        std::fs::write(dir.path().join("12.jnl"), b"").expect("write");
        assert_eq!(active_journal(dir.path()), Some(12));
    }
}
