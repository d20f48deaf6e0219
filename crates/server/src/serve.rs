//! A running server: its storage, catalog, evaluation pool and the loop accepting
//! driver connections, started on a bound listener and stopped explicitly.
//!
//! Everything a server uses is its own (engine, document-cache budget, threads, log
//! destination), so one process can run several: tests do. Stopping one closes its
//! connections (interrupting their queries), flushes its storage and waits (a bounded
//! time) for the storage to be closed, so its directory can be opened again.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

use crate::config::Config;
use crate::conn::{self, Stop};
use crate::exec::Pool;
use crate::http::HttpAdmin;
use crate::state::ServerState;
use crate::{tls, Error};

/// Longest time `Server::shutdown` waits for background work (an index build, a query
/// finishing its evaluation) to let go of the storage.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Longest time a replicated server's start waits for its catalog group to open.
const READY_WAIT: Duration = Duration::from_secs(15);

/// A server accepting driver connections on its listener. Stop it with `shutdown`;
/// dropping it also stops it, but without the final flush and without waiting.
pub struct Server {
    local_addr: SocketAddr,
    state: Arc<ServerState>,
    /// Sending `true` stops the accept loop and every connection.
    stop: watch::Sender<bool>,
    accept: JoinHandle<()>,
    log_file: Option<std::path::PathBuf>,
    /// The engine, to see it closed after shutdown.
    engine: Weak<dyn storage::Engine>,
    /// The HTTP admin, when served.
    http: Option<HttpAdmin>,
    /// The cluster port and membership, when served.
    membership: Option<crate::membership::Membership>,
}

impl Server {
    /// Opens the storage in `config.directory` (creating it if needed), logs the
    /// "listening for client driver connections" line and serves `listener` until
    /// `shutdown`. Storage is opened on the calling task.
    pub async fn start(listener: TcpListener, config: Config) -> Result<Server, Error> {
        Self::start_with_http(listener, None, config).await
    }

    /// As `start`, and serves the HTTP admin (`config.http`) on `http` when given.
    pub async fn start_with_http(
        listener: TcpListener,
        http: Option<TcpListener>,
        config: Config,
    ) -> Result<Server, Error> {
        Self::start_full(listener, http, None, config).await
    }

