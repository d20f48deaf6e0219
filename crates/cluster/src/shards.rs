//! The shards of one table: primary-key ranges cut at split points, each a
//! `store::Shard` with its own stripe locks, document cache, count and key sample.
//!
//! On one server the shards of a table share its storage spaces (documents in
//! `t_<id>`, index entries in `i_<id>_<index>`), each reading only its own key range
//! (`store::KeyRange`), and publish to the table's one changefeed hub. So resharding
//! moves no data: `reshard` waits for writes in flight, opens the new ranges (counting
//! and sampling their keys) and swaps the layout; a crash at any point leaves a valid
//! table whichever split points the catalog holds. Split points are primary-key values,
//! persisted in the table's catalog record (`split_points`).
//!
//! Writes hold the layout's read lock while they apply (`Sharded::apply_on`), so a
//! reshard never sees a write half applied to an old shard. Reads take it recursively
//! (`read_recursive`): a changefeed's transform, run while a write publishes, may read the
//! same table, and must not wait behind a reshard queued for the write lock. Index entries live in one
//! space per index for the whole table, so index reads go through any shard.

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use parking_lot::{RwLock, RwLockReadGuard};
use storage::Engine;
use store::{CacheBudget, GroupCommit, KeyRange, SecondaryIndex, Shard, StoreError};

/// Tables of at most this many documents are cut at exact quantiles of their keys;
/// larger ones at quantiles of the shards' key samples.
const EXACT_SPLIT_DOCS: u64 = 200_000;

/// The shards of a table in key order, with the encoded split points between them.
pub(crate) struct Layout {
    /// The encoded split points, ascending (`shards.len() - 1` of them).
    cuts: Vec<Vec<u8>>,
    pub(crate) shards: Vec<Arc<Shard>>,
}

impl Layout {
    /// The shard owning a primary key.
    pub(crate) fn owner_of(&self, key: &Datum) -> Result<&Arc<Shard>, StoreError> {
        match self.shards.as_slice() {
            [only] => Ok(only),
            _ => Ok(self.owner(&encode(key)?)),
        }
    }

    /// The shard owning an encoded primary key.
    fn owner(&self, key: &[u8]) -> &Arc<Shard> {
        &self.shards[self.owner_index(key)]
    }

    /// The position of the shard owning an encoded primary key.
    fn owner_index(&self, key: &[u8]) -> usize {
        let i = self.cuts.partition_point(|c| c.as_slice() <= key);
        // `shards` has `cuts.len() + 1` entries, so `i` is in range.
        i.min(self.shards.len() - 1)
    }

    /// The position of the shard owning a primary key.
    pub(crate) fn index_of(&self, key: &Datum) -> Result<usize, StoreError> {
        match self.shards.len() {
            1 => Ok(0),
            _ => Ok(self.owner_index(&encode(key)?)),
        }
    }
}

/// What a table needs to open shards.
pub(crate) struct ShardEnv {
    pub(crate) engine: Arc<dyn Engine>,
    pub(crate) space: String,
    pub(crate) commit: Arc<GroupCommit>,
    pub(crate) cache: CacheBudget,
    pub(crate) feeds: Arc<changefeed::Hub>,
}

/// A table's shards, swappable by `reshard`.
pub struct Sharded {
    env: ShardEnv,
    layout: RwLock<Arc<Layout>>,
    /// Set once a single server's table moved into its replicated groups
    /// (`Sharded::freeze`): its local shards take no more writes.
    frozen: std::sync::atomic::AtomicBool,
}

/// Why a frozen table's local shards refuse a write.
const FROZEN: &str = "the table is moving into its replicated shards; retry the write";

fn encode(d: &Datum) -> Result<Vec<u8>, StoreError> {
    datum::keys::encode_primary(d).map_err(|e| StoreError::Key(e.message().to_string()))
}

impl Sharded {
    /// Opens the shards cut at `splits` (ascending primary-key values).
    pub(crate) fn open(env: ShardEnv, splits: &[Datum]) -> Result<Sharded, StoreError> {
        let layout = Self::layout(&env, splits, &[])?;
        Ok(Sharded {
            env,
            layout: RwLock::new(Arc::new(layout)),
            frozen: Default::default(),
        })
    }

    /// A table whose shards were opened elsewhere (a replicated table's, one per Raft
    /// group: `crate::groups`), cut at `splits`; `shards` are in key order, one more than
    /// the split points.
    pub(crate) fn with_shards(
        env: ShardEnv,
        splits: &[Datum],
        shards: Vec<Arc<Shard>>,
    ) -> Result<Sharded, StoreError> {
        let cuts = splits.iter().map(encode).collect::<Result<Vec<_>, _>>()?;
        if shards.len() != cuts.len() + 1 {
            return Err(StoreError::Corrupt(format!(
                "{} shards for {} split points",
                shards.len(),
                cuts.len()
            )));
        }
        Ok(Sharded {
            env,
            layout: RwLock::new(Arc::new(Layout { cuts, shards })),
            frozen: Default::default(),
        })
    }

