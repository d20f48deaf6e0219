//! The closed-loop runner: `C` connections, each with `in_flight` workers
//! issuing one operation at a time until the deadline or the operation
//! budget is spent; per-operation-type HdrHistograms, per-second
//! throughput, read checks, and the server's CPU and memory from `/proc`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::check::{Known, Tracker, Verdict};
use super::{DataSpec, OpKind, Workload};
use crate::data::{digest, initial_field, ycsb_key, Rng64, FIELDS, FIELD_LEN};
use crate::procstat::{cpu_secs_of, MemorySampler};
use crate::results::{CheckStats, Phase, PhaseKind, ServerUsage};
use crate::stats::{new_histogram, ops_per_sec, record, LatencySummary, SeriesStats};
use crate::targets::{Conn, Endpoint, TargetError};
use crate::zipf::{Distribution, KeyChooser};

/// Distinct error messages kept per phase.
const MAX_ERROR_SAMPLES: usize = 5;
/// Longest phase the per-second series covers.
const MAX_SECONDS: usize = 24 * 3600;
/// Connections opened at once while setting up a phase.
const CONNECT_PARALLELISM: usize = 16;

/// Errors that stop a phase (failed operations are counted instead).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Connecting or setting up failed.
    #[error("{system}: {source}")]
    Target {
        /// The system.
        system: &'static str,
        /// The cause.
        source: TargetError,
    },
    /// A task panicked or was cancelled.
    #[error("task failed: {0}")]
    Task(String),
}

/// A loaded data set on one system, and what was written to it since.
#[derive(Debug)]
pub struct DataState {
    /// Its shape.
    pub spec: DataSpec,
    /// Records loaded (record numbers `0..records`).
    pub records: u64,
    /// The next record number for an insert of a new key.
    pub next_insert: AtomicU64,
    /// Writes made since the load, for read checks.
    pub tracker: Tracker,
}

