//! The client side of a replicated shard: [`ReplicatedShard`] routes one shard's writes
//! to its Raft group's leader and serves reads by RethinkDB's `read_mode`.
//!
//! * Writes ([`ReplicatedShard::apply`]): `store::encode_command` proposed through
//!   `replication::serve_client` on this server if it leads, else forwarded to the
//!   leader as `ClientRequest::Propose` over the cluster transport, following the
//!   `NotLeader` hints at most [`RoutePolicy::max_redirects`] times within
//!   [`RoutePolicy::deadline`].
//! * Reads: `outdated` reads this server's replica as it is; `single` reads the leader's
//!   (here, or forwarded), refused by a leader without a recent quorum; `majority` has
//!   the leader confirm its leadership with a quorum and catch its state machine up to
//!   the read index (`ensure_linearizable`) first.
//!
//! Invariants: a request is retried (at another node) only when it certainly was not
//! appended — a refusal before the log, or a transport failure before anything was sent
//! (`TransportError::maybe_delivered`); once a write may have been applied, the answer is
//! indeterminate ([`RouteError::indeterminate`]), never a silent retry. Every wait is
//! bounded by the deadline.

mod error;
mod read;

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use datum::{Datum, Version};
use replication::{
    serve_client, ClientPolicy, ClientRequest, ClientResponse, ClientService, Command, GroupId,
    Node, NodeId, Raft, RaftRequest, RaftResponse, Router, Transport,
};
use store::{decode_reply, encode_command, Applied, ReplyError, Shard, StoreChange};
use tokio::time::Instant;

pub use error::{range_text, Op, RouteError, StoreErrorText};
use read::{docs, ReadAnswer, ReadQuery};
pub use read::{RangeReader, ShardReader};

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

/// Limits of routing one operation.
#[derive(Debug, Clone, Copy)]
pub struct RoutePolicy {
    /// The whole operation's time limit, elections and redirects included.
    pub deadline: Duration,
    /// How many `NotLeader` hints are followed.
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
    group: GroupId,
    raft: Raft,
    shard: Arc<Shard>,
    primary_key: String,
    service: ClientService,
    transport: Arc<T>,
    policy: RoutePolicy,
    range: String,
}

impl<T: Transport> ReplicatedShard<T> {
    /// The handle of `group`, whose member here is `raft` and replica `shard` (the
    /// `ShardMachine`'s, with documents keyed by `primary_key`).
    pub fn new(
        group: GroupId,
        raft: Raft,
        shard: Arc<Shard>,
        primary_key: &str,
        transport: Arc<T>,
        policy: RoutePolicy,
        client: ClientPolicy,
    ) -> Self {
        let range = range_text(shard.range());
        let service = ClientService {
            reader: Arc::new(ShardReader::new(shard.clone())),
            policy: client,
        };
        Self {
            group,
            raft,
            shard,
            primary_key: primary_key.to_owned(),
            service,
            transport,
            policy,
            range,
        }
    }

    /// Serves the other members' forwarded writes and reads of this group on `router`
    /// (the node's one router, which `serve_tcp` feeds).
    pub fn register(&self, router: &Router) {
        router.add_client(self.group, self.service.clone());
    }

    /// The local replica (what `outdated` reads).
    pub fn shard(&self) -> &Arc<Shard> {
        &self.shard
    }

    /// The documents' primary key field.
    pub fn primary_key(&self) -> &str {
        &self.primary_key
    }

    /// The group's Raft member on this server.
    pub fn raft(&self) -> &Raft {
        &self.raft
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
        let request = ClientRequest::Propose(Command(command));
        match self.route(Op::Write, request).await? {
            ClientResponse::Applied(reply) => decode_reply(&reply.0).map_err(|e| match e {
                ReplyError::Refused(why) => RouteError::Refused(why),
                // Applied, but the reply is unreadable: the outcome is unknown.
                ReplyError::Malformed(why) => RouteError::CommitUnknown(why),
            }),
            _ => Err(RouteError::CommitUnknown("answer of the wrong kind".into())),
        }
    }

