//! What the system tables ask of the membership layer (`cluster::system::Membership`):
//! the connected peers, this server's `connected_to`, renames and retags (of this
//! server, applied here; of a peer, sent to it and waited for), heartbeat writes, and
//! the peers' query counters (`rethinkdb.stats`, asked of all at once, each within
//! `STATS_TIMEOUT`).
//!
//! Invariant: a rename of a peer is shown only once the peer confirmed it applied and
//! persisted it; an answer that does not come within `CONFIGURE_TIMEOUT` is RethinkDB's
//! "lost contact" error (the change may or may not have happened).

use std::time::Duration;

use cluster::system::{now_secs, ServerRecord, ServerStats};

use super::{Answer, Inner, Request, CONFIGURE_TIMEOUT, STATS_TIMEOUT};

impl cluster::system::Membership for Inner {
    fn peers(&self) -> Vec<ServerRecord> {
        self.peers.lock().connected()
    }

    fn connected_to(&self) -> std::collections::BTreeMap<String, bool> {
        self.peers.lock().connected_to()
    }

    fn names(&self) -> std::collections::BTreeMap<String, String> {
        self.peers.lock().names()
    }

    fn configure(&self, id: &str, name: &str, tags: &[String]) -> Result<(), String> {
        if id == self.me {
            let old_name = self
                .cluster
                .upgrade()
                .map(|c| c.server_name())
                .unwrap_or_default();
            return self
                .configure_self(name, tags)
                .map_err(|e| not_changed(&old_name, &e));
        }
        let (addresses, old_name) = {
            let peers = self.peers.lock();
            let old = peers
                .connected()
                .into_iter()
                .find(|r| r.id == id)
                .map(|r| r.name)
                .unwrap_or_else(|| id.to_string());
            (peers.addresses_of(id), old)
        };
        let lost = || {
            format!(
                "Lost contact with server `{old_name}` while trying to change the server \
                 configuration. The configuration may or may not have been changed."
            )
        };
        let (Some(addresses), Some(transport)) = (addresses, self.transport.get().cloned()) else {
            return Err(lost());
        };
        let body = serde_json::to_vec(&Request::Configure {
            id: id.to_string(),
            name: name.to_string(),
            tags: tags.to_vec(),
        })
        .map_err(|e| e.to_string())?;
        // Called on an evaluation thread (never an async worker): wait for the answer.
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            let mut result = None;
            for addr in addresses {
                if let Ok(b) = transport
                    .call_service(&addr, body.clone(), CONFIGURE_TIMEOUT)
                    .await
                {
                    result = serde_json::from_slice::<Answer>(&b).ok();
                    break;
                }
            }
            let _ = tx.send(result);
        });
        match rx.recv_timeout(CONFIGURE_TIMEOUT + Duration::from_secs(1)) {
            Ok(Some(Answer::Configured(Ok(())))) => {
                self.peers.lock().renamed(id, name, tags);
                Ok(())
            }
            Ok(Some(Answer::Configured(Err(e)))) => Err(not_changed(&old_name, &e)),
            _ => Err(lost()),
        }
    }

    fn peer_stats(&self) -> Vec<ServerStats> {
        let targets: Vec<Vec<String>> = {
            let peers = self.peers.lock();
            (peers.connected().iter())
                .filter_map(|r| peers.addresses_of(&r.id))
                .collect()
        };
        let (Some(transport), Ok(body)) = (
            self.transport.get().cloned(),
            serde_json::to_vec(&Request::Stats),
        ) else {
            return Vec::new();
        };
        // No peer to ask (a server alone): nothing to wait for. Waiting anyway cost the
        // whole timeout when this thread was a runtime worker, whose own queue held the
        // spawned task (the web console's dashboard polls `stats.get(['cluster'])`).
        if targets.is_empty() {
            return Vec::new();
        }
        // Called on an evaluation thread (never an async worker): wait for the answers.
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            let mut calls = tokio::task::JoinSet::new();
            for addresses in targets {
                let (t, body) = (transport.clone(), body.clone());
                calls.spawn(tokio::time::timeout(STATS_TIMEOUT, async move {
                    for addr in addresses {
                        if let Ok(b) = t.call_service(&addr, body.clone(), STATS_TIMEOUT).await {
                            return match serde_json::from_slice::<Answer>(&b) {
                                Ok(Answer::Stats(s)) => Some(*s),
                                _ => None,
                            };
                        }
                    }
                    None
                }));
            }
            let mut all = Vec::new();
            while let Some(done) = calls.join_next().await {
                if let Ok(Ok(Some(s))) = done {
                    all.push(s);
                }
            }
            all.sort_by(|a: &ServerStats, b| a.name.cmp(&b.name));
            let _ = tx.send(all);
        });
        rx.recv_timeout(STATS_TIMEOUT + Duration::from_secs(1))
            .unwrap_or_default()
    }

    fn heartbeat_written(&self, secs: f64) {
        let mut ours = self.heartbeat.lock();
        let now_ms = (now_secs() * 1000.0) as u64;
        *ours = (secs, now_ms.max(ours.1 + 1));
    }
}

/// RethinkDB's message for a change the server refused or could not make.
fn not_changed(server: &str, why: &str) -> String {
    format!(
        "Error when trying to change the configuration of server `{server}`: {why} \
         The configuration was not changed."
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cluster::system::Membership as _;
    use tokio::net::TcpListener;

    use crate::config::ClusterSetup;
    use crate::membership::{Identity, Membership};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn changes_apply_to_this_server_and_fail_for_one_not_connected() {
        let dir = tempfile::tempdir().unwrap();
        let tags = vec!["default".to_string()];
        let identity = Identity::load(dir.path(), "me", &tags, false).unwrap();
        identity.save(dir.path()).unwrap();
        let engine: Arc<dyn storage::Engine> = Arc::new(storage::Memory::new());
        let cluster = cluster::Cluster::open_with_options(
            engine.clone(),
            cluster::ClusterOptions {
                server_id: Some(identity.server_id.clone()),
                ..cluster::ClusterOptions::new("me")
            },
        )
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let setup = ClusterSetup {
            tags: tags.clone(),
            ..ClusterSetup::default()
        };
        let log = Some(dir.path().join("log"));
        let raft = crate::membership::RaftSetup {
            engine,
            machine: None,
        };
        let m = Membership::start(
            &cluster,
            listener,
            &setup,
            identity,
            dir.path().into(),
            log,
            raft,
        )
        .unwrap();
        let (inner, me) = (m.inner.clone(), cluster.server_id().to_string());
        let (mine, other) = tokio::task::spawn_blocking(move || {
            (
                inner.configure(&me, "renamed", &["ssd".to_string()]),
                inner.configure("nobody", "x", &[]),
            )
        })
        .await
        .unwrap();
        mine.unwrap();
        assert_eq!(cluster.server_name(), "renamed");
        assert_eq!(cluster.server_tags(), vec!["ssd".to_string()]);
        // Persisted: a restart with the old flags keeps the new name.
        let again = Identity::load(dir.path(), "me", &tags, false).unwrap();
        assert_eq!((again.name.as_str(), again.renamed), ("renamed", true));
        assert_eq!(
            other.unwrap_err(),
            "Lost contact with server `nobody` while trying to change the server \
             configuration. The configuration may or may not have been changed."
        );
        m.stop().await;
        cluster.shutdown();
    }
}
