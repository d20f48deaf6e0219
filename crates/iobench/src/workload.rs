//! Workload descriptions and the workload-line parser.
//!
//! A workload is one line of whitespace-separated `key=value` settings, given
//! either as an argument after the target or, when none is given there, one per
//! line on standard input (as Rebench read them). Blank lines and lines starting
//! with `#` are ignored. Every key has a default, so an empty line is not a
//! workload but `op=read` alone is.
//!
//! | key | values | default |
//! | --- | --- | --- |
//! | `name` | a label | `w0`, `w1`, … |
//! | `pattern` | `random`, `seq` (`sequential`) | `random` |
//! | `dist` | `uniform`, `normal[:MEAN,SD]` (fractions of the span), `zipf[:S]` | `uniform` |
//! | `direction` | `forward`, `backward` (sequential only) | `forward` |
//! | `stride` | size; distance between sequential offsets | `bs` |
//! | `bs` | size of one operation | `4k` |
//! | `align` | alignment of random offsets | `bs` |
//! | `op` | `read`, `write`, `mix[:READ_PERCENT]` | `read` |
//! | `read_pct` | percentage of reads in a mix | `50` |
//! | `duration` | e.g. `10s` (exclusive with `ops`) | `10s` |
//! | `ops` | total operations over all threads | — |
//! | `qd` | operations in flight per thread (io_uring only above 1) | `1` |
//! | `threads` | threads running this workload | `1` |
//! | `fd` | `own` (one descriptor per thread) or `shared` | `own` |
//! | `engine` | `pread` (pread/pwrite), `lseek` (lseek + read/write), `uring`, `mmap` | `pread` |
//! | `direct` | boolean: O_DIRECT, bypassing the page cache | `no` |
//! | `sync` | `none`, `fsync[:N]`, `fdatasync[:N]` (every N writes), `dsync` (O_DSYNC), `osync` (O_SYNC) | `none` |
//! | `flags` | comma list of open flags: `append`, `noatime`, `direct`, `dsync`, `sync`, `nofollow` | — |
//! | `fadvise` | `auto` (sequential or random, after the pattern, as fio does), `none`, `normal`, `sequential`, `random` | `auto` |
//! | `offset` | start of the region used | `0` |
//! | `span` | length of the region used | to the end of the target |
//! | `seed` | random seed | derived from the workload index |

use std::time::Duration;

use crate::error::Error;
use crate::units::{parse_duration, parse_size};

/// Where successive offsets come from.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Pattern {
    /// Random offsets drawn from a distribution over the region's blocks.
    Random {
        /// The distribution of block indexes.
        dist: Dist,
    },
    /// Sequential offsets, `stride` bytes apart.
    Sequential {
        /// `true` to walk from the end towards the start.
        backward: bool,
        /// Distance between two successive offsets, in bytes.
        stride: u64,
    },
}

/// The distribution of random block indexes.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(tag = "name", rename_all = "lowercase")]
pub enum Dist {
    /// Every block equally likely.
    Uniform,
    /// Normal around `mean` with standard deviation `sd`, both fractions of the region.
    Normal {
        /// Centre, as a fraction of the region (0..1).
        mean: f64,
        /// Standard deviation, as a fraction of the region.
        sd: f64,
    },
    /// Power law: the k-th most popular block has weight k^-s.
    Zipf {
        /// The exponent (> 0).
        s: f64,
    },
}

/// Reads, writes, or a mix of both.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum OpMix {
    /// Reads only.
    Read,
    /// Writes only.
    Write,
    /// Reads with probability `read_pct`/100, writes otherwise.
    Mix {
        /// Percentage of reads, 0..=100.
        read_pct: f64,
    },
}

impl OpMix {
    /// Whether the workload ever writes.
    pub fn writes(&self) -> bool {
        !matches!(self, OpMix::Read)
    }
}

/// When a workload stops.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stop {
    /// After this long.
    Duration(#[serde(serialize_with = "ser_secs")] Duration),
    /// After this many operations in total over all threads.
    Ops(u64),
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// The family of system calls used for I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// `pread(2)` / `pwrite(2)`.
    Pread,
    /// `lseek(2)` followed by `read(2)` / `write(2)`.
    Lseek,
    /// io_uring, with `qd` operations in flight.
    Uring,
    /// Loads and stores through a shared memory mapping.
    Mmap,
}