    /// As `start_with_http`, and serves the cluster port on `cluster` when given with a
    /// `config.cluster` (joining other servers: `membership`).
    pub async fn start_full(
        listener: TcpListener,
        http: Option<TcpListener>,
        cluster_port: Option<TcpListener>,
        config: Config,
    ) -> Result<Server, Error> {
        let local_addr = listener.local_addr().map_err(|source| Error::Listen {
            addr: "the given listener".into(),
            source,
        })?;
        std::fs::create_dir_all(&config.directory).map_err(|source| Error::DataDirectory {
            path: config.directory.clone(),
            source,
        })?;
        // The cache size is split between the engine's block cache and the shards'
        // document caches in front of it (this server's budget; `Config`).
        let fjall =
            storage::Fjall::open(&config.directory.join("data"), config.block_cache_bytes())?;
        fjall.set_min_free_bytes(config.min_free_disk_mb.saturating_mul(1 << 20));
        let identity = match &config.cluster {
            Some(setup) => Some(
                crate::membership::Identity::load(
                    &config.directory,
                    &config.server_name,
                    &setup.tags,
                    !setup.joins.is_empty(),
                )
                .map_err(|e| Error::Membership(e.to_string()))?,
            ),
            None => None,
        };
        let engine: Arc<dyn storage::Engine> = Arc::new(fjall);
        let weak_engine = Arc::downgrade(&engine);
        let replicated = identity.as_ref().is_some_and(|i| i.replicated);
        if replicated && cluster_port.is_none() {
            return Err(Error::Membership(
                "this data directory belongs to a cluster whose catalog is replicated: \
                 the server cannot run without its cluster port"
                    .into(),
            ));
        }
        let options = cluster::ClusterOptions {
            server_id: identity.as_ref().map(|i| i.server_id.clone()),
            server_tags: identity
                .as_ref()
                .map_or_else(|| vec!["default".into()], |i| i.tags.clone()),
            server_name: identity
                .as_ref()
                .map_or_else(|| config.server_name.clone(), |i| i.name.clone()),
            initial_password: config.initial_password.clone(),
            doc_cache: store::CacheBudget::new(config.doc_cache_bytes()),
            network: config.network,
        };
        // A replicated catalog is Raft group 0's state machine (`membership::raft`).
        let (cluster, machine) = if replicated {
            let (c, m) = cluster::Cluster::open_replicated(
                engine.clone(),
                options,
                crate::membership::CATALOG_PREFIX,
            )?;
            (c, Some(m))
        } else {
            (
                cluster::Cluster::open_with_options(engine.clone(), options)?,
                None,
            )
        };
        let (tls, pool) = match tls_and_pool(&config) {
            Ok(v) => v,
            Err(e) => {
                cluster.shutdown();
                return Err(e);
            }
        };
        // Written only once the directory was accepted (a refused one stays untouched).
        if let Some(identity) = &identity {
            if let Err(e) = identity.save(&config.directory) {
                cluster.shutdown();
                return Err(Error::Membership(e.to_string()));
            }
        }
        cluster.set_soft_flush_interval(config.soft_flush_interval);
        let state = Arc::new(ServerState {
            cluster: cluster.clone(),
            server_id: cluster.server_id().to_string(),
            pool: Arc::new(pool),
            handshake_timeout: config.handshake_timeout,
            query_memory: config.query_memory_mb.saturating_mul(1 << 20),
            optimizer: config.optimizer,
        });
        let listening = format!(
            "Ponder {} listening for client driver connections on {}:{}{} (data in {})",
            env!("CARGO_PKG_VERSION"),
            local_addr.ip(),
            local_addr.port(),
            if tls.is_some() { " with TLS" } else { "" },
            config.directory.display()
        );
        log(config.log_file.as_deref(), &listening);
        cluster.log("notice", &listening);
        // RethinkDB logs the cache size it settled on (users of `auto` look for it).
        let cache = format!(
            "Using a cache size of {} MB{}",
            config.cache_size_mb,
            if config.cache_size_auto {
                " (auto)"
            } else {
                ""
            }
        );
        log(config.log_file.as_deref(), &cache);
        cluster.log("notice", &cache);
        let (stop, stop_rx) = Stop::new();
        let http = match http {
            None => None,
            Some(l) => {
                let started = HttpAdmin::start(
                    l,
                    state.clone(),
                    config.http.clone(),
                    config.directory.join("data"),
                    stop_rx.clone(),
                );
                match started {
                    Ok(h) => Some(h),
                    Err(e) => {
                        let _ = stop.send(true);
                        cluster.shutdown();
                        return Err(e);
                    }
                }
            }
        };
        if let Some(h) = &http {
            let line = format!(
                "Listening for administrative HTTP connections on {}:{}{}",
                h.local_addr().ip(),
                h.local_addr().port(),
                if h.tls() { " with TLS" } else { "" }
            );
            log(config.log_file.as_deref(), &line);
            cluster.log("notice", &line);
        }
        let cluster_addr = cluster_port.as_ref().and_then(|l| l.local_addr().ok());
        let canonical = match (&config.cluster, cluster_addr) {
            (Some(setup), Some(addr)) if !setup.canonical.is_empty() => {
                crate::config::parse_canonical(&setup.canonical, addr.port())?
            }
            (_, Some(addr)) if addr.ip().is_unspecified() => {
                vec![(config.hostname.clone(), addr.port())]
            }
            (_, Some(addr)) => vec![(addr.ip().to_string(), addr.port())],
            (_, None) => Vec::new(),
        };
        cluster.set_server_info(cluster::system::ServerInfo {
            reql_port: local_addr.port(),
            http_port: http
                .as_ref()
                .map_or(config.http_port, |h| h.local_addr().port()),
            cluster_port: cluster_addr.map_or(config.cluster_port, |a| a.port()),
            hostname: config.hostname.clone(),
            argv: config.argv.clone(),
            cache_size_mb: config.cache_size_mb as f64,
            cache_size_auto: config.cache_size_auto,
            canonical_addresses: canonical,
        });
        let membership = match (&config.cluster, cluster_port, identity) {
            (Some(setup), Some(l), Some(identity)) => {
                let line = format!(
                    "Listening for intracluster connections on port {}{}",
                    l.local_addr().map_or(0, |a| a.port()),
                    if setup.tls.is_some() { " with TLS" } else { "" }
                );
                log(config.log_file.as_deref(), &line);
                cluster.log("notice", &line);
                match crate::membership::Membership::start(
                    &cluster,
                    l,
                    setup,
                    identity,
                    config.directory.clone(),
                    config.log_file.clone(),
                    crate::membership::RaftSetup {
                        engine: engine.clone(),
                        machine,
                    },
                ) {
                    Ok(m) => Some(m),
                    Err(e) => {
                        let _ = stop.send(true);
                        cluster.shutdown();
                        return Err(e);
                    }
                }
            }
            _ => None,
        };
        // A replicated server opens its catalog group and placed tables (a new one:
        // receives the catalog, its users included) before it takes queries.
        if let (Some(m), true) = (&membership, replicated) {
            if !m.ready(READY_WAIT).await {
                let line = "This server has not received the cluster's catalog yet (is a \
                            server it joins reachable?): until it has, it knows no users and \
                            refuses every login.";
                log(config.log_file.as_deref(), line);
                cluster.log("warn", line);
            }
        }
        drop(engine);
        let limit = Limit {
            slots: Arc::new(Semaphore::new(config.max_connections)),
            max: config.max_connections,
            log_file: config.log_file.clone(),
        };
        let accept = tokio::spawn(accept_loop(listener, state.clone(), tls, limit, stop_rx));
        Ok(Server {
            local_addr,
            state,
            stop,
            accept,
            log_file: config.log_file,
            engine: weak_engine,
            http,
            membership,
        })
    }

