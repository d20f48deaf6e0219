//! Group commit: tickets, one fsync thread, and async waiting for durability.
//!
//! Besides `wait`, a caller may hand the flush thread a callback to run once a ticket
//! is durable or the flush failed (`when_durable`): the evaluation pool delivers a hard
//! write's answer that way, so the connection's task is woken once, after the fsync,
//! instead of once for the evaluation and again for the fsync. Invariant: every
//! callback runs exactly once, after a flush pass that saw its ticket durable or
//! failed, or when the thread stops; it is a hint, the caller still checks with `wait`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use storage::Engine;
use tokio::sync::watch;

use crate::StoreError;

/// How long a soft-durability write may stay unflushed, by default.
pub const SOFT_FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// The durability watermark: every ticket `<= durable` is on stable storage.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Mark {
    durable: u64,
    failed: bool,
}

/// Assigns tickets to applied writes and flushes them in groups.
pub struct GroupCommit {
    last_ticket: AtomicU64,
    wanted: Mutex<bool>,
    wake: Condvar,
    mark: watch::Sender<Mark>,
    stop: Mutex<bool>,
    /// The soft-flush bound in milliseconds.
    soft_flush_ms: AtomicU64,
    /// Callbacks waiting for their ticket (`when_durable`).
    pending: Mutex<Vec<(u64, Callback)>>,
}

/// What `when_durable` runs.
pub type Callback = Box<dyn FnOnce() + Send>;

impl GroupCommit {
    /// Starts the flush thread for `engine`.
    pub fn start(engine: Arc<dyn Engine>) -> Arc<GroupCommit> {
        let (tx, _rx) = watch::channel(Mark {
            durable: 0,
            failed: false,
        });
        let gc = Arc::new(GroupCommit {
            last_ticket: AtomicU64::new(0),
            wanted: Mutex::new(false),
            wake: Condvar::new(),
            mark: tx,
            stop: Mutex::new(false),
            soft_flush_ms: AtomicU64::new(SOFT_FLUSH_INTERVAL.as_millis() as u64),
            pending: Mutex::new(Vec::new()),
        });
        let me = gc.clone();
        let spawned = std::thread::Builder::new()
            .name("group-commit".into())
            .spawn(move || me.run(engine));
        if let Err(e) = spawned {
            gc.mark.send_replace(Mark {
                durable: 0,
                failed: true,
            });
            eprintln!("cannot start the group-commit thread: {e}");
        }
        gc
    }

    /// Sets how long a soft-durability write may stay unflushed (at least 1 ms).
    pub fn set_soft_flush_interval(&self, d: Duration) {
        self.soft_flush_ms
            .store((d.as_millis() as u64).max(1), Ordering::SeqCst);
    }

    /// A ticket for a write that has just been applied.
    pub fn ticket(&self) -> u64 {
        self.last_ticket.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The ticket of the latest applied write.
    pub fn last_ticket(&self) -> u64 {
        self.last_ticket.load(Ordering::SeqCst)
    }

    fn request(&self) {
        let mut w = self.wanted.lock();
        *w = true;
        self.wake.notify_one();
    }

    /// Waits until `ticket` is durable.
    pub async fn wait(&self, ticket: u64) -> Result<(), StoreError> {
        let mut rx = self.mark.subscribe();
        if rx.borrow().durable >= ticket {
            return Ok(());
        }
        self.request();
        let m = rx
            .wait_for(|m| m.durable >= ticket || m.failed)
            .await
            .map_err(|_| StoreError::NotDurable("flush thread stopped".into()))?;
        if m.durable >= ticket {
            Ok(())
        } else {
            Err(StoreError::NotDurable(
                "the storage engine failed to sync".into(),
            ))
        }
    }

    /// Runs `then` once `ticket` is durable or the flush failed: here and now if that is
    /// already so, else on the flush thread after the flush that covers it (asked for
    /// here, so that it starts without waiting for the caller's `wait`).
    pub fn when_durable(&self, ticket: u64, then: Callback) {
        let m = *self.mark.borrow();
        if m.durable >= ticket || m.failed {
            return then();
        }
        self.pending.lock().push((ticket, then));
        // After the push: the flush pass this asks for sees the callback (module note).
        self.request();
    }

    /// Runs the callbacks whose ticket `m` covers (all of them if the flush failed or
    /// `all`), outside the list's lock.
    fn run_callbacks(&self, m: Mark, all: bool) {
        let due: Vec<Callback> = {
            let mut p = self.pending.lock();
            if p.is_empty() {
                return;
            }
            let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut *p)
                .into_iter()
                .partition(|(t, _)| all || m.failed || *t <= m.durable);
            *p = rest;
            due.into_iter().map(|(_, f)| f).collect()
        };
        for f in due {
            f();
        }
    }

