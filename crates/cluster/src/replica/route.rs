//! Routing one request of a Raft group to its leader ([`GroupRoute`]): this server's
//! member when it leads, else the leader it knows of over the cluster transport,
//! following `NotLeader` hints, all within one deadline. Shared by a replicated shard
//! (`super::ReplicatedShard`) and the replicated catalog's proposals.
//!
//! Invariants: a request is retried (at another node) only when it certainly was not
//! appended — a refusal before the log, or a transport failure before anything was sent
//! (`TransportError::maybe_delivered`); once a write may have been applied, the answer is
//! indeterminate ([`RouteError::CommitUnknown`]), never a silent retry. A leader's "no
//! quorum" refusal (nothing appended) is asked again twice before it is the answer.
//! Every wait is bounded by the deadline.

use std::sync::Arc;

use replication::{
    serve_client, ClientRequest, ClientResponse, ClientService, Command, GroupId, Node, NodeId,
    Raft, RaftRequest, RaftResponse, Reply, Router, Transport,
};
use tokio::time::Instant;

use super::{Op, RouteError, RoutePolicy};

/// How many times a leader's "no quorum" refusal is asked again before it is the answer.
const NO_QUORUM_RETRIES: u32 = 2;

/// How this server reaches one group's leader.
pub struct GroupRoute<T: Transport> {
    pub(crate) group: GroupId,
    pub(crate) raft: Raft,
    pub(crate) service: ClientService,
    pub(crate) transport: Arc<T>,
    pub(crate) policy: RoutePolicy,
    /// What the group holds, for RethinkDB's "primary replica for shard ..." errors.
    pub(crate) label: String,
}

impl<T: Transport> GroupRoute<T> {
    /// The route of `group`, whose member here is `raft`; forwarded requests are served
    /// here with `service` (once `register`ed); `label` names what the group holds in
    /// errors (a shard's key range).
    pub fn new(
        group: GroupId,
        raft: Raft,
        service: ClientService,
        transport: Arc<T>,
        policy: RoutePolicy,
        label: String,
    ) -> Self {
        Self {
            group,
            raft,
            service,
            transport,
            policy,
            label,
        }
    }

    /// Serves the other members' forwarded requests of this group on `router`.
    pub fn register(&self, router: &Router) {
        router.add_client(self.group, self.service.clone());
    }

    /// The group's member on this server.
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Proposes `command` through the leader: its reply and log index once applied there.
    pub async fn propose(&self, command: Command) -> Result<(Reply, u64), RouteError> {
        match self
            .route(Op::Write, ClientRequest::Propose(command))
            .await?
        {
            ClientResponse::Applied { reply, index } => Ok((reply, index)),
            _ => Err(RouteError::CommitUnknown("answer of the wrong kind".into())),
        }
    }

    /// Waits until this server's member has applied the entry at `index` (so what the
    /// leader applied is visible here), within the policy's deadline.
    pub async fn caught_up(&self, index: u64) -> Result<(), RouteError> {
        self.raft
            .wait(Some(self.policy.deadline))
            .applied_index_at_least(Some(index), "the entry applied here")
            .await
            .map(|_| ())
            // Applied on the leader, not yet seen here: the write happened.
            .map_err(|e| RouteError::CommitUnknown(format!("applied, not yet here: {e}")))
    }

    fn unavailable(&self, op: Op) -> RouteError {
        RouteError::PrimaryUnavailable {
            op,
            range: self.label.clone(),
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
    pub async fn route(
        &self,
        op: Op,
        request: ClientRequest,
    ) -> Result<ClientResponse, RouteError> {
        let deadline = Instant::now() + self.policy.deadline;
        let mut hint: Option<NodeId> = None;
        let mut redirects = 0;
        let mut no_quorum = 0;
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
                // Nothing was appended: asked again a few times, since a leader on a
                // loaded machine can miss its lease for a moment; a leader really cut
                // off keeps refusing, and that is the answer.
                ClientResponse::NoQuorum if no_quorum < NO_QUORUM_RETRIES => {
                    no_quorum += 1;
                    tokio::time::sleep(pause).await;
                }
                ClientResponse::NoQuorum => return Err(RouteError::NoQuorum(op)),
                ClientResponse::Lost(why) => {
                    return Err(match op {
                        Op::Write => RouteError::CommitUnknown(why),
                        Op::Read => RouteError::LostContact(Op::Read),
                    })
                }
                ClientResponse::Failed(why) => return Err(RouteError::ReadFailed(why)),
                answer @ (ClientResponse::Applied { .. } | ClientResponse::Read(_)) => {
                    return Ok(answer)
                }
            }
        }
    }
}
