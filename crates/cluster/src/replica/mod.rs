//! The client side of a replicated shard: [`ReplicatedShard`] routes one shard's writes
//! to its Raft group's leader and serves reads by RethinkDB's `read_mode`.
//!
//! * Writes ([`ReplicatedShard::apply`]): `store::encode_command` proposed through
//!   `replication::serve_client` on this server if it leads, else forwarded to the
//!   leader as `ClientRequest::Propose` over the cluster transport, following the
//!   `NotLeader` hints within [`RoutePolicy::deadline`] (at once for the first
//!   [`RoutePolicy::max_redirects`], then after a pause each).
//! * Reads: `outdated` reads this server's replica as it is; `single` reads the leader's
//!   (here, or forwarded), refused by a leader without a recent quorum; `majority` has
//!   the leader confirm its leadership with a quorum and catch its state machine up to
//!   the read index (`ensure_linearizable`) first.
//!
//! The routing itself (to the leader, retries, deadline) is [`GroupRoute`] (`route`),
//! shared with the replicated catalog: a request is retried only when it certainly was
//! not appended; once a write may have been applied, the answer is indeterminate
//! ([`RouteError::indeterminate`]), never a silent retry.

mod blocking;
mod error;
mod indexes;
mod read;
mod ring;
mod route;
pub(crate) mod tap;

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use datum::{Datum, Version};
use replication::{
    ClientPolicy, ClientRequest, ClientResponse, ClientService, Command, GroupId, Node, NodeId,
    Proposer, Raft, Router, Transport,
};
use store::{
    decode_chunk_reply, decode_reply, encode_chunk, encode_command, Applied, ReplyError, Shard,
    StoreChange,
};

pub use blocking::wait_for;
pub use error::{range_text, Op, RouteError, StoreErrorText};
pub(crate) use indexes::{after_of, bounds, entry_of, IndexAnswer, IndexCounts, IndexQuery};
pub use indexes::{IndexMissing, ShardIndexes};
pub(crate) use read::NoReads;
use read::{docs, ReadAnswer, ReadQuery};
pub use read::{RangeReader, ShardReader};
pub use route::{GroupRoute, Reach};

/// A key bound as a routed read carries it.
pub(crate) fn read_bound(b: &Bound<Datum>) -> read::KeyBound {
    read::KeyBound::of(b)
}

/// RethinkDB's `read_mode` of `r.table`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// The primary's data, refused by a primary cut off from its quorum (the default).
    Single,
    /// Linearizable: the primary confirms with a quorum and has applied everything
    /// committed before it reads.
    Majority,
    /// This server's replica, whatever its state.
    Outdated,
    /// As `Majority`, answered by an old shard after its retirement too: a resharding's
    /// reads of the shards it copies (`read::ReadQuery::Final`).
    Final,
}

impl ReadMode {
    /// The mode named by `read_mode` (`_debug_direct` reads the local replica too).
    pub fn from_name(name: &str) -> Option<ReadMode> {
        match name {
            "single" => Some(ReadMode::Single),
            "majority" => Some(ReadMode::Majority),
            "outdated" | "_debug_direct" => Some(ReadMode::Outdated),
            _ => None,
        }
    }
}

/// A resharding's mark in a shard's log (`ReplicatedShard::mark`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// The old shard's documents are final.
    Freeze,
    /// The copy into the new shard is over.
    Open,
    /// The old shard's documents are in the new shards: it answers no more reads.
    Retire,
    /// The old shard's resharding was abandoned: it takes writes again.
    Unfreeze,
}

/// Limits of routing one operation.
#[derive(Debug, Clone, Copy)]
pub struct RoutePolicy {
    /// The whole operation's time limit, elections and redirects included.
    pub deadline: Duration,
    /// How many `NotLeader` hints are followed at once; later ones after `retry_pause`.
    pub max_redirects: u32,
    /// The pause before trying again when no leader is known or it was unreachable.
    pub retry_pause: Duration,
}

impl Default for RoutePolicy {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(10),
            max_redirects: 5,
            retry_pause: Duration::from_millis(50),
        }
    }
}

