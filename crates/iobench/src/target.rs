//! The target: a block device or a regular file, its size and file system,
//! creating and filling a file, the `--destructive` safety rule, and opening it
//! with a workload's flags (with clear errors for flags the target refuses).

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::dist::Rng;
use crate::error::{Error, Result};
use crate::workload::Workload;

/// What kind of object the target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// A regular file.
    File,
    /// A block device.
    BlockDevice,
}

/// A target ready for workloads.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Target {
    /// Its path.
    pub path: PathBuf,
    /// File or block device.
    pub kind: TargetKind,
    /// Usable bytes (the file's length or `--size`, the device's size).
    pub size: u64,
    /// Name of the file system holding it (`ext4`, `tmpfs`, …; `bdev` for a device).
    pub fs: String,
    /// Whether this run created or extended it.
    pub created: bool,
    /// Required alignment of O_DIRECT offsets and lengths, when the kernel tells.
    pub dio_align: Option<u32>,
}

/// `_IOR(0x12, 114, u64)`: the size of a block device in bytes.
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

fn cpath(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::BadParameter(format!("{} contains a NUL byte", path.display())))
}

/// The name of the file system that holds `path` (from statfs's magic number).
pub fn fs_name(path: &Path) -> Result<String> {
    let c = cpath(path)?;
    // SAFETY: `c` is a valid NUL-terminated string; `st` is plain old data
    // that statfs fills in.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(Error::io("statfs", path, std::io::Error::last_os_error()));
    }
    let name = match st.f_type as u64 {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x8584_58F6 => "ramfs",
        0x794C_7630 => "overlayfs",
        0x6969 => "nfs",
        0x2FC1_2FC1 => "zfs",
        0xF2F5_2010 => "f2fs",
        0x4D44 => "vfat",
        0x6573_5546 => "fuse",
        0x0102_1997 => "9p",
        0x6264_6576 => "bdev",
        0x1CD1 => "devpts",
        other => return Ok(format!("fs-0x{other:x}")),
    };
    Ok(name.to_string())
}