/// How writes are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SyncMode {
    /// Never flushed by the benchmark.
    None,
    /// `fsync(2)` after every `every` writes (per thread).
    Fsync {
        /// Writes between two flushes.
        every: u64,
    },
    /// `fdatasync(2)` after every `every` writes (per thread).
    Fdatasync {
        /// Writes between two flushes.
        every: u64,
    },
    /// Open with O_DSYNC: every write is durable before it returns.
    Dsync,
    /// Open with O_SYNC.
    Osync,
}

/// Extra open(2) flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OpenFlags {
    /// O_APPEND: writes go to the end of the file whatever the offset.
    pub append: bool,
    /// O_NOATIME: reads do not update the access time.
    pub noatime: bool,
    /// O_DIRECT: bypass the page cache (aligned buffers and offsets).
    pub direct: bool,
    /// O_DSYNC.
    pub dsync: bool,
    /// O_SYNC.
    pub sync: bool,
    /// O_NOFOLLOW: refuse a symbolic link as the target.
    pub nofollow: bool,
}

/// The `posix_fadvise` hint given on each descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Advice {
    /// `Sequential` for sequential patterns, `Random` for random ones (fio's default).
    Auto,
    /// No hint at all.
    None,
    /// POSIX_FADV_NORMAL.
    Normal,
    /// POSIX_FADV_SEQUENTIAL (larger readahead).
    Sequential,
    /// POSIX_FADV_RANDOM (no readahead).
    Random,
}

impl Advice {
    /// The `posix_fadvise` advice to give for `pattern`, if any.
    pub fn for_pattern(self, pattern: &Pattern) -> Option<libc::c_int> {
        match (self, pattern) {
            (Advice::None, _) => None,
            (Advice::Normal, _) => Some(libc::POSIX_FADV_NORMAL),
            (Advice::Sequential, _) | (Advice::Auto, Pattern::Sequential { .. }) => {
                Some(libc::POSIX_FADV_SEQUENTIAL)
            }
            (Advice::Random, _) | (Advice::Auto, Pattern::Random { .. }) => {
                Some(libc::POSIX_FADV_RANDOM)
            }
        }
    }
}

/// Whether threads of a workload share one file descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FdMode {
    /// Each thread opens the target itself.
    Own,
    /// One descriptor (and one mapping, for mmap) for all threads.
    Shared,
}

/// One fully specified workload.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Workload {
    /// Label used in reports.
    pub name: String,
    /// Where offsets come from.
    pub pattern: Pattern,
    /// Bytes per operation.
    pub bs: u64,
    /// Alignment of random offsets.
    pub align: u64,
    /// Reads, writes or a mix.
    pub op: OpMix,
    /// When to stop.
    pub stop: Stop,
    /// Operations in flight per thread.
    pub qd: u32,
    /// Number of threads.
    pub threads: u32,
    /// Descriptor sharing.
    pub fd: FdMode,
    /// System-call family.
    pub engine: EngineKind,
    /// Flush strategy.
    pub sync: SyncMode,
    /// Open flags (O_DIRECT, O_DSYNC and O_SYNC included, whichever key set them).
    pub flags: OpenFlags,
    /// Access-pattern hint for the kernel.
    pub fadvise: Advice,
    /// Start of the region, in bytes.
    pub offset: u64,
    /// Length of the region, or `None` for "up to the end of the target".
    pub span: Option<u64>,
    /// Random seed.
    pub seed: u64,
}

impl Workload {
    /// The defaults, named `name`, seeded from `index`.
    pub fn defaults(name: String, index: usize) -> Self {
        Workload {
            name,
            pattern: Pattern::Random {
                dist: Dist::Uniform,
            },
            bs: 4096,
            align: 4096,
            op: OpMix::Read,
            stop: Stop::Duration(Duration::from_secs(10)),
            qd: 1,
            threads: 1,
            fd: FdMode::Own,
            engine: EngineKind::Pread,
            sync: SyncMode::None,
            flags: OpenFlags::default(),
            fadvise: Advice::Auto,
            offset: 0,
            span: None,
            seed: 0x5EED_0000 + index as u64,
        }
    }
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "yes" | "true" | "on" => Ok(true),
        "0" | "no" | "false" | "off" => Ok(false),
        _ => Err(format!(
            "{v:?} is not a boolean (yes/no, 1/0, true/false, on/off)"
        )),
    }
}

