//! A shard replicated on Raft: [`ShardMachine`], the `replication::StateMachine` whose
//! commands are the shard's write operations (`crate::replica_codec`).
//!
//! Every replica applies the same entries in order through the shard's one write path
//! (`Shard::apply_encoded`, `crate::write`): the same stripe lock, read of the old
//! document, pure `plan` and in-memory side effects as a local write; only the commit
//! differs: the staged writes go into the entry's batch and are committed with its log
//! position by `ApplyCtx::commit`, before the side effects, so the cache, count, key
//! sample, index statistics and feeds follow committed state only. A replicated write
//! takes no group-commit ticket: it is durable once its entry is committed in the log.
//!
//! The state lives in spaces named by kind: [`DOCS`] for the documents, and
//! `index.<id>` for each secondary index the machine was opened with. That index set is
//! fixed for the machine's lifetime (a snapshot names spaces by position); indexes are
//! complete from the start (every entry maintains them), so none is backfilled here.
//! The indexes users create while the group runs are not among them: each replica adds
//! and builds those itself (`crate::replica_index`), and `attach` rebuilds them.
//! After a snapshot install, `attach` moves the shard and its indexes to the new spaces
//! (readers follow: `crate::spaces`), empties the document cache and rebuilds the count,
//! the key sample and the tracked index counts from the installed state.
//!
//! A resharding freezes the shard through its log (`crate::replica_codec::encode_freeze`):
//! the generation it was frozen for is kept under [`FROZEN`] in the [`META`] space
//! (last of the machine's kinds, so it travels in snapshots), and from that entry on
//! every write is answered `Frozen` and changes nothing, on every replica. A new shard
//! of a resharding takes the copied documents as loads until its open entry, kept
//! under [`OPENED`]; a load after it changes nothing and is answered as done (a late
//! copier must not overwrite the clients' writes, and the open proves that a copy was
//! complete, so a resumed resharding may go on). Once the copy is over, the old shard is
//! retired (kept under [`RETIRED`], published on the shard: `Shard::retired`): its
//! leader then refuses the table's reads (`cluster::replica::ShardReader`), so a server
//! that has not yet switched to the new shards cannot serve a `majority` read from
//! this frozen copy after a write was acknowledged through the new ones.
//!
//! An abandoned resharding's unfreeze entry lifts the freeze and the retirement and
//! records its generation under [`THAWED`]: a freeze or a retirement for that
//! generation or an older one (a late copier's) changes nothing from then on, so an
//! old shard once unfrozen serves its table as before the resharding began, until a
//! newer resharding freezes it.
//!
//! Invariants: the shard's local `apply`/`write` must not be used on a replicated shard
//! (writes reach its spaces only through entries); `apply` is deterministic: it reads
//! only the state before the entry, runs only the indexes' functions (deterministic,
//! checked by ReQL when an index is created), and answers a command it cannot apply (it
//! does not decode, its key is not a primary key of this shard, or the engine could not
//! hold its writes) with a refusal reply, never with a panic or an `Err` (which would
//! stop the node and is kept for storage failures).

use std::sync::Arc;

use datum::Version;
use replication::{ApplyCtx, StateMachine};
use storage::{Engine, StorageError, WriteBatch};

use crate::cache::CacheBudget;
use crate::commit::GroupCommit;
use crate::index::{IndexFn, SecondaryIndex};
use crate::range::KeyRange;
use crate::replica_codec::{decode_entry, encode_frozen, encode_reply, Entry};
use crate::shard::{count_and_sample, Shard, StoreChange};
use crate::write::Commit;
use crate::StoreError;

/// The space kind of the documents.
pub const DOCS: &str = "docs";

/// The space kind of the machine's own records (the freeze), last of its kinds.
pub const META: &str = "meta";

/// The key under [`META`] of the generation the shard was frozen for (8 bytes, BE).
const FROZEN: &[u8] = b"frozen";

/// The key under [`META`] of the generation whose copy into the shard ended (8 bytes).
const OPENED: &[u8] = b"opened";

/// The key under [`META`] of the generation the old shard was retired for (8 bytes).
const RETIRED: &[u8] = b"retired";

/// The key under [`META`] of the newest abandoned resharding's generation whose freeze
/// was lifted (8 bytes, BE).
const THAWED: &[u8] = b"thawed";

/// The outcome of an entry that changes no document.
const NOTHING: crate::Applied = crate::Applied::Done((None, None, None));