fn free_space(dir: &Path) -> Result<u64> {
    let c = cpath(dir)?;
    // SAFETY: as in `fs_name`.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(Error::io("statvfs", dir, std::io::Error::last_os_error()));
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

fn block_device_size(path: &Path) -> Result<u64> {
    let f = File::open(path).map_err(|e| Error::io("open", path, e))?;
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer.
    if unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64 as _, &mut size) } != 0 {
        return Err(Error::io(
            "ioctl(BLKGETSIZE64)",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(size)
}

/// The O_DIRECT offset alignment the kernel reports through statx (Linux 6.1+).
fn dio_alignment(path: &Path) -> Option<u32> {
    let c = cpath(path).ok()?;
    // SAFETY: statx fills a plain-old-data struct.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_DIOALIGN, &mut st) };
    if rc == 0 && st.stx_mask & libc::STATX_DIOALIGN != 0 && st.stx_dio_offset_align > 0 {
        Some(st.stx_dio_offset_align)
    } else {
        None
    }
}

/// Appends pseudo-random bytes to `file` from `from` up to `to`, then fsyncs.
/// Random rather than zero data, so that no layer can compress or skip it.
fn fill(file: &mut File, path: &Path, from: u64, to: u64) -> Result<()> {
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(from))
        .map_err(|e| Error::io("seek", path, e))?;
    let mut rng = Rng::new(0xF111);
    let mut buf = vec![0u8; 1 << 20];
    let mut at = from;
    while at < to {
        let n = ((to - at) as usize).min(buf.len());
        rng.fill(&mut buf[..n]);
        file.write_all(&buf[..n])
            .map_err(|e| Error::io("write (filling)", path, e))?;
        at += n as u64;
    }
    file.sync_all().map_err(|e| Error::io("fsync", path, e))
}

/// Inspects (and if needed creates, fills or extends) the target.
///
/// - A missing file is created and filled with `size` bytes; without `size` it is an error.
/// - A shorter file is extended to `size`; a longer one is used up to `size`.
/// - A block device is used up to `size` (default: all of it).
/// - If `writes`, a block device or a file that held data before this run is
///   refused unless `destructive`.
pub fn prepare(path: &Path, size: Option<u64>, writes: bool, destructive: bool) -> Result<Target> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io("stat", path, e)),
    };
    if size == Some(0) {
        return Err(Error::BadParameter("--size must be at least 1 byte".into()));
    }
    let Some(meta) = meta else {
        let Some(size) = size else {
            return Err(Error::MissingTarget(path.to_path_buf()));
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !parent.is_dir() {
            return Err(Error::BadParameter(format!(
                "cannot create {}: directory {} does not exist",
                path.display(),
                parent.display()
            )));
        }
        let available = free_space(&parent)?;
        if size > available {
            return Err(Error::SizeTooLarge {
                path: path.to_path_buf(),
                requested: size,
                available,
            });
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        if let Err(e) = fill(&mut f, path, 0, size) {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        return Ok(Target {
            path: path.to_path_buf(),
            kind: TargetKind::File,
            size,
            fs: fs_name(path)?,
            created: true,
            dio_align: dio_alignment(path),
        });
    };

    let ft = meta.file_type();
    if ft.is_block_device() {
        if writes && !destructive {
            return Err(Error::Destructive {
                what: "block device",
                path: path.to_path_buf(),
            });
        }
        let dev_size = block_device_size(path)?;
        if let Some(s) = size {
            if s > dev_size {
                return Err(Error::SizeTooLarge {
                    path: path.to_path_buf(),
                    requested: s,
                    available: dev_size,
                });
            }
        }
        return Ok(Target {
            path: path.to_path_buf(),
            kind: TargetKind::BlockDevice,
            size: size.unwrap_or(dev_size),
            fs: "bdev".into(),
            created: false,
            dio_align: dio_alignment(path),
        });
    }
    if !ft.is_file() {
        return Err(Error::BadParameter(format!(
            "{} is neither a regular file nor a block device",
            path.display()
        )));
    }
    let len = meta.len();
    if writes && len > 0 && !destructive {
        return Err(Error::Destructive {
            what: "non-empty file",
            path: path.to_path_buf(),
        });
    }
    let mut created = false;
    let size = match size {
        None if len == 0 => {
            return Err(Error::BadParameter(format!(
                "{} is empty: pass --size SIZE to fill it",
                path.display()
            )))
        }
        None => len,
        Some(s) if s > len => {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let available = free_space(dir)?;
            if s - len > available {
                return Err(Error::SizeTooLarge {
                    path: path.to_path_buf(),
                    requested: s,
                    available: len + available,
                });
            }
            let mut f = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io("open", path, e))?;
            fill(&mut f, path, len, s)?;
            created = true;
            s
        }
        Some(s) => s,
    };
    Ok(Target {
        path: path.to_path_buf(),
        kind: TargetKind::File,
        size,
        fs: fs_name(path)?,
        created,
        dio_align: dio_alignment(path),
    })
}

/// Checks, before anything is created or filled, what can be known from the
/// file system alone: O_DIRECT is refused on tmpfs and ramfs.
pub fn precheck(path: &Path, workloads: &[Workload]) -> Result<()> {
    if !workloads.iter().any(|w| w.flags.direct) {
        return Ok(());
    }
    let probe = if path.exists() {
        path.to_path_buf()
    } else {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    };
    let Ok(fs) = fs_name(&probe) else {
        return Ok(()); // a missing directory is reported by `prepare`
    };
    if matches!(fs.as_str(), "tmpfs" | "ramfs") {
        return Err(tmpfs_direct(path, &fs));
    }
    Ok(())
}

fn tmpfs_direct(path: &Path, fs: &str) -> Error {
    Error::Unsupported(format!(
        "O_DIRECT on {} ({fs}): there is no disk under it, so nothing would be bypassed \
         (kernels before 6.6 refuse the flag outright); put the target on a disk file system",
        path.display()
    ))
}

impl Target {
    /// Checks that `w`'s flags and geometry suit this target.
    pub fn check(&self, w: &Workload) -> Result<()> {
        if w.flags.direct && matches!(self.fs.as_str(), "tmpfs" | "ramfs") {
            return Err(tmpfs_direct(&self.path, &self.fs));
        }
        if w.flags.direct {
            if let Some(a) = self.dio_align {
                let a = a as u64;
                let stride = match w.pattern {
                    crate::workload::Pattern::Sequential { stride, .. } => stride,
                    crate::workload::Pattern::Random { .. } => w.align,
                };
                if !w.bs.is_multiple_of(a)
                    || !stride.is_multiple_of(a)
                    || !w.offset.is_multiple_of(a)
                {
                    return Err(Error::Unsupported(format!(
                        "O_DIRECT on {} needs bs, offset and {} to be multiples of {a} bytes",
                        self.path.display(),
                        if matches!(w.pattern, crate::workload::Pattern::Sequential { .. }) {
                            "stride"
                        } else {
                            "align"
                        }
                    )));
                }
            }
        }
        let span = self.span_of(w)?;
        if w.bs > span {
            return Err(Error::BadParameter(format!(
                "workload {}: bs {} is larger than the region of {} bytes",
                w.name, w.bs, span
            )));
        }
        Ok(())
    }

    /// The length of the region `w` uses.
    pub fn span_of(&self, w: &Workload) -> Result<u64> {
        if w.offset >= self.size {
            return Err(Error::BadParameter(format!(
                "workload {}: offset {} is beyond the target's {} bytes",
                w.name, w.offset, self.size
            )));
        }
        let rest = self.size - w.offset;
        match w.span {
            None => Ok(rest),
            Some(s) if s <= rest => Ok(s),
            Some(s) => Err(Error::BadParameter(format!(
                "workload {}: offset {} + span {} exceeds the target's {} bytes",
                w.name, w.offset, s, self.size
            ))),
        }
    }

    /// Opens the target with `w`'s flags, translating refusals into clear errors.
    pub fn open(&self, w: &Workload) -> Result<File> {
        let mut flags = 0;
        if w.flags.append {
            flags |= libc::O_APPEND;
        }
        if w.flags.noatime {
            flags |= libc::O_NOATIME;
        }
        if w.flags.direct {
            flags |= libc::O_DIRECT;
        }
        if w.flags.dsync {
            flags |= libc::O_DSYNC;
        }
        if w.flags.sync {
            flags |= libc::O_SYNC;
        }
        if w.flags.nofollow {
            flags |= libc::O_NOFOLLOW;
        }
        let mut opts = OpenOptions::new();
        opts.read(true).write(w.op.writes()).custom_flags(flags);
        opts.open(&self.path).map_err(|e| {
            let path = self.path.display();
            match e.raw_os_error() {
                Some(libc::EINVAL) if w.flags.direct => Error::Unsupported(format!(
                    "O_DIRECT is not supported by the {} file system holding {path}",
                    self.fs
                )),
                Some(libc::EPERM) if w.flags.noatime => Error::Unsupported(format!(
                    "O_NOATIME on {path} is allowed only to the file's owner or with CAP_FOWNER"
                )),
                Some(libc::ELOOP) if w.flags.nofollow => Error::Unsupported(format!(
                    "{path} is a symbolic link and flags=nofollow refuses it"
                )),
                _ => Error::io("open", &self.path, e),
            }
        })
    }

    /// Writes back dirty pages and drops the target's cached pages, so that a
    /// workload starts cold (as fio's default `invalidate=1` does).
    pub fn drop_cache(&self) -> Result<()> {
        let f = File::open(&self.path).map_err(|e| Error::io("open", &self.path, e))?;
        // fdatasync first: POSIX_FADV_DONTNEED leaves dirty pages in place.
        // SAFETY: plain system calls on a descriptor we own.
        unsafe {
            libc::fdatasync(f.as_raw_fd());
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::parse_line;

    fn w(line: &str) -> Workload {
        parse_line(line, 0).unwrap()
    }

    #[test]
    fn creates_and_fills_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        let t = prepare(&p, Some(3 << 20), true, false).unwrap();
        assert!(t.created);
        assert_eq!(t.kind, TargetKind::File);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 3 << 20);
        let data = std::fs::read(&p).unwrap();
        assert!(data.iter().filter(|&&b| b == 0).count() < data.len() / 100);
    }

    #[test]
    fn missing_without_size_and_bad_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope");
        assert!(matches!(
            prepare(&p, None, false, false),
            Err(Error::MissingTarget(_))
        ));
        assert!(matches!(
            prepare(&p, Some(0), false, false),
            Err(Error::BadParameter(_))
        ));
        assert!(matches!(
            prepare(&p, Some(1 << 60), false, false),
            Err(Error::SizeTooLarge { .. })
        ));
        assert!(!p.exists());
        let deep = dir.path().join("no/such/dir/f");
        assert!(matches!(
            prepare(&deep, Some(4096), false, false),
            Err(Error::BadParameter(_))
        ));
    }

    #[test]
    fn refuses_to_write_a_non_empty_file_unless_destructive() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("data");
        std::fs::write(&p, vec![7u8; 8192]).unwrap();
        assert!(matches!(
            prepare(&p, None, true, false),
            Err(Error::Destructive { .. })
        ));
        assert!(prepare(&p, None, false, false).is_ok());
        let t = prepare(&p, None, true, true).unwrap();
        assert_eq!(t.size, 8192);
        assert!(!t.created);
        // Extending is allowed and fills the new part only.
        let t = prepare(&p, Some(16384), false, false).unwrap();
        assert!(t.created);
        let data = std::fs::read(&p).unwrap();
        assert_eq!(data.len(), 16384);
        assert!(data[..8192].iter().all(|&b| b == 7));
    }

    #[test]
    fn empty_file_needs_a_size() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty");
        std::fs::write(&p, b"").unwrap();
        assert!(matches!(
            prepare(&p, None, false, false),
            Err(Error::BadParameter(_))
        ));
        // An empty file holds no data: writing to it needs no --destructive.
        assert!(prepare(&p, Some(4096), true, false).is_ok());
    }

    #[test]
    fn a_directory_is_not_a_target() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            prepare(dir.path(), None, false, false),
            Err(Error::BadParameter(_))
        ));
    }

    #[test]
    fn regions_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        let t = prepare(&p, Some(1 << 20), false, false).unwrap();
        assert_eq!(t.span_of(&w("offset=512k")).unwrap(), 512 << 10);
        assert!(t.check(&w("offset=1m")).is_err());
        assert!(t.check(&w("offset=512k span=1m")).is_err());
        assert!(t.check(&w("bs=2m")).is_err());
        assert!(t.check(&w("bs=64k")).is_ok());
    }

    #[test]
    fn o_direct_on_tmpfs_is_refused_clearly() {
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() || fs_name(shm).map(|n| n != "tmpfs").unwrap_or(true) {
            eprintln!("skipped: /dev/shm is not a tmpfs here");
            return;
        }
        let dir = tempfile::tempdir_in(shm).unwrap();
        let p = dir.path().join("t");
        let t = prepare(&p, Some(1 << 20), false, false).unwrap();
        let e = t.check(&w("direct=1")).unwrap_err().to_string();
        assert!(e.contains("O_DIRECT") && e.contains("tmpfs"), "{e}");
        // Refused before a missing file is created and filled.
        let missing = dir.path().join("missing");
        assert!(precheck(&missing, &[w("direct=1")]).is_err());
        assert!(precheck(&missing, &[w("direct=0")]).is_ok());
        assert!(t.check(&w("direct=0")).is_ok());
    }

    #[test]
    fn open_flags_are_applied() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        let t = prepare(&p, Some(1 << 20), true, false).unwrap();
        let f = t
            .open(&w("op=write flags=append,noatime sync=dsync"))
            .unwrap();
        // SAFETY: fcntl(F_GETFL) on an open descriptor.
        let fl = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
        assert_ne!(fl & libc::O_APPEND, 0);
        assert_ne!(fl & libc::O_NOATIME, 0);
        assert_eq!(fl & libc::O_DSYNC, libc::O_DSYNC);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let tl = Target { path: link, ..t };
        let e = tl.open(&w("flags=nofollow")).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }
}