    /// The address the HTTP admin listens on, when it is served.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().map(HttpAdmin::local_addr)
    }

    /// The address the server accepts connections on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The byte budget shared by the document caches of this server's tables.
    pub fn doc_cache(&self) -> &store::CacheBudget {
        self.state.cluster.doc_cache()
    }

    /// The membership layer (cluster port, router, transport), when served.
    pub fn membership(&self) -> Option<&crate::membership::Membership> {
        self.membership.as_ref()
    }

    /// This server's catalog and tables.
    pub fn cluster(&self) -> &Arc<cluster::Cluster> {
        &self.state.cluster
    }

    /// Stops accepting, closes every connection (interrupting its queries), flushes
    /// the storage, then waits until it is closed (at most a few seconds, if
    /// background work still holds it).
    pub async fn shutdown(self) -> Result<(), Error> {
        log(self.log_file.as_deref(), "Shutting down: flushing storage.");
        if let Some(m) = self.membership {
            m.stop().await;
        }
        let _ = self.stop.send(true);
        let accepted = self.accept.await;
        if let Some(h) = self.http {
            let _ = h.join().await;
        }
        self.state.cluster.shutdown();
        drop(self.state);
        let deadline = Instant::now() + CLOSE_WAIT;
        while self.engine.strong_count() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        accepted.map_err(Error::Task)
    }
}

/// Serves `listener` with `config` until `shutdown` resolves, then stops the server
/// (`Server::shutdown`).
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    run_with_http(listener, None, config, shutdown).await
}

/// As `run_with_http`, serving the cluster port on `cluster` (with `config.cluster`).
pub async fn run_full(
    listener: TcpListener,
    http: Option<TcpListener>,
    cluster: Option<TcpListener>,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let server = Server::start_full(listener, http, cluster, config).await?;
    shutdown.await;
    server.shutdown().await
}

