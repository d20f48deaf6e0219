//! Runs several workloads at once against one target.
//!
//! Everything that can fail before measuring (checks, opening descriptors with
//! their flags, mappings, io_uring availability) happens first, in the calling
//! thread. Then every thread of every workload checks in at a starting gate, the common
//! start instant is taken, and they run until their own stop condition. A
//! failing thread raises a shared flag so that the others stop early, and the
//! first error is returned.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::engine::{self, mmap::Mapping, FlushEvery, IoHandle, OpSource, ThreadPlan};
use crate::error::{Error, Result};
use crate::stats::Recorder;
use crate::target::Target;
use crate::workload::{EngineKind, FdMode, Pattern, Workload};

/// The measurements of one workload.
pub struct WorkloadResult {
    /// The workload.
    pub workload: Workload,
    /// All its threads' measurements merged.
    pub rec: Recorder,
    /// From the common start until its last thread stopped.
    pub elapsed: Duration,
}

/// The starting gate: threads check in, then all leave at one common instant.
#[derive(Default)]
struct Gate {
    state: Mutex<(usize, Option<Instant>)>,
    cv: Condvar,
}

impl Gate {
    /// Called by each thread: checks in and waits for the start instant.
    fn arrive_and_wait(&self) -> Instant {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.0 += 1;
        self.cv.notify_all();
        loop {
            if let Some(start) = st.1 {
                return start;
            }
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Called by the coordinator: waits for `n` threads, then sets the start.
    fn open_when(&self, n: usize) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while st.0 < n {
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.1 = Some(Instant::now());
        self.cv.notify_all();
    }
}

/// Options that apply to the whole run.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Leave the page cache as it is instead of dropping the target's pages first.
    pub keep_cache: bool,
}

fn handle_for(target: &Target, w: &Workload, shared: &mut Option<IoHandle>) -> Result<IoHandle> {
    let share = w.fd == FdMode::Shared;
    if share {
        if let Some(h) = shared {
            return Ok(h.share());
        }
    }
    let file = target.open(w)?;
    if let Some(advice) = w.fadvise.for_pattern(&w.pattern) {
        use std::os::unix::io::AsRawFd;
        // SAFETY: an advisory call on a descriptor we own.
        unsafe {
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, advice);
        }
    }
    let handle = if w.engine == EngineKind::Mmap {
        IoHandle::Mmap(Arc::new(Mapping::new(
            &file,
            target.size,
            w.op.writes(),
            &target.path,
        )?))
    } else {
        let lock = (share && w.engine == EngineKind::Lseek && w.threads > 1)
            .then(|| Arc::new(Mutex::new(())));
        IoHandle::File {
            file: Arc::new(file),
            lock,
        }
    };
    if share {
        *shared = Some(handle.share());
    }
    Ok(handle)
}

/// Runs `workloads` together on `target` and returns their measurements in order.
pub fn run(
    target: &Target,
    workloads: &[Workload],
    opts: RunOptions,
) -> Result<Vec<WorkloadResult>> {
    if workloads.is_empty() {
        return Err(Error::BadParameter("no workload given".into()));
    }
    for w in workloads {
        target.check(w)?;
    }
    if workloads.iter().any(|w| w.engine == EngineKind::Uring) {
        engine::uring::probe()?;
    }
    if !opts.keep_cache {
        target.drop_cache()?;
    }

    let abort = Arc::new(AtomicBool::new(false));
    let mut plans: Vec<(usize, ThreadPlan)> = Vec::new();
    for (wi, w) in workloads.iter().enumerate() {
        let span = target.span_of(w)?;
        let shared_w = Arc::new(w.clone());
        let mut shared = None;
        for t in 0..w.threads {
            plans.push((
                wi,
                ThreadPlan {
                    workload: shared_w.clone(),
                    path: target.path.clone(),
                    thread: t,
                    source: OpSource::new(w, w.offset, span, t),
                    io: handle_for(target, w, &mut shared)?,
                    stop: ThreadPlan::stop_for(w, t),
                    flush: FlushEvery::of(w.sync),
                    abort: abort.clone(),
                    drop_on_wrap: (!opts.keep_cache
                        && !w.flags.direct
                        && w.engine != EngineKind::Mmap
                        && matches!(w.pattern, Pattern::Sequential { .. }))
                    .then_some((w.offset, span)),
                },
            ));
        }
    }

    let gate = Gate::default();
    let results: Vec<(usize, Result<engine::ThreadResult>)> = std::thread::scope(|scope| {
        let mut spawned = Vec::with_capacity(plans.len());
        for (wi, plan) in plans {
            let gate = &gate;
            let name = format!("{}-{}", plan.workload.name, plan.thread);
            let spawn = std::thread::Builder::new()
                .name(name)
                .spawn_scoped(scope, move || {
                    let start = gate.arrive_and_wait();
                    (wi, engine::run_thread(plan, start))
                });
            match spawn {
                Ok(h) => spawned.push(h),
                Err(_) => {
                    // Too many threads: release those started; they see the abort flag.
                    abort.store(true, std::sync::atomic::Ordering::Relaxed);
                    break;
                }
            }
        }
        gate.open_when(spawned.len());
        spawned
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r,
                Err(_) => (
                    usize::MAX,
                    Err(Error::Output("a benchmark thread panicked".into())),
                ),
            })
            .collect()
    });

    let mut out: Vec<WorkloadResult> = workloads
        .iter()
        .map(|w| WorkloadResult {
            workload: w.clone(),
            rec: Recorder::new(),
            elapsed: Duration::ZERO,
        })
        .collect();
    let expected: u32 = workloads.iter().map(|w| w.threads).sum();
    if results.len() != expected as usize {
        return Err(Error::BadParameter(format!(
            "could not start {expected} threads (only {} started)",
            results.len()
        )));
    }
    let mut first_error = None;
    for (wi, r) in results {
        match r {
            Ok(tr) => {
                if let Some(o) = out.get_mut(wi) {
                    o.rec.merge(&tr.rec);
                    o.elapsed = o.elapsed.max(tr.end);
                }
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
