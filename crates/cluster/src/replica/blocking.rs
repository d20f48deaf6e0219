//! Running an asynchronous replication call from a synchronous caller (an evaluation
//! thread, an index build's thread, tokio's blocking pool): the future is spawned on the
//! server's runtime and its answer waited for on this thread. `Handle::block_on` would
//! panic on a thread inside the runtime's context; this never panics, and never runs on
//! an async worker by the callers' contract.
//!
//! A thread may register a hook ([`on_block`]) that hears when it starts and stops
//! waiting: the server's evaluation pool uses it to run another worker while one waits
//! on the network and a quorum's fsync, so a small pool does not cap the replicated
//! operations a server has in flight (`server::exec`).

use std::cell::RefCell;
use std::future::Future;
use std::sync::{mpsc, Arc};

/// Told `true` when its thread starts waiting in [`wait_for`], `false` when it stops.
pub type BlockHook = Arc<dyn Fn(bool) + Send + Sync>;

thread_local! {
    static HOOK: RefCell<Option<BlockHook>> = const { RefCell::new(None) };
}

/// Registers `hook` for the calling thread (replacing any earlier one).
pub fn on_block(hook: BlockHook) {
    HOOK.with(|h| *h.borrow_mut() = Some(hook));
}

/// Calls the thread's hook with `true` now and with `false` when dropped.
struct Waiting(Option<BlockHook>);

impl Waiting {
    fn begin() -> Waiting {
        let hook = HOOK.with(|h| h.borrow().clone());
        if let Some(h) = &hook {
            h(true);
        }
        Waiting(hook)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(h) = &self.0 {
            h(false);
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicIsize, Ordering};

    #[test]
    fn the_hook_hears_each_wait_begin_and_end() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let depth = Arc::new(AtomicIsize::new(0));
        let seen = Arc::new(AtomicIsize::new(0));
        let (d, s) = (depth.clone(), seen.clone());
        on_block(Arc::new(move |begins| {
            if begins {
                s.fetch_max(d.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            } else {
                d.fetch_sub(1, Ordering::SeqCst);
            }
        }));
        let answer = wait_for(rt.handle(), async { 7 });
        assert_eq!(answer, Some(7));
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        assert_eq!(depth.load(Ordering::SeqCst), 0);
        // Another thread has no hook: waits there are not heard.
        let h = rt.handle().clone();
        std::thread::spawn(move || wait_for(&h, async { 1 }))
            .join()
            .unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }
}
