//! Cluster membership: servers that join each other on the cluster port.
//!
//! A server with a cluster port runs one [`Membership`]: it serves the port with the
//! replication crate's transport (`serve_tcp`, one connection per peer address through
//! `TcpTransport`, TLS and the hello as the [`replication::PeerConfig`] says), and
//! registers itself as the router's [`replication::Service`], so membership messages
//! travel beside the Raft groups on the same connections. Each round (a quarter of the
//! heartbeat timeout, 0.2 to 1 s) it pings every address it knows (`--join` seeds and
//! every peer's canonical addresses); a ping and its answer carry the sender's
//! [`ServerRecord`], the servers it knows (so a joiner learns the whole cluster from one
//! member and connects to all of them, as in RethinkDB) and `cluster_config`'s
//! heartbeat (the latest write wins). A peer not heard from within the heartbeat timeout
//! is marked disconnected (`peers`); it is still pinged, and reconnects when back.
//!
//! The cluster id: a server without `--join` created it when its identity was first
//! loaded (`identity`); a fresh server with `--join` has none, and this layer asks the
//! seeds for theirs (the hello's join, `replication::learn_cluster_id`) until one
//! answers, then persists it. Nothing is served on the port until the id is known.
//!
//! Invariants: no lock is held across an `.await` or while calling into the cluster
//! (which calls back for `connected_to`); a rename of this server is applied and
//! persisted before it is acknowledged.

mod handback;
mod identity;
mod moves;
mod peers;
mod raft;
mod tables;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use cluster::system::{now_secs, ServerRecord};
use cluster::Cluster;
use parking_lot::Mutex;
use replication::{ClusterId, ClusterTls, PeerConfig, Router, TcpTransport, TransportError};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use identity::{Identity, IdentityError};
pub use peers::{Known, PeerSet};
pub use raft::Setup as RaftSetup;
pub(crate) use raft::CATALOG_PREFIX;

use crate::config::ClusterSetup;
use crate::Error;

/// How long a connection attempt to a peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a rename through another server may take.
pub(crate) const CONFIGURE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a peer's counters (`rethinkdb.stats`) may take.
pub(crate) const STATS_TIMEOUT: Duration = Duration::from_secs(2);

/// What a ping and its answer carry.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Hello {
    from: ServerRecord,
    known: Vec<Known>,
    /// `heartbeat_timeout_secs` and when it was written (ms since the epoch; 0: never).
    heartbeat: (f64, u64),
}

#[derive(Debug, Serialize, Deserialize)]
enum Request {
    Ping(Hello),
    Configure {
        id: String,
        name: String,
        tags: Vec<String>,
    },
    /// This server's query counters (`rethinkdb.stats` read on a peer).
    Stats,
}

#[derive(Debug, Serialize, Deserialize)]
enum Answer {
    Pong(Box<Hello>),
    Configured(Result<(), String>),
    Malformed(String),
    Stats(Box<cluster::system::ServerStats>),
}

struct Inner {
    cluster: Weak<Cluster>,
    me: String,
    dir: PathBuf,
    log_file: Option<PathBuf>,
    identity: Mutex<Identity>,
    peers: Mutex<PeerSet>,
    heartbeat: Mutex<(f64, u64)>,
    transport: OnceLock<Arc<TcpTransport>>,
    runtime: tokio::runtime::Handle,
    /// This server's Raft groups (cluster mode: `raft`), once the transport exists;
    /// taken when the layer stops (the host's router holds this `Inner`: a cycle that
    /// would keep the storage open).
    host: Mutex<Option<Arc<replication::Host<replication::SharedTransport>>>>,
    /// True once cluster mode has opened what the server had (`Membership::ready`).
    ready: tokio::sync::watch::Sender<bool>,
}

/// A running membership layer; dropping it (or `stop`) closes the cluster port.
pub struct Membership {
    task: JoinHandle<()>,
    inner: Arc<Inner>,
    router: Arc<Router>,
}

impl Membership {
    /// Starts serving `listener` as this server's cluster port and joining `setup.joins`.
    /// `identity` is the one the cluster was opened with.
    pub fn start(
        cluster: &Arc<Cluster>,
        listener: TcpListener,
        setup: &ClusterSetup,
        identity: Identity,
        dir: PathBuf,
        log_file: Option<PathBuf>,
        raft: RaftSetup,
    ) -> Result<Membership, Error> {
        let tls = match &setup.tls {
            Some(f) => Some(
                ClusterTls::from_pem_files(&f.key, &f.cert, &f.ca)
                    .map_err(|e| Error::Tls(e.to_string()))?,
            ),
            None => None,
        };
        let inner = Arc::new(Inner {
            cluster: Arc::downgrade(cluster),
            me: identity.server_id.clone(),
            dir,
            log_file,
            identity: Mutex::new(identity),
            peers: Mutex::new(PeerSet::new(cluster.server_id(), setup.joins.clone())),
            heartbeat: Mutex::new((cluster.heartbeat_secs(), 0)),
            transport: OnceLock::new(),
            runtime: tokio::runtime::Handle::current(),
            host: Mutex::new(None),
            ready: tokio::sync::watch::channel(false).0,
        });
        cluster.set_membership(inner.clone());
        let router = Arc::new(Router::new());
        router.set_service(Arc::new(Svc(inner.clone())));
        let task = tokio::spawn(run(
            inner.clone(),
            router.clone(),
            listener,
            tls,
            setup.joins.clone(),
            raft,
        ));
        Ok(Membership {
            task,
            inner,
            router,
        })
    }

