//! A fixed pool of evaluation threads.
//!
//! Query evaluation is synchronous and may touch the disk, so it never runs on the async
//! workers. A small fixed pool (rather than tokio's blocking pool, which grows a thread
//! per concurrent query) keeps context switches low when many connections are busy:
//! with 64 clients on 2 cores the blocking pool thrashes 64 threads, this pool runs a
//! handful. Evaluation never waits for fsync (durability is awaited asynchronously after
//! it returns), so a small pool is not starved by hard-durability writes.
//!
//! Dropping the pool stops its threads once the queued jobs are done, so a server that
//! shuts down leaves no thread behind in a process that goes on (tests, embedding).

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// Takes a job's hand-back of its result and calls it when it sees fit (`Pool::run_then`).
pub type Scheduler = Box<dyn FnOnce(Box<dyn FnOnce() + Send>) + Send>;

struct Jobs {
    queue: std::collections::VecDeque<Job>,
    /// Set when the pool is dropped: workers exit once `queue` is empty.
    closed: bool,
}

struct Queue {
    jobs: Mutex<Jobs>,
    ready: Condvar,
}

/// The evaluation pool.
pub struct Pool {
    queue: Arc<Queue>,
}

impl Pool {
    /// Starts `threads` workers.
    pub fn new(threads: usize) -> std::io::Result<Pool> {
        let queue = Arc::new(Queue {
            jobs: Mutex::new(Jobs {
                queue: std::collections::VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
        });
        for i in 0..threads.max(1) {
            let q = queue.clone();
            std::thread::Builder::new()
                .name(format!("eval-{i}"))
                .spawn(move || loop {
                    let job = {
                        let mut jobs = q.jobs.lock();
                        loop {
                            if let Some(j) = jobs.queue.pop_front() {
                                break j;
                            }
                            if jobs.closed {
                                return;
                            }
                            q.ready.wait(&mut jobs);
                        }
                    };
                    job();
                })?;
        }
        Ok(Pool { queue })
    }

    /// Runs `f` on the pool and awaits its result (None if the job panicked).
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        self.run_then(f, |_| None).await
    }

    /// As `run`, but `hold` may delay the hand-back of the result: given the result, it
    /// returns nothing (handed back at once) or a scheduler, which gets the hand-back to
    /// call later from any thread. A hard write's answer waits for its fsync that way,
    /// so the awaiting task is woken once rather than twice.
    pub async fn run_then<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
        hold: impl FnOnce(&T) -> Option<Scheduler> + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            if let Ok(v) = r {
                let later = hold(&v);
                let deliver: Job = Box::new(move || {
                    let _ = tx.send(v);
                });
                match later {
                    Some(schedule) => schedule(deliver),
                    None => deliver(),
                }
            }
        });
        self.queue.jobs.lock().queue.push_back(job);
        self.queue.ready.notify_one();
        rx.await.ok()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.queue.jobs.lock().closed = true;
        self.queue.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_jobs_and_survives_panics() {
        let p = Pool::new(2).unwrap();
        assert_eq!(p.run(|| 2 + 2).await, Some(4));
        let r: Option<()> = p.run(|| panic!("boom")).await;
        assert_eq!(r, None);
        assert_eq!(p.run(|| 5).await, Some(5));
    }

    #[tokio::test]
    async fn dropping_the_pool_stops_its_threads() {
        let p = Pool::new(3).unwrap();
        assert_eq!(p.run(|| 1).await, Some(1));
        let q = Arc::downgrade(&p.queue);
        drop(p);
        // Each worker holds the queue until it exits.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while q.strong_count() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "workers still running"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}