/// A secondary index of a replicated shard.
pub struct ReplicaIndex {
    /// Its id, fixed for the group's lifetime (its space kind is `index.<id>`).
    pub id: String,
    /// Computes its values.
    pub func: Arc<dyn IndexFn>,
    /// A multi index.
    pub multi: bool,
}

/// Where a replicated shard keeps its state and what it is made of.
pub struct ReplicaOptions {
    /// The group's state-machine prefix (as given to `replication::StateMachineStore`).
    pub prefix: String,
    /// The server's group committer (for the shard; replicated writes take no ticket).
    pub commit: Arc<GroupCommit>,
    /// The document cache's budget.
    pub cache: CacheBudget,
    /// The table's changefeed hub.
    pub feeds: Arc<changefeed::Hub>,
    /// The primary keys this shard owns.
    pub range: KeyRange,
    /// Its secondary indexes.
    pub indexes: Vec<ReplicaIndex>,
}

/// A shard as a replicated state machine.
pub struct ShardMachine {
    shard: Arc<Shard>,
    /// The indexes by id, in space-kind order.
    indexes: Vec<(String, Arc<SecondaryIndex>)>,
    engine: Arc<dyn Engine>,
    /// The generation the shard was frozen for (0: not frozen), as its state says.
    frozen: u64,
    /// The generation whose copy into the shard ended (0: none did).
    opened: u64,
    /// The newest abandoned resharding's generation whose freeze was lifted (0: none).
    thawed: u64,
}

/// The space kinds of a shard with indexes `ids`: [`DOCS`], then `index.<id>` each.
pub fn space_kinds<'a>(ids: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    std::iter::once(DOCS.to_owned())
        .chain(ids.into_iter().map(|id| format!("index.{id}")))
        .collect()
}

impl ShardMachine {
    /// Opens the shard on the spaces where the group's state is now (so the
    /// `StateMachineStore::open` that follows attaches it where it already is).
    pub fn open(engine: Arc<dyn Engine>, opts: ReplicaOptions) -> Result<ShardMachine, StoreError> {
        let kinds = space_kinds(opts.indexes.iter().map(|i| i.id.as_str()));
        let spaces = replication::state_spaces(&*engine, &opts.prefix, &kinds)
            .map_err(|e| StoreError::Corrupt(format!("replicated shard state: {e}")))?;
        let shard = Shard::open_range(
            engine.clone(),
            &spaces[0],
            opts.commit,
            opts.cache,
            opts.feeds,
            opts.range,
        )?;
        let mut indexes = Vec::with_capacity(opts.indexes.len());
        for (def, space) in opts.indexes.into_iter().zip(&spaces[1..]) {
            let idx = SecondaryIndex::new(space, def.func, def.multi, true);
            shard.add_index(idx.clone())?;
            indexes.push((def.id, idx));
        }
        Ok(ShardMachine {
            shard: Arc::new(shard),
            indexes,
            engine,
            // Read from the state by `attach`, called before anything applies.
            frozen: 0,
            opened: 0,
            thawed: 0,
        })
    }

    /// The generation the shard was frozen for by a resharding (0: not frozen).
    pub fn frozen(&self) -> u64 {
        self.frozen
    }

    /// The generation whose resharding opened the shard to its table's writes (0: not
    /// opened; a resharding's copies change nothing once it is).
    pub(crate) fn opened(&self) -> u64 {
        self.opened
    }

    /// The generation a write is refused for, if any: the freeze's, or (a retire without
    /// a freeze, which a resharding never writes) the retirement's.
    pub(crate) fn refusing(&self) -> Option<u64> {
        [self.frozen, self.shard.retired()]
            .into_iter()
            .find(|&g| g != 0)
    }

    /// Records a resharding's mark under `key` in [`META`] (the first one wins: a later
    /// one, a retry, changes nothing); whether it was recorded now.
    fn record(
        ctx: &mut ApplyCtx<'_>,
        now: u64,
        key: &[u8],
        generation: u64,
    ) -> Result<bool, StorageError> {
        if now != 0 {
            return Ok(false);
        }
        let meta = ctx.space(META)?;
        ctx.batch_mut()?
            .put(meta, key.to_vec(), generation.to_be_bytes().to_vec());
        ctx.commit()?;
        Ok(true)
    }

