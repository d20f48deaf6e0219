//! `Outbox`: the responses of one connection waiting to be written, bounded in bytes.
//!
//! Every response frame takes permits for its size (in KiB, at least one, at most the
//! whole budget) before it is queued, and gives them back once written. A client that
//! sends queries without reading the answers therefore stops the queries' tasks at
//! `send` once `OUT_BUDGET_KIB` is queued, and (with the limit on queries started per
//! connection, `Session::started`) the server's memory for that connection stays
//! bounded instead of growing with every pipelined query.

use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// Responses (in KiB) queued per connection before senders wait for the client.
pub const OUT_BUDGET_KIB: u32 = 32 * 1024;

/// Frames queued per connection (a second bound, for many tiny frames).
const OUT_QUEUE: usize = 1024;

/// A response frame and the budget it holds until written.
pub struct Outgoing {
    /// The frame's bytes.
    pub frame: Vec<u8>,
    _held: OwnedSemaphorePermit,
}

/// The sending side of a connection's responses.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Outgoing>,
    budget: Arc<Semaphore>,
}

impl Outbox {
    /// An outbox and the receiver its writer drains.
    pub fn new() -> (Outbox, mpsc::Receiver<Outgoing>) {
        let (tx, rx) = mpsc::channel(OUT_QUEUE);
        let budget = Arc::new(Semaphore::new(OUT_BUDGET_KIB as usize));
        (Outbox { tx, budget }, rx)
    }

    /// Queues a frame, waiting while the connection's budget is spent. Returns false
    /// when the connection is gone.
    pub async fn send(&self, frame: Vec<u8>) -> bool {
        let kib = u32::try_from(frame.len().div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, OUT_BUDGET_KIB);
        let Ok(held) = self.budget.clone().acquire_many_owned(kib).await else {
            return false;
        };
        self.tx.send(Outgoing { frame, _held: held }).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn senders_wait_once_the_budget_is_queued_and_resume_as_frames_are_written() {
        let (out, mut rx) = Outbox::new();
        let big = vec![0u8; (OUT_BUDGET_KIB as usize - 1) * 1024];
        assert!(out.send(big).await);
        // One more KiB fits, the next does not until something is written.
        assert!(out.send(vec![1u8; 1024]).await);
        let blocked = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            out.send(vec![2u8; 10]),
        )
        .await;
        assert!(blocked.is_err(), "a send past the budget must wait");
        let first = rx.recv().await.map(|o| o.frame.len());
        assert_eq!(first, Some((OUT_BUDGET_KIB as usize - 1) * 1024));
        assert!(out.send(vec![3u8; 10]).await);
    }
}
