//! The state machine adaptor (openraft's `RaftStateMachine`, v2) over a
//! [`StateMachine`] and a storage engine.
//!
//! Layout (docs/storage-format.md): space `{prefix}.sm` holds `applied` (the last applied
//! log id), `membership` (the last applied membership) and `generation`; the machine's
//! state lives in spaces `{prefix}.d{generation}.{kind}`.
//!
//! Invariants:
//! * Each entry's writes and the new `applied` (and `membership`) are one atomic batch,
//!   so the state and its log position never disagree, even after a crash.
//! * Applying does not fsync: the log is durable, and entries lost from the state
//!   machine by a crash are applied again from it. This requires the state machine and
//!   the log of a group to share one engine (one journal, so a surviving `purge` implies
//!   the state it relied on survived too), and [`crate::StateMachineStore`]'s snapshot
//!   build flushes before openraft purges the log up to it.
//! * The current snapshot is the current state: building one flushes and returns a view;
//!   a view's metadata is read from the same engine snapshot as its data.
//! * Installing a snapshot switches the generation in one batch, flushes, and only then
//!   drops the old generation's spaces.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder};
use storage::{Engine, WriteBatch};

use crate::codec::{decode_record, encode_record};
use crate::durability::Durability;
use crate::error::ReplicationError;
use crate::snapshot::{SnapshotData, SnapshotView, StagedSnapshot, DEFAULT_CHUNK_BYTES};
use crate::state_machine::{ApplyCtx, StateMachine};
use crate::types::{
    Entry, LogId, RaftStorageError, Reply, SnapshotMeta, StoredMembership, TypeConfig,
};

const APPLIED: &[u8] = b"applied";
const MEMBERSHIP: &[u8] = b"membership";
const GENERATION: &[u8] = b"generation";

/// What the adaptor and its snapshot builders share.
struct Shared {
    engine: Arc<dyn Engine>,
    prefix: String,
    meta_space: String,
    kinds: Vec<String>,
    next_generation: AtomicU64,
    durability: Durability,
}

impl Shared {
    fn spaces_of(&self, generation: u64) -> Vec<String> {
        self.kinds
            .iter()
            .map(|k| format!("{}.d{generation}.{k}", self.prefix))
            .collect()
    }

    fn read_meta<T: serde::de::DeserializeOwned>(
        &self,
        view: &dyn storage::Snapshot,
        key: &[u8],
    ) -> Result<Option<T>, ReplicationError> {
        match view.get(&self.meta_space, key)? {
            Some(bytes) => Ok(Some(decode_record(&bytes)?)),
            None => Ok(None),
        }
    }

    /// The current state as a snapshot (metadata read from the same engine snapshot as
    /// the data; no log id before anything was applied).
    fn current(&self) -> Result<Snapshot<TypeConfig>, ReplicationError> {
        let view: Arc<dyn storage::Snapshot> = Arc::from(self.engine.snapshot());
        let applied: Option<LogId> = self.read_meta(&*view, APPLIED)?;
        let membership: StoredMembership = self.read_meta(&*view, MEMBERSHIP)?.unwrap_or_default();
        let generation: u64 = self.read_meta(&*view, GENERATION)?.unwrap_or(0);
        let snapshot_id = match &applied {
            Some(a) => format!("{}-{}", a.leader_id, a.index),
            None => "empty".to_owned(),
        };
        let meta = SnapshotMeta {
            last_log_id: applied,
            last_membership: membership,
            snapshot_id,
        };
        let data = SnapshotView::new(view, self.spaces_of(generation));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(SnapshotData::View(data)),
        })
    }
}

/// A group's state machine: a [`StateMachine`] on its engine spaces.
pub struct StateMachineStore<S: StateMachine> {
    machine: S,
    shared: Arc<Shared>,
    /// The spaces of the current generation, by kind.
    spaces: Vec<String>,
}

