//! The in-process group the leader-transfer tests run on: an in-memory transport between
//! [`Router`]s that can cut a node off, [`KvMachine`] replicas read back for comparison.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use openraft::{Config, ServerState};
use parking_lot::RwLock;
use storage::{Engine, Memory};

use crate::kv::{read_map, KvCommand, KvMachine};
use crate::*;

pub(super) const G: GroupId = GroupId(1);
const PREFIX: &str = "raft.g1";

/// The in-memory network: every node's router, and the nodes cut off from all others.
#[derive(Default)]
pub(super) struct Net {
    pub(super) routers: RwLock<HashMap<NodeId, Arc<Router>>>,
    pub(super) cut: RwLock<HashSet<NodeId>>,
}

/// One node's side of [`Net`].
pub(super) struct Local {
    pub(super) net: Arc<Net>,
    me: NodeId,
}

impl Transport for Local {
    async fn call(
        &self,
        target: NodeId,
        _: &Node,
        group: GroupId,
        request: RaftRequest,
    ) -> Result<RaftResponse, TransportError> {
        let cut = {
            let cut = self.net.cut.read();
            cut.contains(&self.me) || cut.contains(&target)
        };
        let router = self.net.routers.read().get(&target).cloned();
        match router {
            Some(router) if !cut => Ok(router.handle(group, request).await),
            _ => Err(TransportError::Closed),
        }
    }
}

pub(super) struct Member {
    pub(super) engine: Arc<dyn Engine>,
    pub(super) proposer: Proposer,
    pub(super) transport: Arc<Local>,
}

pub(super) struct Group {
    pub(super) net: Arc<Net>,
    pub(super) members: BTreeMap<NodeId, Member>,
}

fn config() -> Arc<Config> {
    let c = Config {
        heartbeat_interval: 50,
        election_timeout_min: 300,
        election_timeout_max: 500,
        ..Default::default()
    };
    Arc::new(c.validate().unwrap())
}

impl Group {
    /// A group of voters `1..=voters`, initialized by node 1, with a leader.
    pub(super) async fn start(voters: u64) -> Self {
        let mut group = Group {
            net: Arc::default(),
            members: BTreeMap::new(),
        };
        for id in 1..=voters {
            group.add_node(id).await;
        }
        let members: BTreeMap<NodeId, Node> = (1..=voters)
            .map(|id| (id, Node::new(format!("n{id}"))))
            .collect();
        group.raft(1).initialize(members).await.unwrap();
        group.wait_for_leader(None).await;
        group
    }

    /// Starts node `id` (not yet a member).
    pub(super) async fn add_node(&mut self, id: NodeId) {
        let engine: Arc<dyn Engine> = Arc::new(Memory::new());
        let log = LogStore::open(engine.clone(), PREFIX, Durability::Inline).unwrap();
        let sm = StateMachineStore::open(
            engine.clone(),
            PREFIX,
            KvMachine::default(),
            Durability::Inline,
        )
        .unwrap();
        let transport = Arc::new(Local {
            net: self.net.clone(),
            me: id,
        });
        let network = Network::new(transport.clone(), G);
        let raft = Raft::new(id, config(), network, log, sm).await.unwrap();
        let router = Arc::new(Router::new());
        router.add_group(G, raft.clone());
        self.net.routers.write().insert(id, router);
        self.members.insert(
            id,
            Member {
                engine,
                proposer: Proposer::new(raft),
                transport,
            },
        );
    }

    pub(super) fn raft(&self, id: NodeId) -> &Raft {
        self.members[&id].proposer.raft()
    }

    /// The node that leads in the highest term, if any.
    pub(super) fn leader(&self) -> Option<NodeId> {
        leader_among(self.members.values().map(|m| &m.proposer))
    }

    /// Waits for a leader (other than `not`); answers it.
    pub(super) async fn wait_for_leader(&self, not: Option<NodeId>) -> NodeId {
        for _ in 0..400 {
            if let Some(l) = self.leader().filter(|l| Some(*l) != not) {
                return l;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no leader within 10 s");
    }

    pub(super) async fn transfer(
        &self,
        from: NodeId,
        to: NodeId,
        timeout: Duration,
    ) -> Result<Transferred, TransferError> {
        let m = &self.members[&from];
        m.proposer
            .transfer_leader(&*m.transport, G, to, timeout)
            .await
    }

    pub(super) async fn put(&self, at: NodeId, key: &str) -> Result<Reply, ProposeError> {
        let cmd = KvCommand::Put {
            key: key.into(),
            value: format!("v-{key}"),
        };
        self.members[&at]
            .proposer
            .propose(Command(cmd.encode().unwrap()))
            .await
    }

    pub(super) fn map(&self, id: NodeId) -> BTreeMap<String, String> {
        let engine = &*self.members[&id].engine;
        let spaces = state_spaces(engine, PREFIX, &[KvMachine::KIND.to_owned()]).unwrap();
        read_map(engine, &spaces[0]).unwrap()
    }

    /// Waits until every running replica holds the same map and applied position.
    pub(super) async fn converged(&self, ids: &[NodeId]) -> BTreeMap<String, String> {
        for _ in 0..400 {
            let applied: Vec<_> = ids
                .iter()
                .map(|id| applied_log_id(&*self.members[id].engine, PREFIX).unwrap())
                .collect();
            let first = self.map(ids[0]);
            if applied.windows(2).all(|w| w[0] == w[1])
                && ids.iter().all(|id| self.map(*id) == first)
            {
                return first;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("replicas {ids:?} did not converge");
    }

    pub(super) async fn shutdown(self) {
        for m in self.members.values() {
            m.proposer.raft().shutdown().await.unwrap();
        }
    }
}

pub(super) fn leader_among<'a>(proposers: impl Iterator<Item = &'a Proposer>) -> Option<NodeId> {
    proposers
        .map(|p| p.raft().metrics().borrow().clone())
        .filter(|m| m.state == ServerState::Leader)
        .max_by_key(|m| m.current_term)
        .map(|m| m.id)
}

pub(super) fn term(raft: &Raft) -> u64 {
    raft.metrics().borrow().current_term
}