    /// Blocking variant of `wait`, for threads outside the async runtime.
    pub fn wait_blocking(&self, ticket: u64) -> Result<(), StoreError> {
        let mut rx = self.mark.subscribe();
        loop {
            let m = *rx.borrow_and_update();
            if m.durable >= ticket {
                return Ok(());
            }
            if m.failed {
                return Err(StoreError::NotDurable(
                    "the storage engine failed to sync".into(),
                ));
            }
            self.request();
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Stops the flush thread after a final flush.
    pub fn shutdown(&self) {
        *self.stop.lock() = true;
        self.request();
    }

    fn run(&self, engine: Arc<dyn Engine>) {
        loop {
            {
                let mut w = self.wanted.lock();
                if !*w {
                    let ms = self.soft_flush_ms.load(Ordering::SeqCst);
                    self.wake.wait_for(&mut w, Duration::from_millis(ms));
                }
                *w = false;
            }
            let target = self.last_ticket.load(Ordering::SeqCst);
            let cur = *self.mark.borrow();
            if target > cur.durable && !cur.failed {
                match engine.persist() {
                    Ok(()) => {
                        self.mark.send_replace(Mark {
                            durable: target,
                            failed: false,
                        });
                    }
                    Err(e) => {
                        eprintln!("storage sync failed: {e}");
                        self.mark.send_replace(Mark {
                            durable: cur.durable,
                            failed: true,
                        });
                    }
                }
            }
            let stop = *self.stop.lock();
            self.run_callbacks(*self.mark.borrow(), stop);
            if stop {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::{Faulty, Memory, WriteBatch};

    #[test]
    fn tickets_become_durable() {
        let e: Arc<dyn Engine> = Arc::new(Memory::new());
        let gc = GroupCommit::start(e.clone());
        e.create_space("s").unwrap();
        let mut b = WriteBatch::new();
        b.put("s", b"k".to_vec(), b"v".to_vec());
        e.apply(b).unwrap();
        let t = gc.ticket();
        gc.wait_blocking(t).unwrap();
        gc.shutdown();
    }

    #[test]
    fn failed_sync_is_reported_not_acknowledged() {
        let f = Arc::new(Faulty::new(Memory::new()));
        f.fail_next_persists(1000);
        let e: Arc<dyn Engine> = f.clone();
        let gc = GroupCommit::start(e);
        let t = gc.ticket();
        // A callback waiting for the ticket runs when the flush fails.
        let (cb, rx) = callback();
        gc.when_durable(t, cb);
        rx.recv().unwrap();
        assert!(gc.wait_blocking(t).is_err());
        gc.shutdown();
    }

    /// A channel the callback of `when_durable` reports on.
    fn callback() -> (Callback, std::sync::mpsc::Receiver<()>) {
        let (tx, rx) = std::sync::mpsc::channel();
        (
            Box::new(move || {
                let _ = tx.send(());
            }),
            rx,
        )
    }

    #[test]
    fn callbacks_run_after_the_flush_that_covers_them() {
        let f = Arc::new(Faulty::new(Memory::new()));
        f.create_space("s").unwrap();
        let e: Arc<dyn Engine> = f.clone();
        let gc = GroupCommit::start(e);
        let mut b = WriteBatch::new();
        b.put("s", b"k".to_vec(), b"v".to_vec());
        f.apply(b).unwrap();
        let t = gc.ticket();
        let (cb, rx) = callback();
        gc.when_durable(t, cb);
        rx.recv().unwrap();
        // Run only once the write is on stable storage.
        assert!(f.unpersisted().is_empty());
        // A durable ticket's callback runs at once, on the caller's thread.
        let (cb, rx) = callback();
        gc.when_durable(t, cb);
        assert!(rx.try_recv().is_ok());
        gc.shutdown();
    }

    /// Applies one soft write (a ticket nobody waits for) through `f`.
    fn soft_write(f: &Faulty<Memory>, gc: &GroupCommit, key: &[u8]) {
        let mut b = WriteBatch::new();
        b.put("s", key.to_vec(), b"v".to_vec());
        f.apply(b).unwrap();
        gc.ticket();
    }

    #[test]
    fn soft_writes_are_flushed_within_the_bound() {
        let f = Arc::new(Faulty::new(Memory::new()));
        f.create_space("s").unwrap();
        let e: Arc<dyn Engine> = f.clone();
        let gc = GroupCommit::start(e);
        gc.set_soft_flush_interval(Duration::from_millis(50));
        // Let the thread's current (default-length) wait run out first.
        std::thread::sleep(SOFT_FLUSH_INTERVAL + Duration::from_millis(50));
        for round in 0..3u8 {
            soft_write(&f, &gc, &[round]);
            // Nobody waits on the ticket: only the periodic flush covers it.
            let began = std::time::Instant::now();
            while !f.unpersisted().is_empty() {
                assert!(
                    began.elapsed() < Duration::from_millis(50 + 250),
                    "a soft write stayed unflushed for longer than the bound"
                );
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        // A long bound really delays the flush (so the check above means something).
        gc.set_soft_flush_interval(Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(100));
        soft_write(&f, &gc, b"late");
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(f.unpersisted().len(), 1);
        gc.shutdown();
    }
}