    /// Another layout of `shards` cut at `splits`, over the same storage and
    /// changefeed hub (a replicated table whose replicas moved).
    pub(crate) fn with_shards_like(
        &self,
        splits: &[Datum],
        shards: Vec<Arc<Shard>>,
    ) -> Result<Sharded, StoreError> {
        let env = ShardEnv {
            engine: self.env.engine.clone(),
            space: self.env.space.clone(),
            commit: self.env.commit.clone(),
            cache: self.env.cache.clone(),
            feeds: self.env.feeds.clone(),
        };
        Self::with_shards(env, splits, shards)
    }

    /// The key ranges that `splits` cut, in order.
    pub(crate) fn ranges(splits: &[Datum]) -> Result<Vec<KeyRange>, StoreError> {
        let cuts = splits.iter().map(encode).collect::<Result<Vec<_>, _>>()?;
        Ok((0..=cuts.len())
            .map(|i| KeyRange {
                lower: i.checked_sub(1).and_then(|j| cuts.get(j).cloned()),
                upper: cuts.get(i).cloned(),
            })
            .collect())
    }

    fn layout(
        env: &ShardEnv,
        splits: &[Datum],
        indexes: &[Arc<SecondaryIndex>],
    ) -> Result<Layout, StoreError> {
        let cuts = splits.iter().map(encode).collect::<Result<Vec<_>, _>>()?;
        let mut shards = Vec::with_capacity(cuts.len() + 1);
        for range in Self::ranges(splits)? {
            let shard = Shard::open_range(
                env.engine.clone(),
                &env.space,
                env.commit.clone(),
                env.cache.clone(),
                env.feeds.clone(),
                range,
            )?;
            for idx in indexes {
                shard.add_index(idx.clone())?;
            }
            shards.push(Arc::new(shard));
        }
        Ok(Layout { cuts, shards })
    }

    /// The current layout (a snapshot: a reshard swaps in a new one).
    pub(crate) fn current(&self) -> Arc<Layout> {
        self.layout.read_recursive().clone()
    }

    /// Runs `f` on the current layout, no reshard happening until it returns (a feed's
    /// registration). `f` must not take the layout again.
    pub(crate) fn held<R>(&self, f: impl FnOnce(&Layout) -> R) -> R {
        let layout = self.layout.read_recursive();
        f(&layout)
    }

    /// The table's changefeed hub.
    pub(crate) fn feeds(&self) -> &Arc<changefeed::Hub> {
        &self.env.feeds
    }

    /// The shard owning `key`, with the layout held so that no reshard happens until
    /// the guard drops (writes apply under it).
    pub(crate) fn apply_on<R>(
        &self,
        key: &Datum,
        f: impl FnOnce(&Shard) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let layout: RwLockReadGuard<'_, Arc<Layout>> = self.layout.read_recursive();
        if self.is_frozen() {
            return Err(StoreError::StorageText(FROZEN.into()));
        }
        if let [only] = layout.shards.as_slice() {
            return f(only);
        }
        f(layout.owner(&encode(key)?))
    }

    /// Applies a chunk of operations (`store::Shard::apply_many`), with the layout held
    /// as `apply_on` holds it: each shard's operations as one batch, the shards one after
    /// another (a chunk holds one shard's stripes at a time, as feed registration and
    /// backfills lock shard by shard). Answers in the operations' order.
    pub(crate) fn apply_many(
        &self,
        ops: Vec<store::ChunkOp>,
    ) -> Vec<Result<store::Applied, StoreError>> {
        let layout: RwLockReadGuard<'_, Arc<Layout>> = self.layout.read_recursive();
        if self.is_frozen() {
            return ops
                .iter()
                .map(|_| Err(StoreError::StorageText(FROZEN.into())))
                .collect();
        }
        if let [only] = layout.shards.as_slice() {
            return only.apply_many(ops);
        }
        let mut out: Vec<Option<Result<store::Applied, StoreError>>> =
            (0..ops.len()).map(|_| None).collect();
        let mut parts: Vec<(Vec<usize>, Vec<store::ChunkOp>)> = layout
            .shards
            .iter()
            .map(|_| (Vec::new(), Vec::new()))
            .collect();
        for (at, op) in ops.into_iter().enumerate() {
            match encode(&op.0) {
                Ok(k) => {
                    let (ats, part) = &mut parts[layout.owner_index(&k)];
                    ats.push(at);
                    part.push(op);
                }
                Err(e) => out[at] = Some(Err(e)),
            }
        }
        for (shard, (ats, part)) in layout.shards.iter().zip(parts) {
            if part.is_empty() {
                continue;
            }
            for (at, answer) in ats.into_iter().zip(shard.apply_many(part)) {
                out[at] = Some(answer);
            }
        }
        out.into_iter()
            .map(|a| {
                a.unwrap_or_else(|| Err(StoreError::Corrupt("a write was not answered".into())))
            })
            .collect()
    }