impl<S: StateMachine> StateMachineStore<S> {
    /// Opens (creating if missing) the state machine stored under `prefix` in `engine`,
    /// dropping spaces of generations that are not current (left by a crash).
    pub fn open(
        engine: Arc<dyn Engine>,
        prefix: &str,
        mut machine: S,
        durability: Durability,
    ) -> Result<Self, ReplicationError> {
        let meta_space = format!("{prefix}.sm");
        engine.create_space(&meta_space)?;
        let shared = Shared {
            engine: engine.clone(),
            prefix: prefix.to_owned(),
            meta_space,
            kinds: machine.space_kinds(),
            next_generation: AtomicU64::new(0),
            durability,
        };
        let snap = engine.snapshot();
        let generation: u64 = shared.read_meta(&*snap, GENERATION)?.unwrap_or(0);
        let data_prefix = format!("{prefix}.d");
        let mut highest = generation;
        for name in engine.space_names()? {
            let Some(rest) = name.strip_prefix(&data_prefix) else {
                continue;
            };
            let Some(g) = rest
                .split_once('.')
                .and_then(|(g, _)| g.parse::<u64>().ok())
            else {
                continue;
            };
            highest = highest.max(g);
            if g != generation {
                engine.drop_space(&name)?;
            }
        }
        shared.next_generation.store(highest + 1, Ordering::SeqCst);
        let spaces = shared.spaces_of(generation);
        for s in &spaces {
            engine.create_space(s)?;
        }
        machine.attach(&spaces)?;
        Ok(Self {
            machine,
            shared: Arc::new(shared),
            spaces,
        })
    }

    /// The machine (for reads by the layer above).
    pub fn machine(&self) -> &S {
        &self.machine
    }

    /// The spaces holding the current state, by kind.
    pub fn spaces(&self) -> &[String] {
        &self.spaces
    }

    fn apply_one(&mut self, entry: Entry) -> Result<Reply, ReplicationError> {
        let sh = &*self.shared;
        let log_id = entry.log_id;
        let position = (sh.meta_space.as_str(), APPLIED, encode_record(&log_id)?);
        let mut ctx = ApplyCtx::new(&*sh.engine, &sh.kinds, &self.spaces, log_id.index, position);
        let reply = match entry.payload {
            EntryPayload::Blank => Vec::new(),
            EntryPayload::Normal(command) => self.machine.apply(&mut ctx, &command.0)?,
            EntryPayload::Membership(m) => {
                let stored = StoredMembership::new(Some(log_id), m);
                ctx.batch
                    .put(&sh.meta_space, MEMBERSHIP, encode_record(&stored)?);
                Vec::new()
            }
        };
        // Unless the machine committed the entry itself (`ApplyCtx::commit`).
        if !ctx.is_committed() {
            ctx.commit()?;
        }
        Ok(Reply(reply))
    }

    async fn install(
        &mut self,
        meta: &SnapshotMeta,
        data: SnapshotData,
    ) -> Result<(), ReplicationError> {
        let sh = self.shared.clone();
        let mut staged = match data {
            SnapshotData::Staged(s) => s,
            // A local view (tests, or a snapshot handed over in-process): copy it into
            // a new generation chunk by chunk.
            SnapshotData::View(view) => {
                let mut staged = self.stage()?;
                let mut chunks = view.chunks(DEFAULT_CHUNK_BYTES);
                while let Some(chunk) = chunks.next_chunk()? {
                    staged.write_chunk(&chunk)?;
                }
                staged
            }
        };
        let mut batch = WriteBatch::new();
        batch.put(
            &sh.meta_space,
            GENERATION,
            encode_record(&staged.generation)?,
        );
        match &meta.last_log_id {
            Some(id) => batch.put(&sh.meta_space, APPLIED, encode_record(id)?),
            None => batch.delete(&sh.meta_space, APPLIED),
        }
        batch.put(
            &sh.meta_space,
            MEMBERSHIP,
            encode_record(&meta.last_membership)?,
        );
        sh.engine.apply(batch)?;
        staged.installed = true;
        // Durable before the old state is dropped and before openraft purges the log.
        sh.durability.flush(&sh.engine).await?;
        let old = std::mem::replace(&mut self.spaces, std::mem::take(&mut staged.spaces));
        // The machine's readers move to the new spaces before the old ones go.
        let attached = self.machine.attach(&self.spaces);
        for s in &old {
            sh.engine.drop_space(s)?;
        }
        Ok(attached?)
    }