fn parse_f64(v: &str, what: &str) -> Result<f64, String> {
    let x: f64 = v
        .trim()
        .parse()
        .map_err(|_| format!("{what} {v:?} is not a number"))?;
    if !x.is_finite() {
        return Err(format!("{what} {v:?} is not finite"));
    }
    Ok(x)
}

fn parse_u64(v: &str, what: &str) -> Result<u64, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{what} {v:?} is not a non-negative integer"))
}

/// Parses `KIND[:ARGS]` where ARGS are positional or `name=value`, comma-separated.
fn split_args(v: &str) -> (&str, Vec<(Option<&str>, &str)>) {
    match v.split_once(':') {
        None => (v, Vec::new()),
        Some((kind, rest)) => {
            let args = rest
                .split(',')
                .filter(|a| !a.is_empty())
                .map(|a| match a.split_once('=') {
                    Some((k, val)) => (Some(k), val),
                    None => (None, a),
                })
                .collect();
            (kind, args)
        }
    }
}

fn parse_dist(v: &str) -> Result<Dist, String> {
    let (kind, args) = split_args(v);
    match kind.to_ascii_lowercase().as_str() {
        "uniform" => {
            if !args.is_empty() {
                return Err("uniform takes no parameters".into());
            }
            Ok(Dist::Uniform)
        }
        "normal" | "gauss" | "gaussian" => {
            let (mut mean, mut sd) = (0.5, 0.1);
            for (i, (name, val)) in args.iter().enumerate() {
                match (name.map(|n| n.to_ascii_lowercase()), i) {
                    (Some(n), _) if n == "mean" => mean = parse_f64(val, "mean")?,
                    (Some(n), _) if n == "sd" || n == "stddev" => sd = parse_f64(val, "sd")?,
                    (None, 0) => mean = parse_f64(val, "mean")?,
                    (None, 1) => sd = parse_f64(val, "sd")?,
                    _ => return Err(format!("normal takes mean and sd, not {val:?}")),
                }
            }
            if !(0.0..=1.0).contains(&mean) {
                return Err(format!(
                    "normal mean {mean} must be within 0..1 (a fraction of the region)"
                ));
            }
            if sd <= 0.0 {
                return Err(format!("normal sd {sd} must be positive"));
            }
            Ok(Dist::Normal { mean, sd })
        }
        "zipf" | "powerlaw" => {
            let mut s = 1.1;
            for (i, (name, val)) in args.iter().enumerate() {
                match (name.map(|n| n.to_ascii_lowercase()), i) {
                    (Some(n), _) if n == "s" || n == "theta" || n == "exponent" => {
                        s = parse_f64(val, "zipf exponent")?
                    }
                    (None, 0) => s = parse_f64(val, "zipf exponent")?,
                    _ => return Err(format!("zipf takes one exponent, not {val:?}")),
                }
            }
            if s <= 0.0 || s > 100.0 {
                return Err(format!("zipf exponent {s} must be within (0, 100]"));
            }
            Ok(Dist::Zipf { s })
        }
        other => Err(format!(
            "unknown distribution {other:?} (uniform, normal, zipf)"
        )),
    }
}

fn parse_sync(v: &str) -> Result<SyncMode, String> {
    let (kind, args) = split_args(v);
    let every = match args.as_slice() {
        [] => 1,
        [(_, n)] => parse_u64(n, "flush interval")?,
        _ => return Err(format!("sync {v:?} takes one interval")),
    };
    let kind = kind.to_ascii_lowercase();
    if every == 0 {
        return Err("flush interval must be at least 1 write".into());
    }
    if !args.is_empty() && !matches!(kind.as_str(), "fsync" | "fdatasync") {
        return Err(format!("sync={kind} takes no interval"));
    }
    match kind.as_str() {
        "none" | "no" => Ok(SyncMode::None),
        "fsync" => Ok(SyncMode::Fsync { every }),
        "fdatasync" | "datasync" => Ok(SyncMode::Fdatasync { every }),
        "dsync" | "o_dsync" => Ok(SyncMode::Dsync),
        "osync" | "o_sync" => Ok(SyncMode::Osync),
        other => Err(format!(
            "unknown sync {other:?} (none, fsync[:N], fdatasync[:N], dsync, osync)"
        )),
    }
}

