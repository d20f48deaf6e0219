//! The order of a session's noreply queries, for NOREPLY_WAIT.
//!
//! RethinkDB numbers each query of a connection as it arrives and keeps the number only
//! for noreply ones (`query_params_t::query_id_t`, `maybe_release_query_id`);
//! NOREPLY_WAIT is answered once every noreply query that arrived *before* it has
//! finished. Noreply queries sent after it do not hold it back, so a client that keeps
//! sending them cannot starve its own NOREPLY_WAIT, and queries that want a reply (a
//! changefeed waiting for changes among them) are never waited for.
//!
//! Invariant: a number is in `running` from the moment its query is accepted (on the
//! connection's reader, in frame order) until its `Ticket` is dropped, whichever way
//! the query ends.

use std::collections::BTreeSet;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

#[derive(Default)]
struct Inner {
    /// The number the next noreply query gets.
    next: u64,
    /// The noreply queries still running.
    running: BTreeSet<u64>,
}

/// A session's running noreply queries, in arrival order.
#[derive(Default)]
pub(super) struct NoreplyOrder {
    inner: Mutex<Inner>,
    done: Notify,
}

/// A running noreply query; dropping it marks the query finished.
pub(super) struct Ticket {
    order: Arc<NoreplyOrder>,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.order.inner.lock().running.remove(&self.id);
        self.order.done.notify_waiters();
    }
}

impl NoreplyOrder {
    /// Registers a noreply query that just arrived.
    pub(super) fn begin(self: &Arc<Self>) -> Ticket {
        let mut inner = self.inner.lock();
        let id = inner.next;
        inner.next += 1;
        inner.running.insert(id);
        Ticket {
            order: self.clone(),
            id,
        }
    }

    /// A wait that ends once every noreply query registered before this call has
    /// finished (the mark is taken now, not when the future is first polled).
    pub(super) fn wait_earlier(self: &Arc<Self>) -> impl std::future::Future<Output = ()> {
        let mark = self.inner.lock().next;
        let me = self.clone();
        async move {
            loop {
                let notified = me.done.notified();
                tokio::pin!(notified);
                // Registered before checking, so a finish in between is not missed.
                notified.as_mut().enable();
                let pending = me.inner.lock().running.first().is_some_and(|&id| id < mark);
                if !pending {
                    return;
                }
                notified.await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Whether `w` finishes within a short while.
    async fn finishes(w: &mut tokio::task::JoinHandle<()>) -> bool {
        tokio::time::timeout(Duration::from_millis(50), w)
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn nothing_running_answers_at_once() {
        let o = Arc::new(NoreplyOrder::default());
        let mut w = tokio::spawn(o.wait_earlier());
        assert!(finishes(&mut w).await);
    }

    #[tokio::test]
    async fn waits_for_earlier_queries_only() {
        let o = Arc::new(NoreplyOrder::default());
        let a = o.begin();
        let b = o.begin();
        let mut w = tokio::spawn(o.wait_earlier());
        let later = o.begin();
        drop(a);
        assert!(!finishes(&mut w).await);
        drop(b);
        // `later` is still running and does not hold the wait back.
        assert!(finishes(&mut w).await);
        drop(later);
    }
}
