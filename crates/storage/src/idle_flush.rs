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
//! Invariant: the thread holds no lock while it waits, and it ends before the engine it
//! watches is dropped (`IdleFlush` is the engine's first field, and dropping it joins).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use fjall::AbstractTree;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::fjall_engine::Spaces;

/// How long no write may have been applied before memtables are flushed.
pub(crate) const QUIET: Duration = Duration::from_secs(1);

/// Smaller memtables are left alone: they cost little to scan, and flushing each would
/// leave many small table files for compaction to merge.
pub(crate) const MIN_BYTES: u64 = 4 << 20;

/// The running flusher; dropping it stops the thread and waits for it.
pub(crate) struct IdleFlush {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl IdleFlush {
    /// Starts watching `applied` (the engine's count of applied batches) and `spaces`;
    /// a round holds `ddl`, so no keyspace is created or dropped under it.
    pub(crate) fn start(
        spaces: Arc<RwLock<Spaces>>,
        applied: Arc<AtomicU64>,
        ddl: Arc<Mutex<()>>,
    ) -> Self {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("idle-flush".into())
            .spawn(move || run(&signal, &spaces, &applied, &ddl))
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

fn run(
    stop: &(Mutex<bool>, Condvar),
    spaces: &RwLock<Spaces>,
    applied: &AtomicU64,
    ddl: &Mutex<()>,
) {
    let mut seen = applied.load(Ordering::Acquire);
    // The count at the last flush round: nothing to do again until it moves.
    let mut flushed = seen;
    loop {
        {
            let mut stopped = stop.0.lock();
            if !*stopped {
                stop.1.wait_for(&mut stopped, QUIET);
            }
            if *stopped {
                return;
            }
        }
        let now = applied.load(Ordering::Acquire);
        if now != seen {
            seen = now;
            continue;
        }
        if now == flushed {
            continue;
        }
        flushed = now;
        let _ddl = ddl.lock();
        let handles = Arc::clone(&spaces.read());
        for ks in handles.values() {
            if ks.tree.active_memtable().size() >= MIN_BYTES {
                // A failed rotation (a poisoned journal) is reported by the next write.
                let _ = ks.rotate_memtable();
            }
        }
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
}
