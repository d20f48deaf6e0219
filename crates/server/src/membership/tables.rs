//! What the system tables ask of the membership layer (`cluster::system::Membership`):
//! the connected peers, this server's `connected_to`, renames and retags (of this
//! server, applied here; of a peer, sent to it and waited for), and heartbeat writes.
//!
//! Invariant: a rename of a peer is shown only once the peer confirmed it applied and
//! persisted it; an answer that does not come within `CONFIGURE_TIMEOUT` is RethinkDB's
//! "lost contact" error (the change may or may not have happened).

use std::time::Duration;

use cluster::system::{now_secs, ServerRecord};

use super::{Answer, Inner, Request, CONFIGURE_TIMEOUT};

impl cluster::system::Membership for Inner {
    fn peers(&self) -> Vec<ServerRecord> {
        self.peers.lock().connected()
    }

    fn connected_to(&self) -> std::collections::BTreeMap<String, bool> {
        self.peers.lock().connected_to()
    }

    fn configure(&self, id: &str, name: &str, tags: &[String]) -> Result<(), String> {
        if id == self.me {
            return self.configure_self(name, tags);
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
            Ok(Some(Answer::Configured(Err(e)))) => Err(e),
            _ => Err(lost()),
        }
    }

    fn heartbeat_written(&self, secs: f64) {
        let mut ours = self.heartbeat.lock();
        let now_ms = (now_secs() * 1000.0) as u64;
        *ours = (secs, now_ms.max(ours.1 + 1));
    }
}