    fn stage(&self) -> Result<StagedSnapshot, ReplicationError> {
        let sh = &self.shared;
        let generation = sh.next_generation.fetch_add(1, Ordering::SeqCst);
        StagedSnapshot::create(sh.engine.clone(), generation, sh.spaces_of(generation))
    }
}

/// Builds snapshots of a [`StateMachineStore`] (the current state, made durable).
pub struct SnapshotBuilder {
    shared: Arc<Shared>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, RaftStorageError> {
        let sh = &self.shared;
        // openraft purges the log up to the snapshot once it is built: the state it
        // covers must be durable first.
        sh.durability
            .flush(&sh.engine)
            .await
            .map_err(ReplicationError::write)?;
        sh.current().map_err(ReplicationError::read)
    }
}

impl<S: StateMachine> RaftStateMachine<TypeConfig> for StateMachineStore<S> {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership), RaftStorageError> {
        let sh = &self.shared;
        let read = || -> Result<_, ReplicationError> {
            let snap = sh.engine.snapshot();
            let applied: Option<LogId> = sh.read_meta(&*snap, APPLIED)?;
            let membership: StoredMembership =
                sh.read_meta(&*snap, MEMBERSHIP)?.unwrap_or_default();
            Ok((applied, membership))
        };
        read().map_err(ReplicationError::read)
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Reply>, RaftStorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut replies = Vec::new();
        for entry in entries {
            let log_id = entry.log_id;
            replies.push(self.apply_one(entry).map_err(|e| e.apply(log_id))?);
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            shared: self.shared.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotData>, RaftStorageError> {
        let staged = self.stage().map_err(ReplicationError::write)?;
        Ok(Box::new(SnapshotData::Staged(staged)))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<SnapshotData>,
    ) -> Result<(), RaftStorageError> {
        self.install(meta, *snapshot)
            .await
            .map_err(ReplicationError::write)
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, RaftStorageError> {
        let current = self.shared.current().map_err(ReplicationError::read)?;
        Ok(current.meta.last_log_id.is_some().then_some(current))
    }
}

/// The spaces holding the state of the machine stored under `prefix` now, by kind (for
/// readers outside `apply`; a snapshot install moves them, see [`StateMachine::attach`]).
/// Before the machine was ever opened, the spaces it will open first.
pub fn state_spaces(
    engine: &dyn Engine,
    prefix: &str,
    kinds: &[String],
) -> Result<Vec<String>, ReplicationError> {
    let generation: u64 = match engine.get(&format!("{prefix}.sm"), GENERATION) {
        Ok(Some(bytes)) => decode_record(&bytes)?,
        Ok(None) | Err(storage::StorageError::NoSuchSpace(_)) => 0,
        Err(e) => return Err(e.into()),
    };
    Ok(kinds
        .iter()
        .map(|k| format!("{prefix}.d{generation}.{k}"))
        .collect())
}

/// The last log id applied by the state machine stored under `prefix` (`None` before
/// anything was, or when no machine was ever opened there).
pub fn applied_log_id(
    engine: &dyn Engine,
    prefix: &str,
) -> Result<Option<LogId>, ReplicationError> {
    match engine.get(&format!("{prefix}.sm"), APPLIED) {
        Ok(Some(bytes)) => Ok(Some(decode_record(&bytes)?)),
        // A group never opened has applied nothing.
        Ok(None) | Err(storage::StorageError::NoSuchSpace(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
