//! Waits that hold an evaluation thread without using its core: a replicated table's
//! call to its shard's leader (`cluster::replica::wait_for`), an `r.http` exchange.
//! Such a wait is wrapped in [`Waiting`], which tells the hook its thread registered
//! ([`on_block`]): the server's evaluation pool uses it to run another worker
//! meanwhile, so a few slow waits never hold up the server's other queries
//! (`server::exec`). A thread with no hook (tests, other callers) just waits.

use std::cell::RefCell;
use std::sync::Arc;

/// Told `true` when its thread starts a wait, `false` when the wait ends.
pub type BlockHook = Arc<dyn Fn(bool) + Send + Sync>;

thread_local! {
    static HOOK: RefCell<Option<BlockHook>> = const { RefCell::new(None) };
}

/// Registers `hook` for the calling thread (replacing any earlier one).
pub fn on_block(hook: BlockHook) {
    HOOK.with(|h| *h.borrow_mut() = Some(hook));
}

/// A wait in progress: the thread's hook heard `true` when it began and hears `false`
/// when this is dropped.
pub struct Waiting(Option<BlockHook>);

impl Waiting {
    /// Begins a wait on the calling thread.
    pub fn begin() -> Waiting {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicIsize, Ordering};

    #[test]
    fn the_hook_hears_each_wait_begin_and_end_on_its_thread_only() {
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
        {
            let _w = Waiting::begin();
            assert_eq!(depth.load(Ordering::SeqCst), 1);
        }
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        assert_eq!(depth.load(Ordering::SeqCst), 0);
        std::thread::spawn(|| drop(Waiting::begin()))
            .join()
            .unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }
}