    /// The document under `key`, read as `mode` says.
    pub async fn get(&self, key: &Datum, mode: ReadMode) -> Result<Option<Datum>, RouteError> {
        if mode == ReadMode::Outdated {
            return Ok(self.shard.get(key)?);
        }
        let answer = self.read(mode, &ReadQuery::get(key)).await?;
        match answer {
            ReadAnswer::Doc(Some(text)) => Ok(docs(vec![text])?.pop()),
            ReadAnswer::Doc(None) => Ok(None),
            ReadAnswer::Docs(_) => Err(RouteError::ReadFailed("answer of the wrong kind".into())),
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

    /// Runs a range query as `mode` says.
    pub(crate) async fn read_docs(
        &self,
        mode: ReadMode,
        query: ReadQuery,
    ) -> Result<Vec<Datum>, RouteError> {
        let answer = if mode == ReadMode::Outdated {
            let bytes = replication::ReadService::read(&*self.service.reader, &query.encode()?)
                .map_err(RouteError::ReadFailed)?;
            ReadAnswer::decode(&bytes)?
        } else {
            self.read(mode, &query).await?
        };
        match answer {
            ReadAnswer::Docs(texts) => docs(texts),
            ReadAnswer::Doc(_) => Err(RouteError::ReadFailed("answer of the wrong kind".into())),
        }
    }

    /// Routes a read to the leader.
    async fn read(&self, mode: ReadMode, query: &ReadQuery) -> Result<ReadAnswer, RouteError> {
        let request = ClientRequest::Read {
            linearizable: mode == ReadMode::Majority,
            query: query.encode()?,
        };
        match self.route(Op::Read, request).await? {
            ClientResponse::Read(bytes) => ReadAnswer::decode(&bytes),
            _ => Err(RouteError::ReadFailed("answer of the wrong kind".into())),
        }
    }

    fn unavailable(&self, op: Op) -> RouteError {
        RouteError::PrimaryUnavailable {
            op,
            range: self.range.clone(),
        }
    }

    /// This node's id and the leader it knows of.
    fn known_leader(&self) -> (NodeId, Option<NodeId>) {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        (metrics.id, metrics.current_leader)
    }

    /// A member's address, from the group's membership.
    fn address_of(&self, id: NodeId) -> Option<Node> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        metrics
            .membership_config
            .membership()
            .get_node(&id)
            .cloned()
    }

    /// Sends `request` to the group's leader (this node or another) until one answers,
    /// within the policy's deadline and redirect limit.
    async fn route(&self, op: Op, request: ClientRequest) -> Result<ClientResponse, RouteError> {
        let deadline = Instant::now() + self.policy.deadline;
        let mut hint: Option<NodeId> = None;
        let mut redirects = 0;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(self.unavailable(op));
            }
            let left = deadline - now;
            let pause = self.policy.retry_pause.min(left);
            let (me, known) = self.known_leader();
            let target = match hint.take() {
                Some(h) => h,
                None => match known {
                    Some(l) => l,
                    None => {
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                },
            };
            let answer = if target == me {
                let serve = serve_client(&self.raft, &self.service, request.clone());
                match tokio::time::timeout(left, serve).await {
                    Ok(answer) => answer,
                    // The proposal may be in the log: its outcome is unknown.
                    Err(_) => {
                        return Err(match op {
                            Op::Write => RouteError::CommitUnknown("deadline passed".into()),
                            Op::Read => RouteError::LostContact(Op::Read),
                        })
                    }
                }
            } else {
                let Some(node) = self.address_of(target) else {
                    tokio::time::sleep(pause).await;
                    continue;
                };
                let call = self.transport.call(
                    target,
                    &node,
                    self.group,
                    RaftRequest::Client(request.clone()),
                );
                match tokio::time::timeout(left, call).await {
                    Ok(Ok(RaftResponse::Client(answer))) => answer,
                    // Not sent, or refused by the router before any Raft member saw it:
                    // safe to try again.
                    Ok(Err(e)) if !e.maybe_delivered() => {
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                    Ok(Ok(RaftResponse::Refused(_))) => {
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                    Ok(Ok(_)) | Ok(Err(_)) | Err(_) => return Err(RouteError::LostContact(op)),
                }
            };
            match answer {
                ClientResponse::NotLeader { leader } => {
                    redirects += 1;
                    if redirects > self.policy.max_redirects {
                        return Err(self.unavailable(op));
                    }
                    hint = leader.filter(|l| *l != target);
                    if hint.is_none() {
                        tokio::time::sleep(pause).await;
                    }
                }
                ClientResponse::NoQuorum => return Err(RouteError::NoQuorum(op)),
                ClientResponse::Lost(why) => {
                    return Err(match op {
                        Op::Write => RouteError::CommitUnknown(why),
                        Op::Read => RouteError::LostContact(Op::Read),
                    })
                }
                ClientResponse::Failed(why) => return Err(RouteError::ReadFailed(why)),
                answer @ (ClientResponse::Applied(_) | ClientResponse::Read(_)) => {
                    return Ok(answer)
                }
            }
        }
    }
}