    /// The shard, for reads.
    pub fn shard(&self) -> &Arc<Shard> {
        &self.shard
    }

    /// The index `id`.
    pub fn index(&self, id: &str) -> Option<&Arc<SecondaryIndex>> {
        self.indexes
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, idx)| idx)
    }

    /// Why the command's key cannot be written here, if it cannot.
    pub(crate) fn refuse_key(&self, key: &[u8]) -> Option<String> {
        // The encoding of a primary key a local write accepts, and no other bytes.
        let canonical = datum::keys::decode(key).and_then(|d| datum::keys::encode_primary(&d).ok());
        if canonical.as_deref() != Some(key) {
            return Some("malformed primary key".into());
        }
        (!self.shard.range.contains(key)).then(|| "primary key outside the shard's range".into())
    }

    fn apply_command(
        &self,
        ctx: &mut ApplyCtx<'_>,
        key: &[u8],
        expect: Option<Version>,
        change: StoreChange,
    ) -> Result<Result<crate::Applied, String>, StorageError> {
        let mut commit = EntryCommit::new(ctx);
        let applied =
            datum::work::unwatched(|| self.shard.apply_encoded(key, expect, change, &mut commit));
        match (applied, commit.refused) {
            (Ok(a), _) => Ok(Ok(a)),
            (Err(_), Some(why)) => Ok(Err(why)),
            (Err(StoreError::Storage(e)), None) => Err(e),
            // A stored document that does not decode: this replica's storage is damaged.
            (Err(e), None) => Err(StorageError::Engine(e.to_string())),
        }
    }
}

impl ShardMachine {
    /// Lifts the freeze and the retirement of the reshardings up to `generation`
    /// (abandoned); idempotent.
    fn unfreeze(&mut self, ctx: &mut ApplyCtx<'_>, generation: u64) -> Result<(), StorageError> {
        if generation <= self.thawed {
            return Ok(()); // A retry.
        }
        let lifted = |g: u64| g != 0 && g <= generation;
        let (frozen, retired) = (lifted(self.frozen), lifted(self.shard.retired()));
        let meta = ctx.space(META)?;
        let batch = ctx.batch_mut()?;
        batch.put(meta, THAWED.to_vec(), generation.to_be_bytes().to_vec());
        if frozen {
            batch.delete(meta, FROZEN.to_vec());
        }
        if retired {
            batch.delete(meta, RETIRED.to_vec());
        }
        ctx.commit()?;
        self.thawed = generation;
        if frozen {
            self.frozen = 0;
        }
        if retired {
            self.shard.retire(0);
        }
        Ok(())
    }
}

impl StateMachine for ShardMachine {
    fn space_kinds(&self) -> Vec<String> {
        let mut kinds = space_kinds(self.indexes.iter().map(|(id, _)| id.as_str()));
        kinds.push(META.to_owned());
        kinds
    }

    fn apply(&mut self, ctx: &mut ApplyCtx<'_>, command: &[u8]) -> Result<Vec<u8>, StorageError> {
        if crate::replica_chunk::is_chunk(command) {
            return self.apply_chunk(ctx, command);
        }
        let outcome = match decode_entry(command) {
            Err(why) => Err(why),
            Ok(Entry::Freeze(generation)) => {
                // A freeze for a resharding abandoned already changes nothing.
                if generation > self.thawed && Self::record(ctx, self.frozen, FROZEN, generation)? {
                    self.frozen = generation;
                }
                Ok(NOTHING)
            }
            Ok(Entry::Unfreeze(generation)) => {
                self.unfreeze(ctx, generation)?;
                Ok(NOTHING)
            }
            Ok(Entry::Open(generation)) => {
                if Self::record(ctx, self.opened, OPENED, generation)? {
                    self.opened = generation;
                }
                Ok(NOTHING)
            }
            Ok(Entry::Retire(generation)) => {
                let retired = self.shard.retired();
                if generation > self.thawed && Self::record(ctx, retired, RETIRED, generation)? {
                    self.shard.retire(generation);
                }
                Ok(NOTHING)
            }
            Ok(Entry::Write(_) | Entry::Load(_)) if self.refusing().is_some() => {
                let generation = self.refusing().unwrap_or_default();
                return encode_frozen(generation).map_err(StorageError::Engine);
            }
            // The copy is over: a late copier's load changes nothing (module note).
            Ok(Entry::Load(_)) if self.opened != 0 => Ok(NOTHING),
            Ok(Entry::Write((key, expect, change)) | Entry::Load((key, expect, change))) => {
                match self.refuse_key(&key) {
                    Some(why) => Err(why),
                    None => self.apply_command(ctx, &key, expect, change)?,
                }
            }
        };
        encode_reply(outcome.as_ref().map_err(String::as_str)).map_err(StorageError::Engine)
    }

