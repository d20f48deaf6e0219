//! Cluster mode: this server's catalog (Raft group 0) and its placed tables' shards (a
//! group each, `cluster::groups`) on one `replication::Host`, over the cluster port's
//! connections (the membership `Router` receives, the `TcpTransport` dials each node
//! at the address membership knows for it now: `Resolving`).
//!
//! Which servers replicate: a directory made with `--join` is replicated from the start
//! (its catalog group opens empty and waits to be added); the founder (the server that
//! created the cluster id) converts its catalog when the first replicated server
//! connects (`Cluster::replicate_catalog`, its tables placed on it alone and their
//! documents seeded into their groups; then it bootstraps the group alone and seals the
//! seed); a server that never meets one stays a single server, exactly as before. Each round, the catalog's leader adds the connected
//! replicated servers (`replication::grow`: learners first, then voters, up to five).
//!
//! Invariants: `replicated` is persisted only once the group holds the catalog (and the
//! tables' groups their documents), so a crash during the conversion leaves the single
//! server's catalog and tables in charge (the next conversion first drops the half-made
//! groups), and the tables' local copies are dropped only after it; only founders convert, so two servers
//! never bootstrap group 0 of one cluster; a server that is not replicated is never
//! added to the group.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use cluster::replica::RoutePolicy;
use cluster::replicated::{catalog_route, CatalogMachine, RaftProposer};
use cluster::system::ServerRecord;
use cluster::Cluster;
use replication::{
    grow, node_id, ClientPolicy, Durability, GroupId, Host, Node, NodeId, Raft, Resolve, Resolving,
    Router, SharedTransport, TcpTransport,
};

use super::{handback, peers::address, Inner};

/// The catalog's group.
pub(crate) const CATALOG: GroupId = GroupId(0);
/// Where the catalog group keeps its log and state.
pub(crate) const CATALOG_PREFIX: &str = "raft.g0";
/// The catalog group's most voters (RethinkDB's metadata was on every server; five
/// voters survive two failures, and more only slow every change down).
const MAX_CATALOG_VOTERS: usize = 5;
/// How often the controller looks at the peers.
const ROUND: Duration = Duration::from_millis(500);
/// How long a new member's start waits to receive the catalog.
const RECEIVE_WAIT: Duration = Duration::from_secs(10);
/// How long a proposal may wait for its group before the caller is told.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Raft timing for a server's groups. openraft 0.9 lets a follower that heard from its
/// leader stand for election only after the leader's lease (`election_timeout_max`)
/// plus its own random timeout (min..max): a lost leader is replaced 1.5–2 s after its
/// last heartbeat with these values (3–4 s with 1–2 s timeouts).
pub(crate) fn raft_config() -> Arc<replication::openraft::Config> {
    let c = replication::openraft::Config {
        heartbeat_interval: 100,
        election_timeout_min: 500,
        election_timeout_max: 1000,
        ..Default::default()
    };
    // A constant configuration: validation cannot fail on these values.
    Arc::new(c.validate().unwrap_or_default())
}

/// Dials each node at the first address membership knows for it now.
struct Resolver(Weak<Inner>);

impl Resolve for Resolver {
    fn address(&self, node: NodeId) -> Option<String> {
        let inner = self.0.upgrade()?;
        let peers = inner.peers.lock();
        let record = peers
            .connected()
            .into_iter()
            .find(|r| node_id(&r.id).is_ok_and(|n| replication::same_server(n, node)))?;
        peers.addresses_of(&record.id)?.into_iter().next()
    }
}

/// What a conversion or start needs besides `Inner`.
pub struct Setup {
    /// The server's storage, where its groups keep their logs and state.
    pub engine: Arc<dyn storage::Engine>,
    /// The catalog machine of a server opened replicated (`Cluster::open_replicated`).
    pub machine: Option<CatalogMachine>,
}

