//! I/O engines: what one benchmark thread does.
//!
//! Each thread gets a [`ThreadPlan`]: its operation source (offsets and
//! read/write choice), its I/O handle (a file descriptor, its own or shared, or
//! a mapping), its stop condition and the common start instant. The engines per
//! I/O family live in submodules:
//! - [`sync`]: `pread`/`pwrite` and `lseek` + `read`/`write`, one operation in flight;
//! - [`mmap`]: loads and stores through a shared mapping, flushed by `msync`;
//! - [`uring`]: io_uring with `qd` operations in flight.
//!
//! Latency is measured around each operation (for io_uring, from queueing the
//! submission to reaping the completion). Flushes (`fsync`/`fdatasync`/`msync`
//! every N writes) are timed separately; their time counts in the rates.

pub mod mmap;
pub mod sync;
pub mod uring;

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::dist::{OffsetGen, Rng};
use crate::error::{Error, Result};
use crate::stats::{OpKind, Recorder};
use crate::workload::{OpMix, Stop, SyncMode, Workload};

/// Alignment of every I/O buffer: a page, enough for O_DIRECT on any device.
pub const BUF_ALIGN: usize = 4096;

/// A zero-initialised heap buffer aligned to [`BUF_ALIGN`].
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is uniquely owned heap memory, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of `len` bytes (at least 1).
    pub fn new(len: usize) -> Result<Self> {
        let layout = Layout::from_size_align(len.max(1), BUF_ALIGN)
            .map_err(|e| Error::BadParameter(format!("buffer of {len} bytes: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::BadParameter(format!(
                "cannot allocate a buffer of {len} bytes"
            )));
        }
        Ok(AlignedBuf { ptr, len })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes while self lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if let Ok(layout) = Layout::from_size_align(self.len.max(1), BUF_ALIGN) {
            // SAFETY: allocated in `new` with this very layout.
            unsafe { dealloc(self.ptr, layout) }
        }
    }
}

/// Chooses each operation: read or write, and where.
pub struct OpSource {
    gen: OffsetGen,
    rng: Rng,
    read_threshold: f64,
}

