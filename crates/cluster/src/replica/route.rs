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
//! Every wait is bounded by the deadline; a member forwarding to a leader that stays
//! silent stops waiting once its own member sees another leader elected in a later term
//! (a read is then asked of the new leader, a write is indeterminate at once).

use std::sync::Arc;
use std::time::Duration;

use replication::{
    serve_client, ClientRequest, ClientResponse, ClientService, Command, GroupId, Node, NodeId,
    Proposer, Raft, RaftRequest, RaftResponse, Reply, Router, Transport,
};
use tokio::time::Instant;

use super::{Op, RouteError, RoutePolicy};

/// How many times a leader's "no quorum" refusal is asked again before it is the answer.
const NO_QUORUM_RETRIES: u32 = 2;

/// How a server reaches a group.
pub enum Reach {
    /// Through its own member of the group, behind the member's proposer (it knows the
    /// leader from its metrics; proposals served here pass its transfers' fence).
    Member(Proposer),
    /// As a client holding no member: the group's voters are the candidates for leader
    /// (found by trying them and following hints).
    Voters(Vec<(NodeId, Node)>),
}

/// How this server reaches one group's leader.
pub struct GroupRoute<T: Transport> {
    pub(crate) group: GroupId,
    /// This server's member, when it has one; else the route is a client of the group.
    pub(crate) raft: Option<Raft>,
    /// The member's proposer (with `raft`), through which requests are served here.
    proposer: Option<Proposer>,
    /// A client's candidates for leader (the group's voters), when it has no member.
    candidates: Vec<(NodeId, Node)>,
    /// A client's last known leader (from a `NotLeader` hint or a success).
    hint: parking_lot::Mutex<Option<NodeId>>,
    pub(crate) service: ClientService,
    pub(crate) transport: Arc<T>,
    pub(crate) policy: RoutePolicy,
    /// What the group holds, for RethinkDB's "primary replica for shard ..." errors.
    pub(crate) label: String,
}