    /// The router of this server's cluster port: Raft groups register here
    /// (`Router::add_group`) to be served beside membership.
    pub fn router(&self) -> &Arc<Router> {
        &self.router
    }

    /// The transport to the other servers (one connection per address), once the
    /// cluster id is known (at once, unless a fresh server is still asking its seeds).
    pub fn transport(&self) -> Option<Arc<TcpTransport>> {
        self.inner.transport.get().cloned()
    }

    /// The cluster id, once known.
    pub fn cluster_id(&self) -> Option<String> {
        self.inner.identity.lock().cluster_id.clone()
    }

    /// Waits (at most `timeout`) until cluster mode has opened this server's catalog
    /// group and placed tables, if it has them; false if it did not in time.
    pub async fn ready(&self, timeout: Duration) -> bool {
        let mut rx = self.inner.ready.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|r| *r))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Closes the cluster port, stops pinging and stops this server's Raft groups.
    pub async fn stop(self) {
        self.task.abort();
        let host = self.inner.host.lock().take();
        if let Some(host) = host {
            host.shutdown().await;
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.task.abort();
        // Breaks the cycle through the host's router (its groups stop with the runtime).
        self.inner.host.lock().take();
    }
}

/// Learns the cluster id if needed, then serves the port and pings until aborted.
async fn run(
    inner: Arc<Inner>,
    router: Arc<Router>,
    listener: TcpListener,
    tls: Option<ClusterTls>,
    seeds: Vec<String>,
    raft: RaftSetup,
) {
    let known = inner.identity.lock().cluster_id.clone();
    let id = match known {
        Some(id) => id,
        None => learn(&inner, tls.as_ref(), &seeds).await,
    };
    let id = match ClusterId::new(id) {
        Ok(id) => id,
        Err(e) => {
            inner.log("error", &format!("The cluster port is not served: {e}"));
            inner.ready();
            return;
        }
    };
    let config = match tls {
        Some(tls) => PeerConfig::tls(id, tls),
        None => PeerConfig::plain(id),
    };
    let transport = Arc::new(TcpTransport::new(config.clone(), CONNECT_TIMEOUT));
    let _ = inner.transport.set(transport.clone());
    let groups_router = router.clone();
    tokio::select! {
        served = replication::serve_tcp(listener, router, config) => {
            if let Err(e) = served {
                inner.log("error", &format!("The cluster port failed: {e}"));
            }
        }
        () = ping_loop(&inner, &transport) => {}
        () = raft::control(inner.clone(), groups_router, transport.clone(), raft) => {}
    }
}