fn parse_flags(v: &str, flags: &mut OpenFlags) -> Result<(), String> {
    for f in v.split(',').filter(|f| !f.is_empty()) {
        let name = f.to_ascii_lowercase();
        let name = name.strip_prefix("o_").unwrap_or(&name);
        match name {
            "append" => flags.append = true,
            "noatime" => flags.noatime = true,
            "direct" => flags.direct = true,
            "dsync" => flags.dsync = true,
            "sync" => flags.sync = true,
            "nofollow" => flags.nofollow = true,
            other => {
                return Err(format!(
                    "unknown open flag {other:?} (append, noatime, direct, dsync, sync, nofollow)"
                ))
            }
        }
    }
    Ok(())
}

/// Parses one workload line. `index` numbers the workload (default name and seed).
pub fn parse_line(line: &str, index: usize) -> Result<Workload, Error> {
    parse_inner(line, index).map_err(|message| Error::Parse {
        line: line.to_string(),
        message,
    })
}

fn parse_inner(line: &str, index: usize) -> Result<Workload, String> {
    let mut w = Workload::defaults(format!("w{index}"), index);
    let mut seq = false;
    let mut backward = None;
    let mut stride = None;
    let mut dist = None;
    let mut align = None;
    let mut read_pct = None;
    let mut duration = None;
    let mut ops = None;
    let mut op_kind = None;
    let mut seen: Vec<String> = Vec::new();

    for token in line.split_whitespace() {
        let (key, value) = token
            .split_once('=')
            .ok_or_else(|| format!("{token:?} is not key=value"))?;
        let key = key.to_ascii_lowercase().replace('-', "_");
        if value.is_empty() {
            return Err(format!("{key} has no value"));
        }
        if seen.contains(&key) {
            return Err(format!("{key} is given twice"));
        }
        seen.push(key.clone());
        match key.as_str() {
            "name" => w.name = value.to_string(),
            "pattern" | "access" => {
                seq = match value.to_ascii_lowercase().as_str() {
                    "random" | "rand" | "rnd" => false,
                    "seq" | "sequential" => true,
                    other => return Err(format!("unknown pattern {other:?} (random, seq)")),
                }
            }
            "dist" | "distribution" => dist = Some(parse_dist(value)?),
            "direction" | "dir" => {
                backward = Some(match value.to_ascii_lowercase().as_str() {
                    "forward" | "fwd" => false,
                    "backward" | "back" | "bwd" => true,
                    other => {
                        return Err(format!("unknown direction {other:?} (forward, backward)"))
                    }
                })
            }
            "stride" => stride = Some(parse_size(value)?),
            "bs" | "block_size" | "blocksize" => w.bs = parse_size(value)?,
            "align" => align = Some(parse_size(value)?),
            "op" | "rw" => {
                let (kind, args) = split_args(value);
                op_kind = Some(match kind.to_ascii_lowercase().as_str() {
                    "read" | "r" => {
                        if !args.is_empty() {
                            return Err("op=read takes no parameter".into());
                        }
                        "read"
                    }
                    "write" | "w" => {
                        if !args.is_empty() {
                            return Err("op=write takes no parameter".into());
                        }
                        "write"
                    }
                    "mix" | "rw" | "readwrite" => {
                        match args.as_slice() {
                            [] => {}
                            [(_, pct)] => read_pct = Some(parse_f64(pct, "read percentage")?),
                            _ => return Err("op=mix takes one read percentage".into()),
                        }
                        "mix"
                    }
                    other => {
                        return Err(format!(
                            "unknown op {other:?} (read, write, mix[:READ_PCT])"
                        ))
                    }
                })
            }
            "read_pct" | "rwmix" | "rwmixread" => {
                if read_pct.is_some() {
                    return Err("read percentage is given twice".into());
                }
                read_pct = Some(parse_f64(value, "read percentage")?)
            }
            "duration" | "time" | "runtime" => duration = Some(parse_duration(value)?),
            "ops" | "count" => ops = Some(parse_u64(value, "ops")?),
            "qd" | "iodepth" | "queue_depth" => {
                w.qd = u32::try_from(parse_u64(value, "qd")?)
                    .map_err(|_| "qd is too large".to_string())?
            }
            "threads" | "numjobs" => {
                w.threads = u32::try_from(parse_u64(value, "threads")?)
                    .map_err(|_| "threads is too large".to_string())?
            }
            "fd" => {
                w.fd = match value.to_ascii_lowercase().as_str() {
                    "own" | "private" | "per_thread" => FdMode::Own,
                    "shared" | "share" => FdMode::Shared,
                    other => return Err(format!("unknown fd mode {other:?} (own, shared)")),
                }
            }
            "engine" | "ioengine" => {
                w.engine = match value.to_ascii_lowercase().as_str() {
                    "pread" | "pwrite" | "psync" => EngineKind::Pread,
                    "lseek" | "read" | "sync" => EngineKind::Lseek,
                    "uring" | "io_uring" | "iouring" => EngineKind::Uring,
                    "mmap" => EngineKind::Mmap,
                    other => {
                        return Err(format!(
                            "unknown engine {other:?} (pread, lseek, uring, mmap)"
                        ))
                    }
                }
            }
            "direct" => w.flags.direct |= parse_bool(value)?,
            "sync" | "flush" => w.sync = parse_sync(value)?,
            "flags" => parse_flags(value, &mut w.flags)?,
            "fadvise" | "fadvise_hint" => {
                w.fadvise = match value.to_ascii_lowercase().as_str() {
                    "auto" | "1" | "yes" => Advice::Auto,
                    "none" | "0" | "no" => Advice::None,
                    "normal" => Advice::Normal,
                    "sequential" | "seq" => Advice::Sequential,
                    "random" | "rand" => Advice::Random,
                    other => {
                        return Err(format!(
                            "unknown fadvise {other:?} (auto, none, normal, sequential, random)"
                        ))
                    }
                }
            }
            "offset" => w.offset = parse_size(value)?,
            "span" | "size" | "length" => w.span = Some(parse_size(value)?),
            "seed" => w.seed = parse_u64(value, "seed")?,
            other => return Err(format!("unknown key {other:?}")),
        }
    }

    // Cross-field checks and derived values.
    if w.bs == 0 {
        return Err("bs must be at least 1 byte".into());
    }
    if w.qd == 0 {
        return Err("qd must be at least 1".into());
    }
    if w.threads == 0 {
        return Err("threads must be at least 1".into());
    }
    if w.threads > 4096 {
        return Err("threads must be at most 4096".into());
    }
    if w.qd > 4096 {
        return Err("qd must be at most 4096".into());
    }
    w.stop = match (duration, ops) {
        (Some(_), Some(_)) => return Err("give either duration or ops, not both".into()),
        (None, Some(0)) => return Err("ops must be at least 1".into()),
        (None, Some(n)) => Stop::Ops(n),
        (Some(d), None) => Stop::Duration(d),
        (None, None) => w.stop,
    };
    w.op = match op_kind.unwrap_or(if read_pct.is_some() { "mix" } else { "read" }) {
        "read" => OpMix::Read,
        "write" => OpMix::Write,
        _ => {
            let read_pct = read_pct.unwrap_or(50.0);
            if !(0.0..=100.0).contains(&read_pct) {
                return Err(format!("read percentage {read_pct} must be within 0..100"));
            }
            OpMix::Mix { read_pct }
        }
    };
    if read_pct.is_some() && !matches!(w.op, OpMix::Mix { .. }) {
        return Err("read_pct only applies to op=mix".into());
    }
    if seq {
        if dist.is_some() {
            return Err("dist only applies to pattern=random".into());
        }
        if align.is_some() {
            return Err("align only applies to pattern=random (use stride)".into());
        }
        let stride = stride.unwrap_or(w.bs);
        if stride == 0 {
            return Err("stride must be at least 1 byte".into());
        }
        w.pattern = Pattern::Sequential {
            backward: backward.unwrap_or(false),
            stride,
        };
    } else {
        if backward.is_some() || stride.is_some() {
            return Err("direction and stride only apply to pattern=seq".into());
        }
        w.align = align.unwrap_or(w.bs);
        if w.align == 0 {
            return Err("align must be at least 1 byte".into());
        }
        w.pattern = Pattern::Random {
            dist: dist.unwrap_or(Dist::Uniform),
        };
    }
    match w.sync {
        SyncMode::Dsync => w.flags.dsync = true,
        SyncMode::Osync => w.flags.sync = true,
        _ => {}
    }
    if w.sync != SyncMode::None && !w.op.writes() {
        return Err("sync only applies to workloads that write".into());
    }
    if w.flags.append && !w.op.writes() {
        return Err("flags=append only applies to workloads that write".into());
    }
    if w.qd > 1 && w.engine != EngineKind::Uring {
        return Err(
            "qd above 1 needs engine=uring (synchronous calls have one operation in flight; use threads=N)"
                .into(),
        );
    }
    if w.engine == EngineKind::Mmap {
        if w.flags.direct {
            return Err(
                "engine=mmap cannot use O_DIRECT (a mapping always goes through the page cache)"
                    .into(),
            );
        }
        if w.flags.append {
            return Err("engine=mmap cannot append (stores land at their offset)".into());
        }
        if w.flags.dsync || w.flags.sync {
            return Err("engine=mmap ignores O_DSYNC/O_SYNC; use sync=fsync:N (msync)".into());
        }
    }
    if w.flags.direct && !w.bs.is_multiple_of(512) {
        return Err(format!(
            "direct I/O needs bs to be a multiple of 512, not {}",
            w.bs
        ));
    }
    if let Pattern::Sequential { stride, .. } = w.pattern {
        if w.flags.direct && !stride.is_multiple_of(512) {
            return Err(format!(
                "direct I/O needs stride to be a multiple of 512, not {stride}"
            ));
        }
    } else if w.flags.direct && !w.align.is_multiple_of(512) {
        return Err(format!(
            "direct I/O needs align to be a multiple of 512, not {}",
            w.align
        ));
    }
    if w.flags.direct && !w.offset.is_multiple_of(512) {
        return Err(format!(
            "direct I/O needs offset to be a multiple of 512, not {}",
            w.offset
        ));
    }
    Ok(w)
}

