//! The pool of evaluation threads.
//!
//! Query evaluation is synchronous and may touch the disk, so it never runs on the async
//! workers. A small pool (rather than tokio's blocking pool, which grows a thread per
//! concurrent query) keeps context switches low when many connections are busy: with 64
//! clients on 2 cores the blocking pool thrashes 64 threads, this pool runs a handful.
//! Evaluation never waits for a local fsync (durability is awaited asynchronously after
//! it returns), so a small pool is not starved by hard-durability writes.
//!
//! A replicated table's operations do wait, on an evaluation thread, for the shard's
//! leader and a quorum's fsync (`cluster::replica::wait_for`), and `r.http` for its
//! server. A worker that waits there tells the pool (`reql::blocking::on_block`), which then starts another worker if jobs
//! are queued and fewer than `core` workers are running: so at most `core` threads run
//! at once, as before, but waiting ones no longer hold the server's queries back. Workers
//! beyond `core` exit after [`EXTRA_IDLE`] without a job; there are never more than `max`.
//!
//! Dropping the pool stops its threads once the queued jobs are done, so a server that
//! shuts down leaves no thread behind in a process that goes on (tests, embedding).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// How long a worker beyond the pool's core size waits for a job before it exits.
pub const EXTRA_IDLE: Duration = Duration::from_secs(10);

/// Most workers a pool of `core` has, waiting ones included: each waiting worker is a
/// replicated operation in flight, already bounded by the connections' queries.
pub fn max_workers(core: usize) -> usize {
    core.max(1) * 64
}

/// Takes a job's hand-back of its result and calls it when it sees fit (`Pool::run_then`).
pub type Scheduler = Box<dyn FnOnce(Box<dyn FnOnce() + Send>) + Send>;

struct Jobs {
    queue: std::collections::VecDeque<Job>,
    /// Set when the pool is dropped: workers exit once `queue` is empty.
    closed: bool,
    /// Workers alive.
    alive: usize,
    /// Workers waiting for a job.
    idle: usize,
    /// Workers waiting in a replication call (their hook said so).
    blocked: usize,
}

impl Jobs {
    /// Whether a queued job should get a new worker: none is idle, fewer than `core`
    /// run, and the pool is under its maximum. Counts the new worker as alive.
    fn take_spawn(&mut self, core: usize, max: usize) -> bool {
        let running = self.alive - self.idle - self.blocked;
        let spawn = !self.queue.is_empty()
            && !self.closed
            && self.idle == 0
            && running < core
            && self.alive < max;
        if spawn {
            self.alive += 1;
        }
        spawn
    }
}

struct Queue {
    jobs: Mutex<Jobs>,
    ready: Condvar,
    core: usize,
    max: usize,
}

/// The evaluation pool.
pub struct Pool {
    queue: Arc<Queue>,
}

impl Pool {
    /// Starts `threads` workers (the core size; see the module notes).
    pub fn new(threads: usize) -> std::io::Result<Pool> {
        let core = threads.max(1);
        let queue = Arc::new(Queue {
            jobs: Mutex::new(Jobs {
                queue: std::collections::VecDeque::new(),
                closed: false,
                alive: core,
                idle: 0,
                blocked: 0,
            }),
            ready: Condvar::new(),
            core,
            max: max_workers(core),
        });
        for i in 0..core {
            spawn_worker(&queue, i)?;
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
        let spawn = {
            let mut jobs = self.queue.jobs.lock();
            jobs.queue.push_back(job);
            jobs.take_spawn(self.queue.core, self.queue.max)
        };
        if spawn {
            grow(&self.queue);
        } else {
            self.queue.ready.notify_one();
        }
        rx.await.ok()
    }

    /// Workers alive now.
    #[cfg(test)]
    pub fn workers(&self) -> usize {
        self.queue.jobs.lock().alive
    }
}

/// Starts a worker already counted in `alive`; if the thread cannot be made, uncounts
/// it (the queued jobs wait for the other workers).
fn grow(queue: &Arc<Queue>) {
    let n = queue.jobs.lock().alive;
    if spawn_worker(queue, n).is_err() {
        queue.jobs.lock().alive -= 1;
        queue.ready.notify_one();
    }
}

fn spawn_worker(queue: &Arc<Queue>, i: usize) -> std::io::Result<()> {
    let q = queue.clone();
    std::thread::Builder::new()
        .name(format!("eval-{i}"))
        .spawn(move || {
            let hook = q.clone();
            reql::blocking::on_block(Arc::new(move |begins| blocked(&hook, begins)));
            work(&q);
        })?;
    Ok(())
}

/// A worker's loop: jobs until the pool closes, or, beyond the core size, until
/// [`EXTRA_IDLE`] passes without one.
fn work(q: &Queue) {
    loop {
        let job = {
            let mut jobs = q.jobs.lock();
            loop {
                if let Some(j) = jobs.queue.pop_front() {
                    break j;
                }
                if jobs.closed {
                    jobs.alive -= 1;
                    return;
                }
                jobs.idle += 1;
                let timed_out = q.ready.wait_for(&mut jobs, EXTRA_IDLE).timed_out();
                jobs.idle -= 1;
                if timed_out && jobs.queue.is_empty() && jobs.alive > q.core {
                    jobs.alive -= 1;
                    return;
                }
            }
        };
        job();
    }
}

/// The hook of a worker's replication waits: while it waits, a queued job may get a
/// new worker.
fn blocked(queue: &Arc<Queue>, begins: bool) {
    let spawn = {
        let mut jobs = queue.jobs.lock();
        if begins {
            jobs.blocked += 1;
            jobs.take_spawn(queue.core, queue.max)
        } else {
            jobs.blocked -= 1;
            false
        }
    };
    if spawn {
        grow(queue);
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_worker_waiting_on_replication_lets_another_run() {
        let rt = tokio::runtime::Handle::current();
        let p = Arc::new(Pool::new(1).unwrap());
        // The only core worker waits in a replication call until `go` is sent.
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let (started, began) = tokio::sync::oneshot::channel::<()>();
        let r2 = rt.clone();
        let waiting = {
            let p = p.clone();
            tokio::spawn(async move {
                p.run(move || {
                    let _ = started.send(());
                    cluster::replica::wait_for(&r2, async move { wait.await.ok() })
                })
                .await
            })
        };
        began.await.unwrap();
        // Another job still runs, on a worker the pool started for it.
        let other = tokio::time::timeout(Duration::from_secs(20), p.run(|| 5)).await;
        assert_eq!(other.ok().flatten(), Some(5));
        assert_eq!(p.workers(), 2);
        go.send(()).unwrap();
        assert_eq!(waiting.await.unwrap(), Some(Some(Some(()))));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_that_does_not_wait_gets_no_extra_worker() {
        let p = Pool::new(1).unwrap();
        // The core worker is busy (not waiting) for a while: the next job queues.
        let busy = p.run(|| std::thread::sleep(Duration::from_millis(200)));
        let next = p.run(|| 1);
        let (a, b) = tokio::join!(busy, next);
        assert_eq!((a, b), (Some(()), Some(1)));
        assert_eq!(p.workers(), 1);
    }
}