    fn attach(&mut self, spaces: &[String]) -> Result<(), StorageError> {
        // The freeze travels with the state (a snapshot from a frozen leader).
        let meta = spaces
            .get(1 + self.indexes.len())
            .ok_or_else(|| StorageError::NoSuchSpace(META.into()))?;
        let read = |key: &[u8]| -> Result<u64, StorageError> {
            match self.engine.get(meta, key) {
                Ok(Some(b)) => b
                    .as_slice()
                    .try_into()
                    .map(u64::from_be_bytes)
                    .map_err(|_| StorageError::Engine("malformed resharding record".into())),
                Ok(None) | Err(StorageError::NoSuchSpace(_)) => Ok(0),
                Err(e) => Err(e),
            }
        };
        self.frozen = read(FROZEN)?;
        self.opened = read(OPENED)?;
        self.thawed = read(THAWED)?;
        self.shard.retire(read(RETIRED)?);
        let (docs, rest) = spaces
            .split_first()
            .ok_or_else(|| StorageError::NoSuchSpace(DOCS.into()))?;
        let indexes: Vec<_> = self.indexes.iter().map(|(_, i)| &**i).zip(rest).collect();
        let storage = |e| match e {
            StoreError::Storage(e) => e,
            e => StorageError::Engine(e.to_string()),
        };
        if self.shard.attach(docs, &indexes).map_err(storage)? {
            // The indexes added while the group runs hold the old documents' entries.
            let fixed: Vec<_> = indexes.iter().map(|(i, _)| *i).collect();
            self.shard
                .rebuild_replica_indexes(&fixed)
                .map_err(storage)?;
        }
        Ok(())
    }
}

/// The replicated commit: the staged writes go into the entry's batch, checked against
/// the engine's limits first (a refusal is then the machine's answer, the same on every
/// replica, and the entry commits no write), and are committed with the entry.
pub(crate) struct EntryCommit<'c, 'a> {
    ctx: &'c mut ApplyCtx<'a>,
    pub(crate) batch: WriteBatch,
    refused: Option<String>,
}

impl<'c, 'a> EntryCommit<'c, 'a> {
    pub(crate) fn new(ctx: &'c mut ApplyCtx<'a>) -> Self {
        EntryCommit {
            ctx,
            batch: WriteBatch::new(),
            refused: None,
        }
    }
}

impl Commit for EntryCommit<'_, '_> {
    fn batch(&mut self) -> &mut WriteBatch {
        &mut self.batch
    }

    fn commit(&mut self) -> Result<Option<u64>, StoreError> {
        if let Err(e) = self.batch.validate() {
            self.refused = Some(e.to_string());
            self.batch = WriteBatch::new();
            return Err(e.into());
        }
        // The machine stages nothing through the context itself: its batch is empty.
        std::mem::swap(self.ctx.batch_mut()?, &mut self.batch);
        self.ctx.commit()?;
        Ok(None)
    }
}

impl Shard {
    /// Moves the shard to `docs` and each index to its space (a replicated shard's
    /// state after a snapshot install), with every stripe held: empties the document
    /// cache and rebuilds the count, the key sample and the tracked index counts from
    /// the new state. Nothing to do when nothing moved; true when something did.
    pub(crate) fn attach(
        &self,
        docs: &str,
        indexes: &[(&SecondaryIndex, &String)],
    ) -> Result<bool, StoreError> {
        let _all: Vec<_> = self.locks.iter().map(|l| l.lock()).collect();
        let mut moved = self.space.set(docs);
        for (idx, space) in indexes {
            moved |= idx.set_space(space);
        }
        if !moved {
            return Ok(false);
        }
        // After the switch: a reader's fill from before it is refused.
        self.cache.clear();
        let (n, sample) = count_and_sample(&*self.engine, docs, &self.range)?;
        self.count.store(n, std::sync::atomic::Ordering::SeqCst);
        self.sample.reset(sample);
        for (idx, _) in indexes {
            if Shard::counts_tracked(idx) {
                self.recount(idx)?;
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;
