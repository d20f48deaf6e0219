//! [`WriteBatch`]: a set of puts and deletes applied atomically across spaces.

use crate::{StorageError, MAX_KEY_LEN, MAX_VALUE_LEN};
use std::collections::BTreeMap;

/// One operation of a [`WriteBatch`], as seen by [`WriteBatch::iter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Store `value` under `key` in `space`.
    Put {
        /// Target space.
        space: &'a str,
        /// Key.
        key: &'a [u8],
        /// New value.
        value: &'a [u8],
    },
    /// Remove `key` from `space` (no-op if absent).
    Delete {
        /// Target space.
        space: &'a str,
        /// Key.
        key: &'a [u8],
    },
}

/// Per-space ops of a batch: key -> `Some(value)` (put) or `None` (delete).
pub(crate) type SpaceOps = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// A set of writes applied atomically by [`crate::Engine::apply`].
///
/// At most one op is kept per `(space, key)`: a later `put`/`delete` of the
/// same key replaces the earlier one, so [`WriteBatch::len`] counts distinct
/// keys. Ops are grouped per space and sorted by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// Spaces in first-use order (batches touch few spaces; linear lookup).
    spaces: Vec<(String, SpaceOps)>,
    len: usize,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    fn ops_mut(&mut self, space: &str) -> &mut SpaceOps {
        let idx = match self.spaces.iter().position(|(s, _)| s == space) {
            Some(i) => i,
            None => {
                self.spaces.push((space.to_owned(), BTreeMap::new()));
                self.spaces.len() - 1
            }
        };
        &mut self.spaces[idx].1
    }

    fn set(&mut self, space: &str, key: Vec<u8>, value: Option<Vec<u8>>) {
        if self.ops_mut(space).insert(key, value).is_none() {
            self.len += 1;
        }
    }

    /// Stores `value` under `key` in `space` (replacing any earlier op on that key).
    pub fn put(&mut self, space: &str, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.set(space, key.into(), Some(value.into()));
    }

    /// Deletes `key` from `space` (replacing any earlier op on that key).
    pub fn delete(&mut self, space: &str, key: impl Into<Vec<u8>>) {
        self.set(space, key.into(), None);
    }

    /// Adds every op of `other` (each replacing an earlier op on its key, as `put` and
    /// `delete` do).
    pub fn extend(&mut self, other: WriteBatch) {
        for (space, ops) in other.spaces {
            for (key, value) in ops {
                self.set(&space, key, value);
            }
        }
    }

    /// Number of distinct `(space, key)` ops.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the batch holds no ops.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Names of the spaces the batch touches, in first-use order.
    pub fn spaces(&self) -> impl Iterator<Item = &str> {
        self.spaces.iter().map(|(s, _)| s.as_str())
    }

    /// All ops, grouped by space (first-use order), keys ascending.
    pub fn iter(&self) -> impl Iterator<Item = BatchOp<'_>> {
        self.spaces.iter().flat_map(|(space, ops)| {
            ops.iter().map(move |(key, value)| match value {
                Some(value) => BatchOp::Put { space, key, value },
                None => BatchOp::Delete { space, key },
            })
        })
    }

    /// Checks every key and value against the engine limits (what `Engine::apply`
    /// refuses a batch for; a replicated state machine checks first, so that a refusal
    /// is its deterministic answer rather than a storage failure).
    pub fn validate(&self) -> Result<(), StorageError> {
        for (_, ops) in &self.spaces {
            for (key, value) in ops {
                if key.is_empty() || key.len() > MAX_KEY_LEN {
                    return Err(StorageError::InvalidKey { len: key.len() });
                }
                if let Some(v) = value {
                    if v.len() > MAX_VALUE_LEN {
                        return Err(StorageError::ValueTooLarge { len: v.len() });
                    }
                }
            }
        }
        Ok(())
    }

    /// Roughly how many bytes the batch takes in a journal: keys, values and
    /// a small per-op overhead.
    pub(crate) fn approx_bytes(&self) -> u64 {
        let mut n = 0u64;
        for (space, ops) in &self.spaces {
            for (key, value) in ops {
                let v = value.as_ref().map_or(0, Vec::len);
                n = n.saturating_add((space.len() + key.len() + v + 16) as u64);
            }
        }
        n
    }

    /// Consumes the batch into its per-space op maps.
    pub(crate) fn into_spaces(self) -> Vec<(String, SpaceOps)> {
        self.spaces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extend_adds_ops_and_later_ones_replace_earlier() {
        let mut a = WriteBatch::new();
        a.put("s", b"k".to_vec(), b"1".to_vec());
        a.put("s", b"x".to_vec(), b"1".to_vec());
        let mut b = WriteBatch::new();
        b.delete("s", b"k".to_vec());
        b.put("t", b"y".to_vec(), b"2".to_vec());
        a.extend(b);
        assert_eq!(a.len(), 3);
        let ops: Vec<_> = a.iter().collect();
        assert_eq!(
            ops,
            vec![
                BatchOp::Delete {
                    space: "s",
                    key: b"k"
                },
                BatchOp::Put {
                    space: "s",
                    key: b"x",
                    value: b"1"
                },
                BatchOp::Put {
                    space: "t",
                    key: b"y",
                    value: b"2"
                },
            ]
        );
    }
}
