//! Synchronous engines: `pread`/`pwrite`, and `lseek` followed by
//! `read`/`write` (serialised by a lock when threads share the descriptor,
//! since they would otherwise move each other's file offset).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::time::Instant;

use super::{AlignedBuf, IoHandle, Stopper, ThreadPlan, ThreadResult};
use crate::error::{Error, Result};
use crate::stats::{OpKind, Recorder};
use crate::workload::EngineKind;

/// Flushes a descriptor: fdatasync or fsync.
pub(crate) fn flush_fd(file: &File, data_only: bool) -> std::io::Result<()> {
    // SAFETY: plain system calls on an open descriptor.
    let rc = unsafe {
        if data_only {
            libc::fdatasync(file.as_raw_fd())
        } else {
            libc::fsync(file.as_raw_fd())
        }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Runs a pread/pwrite or lseek+read/write thread.
pub fn run(mut plan: ThreadPlan, start: Instant) -> Result<ThreadResult> {
    let IoHandle::File { file, lock } = &plan.io else {
        return Err(Error::BadParameter(
            "the synchronous engine needs a file descriptor".into(),
        ));
    };
    let w = plan.workload.clone();
    let bs = w.bs as usize;
    let lseek = w.engine == EngineKind::Lseek;
    let mut rbuf = AlignedBuf::new(bs)?;
    let mut wbuf = AlignedBuf::new(bs)?;
    plan.source.fill(wbuf.as_mut_slice());
    let mut rec = Recorder::new();
    let mut stopper = Stopper::new(plan.stop, plan.abort.clone());
    let mut writes_since_flush = 0u64;
    let path = &plan.path;

    loop {
        let t0 = Instant::now();
        if !stopper.may_issue(t0 - start) {
            break;
        }
        let (kind, off) = plan.source.next_op();
        plan.maybe_drop_cache(file.as_raw_fd());
        let res = if lseek {
            let _guard = lock
                .as_ref()
                .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()));
            let mut f: &File = file;
            f.seek(SeekFrom::Start(off)).and_then(|_| match kind {
                OpKind::Read => f.read_exact(rbuf.as_mut_slice()),
                OpKind::Write => f.write_all(wbuf.as_slice()),
            })
        } else {
            match kind {
                OpKind::Read => file.read_exact_at(rbuf.as_mut_slice(), off),
                OpKind::Write => file.write_all_at(wbuf.as_slice(), off),
            }
        };
        let t1 = Instant::now();
        if let Err(e) = res {
            let op = match (lseek, kind) {
                (false, OpKind::Read) => "pread",
                (false, OpKind::Write) => "pwrite",
                (true, OpKind::Read) => "lseek+read",
                (true, OpKind::Write) => "lseek+write",
            };
            return Err(Error::io(op, path, e));
        }
        rec.record(kind, bs as u64, t1 - t0, t1 - start);
        if kind == OpKind::Write {
            if let Some(fl) = plan.flush {
                writes_since_flush += 1;
                if writes_since_flush >= fl.every {
                    writes_since_flush = 0;
                    flush_fd(file, fl.data_only).map_err(|e| {
                        Error::io(if fl.data_only { "fdatasync" } else { "fsync" }, path, e)
                    })?;
                    let t2 = Instant::now();
                    rec.record_flush(t2 - t1);
                }
            }
        }
    }
    Ok(ThreadResult {
        rec,
        end: start.elapsed(),
    })
}
