//! Reports: the summary table for people, `--json` for machines.

use std::fmt::Write as _;

use crate::runner::WorkloadResult;
use crate::stats::{series_points, Latency, Point, Summary};
use crate::target::Target;
use crate::units::format_size;
use crate::workload::{OpMix, Workload};

/// Flush statistics of a workload.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FlushReport {
    /// Flushes done.
    pub count: u64,
    /// Their latencies.
    pub latency: Latency,
}

/// The results of one workload.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkloadReport {
    /// Its label.
    pub name: String,
    /// Its full description.
    pub spec: Workload,
    /// Seconds from the common start to its last operation.
    pub elapsed_s: f64,
    /// Reads and writes together.
    pub total: Summary,
    /// Reads alone (absent for a write-only workload).
    pub read: Option<Summary>,
    /// Writes alone (absent for a read-only workload).
    pub write: Option<Summary>,
    /// Flushes, when the workload flushes.
    pub flush: Option<FlushReport>,
    /// One point per second.
    pub series: Vec<Point>,
}

/// The results of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// The target.
    pub target: Target,
    /// One entry per workload, in the order given.
    pub workloads: Vec<WorkloadReport>,
}

impl Report {
    /// Builds the report of a run.
    pub fn new(target: &Target, results: &[WorkloadResult]) -> Self {
        let workloads = results
            .iter()
            .map(|r| {
                let el = r.elapsed;
                let rec = &r.rec;
                WorkloadReport {
                    name: r.workload.name.clone(),
                    spec: r.workload.clone(),
                    elapsed_s: el.as_secs_f64(),
                    total: Summary::new(&rec.all_ops(), rec.bytes_read + rec.bytes_written, el),
                    read: (r.workload.op != OpMix::Write)
                        .then(|| Summary::new(&rec.reads, rec.bytes_read, el)),
                    write: r
                        .workload
                        .op
                        .writes()
                        .then(|| Summary::new(&rec.writes, rec.bytes_written, el)),
                    flush: (!rec.flushes.is_empty()).then(|| FlushReport {
                        count: rec.flushes.len(),
                        latency: Latency::of(&rec.flushes),
                    }),
                    series: series_points(&rec.series, el),
                }
            })
            .collect();
        Report {
            target: target.clone(),
            workloads,
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The report as text; with `series`, the per-second table of each workload too.
    pub fn to_text(&self, series: bool) -> String {
        let mut s = String::new();
        let t = &self.target;
        let _ = writeln!(
            s,
            "target {} ({}, {}, {})",
            t.path.display(),
            match t.kind {
                crate::target::TargetKind::File => "file",
                crate::target::TargetKind::BlockDevice => "block device",
            },
            t.fs,
            format_size(t.size)
        );
        let _ = writeln!(
            s,
            "{:<14} {:>6} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "workload",
            "",
            "ops/s",
            "MB/s",
            "p50 µs",
            "p95 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "secs"
        );
        let row = |s: &mut String, name: &str, what: &str, x: &Summary, secs: f64| {
            let l = &x.latency;
            let _ = writeln!(
                s,
                "{:<14} {:>6} {:>11.1} {:>9.2} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.2}",
                name,
                what,
                x.ops_per_sec,
                x.mb_per_sec,
                l.p50_us,
                l.p95_us,
                l.p99_us,
                l.p999_us,
                l.max_us,
                secs
            );
        };
        for w in &self.workloads {
            row(&mut s, &w.name, "all", &w.total, w.elapsed_s);
            if let (Some(r), Some(wr)) = (&w.read, &w.write) {
                row(&mut s, "", "read", r, w.elapsed_s);
                row(&mut s, "", "write", wr, w.elapsed_s);
            }
            if let Some(f) = &w.flush {
                let l = &f.latency;
                let _ = writeln!(
                    s,
                    "{:<14} {:>6} {:>11} {:>9} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                    "", "flush", f.count, "", l.p50_us, l.p95_us, l.p99_us, l.p999_us, l.max_us
                );
            }
        }
        if series {
            for w in &self.workloads {
                let _ = writeln!(s, "\n{}: per second", w.name);
                let _ = writeln!(
                    s,
                    "{:>7} {:>11} {:>9} {:>9} {:>9} {:>9}",
                    "t s", "ops/s", "MB/s", "p50 µs", "p99 µs", "max µs"
                );
                for p in &w.series {
                    let _ = writeln!(
                        s,
                        "{:>7.2} {:>11.1} {:>9.2} {:>9.1} {:>9.1} {:>9.1}",
                        p.t, p.ops_per_sec, p.mb_per_sec, p.p50_us, p.p99_us, p.max_us
                    );
                }
            }
        }
        s
    }
}
