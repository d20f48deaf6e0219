//! The io_uring engine: keeps `qd` reads/writes in flight per thread, each
//! with its own aligned buffer; flushes every N writes by draining the queue
//! and submitting an `IORING_OP_FSYNC` (with `DATASYNC` for fdatasync); no
//! new operation is queued between the N-th write and its flush.

use std::os::unix::io::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

use super::{AlignedBuf, IoHandle, Stopper, ThreadPlan, ThreadResult};
use crate::error::{Error, Result};
use crate::stats::{OpKind, Recorder};

/// `IORING_ENTER_GETEVENTS` from the kernel ABI (the crate keeps its `sys` module private).
const IORING_ENTER_GETEVENTS: u32 = 1;

/// user_data of the flush operation (slots use their index).
const FLUSH_TAG: u64 = u64::MAX;

/// Creates a ring with `entries` entries, mapping refusals to [`Error::UringUnavailable`].
///
/// Like fio, the ring is set up for one issuing thread with deferred task work
/// (`SINGLE_ISSUER | DEFER_TASKRUN`, completions are run when the thread asks
/// for them rather than by interrupting it) and `COOP_TASKRUN`, falling back
/// flag by flag on kernels that refuse them. Without these, every completion
/// interrupts and wakes the thread separately, which on a busy machine costs a
/// third of the throughput at queue depth 16. The ring must therefore be used
/// only by the thread that creates it.
pub fn new_ring(entries: u32) -> Result<IoUring> {
    let entries = entries.max(1);
    let attempts: [&dyn Fn() -> std::io::Result<IoUring>; 4] = [
        &|| {
            IoUring::builder()
                .setup_cqsize(entries)
                .setup_coop_taskrun()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(entries)
        },
        &|| {
            IoUring::builder()
                .setup_cqsize(entries)
                .setup_coop_taskrun()
                .build(entries)
        },
        &|| IoUring::builder().setup_cqsize(entries).build(entries),
        &|| IoUring::new(entries),
    ];
    let mut last = None;
    for attempt in attempts {
        match attempt() {
            Ok(ring) => return Ok(ring),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
            Err(e) => {
                last = Some(e);
                break;
            }
        }
    }
    let e = last.unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL));
    let why = match e.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel has no io_uring (ENOSYS)".to_string(),
        Some(libc::EPERM) => {
            "the kernel refused io_uring_setup (EPERM): disabled by kernel.io_uring_disabled \
             or by a seccomp policy (containers often block it)"
                .to_string()
        }
        Some(libc::ENOMEM) => {
            "not enough locked memory for the ring (raise RLIMIT_MEMLOCK)".to_string()
        }
        _ => e.to_string(),
    };
    Err(Error::UringUnavailable(why))
}

/// Checks that io_uring can be set up here.
pub fn probe() -> Result<()> {
    new_ring(1).map(drop)
}

struct Slot {
    buf: AlignedBuf,
    kind: OpKind,
    started: Instant,
}