/// This server's handle on one replicated shard: its group's Raft member, the local
/// replica, and the cluster transport to the other members.
pub struct ReplicatedShard<T: Transport> {
    route: GroupRoute<T>,
    /// This server's replica; none on a server that is only the group's client.
    shard: Option<Arc<Shard>>,
    /// The reader of this server's replica (what `outdated` reads here).
    local: Option<Arc<ShardReader>>,
    primary_key: String,
}

impl<T: Transport> ReplicatedShard<T> {
    /// The handle of `group`, whose member here is behind `proposer` (the host's, so
    /// that its leader transfers fence the proposals served here) and replica `shard` (the
    /// `ShardMachine`'s, with documents keyed by `primary_key`).
    pub fn new(
        group: GroupId,
        proposer: Proposer,
        shard: Arc<Shard>,
        primary_key: &str,
        transport: Arc<T>,
        policy: RoutePolicy,
        client: ClientPolicy,
    ) -> Self {
        let reader = ShardReader::new(shard.clone());
        Self::with_reader(
            group,
            proposer,
            shard,
            reader,
            primary_key,
            transport,
            policy,
            client,
        )
    }

    /// Like `new`, for a replica with secondary indexes (which it answers reads of).
    pub fn indexed(
        group: GroupId,
        proposer: Proposer,
        indexes: Arc<ShardIndexes>,
        primary_key: &str,
        transport: Arc<T>,
        policy: RoutePolicy,
        client: ClientPolicy,
    ) -> Self {
        let shard = indexes.shard().clone();
        let reader = ShardReader::indexed(indexes);
        Self::with_reader(
            group,
            proposer,
            shard,
            reader,
            primary_key,
            transport,
            policy,
            client,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn with_reader(
        group: GroupId,
        proposer: Proposer,
        shard: Arc<Shard>,
        reader: ShardReader,
        primary_key: &str,
        transport: Arc<T>,
        policy: RoutePolicy,
        client: ClientPolicy,
    ) -> Self {
        let range = range_text(shard.range());
        let mut reader = reader;
        reader.primary_key = primary_key.to_owned();
        let reader = Arc::new(reader);
        let service = ClientService {
            reader: reader.clone(),
            policy: client,
        };
        Self {
            route: GroupRoute::new(
                group,
                Reach::Member(proposer),
                service,
                transport,
                policy,
                range,
            ),
            shard: Some(shard),
            local: Some(reader),
            primary_key: primary_key.to_owned(),
        }
    }

    /// The handle of a server holding no replica of `group` (of the primary keys in
    /// `range`): every request goes to a member, the leader found among the voters
    /// `candidates`; `outdated` reads are the leader's too.
    pub fn client(
        group: GroupId,
        candidates: Vec<(NodeId, Node)>,
        range: &store::KeyRange,
        primary_key: &str,
        transport: Arc<T>,
        policy: RoutePolicy,
    ) -> Self {
        let service = ClientService {
            reader: Arc::new(read::NoReads("this server holds no replica of the shard")),
            policy: ClientPolicy {
                quorum_lease: Duration::ZERO,
                commit_timeout: Duration::ZERO,
            },
        };
        let label = range_text(range);
        Self {
            route: GroupRoute::new(
                group,
                Reach::Voters(candidates),
                service,
                transport,
                policy,
                label,
            ),
            shard: None,
            local: None,
            primary_key: primary_key.to_owned(),
        }
    }

    /// Serves the other members' forwarded writes and reads of this group on `router`
    /// (the node's one router, which `serve_tcp` feeds).
    pub fn register(&self, router: &Router) {
        self.route.register(router);
    }

    /// The local replica (what `outdated` reads), if this server holds one.
    pub fn shard(&self) -> Option<&Arc<Shard>> {
        self.shard.as_ref()
    }

    /// The documents' primary key field.
    pub fn primary_key(&self) -> &str {
        &self.primary_key
    }

    /// The group's Raft member on this server, if it has one.
    pub fn raft(&self) -> Option<&Raft> {
        self.route.raft()
    }

    /// Applies `change` to the document under `key` (if its version is `expect`, when
    /// given) through the group's leader: `Applied::Done(old, new, None)` or
    /// `Applied::Conflict(current)`.
    pub async fn apply(
        &self,
        key: &Datum,
        expect: Option<Version>,
        change: &StoreChange,
    ) -> Result<Applied, RouteError> {
        let command = encode_command(key, expect, change)?;
        self.propose(command).await
    }

    /// Marks the shard through its log for the resharding towards `generation`
    /// (docs/clustering.md, "Resharding"). `Freeze` (an old shard): once this returns,
    /// every write after it in the shard's log is refused, so its documents are final.
    /// `Open` (a new shard): the copy into it is over, a later load is refused.
    /// `Unfreeze` (an old shard, its resharding abandoned): writes are taken again, and
    /// a late freeze for that resharding changes nothing. Idempotent.
    pub async fn mark(&self, mark: Mark, generation: u64) -> Result<(), RouteError> {
        let command = match mark {
            Mark::Freeze => store::encode_freeze(generation)?,
            Mark::Open => store::encode_open(generation)?,
            Mark::Retire => store::encode_retire(generation)?,
            Mark::Unfreeze => store::encode_unfreeze(generation)?,
        };
        self.propose(command).await.map(|_| ())
    }

    async fn propose(&self, command: Vec<u8>) -> Result<Applied, RouteError> {
        let request = ClientRequest::Propose(Command(command));
        match self.route.route(Op::Write, request).await? {
            ClientResponse::Applied { reply, .. } => {
                decode_reply(&reply.0).map_err(|e| self.reply_error(e))
            }
            _ => Err(RouteError::CommitUnknown("answer of the wrong kind".into())),
        }
    }

    /// What a write's refusal or unreadable reply means for its proposer.
    fn reply_error(&self, e: ReplyError) -> RouteError {
        match e {
            ReplyError::Refused(why) => RouteError::Refused(why),
            // Applied, but the reply is unreadable: the outcome is unknown.
            ReplyError::Malformed(why) => RouteError::CommitUnknown(why),
            // A resharding froze the shard: nothing was written, and the table is
            // unavailable for writes until its new shards serve it.
            ReplyError::Frozen(_) => RouteError::PrimaryUnavailable {
                op: Op::Write,
                range: self.route.label.clone(),
            },
        }
    }

    /// Proposes operations encoded by `store::encode_op`, with distinct keys, as one
    /// entry (`store::encode_chunk`): each one's outcome as `apply` gives it, or the
    /// failure of the whole proposal.
    pub async fn apply_chunk(
        &self,
        ops: &[Vec<u8>],
    ) -> Result<Vec<Result<Applied, RouteError>>, RouteError> {
        let command = encode_chunk(ops)?;
        let request = ClientRequest::Propose(Command(command));
        match self.route.route(Op::Write, request).await? {
            ClientResponse::Applied { reply, .. } => {
                let each =
                    decode_chunk_reply(&reply.0, ops.len()).map_err(|e| self.reply_error(e))?;
                Ok(each
                    .into_iter()
                    .map(|a| a.map_err(|e| self.reply_error(e)))
                    .collect())
            }
            _ => Err(RouteError::CommitUnknown("answer of the wrong kind".into())),
        }
    }

    /// As `get`, when this server can answer at once from its own replica: `outdated`,
    /// or `single` on the leader that heard from a quorum within its lease (what the
    /// leader's `serve_client` would read). None: the read must be routed or confirmed
    /// by a quorum (`majority`), so it may wait.
    pub fn get_now(
        &self,
        key: &Datum,
        mode: ReadMode,
    ) -> Option<Result<Option<Datum>, RouteError>> {
        let shard = self.shard.as_ref()?;
        let local = match mode {
            ReadMode::Outdated => true,
            // A retired shard's leader refuses the table's reads (`read` module note).
            ReadMode::Single => {
                shard.retired() == 0
                    && self.route.raft().is_some_and(|raft| {
                        replication::leads_now(raft, &self.route.service.policy)
                    })
            }
            ReadMode::Majority | ReadMode::Final => false,
        };
        local.then(|| shard.get(key).map_err(RouteError::from))
    }

    /// The document under `key`, read as `mode` says.
    pub async fn get(&self, key: &Datum, mode: ReadMode) -> Result<Option<Datum>, RouteError> {
        if let (ReadMode::Outdated, Some(shard)) = (mode, &self.shard) {
            return Ok(shard.get(key)?);
        }
        let answer = self.read(mode, &ReadQuery::get(key)).await?;
        match answer {
            ReadAnswer::Doc(Some(text)) => Ok(docs(vec![text])?.pop()),
            ReadAnswer::Doc(None) => Ok(None),
            _ => Err(RouteError::ReadFailed("answer of the wrong kind".into())),
        }
    }

    /// The documents between two primary-key bounds, in key order, fetched lazily in
    /// batches of at most `batch` documents, read as `mode` says.
    pub fn range(
        &self,
        mode: ReadMode,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
        batch: u32,
    ) -> RangeReader<'_, T> {
        RangeReader {
            shard: self,
            mode,
            lower,
            upper,
            reverse,
            batch: batch.max(1),
            done: false,
        }
    }

    /// How many documents lie between two primary-key bounds, counted as `mode` says.
    pub async fn count(
        &self,
        mode: ReadMode,
        lower: &Bound<Datum>,
        upper: &Bound<Datum>,
    ) -> Result<u64, RouteError> {
        let query = ReadQuery::Count {
            lower: read::KeyBound::of(lower),
            upper: read::KeyBound::of(upper),
        };
        match self.answer(mode, &query).await? {
            ReadAnswer::Count(n) => Ok(n),
            _ => Err(RouteError::ReadFailed("answer of the wrong kind".into())),
        }
    }

    /// Runs a range query as `mode` says.
    pub(crate) async fn read_docs(
        &self,
        mode: ReadMode,
        query: ReadQuery,
    ) -> Result<Vec<Datum>, RouteError> {
        match self.answer(mode, &query).await? {
            ReadAnswer::Docs(texts) => docs(texts),
            _ => Err(RouteError::ReadFailed("answer of the wrong kind".into())),
        }
    }

    /// Runs an index read as `mode` says.
    pub(crate) async fn index(
        &self,
        mode: ReadMode,
        query: IndexQuery,
    ) -> Result<IndexAnswer, RouteError> {
        match self.answer(mode, &ReadQuery::Index(query)).await? {
            ReadAnswer::Index(a) => Ok(a),
            _ => Err(RouteError::ReadFailed("answer of the wrong kind".into())),
        }
    }

    /// The leader's view of the group's replication (`table_status`).
    pub(crate) async fn progress(&self) -> Result<replication::Progress, RouteError> {
        match self.route.route(Op::Read, ClientRequest::Progress).await? {
            ClientResponse::Progress(p) => Ok(p),
            _ => Err(RouteError::ReadFailed("answer of the wrong kind".into())),
        }
    }

    /// How far member `member` has applied the group's log (`None`: it did not say
    /// within `limit`, or has applied nothing).
    pub(crate) async fn applied_by(&self, member: NodeId, limit: Duration) -> Option<u64> {
        match self.route.ask(member, ClientRequest::Position, limit).await {
            Some(ClientResponse::Position(applied)) => applied,
            _ => None,
        }
    }

    /// Answers `query` from this server's replica (`outdated`) or the leader's.
    async fn answer(&self, mode: ReadMode, query: &ReadQuery) -> Result<ReadAnswer, RouteError> {
        match (mode, &self.local) {
            (ReadMode::Outdated, Some(local)) => {
                local.answer(query.clone()).map_err(RouteError::ReadFailed)
            }
            _ => self.read(mode, query).await,
        }
    }

    /// Routes a read to the leader.
    async fn read(&self, mode: ReadMode, query: &ReadQuery) -> Result<ReadAnswer, RouteError> {
        let query = match mode {
            ReadMode::Final => ReadQuery::Final(Box::new(query.clone())).encode()?,
            _ => query.encode()?,
        };
        let request = ClientRequest::Read {
            linearizable: matches!(mode, ReadMode::Majority | ReadMode::Final),
            query,
        };
        match self.route.route(Op::Read, request).await? {
            ClientResponse::Read(bytes) => match ReadAnswer::decode(&bytes)? {
                // The table is being switched to its new shards (`read` module note).
                ReadAnswer::Retired(_) => Err(RouteError::PrimaryUnavailable {
                    op: Op::Read,
                    range: self.route.label.clone(),
                }),
                answer => Ok(answer),
            },
            _ => Err(RouteError::ReadFailed("answer of the wrong kind".into())),
        }
    }
}
