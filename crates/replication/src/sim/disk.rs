//! [`Disk`]: an in-memory engine that can lose power — every write not covered by a
//! `persist` is lost, as the page cache is when a machine dies. Creating and dropping a
//! space are durable at once (the `Engine` contract).

use std::ops::Bound;

use parking_lot::{Mutex, RwLock};
use storage::{BatchOp, Engine, Memory, Snapshot, StorageError, WriteBatch};

/// The in-memory engine of one simulated node.
#[derive(Default)]
pub struct Disk {
    live: RwLock<Memory>,
    durable: Memory,
    /// Applied batches not yet persisted, in apply order.
    pending: Mutex<Vec<WriteBatch>>,
}

impl Disk {
    /// Forgets every write since the last `persist`.
    pub fn lose_power(&self) -> Result<(), StorageError> {
        let mut pending = self.pending.lock();
        pending.clear();
        let fresh = Memory::new();
        let snap = self.durable.snapshot();
        let mut batch = WriteBatch::new();
        for space in self.durable.space_names()? {
            fresh.create_space(&space)?;
            for kv in snap.range(&space, Bound::Unbounded, Bound::Unbounded, false)? {
                let (k, v) = kv?;
                batch.put(&space, k, v.to_vec());
            }
        }
        fresh.apply(batch)?;
        *self.live.write() = fresh;
        Ok(())
    }
}

impl Engine for Disk {
    fn create_space(&self, name: &str) -> Result<(), StorageError> {
        self.durable.create_space(name)?;
        self.live.read().create_space(name)
    }
    fn drop_space(&self, name: &str) -> Result<(), StorageError> {
        self.durable.drop_space(name)?;
        self.live.read().drop_space(name)
    }
    fn space_names(&self) -> Result<Vec<String>, StorageError> {
        self.live.read().space_names()
    }
    fn get(&self, space: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.live.read().get(space, key)
    }
    fn snapshot(&self) -> Box<dyn Snapshot> {
        self.live.read().snapshot()
    }
    fn apply(&self, batch: WriteBatch) -> Result<(), StorageError> {
        let mut pending = self.pending.lock();
        self.live.read().apply(batch.clone())?;
        pending.push(batch);
        Ok(())
    }
    fn persist(&self) -> Result<(), StorageError> {
        let mut pending = self.pending.lock();
        let spaces = self.durable.space_names()?;
        for batch in pending.drain(..) {
            // Writes to a space dropped since are moot.
            let mut kept = WriteBatch::new();
            for op in batch.iter() {
                match op {
                    BatchOp::Put { space, key, value } if spaces.iter().any(|s| s == space) => {
                        kept.put(space, key, value)
                    }
                    BatchOp::Delete { space, key } if spaces.iter().any(|s| s == space) => {
                        kept.delete(space, key)
                    }
                    _ => {}
                }
            }
            self.durable.apply(kept)?;
        }
        Ok(())
    }
}
