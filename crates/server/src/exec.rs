//! A fixed pool of evaluation threads.
//!
//! Query evaluation is synchronous and may touch the disk, so it never runs on the async
//! workers. A small fixed pool (rather than tokio's blocking pool, which grows a thread
//! per concurrent query) keeps context switches low when many connections are busy:
//! with 64 clients on 2 cores the blocking pool thrashes 64 threads, this pool runs a
//! handful. Evaluation never waits for fsync (durability is awaited asynchronously after
//! it returns), so a small pool is not starved by hard-durability writes.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

struct Queue {
    jobs: Mutex<std::collections::VecDeque<Job>>,
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
            jobs: Mutex::new(std::collections::VecDeque::new()),
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
                            if let Some(j) = jobs.pop_front() {
                                break j;
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
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            if let Ok(v) = r {
                let _ = tx.send(v);
            }
        });
        self.queue.jobs.lock().push_back(job);
        self.queue.ready.notify_one();
        rx.await.ok()
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
}