/// As `run`, serving the HTTP admin on `http` when given.
pub async fn run_with_http(
    listener: TcpListener,
    http: Option<TcpListener>,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let server = Server::start_with_http(listener, http, config).await?;
    shutdown.await;
    server.shutdown().await
}

/// The TLS acceptor (when configured) and the evaluation pool.
fn tls_and_pool(config: &Config) -> Result<(Option<TlsAcceptor>, Pool), Error> {
    let tls = match &config.tls {
        Some(files) => Some(tls::acceptor(&files.cert, &files.key).map_err(Error::Tls)?),
        None => None,
    };
    let pool = Pool::new(config.eval_threads).map_err(Error::EvalThreads)?;
    Ok((tls, pool))
}

/// The connection cap: its slots, its size for the refusal message, where to log.
struct Limit {
    slots: Arc<Semaphore>,
    max: usize,
    log_file: Option<std::path::PathBuf>,
}

/// What a connection over the cap is told before it is closed: the V1_0 handshake's
/// failure answer (a null-terminated JSON object with `success: false`), which drivers
/// raise as a driver error carrying `error`.
fn over_cap_message(max: usize) -> Vec<u8> {
    let error = format!(
        "Too many open connections: this server serves at most {max} (`--max-connections`)."
    );
    let mut out =
        serde_json::json!({"success": false, "error": error, "error_code": 0}).to_string();
    out.push('\0');
    out.into_bytes()
}

/// Refuses a connection over the cap: the error, then close, within a second whatever
/// the client does; logged at most once a second.
fn refuse(mut stream: TcpStream, limit: &Limit, last_log: &mut Option<Instant>) {
    let now = Instant::now();
    if last_log.is_none_or(|t: Instant| now.duration_since(t) >= Duration::from_secs(1)) {
        *last_log = Some(now);
        log(
            limit.log_file.as_deref(),
            &format!(
                "Refused a connection: {} connections are open (--max-connections).",
                limit.max
            ),
        );
    }
    let msg = over_cap_message(limit.max);
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            let _ = stream.write_all(&msg).await;
            let _ = stream.shutdown().await;
        })
        .await;
    });
}

/// Accepts connections until the server stops, then waits for them to close.
async fn accept_loop(
    listener: TcpListener,
    state: Arc<ServerState>,
    tls: Option<TlsAcceptor>,
    limit: Limit,
    mut stop: Stop,
) {
    let mut conns = JoinSet::new();
    let mut last_refusal_log = None;
    loop {
        tokio::select! {
            () = stop.wait() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of file descriptors and the like: back off rather than spin.
                        log(limit.log_file.as_deref(), &format!("Accepting a connection failed: {e}"));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = limit.slots.clone().try_acquire_owned() else {
                    refuse(stream, &limit, &mut last_refusal_log);
                    continue;
                };
                let st = state.clone();
                let tls = tls.clone();
                let mut stop = stop.clone();
                conns.spawn(async move {
                    match tls {
                        None => conn::serve(stream, st, stop).await,
                        Some(acceptor) => {
                            let _ = stream.set_nodelay(true);
                            let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                            // The TLS handshake counts towards the handshake timeout.
                            let deadline = st.handshake_timeout;
                            let accepted = tokio::select! {
                                s = tokio::time::timeout(deadline, acceptor.accept(stream)) => {
                                    s.ok().and_then(Result::ok)
                                }
                                () = stop.wait() => None,
                            };
                            if let Some(s) = accepted {
                                conn::serve_stream(s, peer, st, stop).await;
                            }
                        }
                    }
                    drop(permit);
                });
            }
        }
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// Writes one line to the log file, or to standard error when there is none.
pub(crate) fn log(file: Option<&std::path::Path>, msg: &str) {
    let line = format!("{msg}\n");
    match file {
        Some(p) => {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
            {
                let _ = f.write_all(line.as_bytes());
            }
        }
        None => eprint!("{line}"),
    }
}