/// Parses every non-blank, non-comment line of `text` as a workload.
pub fn parse_lines(text: &str) -> Result<Vec<Workload>, Error> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .enumerate()
        .map(|(i, l)| parse_line(l, i))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(line: &str) -> Workload {
        match parse_line(line, 0) {
            Ok(w) => w,
            Err(e) => panic!("{line:?} should parse: {e}"),
        }
    }

    fn err(line: &str) -> String {
        match parse_line(line, 0) {
            Ok(w) => panic!("{line:?} should fail, got {w:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn defaults() {
        let w = ok("");
        assert_eq!(w, Workload::defaults("w0".into(), 0));
        assert_eq!(
            w.pattern,
            Pattern::Random {
                dist: Dist::Uniform
            }
        );
        assert_eq!(w.op, OpMix::Read);
        assert_eq!(w.stop, Stop::Duration(Duration::from_secs(10)));
    }

    #[test]
    fn full_random_line() {
        let w = ok("name=hot pattern=random dist=zipf:1.2 bs=8k align=4k op=mix:70 ops=1000 qd=16 \
                    threads=4 fd=shared engine=uring direct=yes sync=fdatasync:8 flags=noatime,o_append \
                    offset=1m span=512m seed=7 fadvise=none");
        assert_eq!(w.fadvise, Advice::None);
        assert_eq!(w.name, "hot");
        assert_eq!(
            w.pattern,
            Pattern::Random {
                dist: Dist::Zipf { s: 1.2 }
            }
        );
        assert_eq!((w.bs, w.align), (8192, 4096));
        assert_eq!(w.op, OpMix::Mix { read_pct: 70.0 });
        assert_eq!(w.stop, Stop::Ops(1000));
        assert_eq!((w.qd, w.threads), (16, 4));
        assert_eq!(w.fd, FdMode::Shared);
        assert_eq!(w.engine, EngineKind::Uring);
        assert_eq!(w.sync, SyncMode::Fdatasync { every: 8 });
        assert!(w.flags.direct && w.flags.noatime && w.flags.append);
        assert!(!w.flags.dsync);
        assert_eq!((w.offset, w.span, w.seed), (1 << 20, Some(512 << 20), 7));
    }

    #[test]
    fn sequential_backward_with_stride() {
        let w = ok("pattern=seq direction=backward stride=64k bs=4k op=write duration=2s");
        assert_eq!(
            w.pattern,
            Pattern::Sequential {
                backward: true,
                stride: 65536
            }
        );
        assert_eq!(w.op, OpMix::Write);
        assert_eq!(w.stop, Stop::Duration(Duration::from_secs(2)));
        // Stride defaults to the block size.
        let w = ok("pattern=seq bs=1m");
        assert_eq!(
            w.pattern,
            Pattern::Sequential {
                backward: false,
                stride: 1 << 20
            }
        );
    }

    #[test]
    fn distributions_and_params() {
        assert_eq!(
            ok("dist=normal").pattern,
            Pattern::Random {
                dist: Dist::Normal { mean: 0.5, sd: 0.1 }
            }
        );
        assert_eq!(
            ok("dist=normal:0.25,0.05").pattern,
            Pattern::Random {
                dist: Dist::Normal {
                    mean: 0.25,
                    sd: 0.05
                }
            }
        );
        assert_eq!(
            ok("dist=normal:sd=0.2,mean=0.3").pattern,
            Pattern::Random {
                dist: Dist::Normal { mean: 0.3, sd: 0.2 }
            }
        );
        assert_eq!(
            ok("dist=zipf:s=0.8").pattern,
            Pattern::Random {
                dist: Dist::Zipf { s: 0.8 }
            }
        );
        assert!(err("dist=zipf:0").contains("exponent"));
        assert!(err("dist=normal:1.5").contains("mean"));
        assert!(err("dist=normal:0.5,-1").contains("sd"));
        assert!(err("dist=pareto").contains("unknown distribution"));
    }

    #[test]
    fn sync_modes_set_flags() {
        assert_eq!(ok("op=write sync=fsync").sync, SyncMode::Fsync { every: 1 });
        let w = ok("op=write sync=dsync");
        assert_eq!(w.sync, SyncMode::Dsync);
        assert!(w.flags.dsync);
        assert!(ok("op=write sync=osync").flags.sync);
        assert!(err("op=write sync=fsync:0").contains("at least 1"));
        assert!(err("op=write sync=dsync:4").contains("no interval"));
        assert!(err("sync=fsync").contains("only applies to workloads that write"));
    }

    #[test]
    fn read_pct_forms() {
        assert_eq!(ok("read_pct=30").op, OpMix::Mix { read_pct: 30.0 });
        assert_eq!(ok("op=mix").op, OpMix::Mix { read_pct: 50.0 });
        assert_eq!(ok("op=mix read_pct=90").op, OpMix::Mix { read_pct: 90.0 });
        assert!(err("op=mix:70 read_pct=30").contains("twice"));
        assert!(err("op=read read_pct=30").contains("only applies"));
        assert!(err("op=mix:120").contains("0..100"));
    }

    #[test]
    fn rejects_bad_input() {
        assert!(err("bs").contains("key=value"));
        assert!(err("bs=").contains("no value"));
        assert!(err("bs=4x").contains("suffix"));
        assert!(err("bs=0").contains("bs"));
        assert!(err("colour=blue").contains("unknown key"));
        assert!(err("bs=4k bs=8k").contains("twice"));
        assert!(err("duration=1s ops=5").contains("either"));
        assert!(err("qd=4").contains("engine=uring"));
        assert!(err("threads=0").contains("threads"));
        assert!(err("pattern=seq dist=zipf").contains("pattern=random"));
        assert!(err("stride=8k").contains("pattern=seq"));
        assert!(err("engine=mmap direct=1").contains("O_DIRECT"));
        assert!(err("engine=mmap op=write flags=append").contains("append"));
        assert!(err("direct=1 bs=1000").contains("512"));
        assert!(err("flags=bogus").contains("unknown open flag"));
        assert!(err("flags=append").contains("write"));
        assert!(err("engine=spdk").contains("unknown engine"));
        assert!(err("qd=-1").contains("qd"));
    }

    #[test]
    fn lines_skip_comments_and_blanks() {
        let ws = parse_lines("# two workloads\n\nop=read\n  op=write bs=8k  \n").unwrap();
        assert_eq!(ws.len(), 2);
        assert_eq!(ws[0].name, "w0");
        assert_eq!(ws[1].name, "w1");
        assert_eq!(ws[1].bs, 8192);
        assert_ne!(ws[0].seed, ws[1].seed);
        let e = parse_lines("op=read\nop=nope\n").unwrap_err().to_string();
        assert!(e.contains("op=nope"), "{e}");
    }
}
