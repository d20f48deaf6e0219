//! How a group's writes that must survive a crash are made durable.
//!
//! Both ways call [`storage::Engine::persist`], the storage crate's durability
//! mechanism: it coalesces concurrent callers into one fsync (every write applied before
//! an fsync *started* is covered), so the Raft logs of many groups and the shards' own
//! writes on one engine share fsyncs.

use std::sync::Arc;

use storage::Engine;

use crate::error::ReplicationError;

/// Where `persist` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// On the calling task. For the in-memory engine and the deterministic simulation,
    /// where `persist` returns at once (a thread would make the schedule
    /// non-deterministic).
    Inline,
    /// On tokio's blocking pool, so an fsync never stalls an async worker. For fjall.
    Blocking,
}

impl Durability {
    /// Makes every write applied to `engine` so far durable.
    pub async fn flush(self, engine: &Arc<dyn Engine>) -> Result<(), ReplicationError> {
        match self {
            Durability::Inline => Ok(engine.persist()?),
            Durability::Blocking => {
                let engine = engine.clone();
                tokio::task::spawn_blocking(move || engine.persist())
                    .await
                    .map_err(|e| ReplicationError::FlushTask(e.to_string()))??;
                Ok(())
            }
        }
    }
}