impl OpSource {
    /// The source for thread `thread` of workload `w` over `[base, base + span)`.
    pub fn new(w: &Workload, base: u64, span: u64, thread: u32) -> Self {
        let read_threshold = match w.op {
            OpMix::Read => 1.0,
            OpMix::Write => 0.0,
            OpMix::Mix { read_pct } => read_pct / 100.0,
        };
        OpSource {
            gen: OffsetGen::new(w.pattern, base, span, w.bs, w.align, thread, w.threads),
            rng: Rng::new(w.seed ^ (thread as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            read_threshold,
        }
    }

    /// The next operation.
    pub fn next_op(&mut self) -> (OpKind, u64) {
        let kind = if self.read_threshold >= 1.0 || self.rng.next_f64() < self.read_threshold {
            OpKind::Read
        } else {
            OpKind::Write
        };
        (kind, self.gen.next(&mut self.rng))
    }

    /// Whether the operation last returned started a new sequential pass.
    pub fn wrapped(&self) -> bool {
        self.gen.wrapped()
    }

    /// Random bytes for write buffers.
    pub fn fill(&mut self, buf: &mut [u8]) {
        self.rng.fill(buf)
    }
}

/// The descriptor or mapping a thread does its I/O through.
pub enum IoHandle {
    /// A descriptor; `lock` serialises lseek + read/write when it is shared.
    File {
        /// The descriptor (shared between threads or not).
        file: Arc<File>,
        /// Held around lseek + read/write on a shared descriptor.
        lock: Option<Arc<Mutex<()>>>,
    },
    /// A shared mapping of the whole target.
    Mmap(Arc<mmap::Mapping>),
}

impl IoHandle {
    /// Another handle on the same descriptor (and lock) or mapping.
    pub fn share(&self) -> IoHandle {
        match self {
            IoHandle::File { file, lock } => IoHandle::File {
                file: file.clone(),
                lock: lock.clone(),
            },
            IoHandle::Mmap(m) => IoHandle::Mmap(m.clone()),
        }
    }
}

/// When a thread stops.
#[derive(Debug, Clone, Copy)]
pub enum ThreadStop {
    /// After this long since the common start.
    Deadline(Duration),
    /// After this many operations.
    Ops(u64),
}

/// Flushing every N writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushEvery {
    /// Writes between two flushes.
    pub every: u64,
    /// fdatasync rather than fsync.
    pub data_only: bool,
}

impl FlushEvery {
    /// The flush policy of a sync mode (`None` when the benchmark never flushes).
    pub fn of(sync: SyncMode) -> Option<Self> {
        match sync {
            SyncMode::Fsync { every } => Some(FlushEvery {
                every,
                data_only: false,
            }),
            SyncMode::Fdatasync { every } => Some(FlushEvery {
                every,
                data_only: true,
            }),
            _ => None,
        }
    }
}

/// Everything one thread needs.
pub struct ThreadPlan {
    /// The workload (shared by its threads).
    pub workload: Arc<Workload>,
    /// The target's path, for error messages.
    pub path: PathBuf,
    /// This thread's index within the workload.
    pub thread: u32,
    /// Operation source.
    pub source: OpSource,
    /// I/O handle.
    pub io: IoHandle,
    /// Stop condition.
    pub stop: ThreadStop,
    /// Flush policy.
    pub flush: Option<FlushEvery>,
    /// Set by a failing thread so that the others stop early.
    pub abort: Arc<AtomicBool>,
    /// The region `(offset, length)` whose cached pages are dropped each time a
    /// sequential pass starts over (as fio does), so that every pass reads the disk.
    pub drop_on_wrap: Option<(u64, u64)>,
}

impl ThreadPlan {
    /// Drops the cached pages of the region if a new sequential pass just started.
    pub(crate) fn maybe_drop_cache(&self, fd: libc::c_int) {
        if let Some((off, len)) = self.drop_on_wrap {
            if self.source.wrapped() {
                // SAFETY: an advisory call on an open descriptor.
                unsafe {
                    libc::posix_fadvise(
                        fd,
                        off as libc::off_t,
                        len as libc::off_t,
                        libc::POSIX_FADV_DONTNEED,
                    );
                }
            }
        }
    }
}

impl ThreadPlan {
    /// The stop condition of thread `thread` of `w`: the duration, or its share of the ops.
    pub fn stop_for(w: &Workload, thread: u32) -> ThreadStop {
        match w.stop {
            Stop::Duration(d) => ThreadStop::Deadline(d),
            Stop::Ops(n) => {
                let t = w.threads as u64;
                let extra = u64::from((thread as u64) < n % t);
                ThreadStop::Ops(n / t + extra)
            }
        }
    }
}

/// What a thread measured and when it finished.
pub struct ThreadResult {
    /// Its measurements.
    pub rec: Recorder,
    /// When it stopped (its last operation completed, or the stop condition
    /// was seen), since the common start.
    pub end: Duration,
}

/// Tracks the stop condition inside an engine's loop.
pub(crate) struct Stopper {
    stop: ThreadStop,
    issued: u64,
    abort: Arc<AtomicBool>,
}

impl Stopper {
    pub(crate) fn new(stop: ThreadStop, abort: Arc<AtomicBool>) -> Self {
        Stopper {
            stop,
            issued: 0,
            abort,
        }
    }

    /// Whether another operation may start at `since_start`; counts it if so.
    pub(crate) fn may_issue(&mut self, since_start: Duration) -> bool {
        if self.abort.load(Ordering::Relaxed) {
            return false;
        }
        let ok = match self.stop {
            ThreadStop::Deadline(d) => since_start < d,
            ThreadStop::Ops(n) => self.issued < n,
        };
        if ok {
            self.issued += 1;
        }
        ok
    }
}

/// Runs one thread of a workload from the common `start`.
pub fn run_thread(plan: ThreadPlan, start: Instant) -> Result<ThreadResult> {
    let abort = plan.abort.clone();
    let result = match (&plan.io, plan.workload.engine) {
        (IoHandle::Mmap(_), _) => mmap::run(plan, start),
        (_, crate::workload::EngineKind::Uring) => uring::run(plan, start),
        _ => sync::run(plan, start),
    };
    if result.is_err() {
        abort.store(true, Ordering::Relaxed);
    }
    result
}