/// Runs cluster mode until aborted: opens the groups of a replicated server (or
/// converts a founder when a replicated server connects), then grows the catalog group.
pub(crate) async fn control(
    inner: Arc<Inner>,
    router: Arc<Router>,
    tcp: Arc<TcpTransport>,
    setup: Setup,
) {
    let Some(cluster) = inner.cluster.upgrade() else {
        return;
    };
    let me = match node_id(&inner.me) {
        Ok(id) => id,
        Err(e) => {
            inner.log("error", &format!("Cluster mode is off: {e}"));
            inner.ready();
            return;
        }
    };
    let resolving = Resolving::new(tcp, Resolver(Arc::downgrade(&inner)));
    let transport = Arc::new(SharedTransport::new(Arc::new(resolving)));
    let host = Arc::new(Host::new(
        me,
        setup.engine.clone(),
        router.clone(),
        transport.clone(),
        raft_config(),
        Durability::Blocking,
    ));
    *inner.host.lock() = Some(host.clone());
    let groups = Groups {
        inner: &inner,
        host: &host,
        router: &router,
        transport: &transport,
    };
    let mut catalog = match setup.machine {
        Some(machine) => match groups.open(&cluster, machine).await {
            Ok(raft) => Some(raft),
            Err(e) => {
                inner.log("error", &format!("Cannot open the cluster's catalog: {e}"));
                None
            }
        },
        None => None,
    };
    match &catalog {
        // A new member has no catalog (no users: nobody could log in) until the
        // leader sends it; ready once it has applied something, or given up waiting.
        Some(raft) => {
            let (raft, waiter) = (raft.clone(), inner.clone());
            tokio::spawn(async move {
                let received =
                    |m: &replication::openraft::RaftMetrics<NodeId, Node>| m.last_applied.is_some();
                let _ = raft
                    .wait(Some(RECEIVE_WAIT))
                    .metrics(received, "the catalog received")
                    .await;
                waiter.ready();
            });
        }
        None => inner.ready(),
    }
    // Failures already logged, so that a persistent one is one line, not one a round.
    let mut logged = HashSet::new();
    let mut hand_back = handback::HandBack::default();
    let known = addresses(&inner);
    drop(cluster);
    loop {
        tokio::time::sleep(ROUND).await;
        let Some(cluster) = inner.cluster.upgrade() else {
            return;
        };
        let peers = inner.peers.lock().connected();
        match &catalog {
            None => {
                if !inner.identity.lock().founder || !peers.iter().any(|p| p.replicated) {
                    continue;
                }
                let converted = groups.convert(&cluster, &setup.engine).await;
                match converted {
                    Ok(raft) => {
                        inner.log(
                            "notice",
                            "This server's catalog is now replicated: servers that join \
                             share its databases, users and tables.",
                        );
                        catalog = Some(raft);
                    }
                    Err(e) => {
                        if logged.insert(e.clone()) {
                            inner.log(
                                "warn",
                                &format!(
                                    "Servers that join this one do not share its catalog yet: {e}"
                                ),
                            );
                        }
                    }
                }
            }
            Some(raft) => {
                let wanted = voters(&cluster.local_record(), &peers);
                if let Err(e) = grow(raft, &wanted, MAX_CATALOG_VOTERS).await {
                    let e = e.to_string();
                    if logged.insert(e.clone()) {
                        inner.log(
                            "warn",
                            &format!("Cannot add servers to the catalog group: {e}"),
                        );
                    }
                }
                let settle = cluster::system::now_secs() - handback::SETTLE.as_secs_f64();
                let settled: Vec<String> = peers
                    .iter()
                    .filter(|p| p.time_connected <= settle)
                    .map(|p| p.id.clone())
                    .collect();
                let me = inner.me.clone();
                if let Some(line) = hand_back
                    .round(&cluster, &host, &transport, &me, &settled)
                    .await
                {
                    inner.log("notice", &line);
                }
                for line in super::moves::round(&cluster, &host, &known).await {
                    inner.log("notice", &line);
                }
                // A resharding whose server failed is finished by the catalog's leader.
                let leads = {
                    let m = raft.metrics();
                    let m = m.borrow();
                    m.current_leader == Some(m.id)
                };
                if leads {
                    cluster.resume_stalled_reshards();
                }
            }
        }
    }
}