/// Asks the seeds for the cluster id until one answers; persists it.
async fn learn(inner: &Arc<Inner>, tls: Option<&ClusterTls>, seeds: &[String]) -> String {
    let mut reported = std::collections::HashSet::new();
    loop {
        for seed in seeds {
            match replication::learn_cluster_id(seed, tls, CONNECT_TIMEOUT).await {
                Ok(id) => {
                    let mut identity = inner.identity.lock().clone();
                    identity.cluster_id = Some(id.to_string());
                    if let Err(e) = identity.save(&inner.dir) {
                        inner.log("error", &format!("Cannot save the cluster id: {e}"));
                    }
                    *inner.identity.lock() = identity;
                    inner.log("notice", &format!("Joined cluster {id} through {seed}"));
                    return id.to_string();
                }
                Err(e) => {
                    if reported.insert(seed.clone()) {
                        inner.log("warn", &format!("Cannot join {seed} yet: {e}"));
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Pings every known address each round and marks the silent peers disconnected.
async fn ping_loop(inner: &Arc<Inner>, transport: &Arc<TcpTransport>) {
    // Addresses whose failure was logged: once until they answer again, so a refused
    // or unreachable server is explained without a line per round.
    let mut reported = std::collections::HashSet::new();
    loop {
        let timeout = Duration::from_secs_f64(inner.heartbeat_secs().max(0.5));
        let interval = (timeout / 4).clamp(Duration::from_millis(200), Duration::from_secs(1));
        let targets = inner.peers.lock().targets();
        let mut refused = std::collections::BTreeSet::new();
        if let Some(body) = inner
            .hello()
            .and_then(|h| serde_json::to_vec(&Request::Ping(h)).ok())
        {
            let mut calls = tokio::task::JoinSet::new();
            for addr in targets {
                let (t, body) = (transport.clone(), body.clone());
                calls.spawn(async move {
                    let answer = t.call_service(&addr, body, interval * 2).await;
                    (addr, answer)
                });
            }
            while let Some(done) = calls.join_next().await {
                let Ok((addr, answer)) = done else { continue };
                let failure = match answer.map(|b| serde_json::from_slice::<Answer>(&b)) {
                    Ok(Ok(Answer::Pong(h))) => {
                        inner.receive(*h, Some(&addr));
                        reported.remove(&addr);
                        continue;
                    }
                    Ok(Ok(other)) => format!("it answered {other:?}"),
                    Ok(Err(e)) => format!("its answer is malformed: {e}"),
                    Err(e) => {
                        if matches!(e, TransportError::Io(_) | TransportError::Closed) {
                            refused.insert(addr.clone());
                        }
                        e.to_string()
                    }
                };
                if reported.insert(addr.clone()) {
                    inner.log(
                        "warn",
                        &format!("Cannot reach the server at {addr}: {failure}"),
                    );
                }
            }
        }
        let lost = {
            let mut peers = inner.peers.lock();
            let mut lost = peers.unreachable(&refused);
            lost.extend(peers.expire(Instant::now(), timeout));
            lost
        };
        for name in lost {
            inner.log("notice", &format!("Disconnected from server \"{name}\""));
        }
        tokio::time::sleep(interval).await;
    }
}

impl Inner {
    fn log(&self, level: &str, line: &str) {
        crate::serve::log(self.log_file.as_deref(), line);
        if let Some(c) = self.cluster.upgrade() {
            c.log(level, line);
        }
    }

    /// Cluster mode has opened what it had to (or given up): `Membership::ready`.
    fn ready(&self) {
        self.ready.send_replace(true);
    }

    /// Records that this server's catalog is replicated (never undone).
    fn set_replicated(&self) -> Result<(), String> {
        let mut identity = self.identity.lock().clone();
        identity.replicated = true;
        identity
            .save(&self.dir)
            .map_err(|e| format!("Cannot record that the catalog is replicated: {e}"))?;
        *self.identity.lock() = identity;
        Ok(())
    }

    fn heartbeat_secs(&self) -> f64 {
        self.cluster.upgrade().map_or(10.0, |c| c.heartbeat_secs())
    }

    /// What this server says about itself (`None` once the cluster is gone).
    fn hello(&self) -> Option<Hello> {
        let from = self.cluster.upgrade()?.local_record();
        Some(Hello {
            from,
            known: self.peers.lock().known(),
            heartbeat: *self.heartbeat.lock(),
        })
    }

    /// Takes in a peer's hello (its ping, or its answer from `addr` to ours).
    fn receive(&self, h: Hello, addr: Option<&str>) {
        if h.from.id == self.me {
            if let Some(a) = addr {
                self.peers.lock().is_me(a);
            }
            return;
        }
        let name = h.from.name.clone();
        let newly = {
            let mut peers = self.peers.lock();
            let newly = peers.heard_from(h.from, Instant::now(), now_secs());
            peers.learn(h.known);
            newly
        };
        let adopted = {
            let mut ours = self.heartbeat.lock();
            let newer = h.heartbeat.1 > ours.1;
            if newer {
                *ours = h.heartbeat;
            }
            newer.then_some(h.heartbeat.0)
        };
        if let (Some(secs), Some(c)) = (adopted, self.cluster.upgrade()) {
            c.set_heartbeat_secs(secs);
        }
        if newly {
            self.log("notice", &format!("Connected to server \"{name}\""));
        }
    }

    /// Applies and persists a new name and tags for this server.
    fn configure_self(&self, name: &str, tags: &[String]) -> Result<(), String> {
        let mut identity = self.identity.lock().clone();
        identity.name = name.to_string();
        identity.tags = tags.to_vec();
        identity.renamed = true;
        identity
            .save(&self.dir)
            .map_err(|e| format!("Cannot save the server's new configuration: {e}"))?;
        *self.identity.lock() = identity;
        if let Some(c) = self.cluster.upgrade() {
            c.set_server_identity(name, tags);
        }
        Ok(())
    }

    fn answer(&self, request: &[u8]) -> Answer {
        match serde_json::from_slice::<Request>(request) {
            Ok(Request::Ping(h)) => {
                self.receive(h, None);
                match self.hello() {
                    Some(h) => Answer::Pong(Box::new(h)),
                    None => Answer::Malformed("the server is shutting down".into()),
                }
            }
            Ok(Request::Configure { id, name, tags }) if id == self.me => {
                Answer::Configured(self.configure_self(&name, &tags))
            }
            Ok(Request::Configure { .. }) => {
                Answer::Configured(Err("The server id does not match.".into()))
            }
            Ok(Request::Stats) => match self.cluster.upgrade() {
                Some(c) => Answer::Stats(Box::new(c.local_stats())),
                None => Answer::Malformed("the server is shutting down".into()),
            },
            Err(e) => Answer::Malformed(e.to_string()),
        }
    }
}

struct Svc(Arc<Inner>);

impl replication::Service for Svc {
    fn handle(
        &self,
        request: Vec<u8>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Vec<u8>> + Send>> {
        let answer = self.0.answer(&request);
        Box::pin(async move { serde_json::to_vec(&answer).unwrap_or_default() })
    }
}