impl DataState {
    /// A freshly loaded data set.
    pub fn new(spec: DataSpec, records: u64) -> Self {
        Self {
            spec,
            records,
            next_insert: AtomicU64::new(records),
            tracker: Tracker::new(),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The workload.
    pub workload: Workload,
    /// Client connections.
    pub connections: usize,
    /// Workers per connection (queries in flight on it).
    pub in_flight: usize,
    /// Stop after this long.
    pub duration: Duration,
    /// Stop after this many operations in total, if set.
    pub ops: Option<u64>,
    /// Key choice.
    pub distribution: Distribution,
    /// A slower operation counts as failed.
    pub op_timeout: Duration,
    /// The server pinned to this many cores, if pinned (recorded only).
    pub cores: Option<usize>,
    /// Show a progress bar.
    pub progress: bool,
}

/// Per-second completion counters shared by workers.
pub struct Meter {
    start: Instant,
    slots: Vec<AtomicU64>,
}

impl Meter {
    /// Counters for a phase starting at `start`, lasting about `secs`.
    pub fn new(start: Instant, secs: usize) -> Self {
        let n = secs.clamp(1, MAX_SECONDS) + 2;
        Self {
            start,
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts `n` completions now.
    pub fn add(&self, n: u64) {
        let s = self.start.elapsed().as_secs() as usize;
        if let Some(slot) = self.slots.get(s.min(self.slots.len() - 1)) {
            slot.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Completions so far.
    pub fn total(&self) -> u64 {
        self.slots.iter().map(|s| s.load(Ordering::Relaxed)).sum()
    }

    /// The per-second series up to `elapsed`, and statistics of its whole seconds.
    pub fn series(&self, elapsed: Duration) -> (Vec<u64>, SeriesStats) {
        let whole = elapsed.as_secs() as usize;
        let n = (whole + 1).min(self.slots.len());
        let v: Vec<u64> = self.slots[..n]
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .collect();
        let full: Vec<f64> = v.iter().take(whole.max(1)).map(|&x| x as f64).collect();
        (v, SeriesStats::of(&full))
    }
}

/// A progress bar for a phase (hidden when `show` is false or stderr is not a terminal).
pub fn progress_bar(show: bool, len: u64, prefix: String, unit: &str) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(len);
    let template = format!("{{prefix:>32}} [{{bar:30}}] {{pos}}/{{len}} {unit} {{msg}}");
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(prefix);
    pb
}

/// One worker's tallies.
struct Tally {
    hists: Vec<Histogram<u64>>,
    ops: u64,
    errors: u64,
    checks: CheckStats,
    samples: Vec<String>,
}

impl Tally {
    fn new() -> Self {
        Self {
            hists: OpKind::ALL.iter().map(|_| new_histogram()).collect(),
            ops: 0,
            errors: 0,
            checks: CheckStats::default(),
            samples: Vec::new(),
        }
    }

    fn error(&mut self, msg: String) {
        self.errors += 1;
        let msg: String = msg.chars().take(200).collect();
        if self.samples.len() < MAX_ERROR_SAMPLES && !self.samples.contains(&msg) {
            self.samples.push(msg);
        }
    }

    fn merge(&mut self, o: Tally) {
        for (a, b) in self.hists.iter_mut().zip(&o.hists) {
            // Same bounds: adding cannot fail.
            let _ = a.add(b);
        }
        self.ops += o.ops;
        self.errors += o.errors;
        self.checks.checked += o.checks.checked;
        self.checks.unchecked += o.checks.unchecked;
        self.checks.mismatches += o.checks.mismatches;
        for s in o.samples {
            if self.samples.len() < MAX_ERROR_SAMPLES && !self.samples.contains(&s) {
                self.samples.push(s);
            }
        }
    }
}

/// Compares what a read returned with what the tracker expects.
fn verdict(
    expected: Option<Option<Known>>,
    got: Option<&str>,
    field: usize,
    loaded: impl Fn() -> Option<String>,
) -> Verdict {
    let ok = match expected {
        None => return Verdict::Unchecked,
        Some(None) => got.map(str::to_owned) == loaded(),
        Some(Some(Known::Absent)) => got.is_none(),
        Some(Some(Known::Value(f, d))) if f == field => got.map(digest) == Some(d),
        Some(Some(Known::Value(..))) => return Verdict::Unchecked,
        Some(Some(Known::Unknown)) => return Verdict::Unchecked,
    };
    if ok {
        Verdict::Ok
    } else {
        Verdict::Mismatch
    }
}

/// Per-worker operation state.
struct OpCtx {
    data: Arc<DataState>,
    chooser: KeyChooser,
    rng: Rng64,
}

impl OpCtx {
    /// Runs one operation of `kind`; `Ok(verdict)` for a read, `Ok(Ok)` for a write.
    async fn op(
        &mut self,
        conn: &Conn,
        kind: OpKind,
        timeout: Duration,
    ) -> Result<Verdict, String> {
        let data = self.data.clone();
        let tracker = &data.tracker;
        let timed = |r: Result<Result<(), TargetError>, tokio::time::error::Elapsed>| match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("timed out after {timeout:?}")),
        };
        match (data.spec, kind) {
            (DataSpec::Ycsb, OpKind::Read) => {
                let i = self.chooser.next(&mut self.rng);
                let key = ycsb_key(i);
                let ticket = tracker.begin_read(i);
                let r = tokio::time::timeout(timeout, conn.ycsb_read(&key)).await;
                let doc = match r {
                    Ok(Ok(d)) => d,
                    Ok(Err(e)) => return Err(e.to_string()),
                    Err(_) => return Err(format!("timed out after {timeout:?}")),
                };
                let exp = tracker.expected(i, ticket);
                let field = match exp {
                    Some(Some(Known::Value(f, _))) => f,
                    _ => 0,
                };
                let got = doc.as_ref().and_then(|d| d.get(field)).map(String::as_str);
                let v = verdict(exp, got, field, || Some(initial_field(i, 0)));
                if v == Verdict::Mismatch {
                    return Err(format!(
                        "read of {key} (record {i}) did not return the value last written"
                    ));
                }
                Ok(v)
            }
            (DataSpec::Ycsb, _) => {
                let i = self.chooser.next(&mut self.rng);
                let key = ycsb_key(i);
                let f = self.rng.below(FIELDS as u64) as usize;
                let value = self.rng.ycsb_string(FIELD_LEN);
                tracker.begin_write(i);
                let r =
                    timed(tokio::time::timeout(timeout, conn.ycsb_update(&key, f, &value)).await);
                tracker.end_write(i, r.is_ok().then(|| Known::Value(f, digest(&value))));
                r.map(|()| Verdict::Ok)
            }
            (DataSpec::Kv(shape), OpKind::Read) => {
                let i = self.chooser.next(&mut self.rng);
                let key = shape.key(i);
                let ticket = tracker.begin_read(i);
                let r = tokio::time::timeout(timeout, conn.kv_get(&key)).await;
                let got = match r {
                    Ok(Ok(v)) => v,
                    Ok(Err(e)) => return Err(e.to_string()),
                    Err(_) => return Err(format!("timed out after {timeout:?}")),
                };
                let records = data.records;
                let v = verdict(tracker.expected(i, ticket), got.as_deref(), 0, || {
                    (i < records).then(|| shape.initial_value(i))
                });
                if v == Verdict::Mismatch {
                    return Err(format!(
                        "get of {key} (record {i}) did not return the value last written"
                    ));
                }
                Ok(v)
            }
            (DataSpec::Kv(shape), kind) => {
                let i = match kind {
                    OpKind::Insert => data.next_insert.fetch_add(1, Ordering::Relaxed),
                    _ => self.chooser.next(&mut self.rng),
                };
                let key = shape.key(i);
                tracker.begin_write(i);
                let (r, known) = match kind {
                    OpKind::Delete => (
                        timed(tokio::time::timeout(timeout, conn.kv_delete(&key)).await),
                        Known::Absent,
                    ),
                    _ => {
                        let value = shape.random_value(&mut self.rng);
                        let fut = async {
                            if kind == OpKind::Insert {
                                conn.kv_insert(&key, &value).await
                            } else {
                                conn.kv_put(&key, &value).await
                            }
                        };
                        (
                            timed(tokio::time::timeout(timeout, fut).await),
                            Known::Value(0, digest(&value)),
                        )
                    }
                };
                tracker.end_write(i, r.is_ok().then_some(known));
                r.map(|()| Verdict::Ok)
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn worker(
    conn: Arc<Conn>,
    mut ctx: OpCtx,
    mix: super::Mix,
    start: Instant,
    deadline: Instant,
    budget: Option<Arc<AtomicI64>>,
    meter: Arc<Meter>,
    timeout: Duration,
) -> Tally {
    let mut t = Tally::new();
    tokio::time::sleep_until(start.into()).await;
    while Instant::now() < deadline {
        if let Some(b) = &budget {
            if b.fetch_sub(1, Ordering::Relaxed) <= 0 {
                break;
            }
        }
        let kind = mix.pick(ctx.rng.below(100));
        let t0 = Instant::now();
        match ctx.op(&conn, kind, timeout).await {
            Ok(v) => {
                record(&mut t.hists[kind.index()], t0.elapsed());
                t.ops += 1;
                meter.add(1);
                if kind == OpKind::Read {
                    match v {
                        Verdict::Ok => t.checks.checked += 1,
                        Verdict::Unchecked => t.checks.unchecked += 1,
                        Verdict::Mismatch => t.checks.mismatches += 1,
                    }
                }
            }
            Err(e) => {
                if e.contains("did not return the value last written") {
                    t.checks.mismatches += 1;
                }
                t.error(e);
            }
        }
    }
    t
}

/// Opens `n` connections with the workload's durability, a few at a time.
pub async fn connect_many(
    ep: &Endpoint,
    n: usize,
    w: Workload,
) -> Result<Vec<Arc<Conn>>, RunError> {
    let mut conns = Vec::with_capacity(n);
    let mut pending = tokio::task::JoinSet::new();
    let mut spawned = 0;
    while conns.len() < n {
        while spawned < n && pending.len() < CONNECT_PARALLELISM {
            let ep = ep.clone();
            pending.spawn(async move { Conn::connect(&ep, w.durability()).await });
            spawned += 1;
        }
        match pending.join_next().await {
            Some(Ok(Ok(c))) => conns.push(Arc::new(c)),
            Some(Ok(Err(source))) => {
                return Err(RunError::Target {
                    system: ep.kind.name(),
                    source,
                })
            }
            Some(Err(e)) => return Err(RunError::Task(e.to_string())),
            None => break,
        }
    }
    Ok(conns)
}

/// CPU and memory of a server (its process tree) or of this client (its
/// own process only: servers it started are its children) over a phase.
pub struct UsageProbe {
    pid: u32,
    tree: bool,
    cpu0: f64,
    mem: MemorySampler,
}

impl UsageProbe {
    /// Starts measuring the process tree under `pid`, if known.
    pub fn start(pid: Option<u32>) -> Option<Self> {
        pid.map(|pid| Self::start_of(pid, true))
    }

    /// Starts measuring this process alone.
    pub fn start_client() -> Self {
        Self::start_of(std::process::id(), false)
    }

    fn start_of(pid: u32, tree: bool) -> Self {
        Self {
            pid,
            tree,
            cpu0: cpu_secs_of(pid, tree),
            mem: MemorySampler::start_of(pid, tree),
        }
    }

    /// Stops and summarises over `elapsed`.
    pub fn finish(self, elapsed: Duration) -> ServerUsage {
        let cpu = (cpu_secs_of(self.pid, self.tree) - self.cpu0).max(0.0);
        let s = elapsed.as_secs_f64();
        ServerUsage {
            cpu_secs: cpu,
            cpu_cores: if s > 0.0 { cpu / s } else { 0.0 },
            peak_rss_kb: self.mem.finish(),
        }
    }
}

/// Runs one closed-loop phase of `spec.workload` against the data `data`.
pub async fn run(
    ep: &Endpoint,
    data: &Arc<DataState>,
    spec: &RunSpec,
    server_pid: Option<u32>,
) -> Result<Phase, RunError> {
    let conns = connect_many(ep, spec.connections.max(1), spec.workload).await?;
    let in_flight = spec.in_flight.max(1);
    let start = Instant::now() + Duration::from_millis(50);
    let deadline = start + spec.duration;
    let meter = Arc::new(Meter::new(start, spec.duration.as_secs() as usize + 1));
    let budget = spec
        .ops
        .map(|n| Arc::new(AtomicI64::new(i64::try_from(n).unwrap_or(i64::MAX))));
    let chooser = KeyChooser::new(spec.distribution, data.records);
    let mut tasks = tokio::task::JoinSet::new();
    for conn in &conns {
        for _ in 0..in_flight {
            let ctx = OpCtx {
                data: data.clone(),
                chooser: chooser.clone(),
                rng: Rng64::from_entropy(),
            };
            tasks.spawn(worker(
                conn.clone(),
                ctx,
                spec.workload.mix(),
                start,
                deadline,
                budget.clone(),
                meter.clone(),
                spec.op_timeout,
            ));
        }
    }
    let secs = spec.duration.as_secs().max(1);
    let pb = progress_bar(
        spec.progress,
        secs,
        format!(
            "{} {} c={}",
            ep.kind.name(),
            spec.workload.name(),
            spec.connections
        ),
        "s",
    );
    let ticker = {
        let (pb, meter) = (pb.clone(), meter.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let e = start.elapsed();
                pb.set_position(e.as_secs().min(secs));
                pb.set_message(format!("{:.0} ops/s", ops_per_sec(meter.total(), e)));
            }
        })
    };
    let probe = UsageProbe::start(server_pid);
    let client_probe = UsageProbe::start_client();
    let mut total = Tally::new();
    while let Some(r) = tasks.join_next().await {
        total.merge(r.map_err(|e| RunError::Task(e.to_string()))?);
    }
    let elapsed = start.elapsed();
    ticker.abort();
    pb.finish_and_clear();
    let server = probe.map(|p| p.finish(elapsed));
    let client = Some(client_probe.finish(elapsed));
    drop(conns);
    let (per_second, qps) = meter.series(elapsed);
    let mut latency_us = BTreeMap::new();
    for k in OpKind::ALL {
        let h = &total.hists[k.index()];
        if !h.is_empty() {
            latency_us.insert(k.name().to_owned(), LatencySummary::from_histogram(h));
        }
    }
    Ok(Phase {
        system: ep.kind.name().to_owned(),
        workload: spec.workload.name().to_owned(),
        kind: PhaseKind::Run,
        records: data.records,
        connections: spec.connections,
        cores: spec.cores,
        distribution: Some(format!("{:?}", spec.distribution).to_lowercase()),
        elapsed_secs: elapsed.as_secs_f64(),
        ops: total.ops,
        errors: total.errors,
        ops_per_sec: ops_per_sec(total.ops, elapsed),
        per_second,
        qps,
        latency_us,
        checks: total.checks,
        server,
        client,
        analytic: None,
        optimizer: None,
        error_samples: total.samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_series() {
        let m = Meter::new(Instant::now(), 3);
        m.add(5);
        m.add(5);
        let (v, s) = m.series(Duration::from_millis(500));
        assert_eq!(v, vec![10]);
        assert_eq!(s.n, 1);
        assert_eq!(m.total(), 10);
    }

    #[test]
    fn verdicts() {
        let loaded = || Some("x".to_owned());
        assert_eq!(verdict(Some(None), Some("x"), 0, loaded), Verdict::Ok);
        assert_eq!(verdict(Some(None), Some("y"), 0, loaded), Verdict::Mismatch);
        assert_eq!(verdict(None, Some("y"), 0, loaded), Verdict::Unchecked);
        let d = digest("v");
        assert_eq!(
            verdict(Some(Some(Known::Value(2, d))), Some("v"), 2, loaded),
            Verdict::Ok
        );
        assert_eq!(
            verdict(Some(Some(Known::Value(2, d))), None, 2, loaded),
            Verdict::Mismatch
        );
        assert_eq!(
            verdict(Some(Some(Known::Absent)), None, 0, loaded),
            Verdict::Ok
        );
        assert_eq!(
            verdict(Some(Some(Known::Absent)), Some("x"), 0, loaded),
            Verdict::Mismatch
        );
    }
}
