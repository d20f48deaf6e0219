//! Client requests of a group: proposals and reads forwarded to (or run on) its leader.
//!
//! A server that is not a group's leader forwards a client's write as
//! [`ClientRequest::Propose`] and a read that must see the leader's state as
//! [`ClientRequest::Read`]; the leader answers through [`serve_client`], which the
//! leader's own server also calls directly, so both paths decide alike. What a read
//! returns is the group's business: a [`ReadService`] registered with the [`Router`]
//! (`Router::add_client`) turns query bytes into answer bytes.
//!
//! Invariants: a proposal is refused before it reaches the log ([`ClientResponse::NotLeader`],
//! [`ClientResponse::NoQuorum`]) only when it was certainly not appended; once it may
//! have been appended, every failure is [`ClientResponse::Lost`] (outcome unknown), never
//! a refusal, so a caller never retries a write that may have been applied. A leader
//! that has not heard from a quorum within [`ClientPolicy::quorum_lease`] refuses writes
//! and reads (it may have been deposed without knowing it).
//!
//! [`Router`]: crate::Router

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::ServerState;
use serde::{Deserialize, Serialize};

use crate::fence::Proposer;
use crate::types::{Command, NodeId, Raft, Reply};

/// A client request for a group's leader.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ClientRequest {
    /// Append `Command` to the log and answer the state machine's reply once applied.
    Propose(Command),
    /// Run a read (bytes the group's [`ReadService`] understands) on the leader's state;
    /// `linearizable` first confirms the leadership with a quorum and waits until the
    /// state machine has applied everything committed before the read.
    Read {
        /// Confirm with a quorum and catch up first (`read_mode="majority"`).
        linearizable: bool,
        /// The encoded read.
        query: Vec<u8>,
    },
    /// The leader's view of replication: how far each member's log matches its own
    /// (what only the leader knows; `table_status` asks it from any server).
    Progress,
    /// How far this member has applied its log: any member answers, leader or not (an
    /// emergency repair keeps the replica that has applied the most).
    Position,
}

/// The answer to a [`ClientRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ClientResponse {
    /// The proposal was committed and applied on the leader: the state machine's reply
    /// and the entry's log index (a member waits for its own state to reach it before
    /// it shows the change to its client).
    Applied {
        /// The state machine's reply.
        reply: Reply,
        /// The entry's log index.
        index: u64,
    },
    /// The read's answer.
    Read(Vec<u8>),
    /// The answer to [`ClientRequest::Progress`].
    Progress(Progress),
    /// The answer to [`ClientRequest::Position`]: the member's last applied log index.
    Position(Option<u64>),
    /// This node is not the leader (nothing was appended); the leader it knows of.
    NotLeader {
        /// The leader this node knows of, if any.
        leader: Option<NodeId>,
    },
    /// This node leads but has not heard from a quorum lately; nothing was appended or
    /// read.
    NoQuorum,
    /// The proposal may have been appended, but its outcome is unknown (the commit
    /// did not come within the time limit, leadership was lost, the node stopped).
    Lost(String),
    /// The read failed on the leader (the text says why).
    Failed(String),
}

/// A leader's view of its group's replication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The leader (the member that answered).
    pub leader: NodeId,
    /// Each other member's last log index known to match the leader's (none yet).
    pub matched: Vec<(NodeId, Option<u64>)>,
    /// The leader's last log index.
    pub last: Option<u64>,
    /// The voters of the membership the leader uses now (a replica being added is a
    /// learner until its membership change commits).
    pub voters: Vec<NodeId>,
}

impl Progress {
    /// What `raft` knows of its followers (nothing unless it leads).
    pub fn of(raft: &Raft) -> Progress {
        let m = raft.metrics().borrow().clone();
        Progress {
            leader: m.id,
            matched: m
                .replication
                .map(|r| {
                    r.into_iter()
                        .map(|(n, l)| (n, l.map(|l| l.index)))
                        .collect()
                })
                .unwrap_or_default(),
            last: m.last_log_index,
            voters: m.membership_config.membership().voter_ids().collect(),
        }
    }
}

/// Turns a group's read query bytes into answer bytes, on the node's local state.
pub trait ReadService: Send + Sync + 'static {
    /// Answers `query`; an error is a text for the client.
    fn read(&self, query: &[u8]) -> Result<Vec<u8>, String>;

    /// What `query` waits for before it is answered (a long poll: a bounded wait the
    /// service chooses), or `None` to answer at once (the default).
    fn ready(&self, _query: &[u8]) -> Option<ReadyWait> {
        None
    }
}

