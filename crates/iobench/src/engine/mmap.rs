//! The mmap engine: reads copy from a shared mapping of the target into a
//! buffer, writes copy a buffer into it (as a database using mmap touches its
//! pages); "fsync"/"fdatasync" every N writes become `msync(MS_SYNC)`.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::Instant;

use super::{AlignedBuf, IoHandle, Stopper, ThreadPlan, ThreadResult};
use crate::error::{Error, Result};
use crate::stats::{OpKind, Recorder};

/// A shared mapping of a whole target.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; threads only copy bytes in and
// out of it (any bit pattern is a valid u8), and it lives until the last Arc.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `file` shared, writable if `writable`.
    pub fn new(file: &File, len: u64, writable: bool, path: &Path) -> Result<Self> {
        let len = usize::try_from(len).map_err(|_| {
            Error::BadParameter(format!("{len} bytes cannot be mapped on this machine"))
        })?;
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: mapping a file descriptor we own; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::io("mmap", path, std::io::Error::last_os_error()));
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Copies `buf.len()` bytes at `off` into `buf`.
    fn load(&self, off: u64, buf: &mut [u8]) {
        let off = off as usize;
        assert!(off + buf.len() <= self.len, "load beyond the mapping");
        // SAFETY: the range is inside the mapping (checked above).
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), buf.as_mut_ptr(), buf.len()) }
    }

    /// Copies `buf` into the mapping at `off`.
    fn store(&self, off: u64, buf: &[u8]) {
        let off = off as usize;
        assert!(off + buf.len() <= self.len, "store beyond the mapping");
        // SAFETY: the range is inside the mapping (checked above), which is writable
        // whenever the workload writes.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), self.ptr.add(off), buf.len()) }
    }

    /// `msync(MS_SYNC)` of the whole mapping.
    fn sync(&self) -> std::io::Result<()> {
        // SAFETY: ptr/len describe our mapping.
        if unsafe { libc::msync(self.ptr.cast(), self.len, libc::MS_SYNC) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped, once.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// Runs an mmap thread.
pub fn run(mut plan: ThreadPlan, start: Instant) -> Result<ThreadResult> {
    let IoHandle::Mmap(map) = &plan.io else {
        return Err(Error::BadParameter(
            "the mmap engine needs a mapping".into(),
        ));
    };
    let bs = plan.workload.bs as usize;
    let mut rbuf = AlignedBuf::new(bs)?;
    let mut wbuf = AlignedBuf::new(bs)?;
    plan.source.fill(wbuf.as_mut_slice());
    let mut rec = Recorder::new();
    let mut stopper = Stopper::new(plan.stop, plan.abort.clone());
    let mut writes_since_flush = 0u64;

    loop {
        let t0 = Instant::now();
        if !stopper.may_issue(t0 - start) {
            break;
        }
        let (kind, off) = plan.source.next_op();
        match kind {
            OpKind::Read => map.load(off, rbuf.as_mut_slice()),
            OpKind::Write => map.store(off, wbuf.as_slice()),
        }
        let t1 = Instant::now();
        rec.record(kind, bs as u64, t1 - t0, t1 - start);
        if kind == OpKind::Write {
            if let Some(fl) = plan.flush {
                writes_since_flush += 1;
                if writes_since_flush >= fl.every {
                    writes_since_flush = 0;
                    map.sync().map_err(|e| Error::io("msync", &plan.path, e))?;
                    let t2 = Instant::now();
                    rec.record_flush(t2 - t1);
                }
            }
        }
    }
    // Keep the read buffer observable so the copies are not optimised away.
    std::hint::black_box(rbuf.as_slice());
    Ok(ThreadResult {
        rec,
        end: start.elapsed(),
    })
}
