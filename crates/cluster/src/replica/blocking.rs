//! Running an asynchronous replication call from a synchronous caller (an evaluation
//! thread, an index build's thread, tokio's blocking pool): the future is spawned on the
//! server's runtime and its answer waited for on this thread. `Handle::block_on` would
//! panic on a thread inside the runtime's context; this never panics, and never runs on
//! an async worker by the callers' contract. The wait is a `reql::blocking::Waiting`,
//! so an evaluation pool can run another worker meanwhile (`server::exec`).

use std::future::Future;
use std::sync::mpsc;

use reql::blocking::Waiting;

/// Runs `fut` on `runtime` and waits for its output; `None` if the runtime dropped it
/// (shutting down).
pub fn wait_for<F>(runtime: &tokio::runtime::Handle, fut: F) -> Option<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(fut.await);
    });
    let _waiting = Waiting::begin();
    rx.recv().ok()
}