/// A read's wait before its answer ([`ReadService::ready`]).
pub type ReadyWait = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Time limits of a leader serving client requests.
#[derive(Debug, Clone, Copy)]
pub struct ClientPolicy {
    /// A leader whose last quorum acknowledgement is older than this refuses requests.
    pub quorum_lease: Duration,
    /// How long a proposal may wait for its commit (or a read for its quorum check).
    pub commit_timeout: Duration,
}

impl ClientPolicy {
    /// The policy for a group with `config`: a lease of the shortest election timeout
    /// (a follower that acknowledged the leader starts no election before it, so until
    /// then no other leader can exist, clock drift aside), a commit timeout of
    /// `commit_timeout`.
    pub fn for_config(config: &openraft::Config, commit_timeout: Duration) -> Self {
        Self {
            quorum_lease: Duration::from_millis(config.election_timeout_min),
            commit_timeout,
        }
    }
}

/// What a group's leader needs to serve client requests: its reads and its limits.
#[derive(Clone)]
pub struct ClientService {
    /// The group's reads.
    pub reader: Arc<dyn ReadService>,
    /// The limits.
    pub policy: ClientPolicy,
}

/// `None` if this node leads with a fresh quorum; else the refusal.
async fn refuse_unless_leading(raft: &Raft, policy: &ClientPolicy) -> Option<ClientResponse> {
    if let Some(ClientResponse::NoQuorum) = refusal(raft, policy) {
        // A leader without a recent acknowledgement may just have been elected (its
        // clock runs from the election, and the first acknowledgement comes with the
        // first heartbeat round): give it one lease to hear from a quorum before
        // refusing. A leader really cut off refuses a lease later.
        let lease = u64::try_from(policy.quorum_lease.as_millis()).unwrap_or(u64::MAX);
        let _ = raft
            .wait(Some(policy.quorum_lease))
            .metrics(
                |m| {
                    m.state != ServerState::Leader
                        || m.millis_since_quorum_ack.is_some_and(|ms| ms <= lease)
                },
                "a quorum acknowledgement",
            )
            .await;
    }
    refusal(raft, policy)
}

/// Whether this node leads and heard from a quorum within the lease, so that a
/// non-linearizable read of its state machine is what `serve_client` would answer now.
pub fn leads_now(raft: &Raft, policy: &ClientPolicy) -> bool {
    refusal(raft, policy).is_none()
}

/// Why this node cannot serve a client request now, if it cannot.
fn refusal(raft: &Raft, policy: &ClientPolicy) -> Option<ClientResponse> {
    let metrics = raft.metrics().borrow().clone();
    if metrics.state != ServerState::Leader || metrics.current_leader != Some(metrics.id) {
        return Some(ClientResponse::NotLeader {
            leader: metrics.current_leader.filter(|l| *l != metrics.id),
        });
    }
    let lease = u64::try_from(policy.quorum_lease.as_millis()).unwrap_or(u64::MAX);
    match metrics.millis_since_quorum_ack {
        Some(ms) if ms <= lease => None,
        _ => Some(ClientResponse::NoQuorum),
    }
}