/// Runs an io_uring thread.
///
/// The loop follows fio's: queue one operation and submit it with
/// `io_uring_enter(1, 0, GETEVENTS)` (which also runs deferred completions),
/// reap whatever has completed, and block for a completion only when the queue
/// is full. Submitting in batches and waiting for one completion instead lets
/// the queue drain to empty between refills on a slow or busy machine.
pub fn run(mut plan: ThreadPlan, start: Instant) -> Result<ThreadResult> {
    let IoHandle::File { file, .. } = &plan.io else {
        return Err(Error::BadParameter(
            "the io_uring engine needs a file descriptor".into(),
        ));
    };
    let w = plan.workload.clone();
    let bs = w.bs as usize;
    let len = u32::try_from(w.bs).map_err(|_| {
        Error::BadParameter("io_uring operations are limited to 4 GiB - 1 bytes".into())
    })?;
    let qd = w.qd as usize;
    let fd = types::Fd(file.as_raw_fd());
    let mut wbuf = AlignedBuf::new(bs)?;
    plan.source.fill(wbuf.as_mut_slice());
    let mut slots = Vec::with_capacity(qd);
    for _ in 0..qd {
        slots.push(Slot {
            buf: AlignedBuf::new(bs)?,
            kind: OpKind::Read,
            started: start,
        });
    }
    let mut free: Vec<usize> = (0..qd).rev().collect();
    // Declared after the buffers so that it is dropped before them.
    let mut ring = new_ring(w.qd)?;
    let mut rec = Recorder::new();
    let mut stopper = Stopper::new(plan.stop, plan.abort.clone());
    let mut stopping = false;
    let mut writes_since_flush = 0u64;
    let mut flush_due = false;
    let mut done: Vec<(u64, i32)> = Vec::with_capacity(qd);
    let path = plan.path.clone();

    loop {
        // Reap what has completed.
        done.clear();
        done.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        if !done.is_empty() {
            let now = Instant::now();
            let mut failure = None;
            for &(tag, res) in &done {
                let Some(slot) = slots.get(tag as usize) else {
                    continue;
                };
                free.push(tag as usize);
                if failure.is_some() {
                    continue;
                }
                if res < 0 {
                    let op = if slot.kind == OpKind::Read {
                        "read (io_uring)"
                    } else {
                        "write (io_uring)"
                    };
                    failure = Some(Error::io(
                        op,
                        &path,
                        std::io::Error::from_raw_os_error(-res),
                    ));
                    continue;
                }
                if res as usize != bs {
                    failure = Some(Error::io(
                        "io_uring",
                        &path,
                        std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            format!("short transfer: {res} of {bs} bytes"),
                        ),
                    ));
                    continue;
                }
                rec.record(slot.kind, bs as u64, now - slot.started, now - start);
            }
            if let Some(e) = failure {
                drain(&mut ring, qd - free.len());
                return Err(e);
            }
        }
        let in_flight = qd - free.len();

        // A flush waits for the queue to empty, then runs alone.
        if flush_due && in_flight == 0 {
            if let Some(fl) = plan.flush {
                let t0 = Instant::now();
                let mut op = opcode::Fsync::new(fd);
                if fl.data_only {
                    op = op.flags(types::FsyncFlags::DATASYNC);
                }
                // SAFETY: a flush carries no buffer.
                if unsafe { ring.submission().push(&op.build().user_data(FLUSH_TAG)) }.is_err() {
                    return Err(Error::BadParameter(
                        "io_uring submission queue is full".into(),
                    ));
                }
                enter(&ring, 1, 1, &path)?;
                let mut res = 0;
                for cqe in ring.completion() {
                    res = cqe.result();
                }
                if res < 0 {
                    let op = if fl.data_only {
                        "fdatasync (io_uring)"
                    } else {
                        "fsync (io_uring)"
                    };
                    return Err(Error::io(
                        op,
                        &path,
                        std::io::Error::from_raw_os_error(-res),
                    ));
                }
                let t1 = Instant::now();
                rec.record_flush(t1 - t0);
            }
            flush_due = false;
            writes_since_flush = 0;
            continue;
        }

        // Queue and submit one more operation if there is room.
        if !stopping && !flush_due {
            if let Some(&slot_ix) = free.last() {
                let now = Instant::now();
                if stopper.may_issue(now - start) {
                    free.pop();
                    let (kind, off) = plan.source.next_op();
                    plan.maybe_drop_cache(fd.0);
                    let slot = &mut slots[slot_ix];
                    slot.kind = kind;
                    let sqe = match kind {
                        OpKind::Read => {
                            opcode::Read::new(fd, slot.buf.as_mut_slice().as_mut_ptr(), len)
                                .offset(off)
                                .build()
                        }
                        OpKind::Write => opcode::Write::new(fd, wbuf.as_slice().as_ptr(), len)
                            .offset(off)
                            .build(),
                    }
                    .user_data(slot_ix as u64);
                    // SAFETY: the buffers live in `slots`/`wbuf` until the loop
                    // ends, which happens only once every operation has completed.
                    if unsafe { ring.submission().push(&sqe) }.is_err() {
                        return Err(Error::BadParameter(
                            "io_uring submission queue is full".into(),
                        ));
                    }
                    slot.started = Instant::now();
                    enter(&ring, 1, 0, &path)?;
                    // Writes are counted when issued, so that a flush follows
                    // exactly every N writes whatever the queue depth.
                    if kind == OpKind::Write {
                        if let Some(fl) = plan.flush {
                            writes_since_flush += 1;
                            if writes_since_flush >= fl.every {
                                flush_due = true;
                            }
                        }
                    }
                    continue;
                }
                stopping = true;
            }
        }

        if in_flight == 0 {
            if stopping {
                break;
            }
            continue;
        }
        // The queue is full (or we are stopping or flushing): wait for one.
        enter(&ring, 0, 1, &path)?;
    }
    std::hint::black_box(&slots);
    Ok(ThreadResult {
        rec,
        end: start.elapsed(),
    })
}

/// `io_uring_enter(to_submit, min_complete, GETEVENTS)`, retried on EINTR.
/// GETEVENTS is always passed: with deferred task work, completions are only
/// posted by an enter that carries it.
fn enter(ring: &IoUring, to_submit: u32, min_complete: u32, path: &std::path::Path) -> Result<()> {
    loop {
        // SAFETY: no argument struct is passed; the counts are within the ring.
        let r = unsafe {
            ring.submitter().enter::<libc::sigset_t>(
                to_submit,
                min_complete,
                IORING_ENTER_GETEVENTS,
                None,
            )
        };
        match r {
            Ok(_) => return Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EAGAIN)) => {
                continue
            }
            Err(e) => return Err(Error::io("io_uring_enter", path, e)),
        }
    }
}

/// Waits for `in_flight` outstanding operations before buffers are freed.
fn drain(ring: &mut IoUring, mut in_flight: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while in_flight > 0 && Instant::now() < deadline {
        if ring.submit_and_wait(1).is_err() {
            break;
        }
        in_flight = in_flight.saturating_sub(ring.completion().count());
    }
}