/// The servers the catalog group should hold: this one and every connected replicated
/// peer, at their first canonical address.
fn voters(me: &ServerRecord, peers: &[ServerRecord]) -> BTreeMap<NodeId, Node> {
    std::iter::once(me)
        .chain(peers.iter().filter(|p| p.replicated))
        .filter_map(|r| {
            let addr = r.canonical_addresses.first().map(address)?;
            Some((node_id(&r.id).ok()?, Node::new(addr)))
        })
        .collect()
}

/// Each server's cluster address as membership knows it now (this server's own
/// canonical address for itself).
fn addresses(inner: &Arc<Inner>) -> cluster::groups::Addresses {
    let weak = Arc::downgrade(inner);
    let me = inner.me.clone();
    Arc::new(move |id: &str| {
        let inner = weak.upgrade()?;
        if id == me {
            let c = inner.cluster.upgrade()?;
            return c.local_record().canonical_addresses.first().map(address);
        }
        let first = inner.peers.lock().addresses_of(id)?.into_iter().next();
        first
    })
}

/// What opening and converting the catalog group work with.
struct Groups<'a> {
    inner: &'a Arc<Inner>,
    host: &'a Arc<Host<SharedTransport>>,
    router: &'a Arc<Router>,
    transport: &'a Arc<SharedTransport>,
}

impl Groups<'_> {
    /// Opens this server's member of the catalog group on `machine` and makes the
    /// catalog and the placed tables use the groups.
    async fn open(&self, cluster: &Cluster, machine: CatalogMachine) -> Result<Raft, String> {
        let member = self
            .host
            .open(CATALOG, CATALOG_PREFIX, machine)
            .await
            .map_err(|e| e.to_string())?;
        self.use_groups(cluster, member.raft.clone())?;
        Ok(member.raft)
    }

    /// Turns the founder's catalog into the cluster's: seeds group 0 from it,
    /// bootstraps alone, seals the seed, then records that the directory is replicated.
    async fn convert(
        &self,
        cluster: &Arc<Cluster>,
        engine: &Arc<dyn storage::Engine>,
    ) -> Result<Raft, String> {
        // A conversion that crashed before it was recorded left a half-made group.
        replication::drop_group_storage(&**engine, CATALOG_PREFIX).map_err(|e| e.to_string())?;
        // Off the runtime's workers: it copies every table's documents.
        let founder = cluster.clone();
        let machine =
            tokio::task::spawn_blocking(move || founder.replicate_catalog(CATALOG_PREFIX))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
        let member = self
            .host
            .open(CATALOG, CATALOG_PREFIX, machine)
            .await
            .map_err(|e| e.to_string())?;
        let me = voters(&cluster.local_record(), &[]);
        let raft_err = |e: replication::HostError| e.to_string();
        self.host.bootstrap(CATALOG, me).await.map_err(raft_err)?;
        self.host
            .seal_seed(CATALOG, COMMIT_TIMEOUT)
            .await
            .map_err(raft_err)?;
        self.inner.set_replicated()?;
        self.use_groups(cluster, member.raft.clone())?;
        Ok(member.raft)
    }

    /// Routes catalog changes through the group and hosts placed tables' shards.
    fn use_groups(&self, cluster: &Cluster, catalog: Raft) -> Result<(), String> {
        let client = ClientPolicy::for_config(&raft_config(), COMMIT_TIMEOUT);
        let route = catalog_route(
            CATALOG,
            catalog,
            self.transport.clone(),
            RoutePolicy::default(),
            client,
        );
        route.register(self.router);
        let runtime = tokio::runtime::Handle::current();
        cluster.set_catalog_proposer(Arc::new(RaftProposer::new(
            Arc::new(route),
            runtime.clone(),
        )));
        let addresses = addresses(self.inner);
        let groups = cluster::groups::TableGroups::new(
            self.host.clone(),
            self.transport.clone(),
            self.router.clone(),
            runtime,
            &self.inner.me,
            addresses,
            RoutePolicy::default(),
            client,
        );
        cluster
            .set_table_groups(groups)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