/// Serves one client request on this node's member of the group, behind its
/// `proposer`: proposals pass the fence of the member's leader transfers (during one
/// they are refused as [`ClientResponse::NotLeader`] without a leader, so that the
/// caller asks again until the new leader is known).
pub async fn serve_client(
    proposer: &Proposer,
    service: &ClientService,
    request: ClientRequest,
) -> ClientResponse {
    let raft = proposer.raft();
    let policy = &service.policy;
    if let ClientRequest::Position = request {
        return position(raft);
    }
    if let Some(refusal) = refuse_unless_leading(raft, policy).await {
        return refusal;
    }
    match request {
        ClientRequest::Propose(command) => {
            // Held until `client_write` answers, so that a transfer waits for this
            // proposal before it compares the target's log with the leader's.
            let Ok(_passing) = proposer.fence.pass() else {
                return ClientResponse::NotLeader { leader: None };
            };
            match tokio::time::timeout(policy.commit_timeout, raft.client_write(command)).await {
                Ok(Ok(response)) => ClientResponse::Applied {
                    index: response.log_id.index,
                    reply: response.data,
                },
                // Refused before the append, or the entry was truncated by a new leader:
                // either way it is not in the log that will be committed.
                Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
                    ClientResponse::NotLeader {
                        leader: f.leader_id,
                    }
                }
                Ok(Err(e)) => ClientResponse::Lost(e.to_string()),
                Err(_) => ClientResponse::Lost(format!(
                    "not committed within {:?}",
                    policy.commit_timeout
                )),
            }
        }
        ClientRequest::Read {
            linearizable,
            query,
        } => {
            if linearizable {
                let check = tokio::time::timeout(policy.commit_timeout, raft.ensure_linearizable());
                match check.await {
                    Ok(Ok(_)) => {}
                    Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)))) => {
                        return ClientResponse::NotLeader {
                            leader: f.leader_id,
                        }
                    }
                    Ok(Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_))))
                    | Err(_) => return ClientResponse::NoQuorum,
                    Ok(Err(e)) => return ClientResponse::Failed(e.to_string()),
                }
            }
            if let Some(wait) = service.reader.ready(&query) {
                wait.await;
            }
            match service.reader.read(&query) {
                Ok(answer) => ClientResponse::Read(answer),
                Err(why) => ClientResponse::Failed(why),
            }
        }
        ClientRequest::Progress => ClientResponse::Progress(Progress::of(raft)),
        ClientRequest::Position => position(raft),
    }
}