impl<T: Transport> GroupRoute<T> {
    /// The route of `group`, reaching it as `reach` says; forwarded requests are served
    /// here with `service` (once `register`ed, by a member); `label` names what the
    /// group holds in errors (a shard's key range).
    pub fn new(
        group: GroupId,
        reach: Reach,
        service: ClientService,
        transport: Arc<T>,
        policy: RoutePolicy,
        label: String,
    ) -> Self {
        let (proposer, candidates) = match reach {
            Reach::Member(proposer) => (Some(proposer), Vec::new()),
            Reach::Voters(candidates) => (None, candidates),
        };
        Self {
            group,
            raft: proposer.as_ref().map(|p| p.raft().clone()),
            proposer,
            candidates,
            hint: parking_lot::Mutex::new(None),
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

    /// The group's member on this server, if it has one.
    pub fn raft(&self) -> Option<&Raft> {
        self.raft.as_ref()
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
        // A client holds no state of the group: nothing to wait for.
        let Some(raft) = &self.raft else {
            return Ok(());
        };
        raft.wait(Some(self.policy.deadline))
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

    /// This node's id (0 for a client: no member has it) and the leader it knows of (a
    /// client: its last hint, else a candidate, a different one after each failure).
    fn known_leader(&self, attempt: usize) -> (NodeId, Option<NodeId>) {
        match &self.raft {
            Some(raft) => {
                let metrics = raft.metrics();
                let metrics = metrics.borrow();
                (metrics.id, metrics.current_leader)
            }
            None => {
                let hint = *self.hint.lock();
                let guess = (!self.candidates.is_empty())
                    .then(|| self.candidates[attempt % self.candidates.len()].0);
                (0, hint.or(guess))
            }
        }
    }

    /// A member's address, from the group's membership (a client: its candidates).
    fn address_of(&self, id: NodeId) -> Option<Node> {
        match &self.raft {
            Some(raft) => {
                let metrics = raft.metrics();
                let metrics = metrics.borrow();
                metrics
                    .membership_config
                    .membership()
                    .get_node(&id)
                    .cloned()
            }
            // A hinted leader that is no candidate (a copy on its way out leading while
            // replicas move): no address here, the cluster transport dials the node's
            // server where membership knows it (`replication::Resolving`).
            None => Some(
                self.candidates
                    .iter()
                    .find(|(c, _)| *c == id)
                    .map_or_else(|| Node::new(String::new()), |(_, n)| n.clone()),
            ),
        }
    }

    /// Resolves once this server's member sees a later term led by a node other than
    /// `target` (so `target` leads no more, or this member is behind and the request was
    /// a guess); never for a client, which has no member to watch.
    async fn leader_moved(&self, target: NodeId) {
        let Some(raft) = &self.raft else {
            return std::future::pending().await;
        };
        let mut metrics = raft.metrics();
        let term = metrics.borrow_and_update().current_term;
        loop {
            if metrics.changed().await.is_err() {
                // The member stopped: the deadline decides.
                return std::future::pending().await;
            }
            let m = metrics.borrow_and_update();
            if m.current_term > term && m.current_leader.is_some_and(|l| l != target) {
                return;
            }
        }
    }

    /// A client remembers who answered, or who was named leader; a failed guess is
    /// forgotten.
    fn remember(&self, leader: Option<NodeId>) {
        if self.raft.is_none() {
            *self.hint.lock() = leader;
        }
    }

    /// Sends `request` to member `target` itself (this node's or another's), once; `None`
    /// when it did not answer within `limit`.
    pub async fn ask(
        &self,
        target: NodeId,
        request: ClientRequest,
        limit: Duration,
    ) -> Option<ClientResponse> {
        let here = self
            .proposer
            .as_ref()
            .filter(|p| p.raft().metrics().borrow().id == target);
        if let Some(proposer) = here {
            let serve = serve_client(proposer, &self.service, request);
            return tokio::time::timeout(limit, serve).await.ok();
        }
        let node = self.address_of(target)?;
        let call = self
            .transport
            .call(target, &node, self.group, RaftRequest::Client(request));
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(RaftResponse::Client(answer))) => Some(answer),
            _ => None,
        }
    }

    /// Sends `request` to the group's leader (this node or another) until one answers,
    /// within the policy's deadline (hints past the redirect limit are followed after a
    /// pause).
    pub async fn route(
        &self,
        op: Op,
        request: ClientRequest,
    ) -> Result<ClientResponse, RouteError> {
        let deadline = Instant::now() + self.policy.deadline;
        let mut hint: Option<NodeId> = None;
        let mut redirects = 0;
        let mut no_quorum = 0;
        let mut attempt = 0usize;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(self.unavailable(op));
            }
            let left = deadline - now;
            let pause = self.policy.retry_pause.min(left);
            let (me, known) = self.known_leader(attempt);
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
            let local = self.proposer.as_ref().filter(|_| target == me);
            let answer = if let Some(proposer) = local {
                let serve = serve_client(proposer, &self.service, request.clone());
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
                let answered = tokio::select! {
                    answered = tokio::time::timeout(left, call) => answered,
                    // The target was deposed while it kept silent (paused, or cut off
                    // with the connection open): a read is asked again of the new
                    // leader; a write may have reached the old one, so it is
                    // indeterminate now rather than at the deadline.
                    () = self.leader_moved(target) => match op {
                        Op::Read => {
                            attempt += 1;
                            continue;
                        }
                        Op::Write => return Err(RouteError::LostContact(op)),
                    },
                };
                match answered {
                    Ok(Ok(RaftResponse::Client(answer))) => answer,
                    // Not sent, or refused by the router before any Raft member saw it:
                    // safe to try again.
                    Ok(Err(e)) if !e.maybe_delivered() => {
                        self.remember(None);
                        attempt += 1;
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                    Ok(Ok(RaftResponse::Refused(_))) => {
                        self.remember(None);
                        attempt += 1;
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                    Ok(Ok(_)) | Ok(Err(_)) | Err(_) => return Err(RouteError::LostContact(op)),
                }
            };
            match answer {
                ClientResponse::NotLeader { leader } => {
                    // Nothing was appended, so asking again is always safe, and only the
                    // deadline ends the attempts. A hint is followed at once the first
                    // `max_redirects` times; past that, members disagree on the leader
                    // (it is changing hands: the old one names the new one before the
                    // new one has taken over, or a leader transfer bounces), so each
                    // further hint waits a pause, as a member that knows no leader yet
                    // (an election under way) does. Failing here instead answered
                    // writes "primary replica not available" within half a second of
                    // every planned change of primary.
                    if leader.is_some() {
                        redirects += 1;
                    }
                    hint = leader.filter(|l| *l != target);
                    self.remember(hint);
                    if hint.is_none() || redirects > self.policy.max_redirects {
                        attempt += 1;
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
                answer @ (ClientResponse::Applied { .. }
                | ClientResponse::Read(_)
                | ClientResponse::Progress(_)
                | ClientResponse::Position(_)) => {
                    self.remember(Some(target));
                    return Ok(answer);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use replication::{ClientPolicy, ReadService, TransportError};

    use super::*;

    /// Two voters that name each other leader for the first `bounces` calls (a leader
    /// changing hands, each side a step behind), then node 2 answers.
    struct Bouncing {
        bounces: usize,
        calls: AtomicUsize,
    }

    impl Transport for Bouncing {
        async fn call(
            &self,
            target: NodeId,
            _: &Node,
            _: GroupId,
            _: RaftRequest,
        ) -> Result<RaftResponse, TransportError> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let answer = if n < self.bounces {
                ClientResponse::NotLeader {
                    leader: Some(3 - target),
                }
            } else if target == 2 {
                ClientResponse::Applied {
                    reply: Reply(vec![7]),
                    index: 9,
                }
            } else {
                ClientResponse::NotLeader { leader: Some(2) }
            };
            Ok(RaftResponse::Client(answer))
        }
    }

    struct NoReads;

    impl ReadService for NoReads {
        fn read(&self, _: &[u8]) -> Result<Vec<u8>, String> {
            Err("no reads here".into())
        }
    }

    fn route(bounces: usize, deadline: Duration) -> GroupRoute<Bouncing> {
        let voters = (1..=2)
            .map(|id| (id, Node::new(format!("n{id}"))))
            .collect();
        let service = ClientService {
            reader: Arc::new(NoReads),
            policy: ClientPolicy {
                quorum_lease: Duration::from_secs(1),
                commit_timeout: Duration::from_secs(1),
            },
        };
        let transport = Arc::new(Bouncing {
            bounces,
            calls: AtomicUsize::new(0),
        });
        let policy = RoutePolicy {
            deadline,
            max_redirects: 5,
            retry_pause: Duration::from_millis(5),
        };
        GroupRoute::new(
            GroupId(1),
            Reach::Voters(voters),
            service,
            transport,
            policy,
            "[\"\", +inf)".into(),
        )
    }

    fn propose() -> ClientRequest {
        ClientRequest::Propose(Command(vec![1]))
    }

    #[tokio::test]
    async fn hints_that_bounce_past_the_redirect_limit_are_followed_until_a_leader_answers() {
        let route = route(20, Duration::from_secs(10));
        let answer = route.route(Op::Write, propose()).await;
        assert!(
            matches!(answer, Ok(ClientResponse::Applied { index: 9, .. })),
            "{answer:?}"
        );
        // Nodes 1, 2, 1, ... asked in turn: the 21st call (to node 1) names node 2,
        // whose answer is the 22nd; nothing asked twice for one hint.
        assert_eq!(route.transport.calls.load(Ordering::SeqCst), 22);
    }

    #[tokio::test]
    async fn hints_that_bounce_until_the_deadline_answer_primary_unavailable() {
        let route = route(usize::MAX, Duration::from_millis(200));
        let started = Instant::now();
        let answer = route.route(Op::Write, propose()).await;
        assert!(
            matches!(
                answer,
                Err(RouteError::PrimaryUnavailable { op: Op::Write, .. })
            ),
            "{answer:?}"
        );
        assert!(started.elapsed() >= Duration::from_millis(200));
        // Paused between hints once past the limit: tens of calls, not thousands.
        let calls = route.transport.calls.load(Ordering::SeqCst);
        assert!(calls < 200, "{calls} calls");
    }
}