    /// Makes the local shards refuse writes from now on (`frozen`), once the writes in
    /// flight finished (they hold the layout): what they wrote is then all there is to
    /// copy into the table's groups. `false` thaws them (a conversion that failed).
    pub(crate) fn freeze(&self, frozen: bool) {
        let _held = self.layout.write();
        self.frozen
            .store(frozen, std::sync::atomic::Ordering::SeqCst);
    }

    fn is_frozen(&self) -> bool {
        self.frozen.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The shard owning `key` now (reads).
    pub(crate) fn owner(&self, key: &Datum) -> Result<Arc<Shard>, StoreError> {
        let layout = self.layout.read_recursive();
        if let [only] = layout.shards.as_slice() {
            return Ok(only.clone());
        }
        Ok(layout.owner(&encode(key)?).clone())
    }

    /// Cuts the table anew at `splits`: waits for writes and index registrations in
    /// flight (they hold the layout), asks `indexes` for the table's indexes (under the
    /// same lock, so none can be added meanwhile; it refuses while one is building),
    /// opens the new shards with those registered, and swaps them in.
    pub(crate) fn reshard(
        &self,
        splits: &[Datum],
        indexes: impl FnOnce() -> Result<Vec<Arc<SecondaryIndex>>, String>,
    ) -> Result<(), String> {
        let mut layout = self.layout.write();
        let indexes = indexes()?;
        let next = Self::layout(&self.env, splits, &indexes).map_err(|e| e.to_string())?;
        *layout = Arc::new(next);
        Ok(())
    }

    /// Whether the table is cut at `splits` now.
    pub(crate) fn cut_at(&self, splits: &[Datum]) -> bool {
        let cuts: Result<Vec<_>, _> = splits.iter().map(encode).collect();
        cuts.is_ok_and(|c| c == self.current().cuts)
    }

    /// `parts - 1` split points that cut the current documents into `parts` ranges of
    /// about equal size: exact quantiles of the keys of a small table, quantiles of the
    /// key samples of a large one, and points spread over the key space of generated
    /// (UUID) keys when there are too few documents to say.
    pub(crate) fn balanced_splits(&self, parts: usize) -> Result<Vec<Datum>, StoreError> {
        if parts < 2 {
            return Ok(Vec::new());
        }
        let layout = self.current();
        let total: u64 = layout.shards.iter().map(|s| s.count()).sum();
        let keys: Vec<Vec<u8>> = if total <= EXACT_SPLIT_DOCS {
            let snap = self.env.engine.snapshot();
            let mut keys = Vec::with_capacity(total as usize);
            for kv in snap.range(&self.env.space, Bound::Unbounded, Bound::Unbounded, false)? {
                keys.push(kv?.0);
            }
            keys
        } else {
            layout
                .shards
                .iter()
                .flat_map(|s| s.sampled_keys())
                .collect()
        };
        Ok(splits_of_keys(&keys, parts))
    }
}

/// The split points cutting `parts` shards of about as many keys each from `keys`
/// (encoded primary keys, sorted; all of them or a sample), or the UUID splits when
/// they are too few to cut that many: the one rule of `rebalance` and of a reshard,
/// local or replicated.
pub(crate) fn splits_of_keys(keys: &[Vec<u8>], parts: usize) -> Vec<Datum> {
    if parts < 2 {
        return Vec::new();
    }
    let cuts = store::split_sorted(keys, parts);
    let splits: Vec<Datum> = cuts.iter().filter_map(|k| datum::keys::decode(k)).collect();
    if splits.len() + 1 == parts {
        splits
    } else {
        uuid_splits(parts)
    }
}

/// `parts - 1` strings spread evenly over the space of lowercase hexadecimal keys (the
/// UUIDs `insert` generates): the split points of a table with no data yet.
pub(crate) fn uuid_splits(parts: usize) -> Vec<Datum> {
    (1..parts)
        .map(|i| Datum::from(format!("{:02x}", i * 256 / parts)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_splits_are_ascending_and_distinct() {
        for parts in 2..=64 {
            let s = uuid_splits(parts);
            assert_eq!(s.len(), parts - 1);
            assert!(s.windows(2).all(|w| datum::cmp(&w[0], &w[1]).is_lt()));
        }
    }
}