/// How far `raft` has applied its log.
fn position(raft: &Raft) -> ClientResponse {
    ClientResponse::Position(raft.metrics().borrow().last_applied.map(|l| l.index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::KvMachine;
    use crate::network::{RaftRequest, RaftResponse, Transport};
    use crate::types::{GroupId, Node};
    use crate::{Durability, LogStore, Network, Router, StateMachineStore, TransportError};

    /// A transport for a node that never calls out.
    struct Nowhere;

    impl Transport for Nowhere {
        async fn call(
            &self,
            _: NodeId,
            _: &Node,
            _: GroupId,
            _: RaftRequest,
        ) -> Result<RaftResponse, TransportError> {
            Err(TransportError::Closed)
        }
    }

    /// Answers every read with the query reversed.
    struct Mirror;

    impl ReadService for Mirror {
        fn read(&self, query: &[u8]) -> Result<Vec<u8>, String> {
            Ok(query.iter().rev().copied().collect())
        }
    }

    async fn node() -> Raft {
        let engine: Arc<dyn storage::Engine> = Arc::new(storage::Memory::new());
        let log = LogStore::open(engine.clone(), "g", Durability::Inline).unwrap();
        let sm =
            StateMachineStore::open(engine, "g", KvMachine::default(), Durability::Inline).unwrap();
        let config = Arc::new(openraft::Config::default().validate().unwrap());
        let network = Network::new(Arc::new(Nowhere), GroupId(1));
        Raft::new(1, config, network, log, sm).await.unwrap()
    }

    fn service(lease: Duration) -> ClientService {
        ClientService {
            reader: Arc::new(Mirror),
            policy: ClientPolicy {
                quorum_lease: lease,
                commit_timeout: Duration::from_secs(5),
            },
        }
    }

    fn read(linearizable: bool) -> ClientRequest {
        ClientRequest::Read {
            linearizable,
            query: vec![1, 2, 3],
        }
    }

    #[tokio::test]
    async fn a_node_that_does_not_lead_refuses_before_the_log() {
        let raft = node().await;
        let raft = &Proposer::new(raft);
        let s = service(Duration::from_secs(1));
        let answer = serve_client(raft, &s, ClientRequest::Propose(Command(vec![]))).await;
        assert!(
            matches!(answer, ClientResponse::NotLeader { leader: None }),
            "{answer:?}"
        );
        let answer = serve_client(raft, &s, read(true)).await;
        assert!(
            matches!(answer, ClientResponse::NotLeader { leader: None }),
            "{answer:?}"
        );
        let answer = serve_client(raft, &s, ClientRequest::Progress).await;
        assert!(
            matches!(answer, ClientResponse::NotLeader { leader: None }),
            "{answer:?}"
        );
        // Any member says how far it applied.
        let answer = serve_client(raft, &s, ClientRequest::Position).await;
        assert!(
            matches!(answer, ClientResponse::Position(None)),
            "{answer:?}"
        );
        assert_eq!(raft.raft().metrics().borrow().last_log_index, None);
        raft.raft().shutdown().await.unwrap();
    }

    /// A one-node group's member, once it leads.
    async fn leader() -> Raft {
        let raft = node().await;
        let members = std::collections::BTreeMap::from([(1, Node::new("nowhere"))]);
        raft.initialize(members).await.unwrap();
        raft.wait(Some(Duration::from_secs(5)))
            .current_leader(1, "leader")
            .await
            .unwrap();
        raft
    }

    #[tokio::test]
    async fn a_leader_proposes_and_reads_and_the_router_needs_a_service() {
        let raft = leader().await;
        let router = Router::new();
        router.add_group(GroupId(1), raft.clone());
        let refused = router
            .handle(GroupId(1), RaftRequest::Client(read(false)))
            .await;
        assert!(matches!(refused, RaftResponse::Refused(_)), "{refused:?}");
        router.add_client(GroupId(1), service(Duration::from_secs(1)));
        for linearizable in [false, true] {
            let answer = router
                .handle(GroupId(1), RaftRequest::Client(read(linearizable)))
                .await;
            assert!(
                matches!(&answer, RaftResponse::Client(ClientResponse::Read(b)) if b == &[3, 2, 1]),
                "{answer:?}"
            );
        }
        let put = crate::kv::KvCommand::Put {
            key: "k".into(),
            value: "v".into(),
        };
        let command = Command(crate::codec::encode_message(&put).unwrap());
        let answer = router
            .handle(
                GroupId(1),
                RaftRequest::Client(ClientRequest::Propose(command)),
            )
            .await;
        assert!(
            matches!(answer, RaftResponse::Client(ClientResponse::Applied { .. })),
            "{answer:?}"
        );
        // The leader's view: itself, no other member, its last entry (the initial
        // membership, its first blank entry, the put).
        let answer = router
            .handle(GroupId(1), RaftRequest::Client(ClientRequest::Progress))
            .await;
        let RaftResponse::Client(ClientResponse::Progress(p)) = answer else {
            panic!("{answer:?}");
        };
        assert_eq!(
            (p.leader, p.last),
            (1, raft.metrics().borrow().last_log_index)
        );
        assert!(p.last.is_some_and(|l| l >= 2), "{p:?}");
        assert!(p.matched.iter().all(|(n, _)| *n == 1), "{p:?}");
        raft.shutdown().await.unwrap();
    }

    /// A leader handing its leadership over refuses client proposals, served here or
    /// forwarded through the router, before they reach the log: a proposal appended
    /// under the transfer would leave the target one entry short, and the leader would
    /// refuse it its vote (under load, the hand-back of a shard to its configured
    /// primary failed this way for half a minute).
    #[tokio::test]
    async fn a_leader_handing_over_refuses_proposals_before_the_log() {
        let raft = leader().await;
        let proposer = Proposer::new(raft.clone());
        let router = Router::new();
        router.add_member(GroupId(1), proposer.clone());
        router.add_client(GroupId(1), service(Duration::from_secs(1)));
        let put = || {
            let put = crate::kv::KvCommand::Put {
                key: "k".into(),
                value: "v".into(),
            };
            ClientRequest::Propose(Command(crate::codec::encode_message(&put).unwrap()))
        };
        let before = raft.metrics().borrow().last_log_index;
        let raised = proposer.fence.raise(2).unwrap();
        let here = serve_client(&proposer, &service(Duration::from_secs(1)), put()).await;
        assert!(
            matches!(here, ClientResponse::NotLeader { leader: None }),
            "{here:?}"
        );
        let forwarded = router.handle(GroupId(1), RaftRequest::Client(put())).await;
        assert!(
            matches!(
                forwarded,
                RaftResponse::Client(ClientResponse::NotLeader { leader: None })
            ),
            "{forwarded:?}"
        );
        assert_eq!(raft.metrics().borrow().last_log_index, before);
        drop(raised);
        let answer = router.handle(GroupId(1), RaftRequest::Client(put())).await;
        assert!(
            matches!(answer, RaftResponse::Client(ClientResponse::Applied { .. })),
            "{answer:?}"
        );
        raft.shutdown().await.unwrap();
    }

    #[test]
    fn only_errors_after_the_connection_may_have_delivered() {
        assert!(TransportError::Closed.maybe_delivered());
        assert!(TransportError::Unexpected("x".into()).maybe_delivered());
        assert!(!TransportError::Timeout(Duration::from_secs(1)).maybe_delivered());
        assert!(!TransportError::Remote("no group".into()).maybe_delivered());
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(!TransportError::Io(refused).maybe_delivered());
    }
}
