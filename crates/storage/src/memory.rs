//! [`Memory`]: an in-memory [`Engine`] for unit tests of upper layers.
//!
//! State is a copy-on-write tree of `Arc`s: taking a snapshot is O(1) (one
//! `Arc` clone); the first write to a space while a snapshot shares it copies
//! that space's map. `persist` is a no-op (nothing here is durable). It enforces
//! the same key/value/space-name limits as [`crate::Fjall`].

use crate::{
    check_space_name, key_unstorable, range_is_empty, Bytes, Engine, KvIter, Snapshot,
    StorageError, WriteBatch,
};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

type Space = Arc<BTreeMap<Vec<u8>, Vec<u8>>>;
type State = Arc<BTreeMap<String, Space>>;

/// The in-memory engine. Cheap to create; data is lost on drop.
#[derive(Default)]
pub struct Memory {
    state: RwLock<State>,
}

impl Memory {
    /// A new, empty engine with no spaces.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Engine for Memory {
    fn create_space(&self, name: &str) -> Result<(), StorageError> {
        check_space_name(name)?;
        let mut guard = self.state.write();
        if !guard.contains_key(name) {
            Arc::make_mut(&mut guard).insert(name.to_owned(), Space::default());
        }
        Ok(())
    }

    fn drop_space(&self, name: &str) -> Result<(), StorageError> {
        let mut guard = self.state.write();
        if guard.contains_key(name) {
            Arc::make_mut(&mut guard).remove(name);
        }
        Ok(())
    }

    fn space_names(&self) -> Result<Vec<String>, StorageError> {
        Ok(self.state.read().keys().cloned().collect())
    }

    fn get(&self, space: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let guard = self.state.read();
        let sp = guard
            .get(space)
            .ok_or_else(|| StorageError::NoSuchSpace(space.to_owned()))?;
        Ok(sp.get(key).cloned())
    }

    fn snapshot(&self) -> Box<dyn Snapshot> {
        Box::new(MemorySnapshot {
            state: Arc::clone(&self.state.read()),
        })
    }

    fn apply(&self, batch: WriteBatch) -> Result<(), StorageError> {
        if batch.is_empty() {
            return Ok(());
        }
        batch.validate()?;
        let mut guard = self.state.write();
        // Check everything before touching anything: all or nothing.
        if let Some(missing) = batch.spaces().find(|s| !guard.contains_key(*s)) {
            return Err(StorageError::NoSuchSpace(missing.to_owned()));
        }
        let state = Arc::make_mut(&mut guard);
        for (space, ops) in batch.into_spaces() {
            let Some(sp) = state.get_mut(&space) else {
                return Err(StorageError::NoSuchSpace(space));
            };
            let sp = Arc::make_mut(sp);
            for (key, value) in ops {
                match value {
                    Some(v) => {
                        sp.insert(key, v);
                    }
                    None => {
                        sp.remove(&key);
                    }
                }
            }
        }
        Ok(())
    }

    fn persist(&self) -> Result<(), StorageError> {
        Ok(())
    }
}

/// A frozen view of the whole state.
struct MemorySnapshot {
    state: State,
}

impl MemorySnapshot {
    fn space(&self, space: &str) -> Result<&Space, StorageError> {
        self.state
            .get(space)
            .ok_or_else(|| StorageError::NoSuchSpace(space.to_owned()))
    }
}

impl Snapshot for MemorySnapshot {
    fn get(&self, space: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let sp = self.space(space)?;
        if key_unstorable(key) {
            return Ok(None);
        }
        Ok(sp.get(key).cloned())
    }

    fn range(
        &self,
        space: &str,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Result<KvIter, StorageError> {
        let space = Arc::clone(self.space(space)?);
        Ok(Box::new(MemRange {
            space,
            lower,
            upper,
            reverse,
        }))
    }
}

/// A lazy, owned range scan: re-seeks from the last returned key on each step
/// (O(log n) per item), so it needs no borrow of the map.
struct MemRange {
    space: Space,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    reverse: bool,
}

fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Iterator for MemRange {
    type Item = Result<(Vec<u8>, Bytes), StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if range_is_empty(&self.lower, &self.upper) {
            return None;
        }
        let mut range = self
            .space
            .range::<[u8], _>((as_slice(&self.lower), as_slice(&self.upper)));
        let (k, v) = if self.reverse {
            range.next_back()?
        } else {
            range.next()?
        };
        let item = (k.clone(), Bytes::copy_from_slice(v));
        if self.reverse {
            self.upper = Bound::Excluded(item.0.clone());
        } else {
            self.lower = Bound::Excluded(item.0.clone());
        }
        Some(Ok(item))
    }
}
