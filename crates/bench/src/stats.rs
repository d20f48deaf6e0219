//! Results and their presentation: latency summaries from HdrHistograms, the
//! text table printed after a run, and the JSON written by `--json`.
//!
//! Latencies are recorded in microseconds. Throughput counts successful
//! operations only; failed ones (error responses, wrong results, timeouts,
//! dropped connections) are counted in `errors` and left out of the latency
//! histogram.

use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Lowest and highest trackable latency (µs) and significant digits.
pub const HIST_LOW_US: u64 = 1;
/// 10 minutes: far above any per-operation timeout.
pub const HIST_HIGH_US: u64 = 600_000_000;
/// Value precision of the histograms.
pub const HIST_SIGFIG: u8 = 3;

/// A fresh latency histogram (µs).
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants known to be valid.
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(HIST_LOW_US, HIST_HIGH_US, HIST_SIGFIG)
        .expect("valid histogram bounds")
}

/// Records one latency, clamped into the histogram's range.
pub fn record(h: &mut Histogram<u64>, latency: Duration) {
    let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
    h.saturating_record(us.clamp(HIST_LOW_US, HIST_HIGH_US));
}

/// Percentiles of one histogram, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Number of recorded latencies.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Smallest.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 95th percentile.
    pub p95: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
}

impl LatencySummary {
    /// Summarises `h` (all zeros when it is empty).
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self {
                count: 0,
                mean: 0.0,
                min: 0,
                p50: 0,
                p95: 0,
                p99: 0,
                p999: 0,
                max: 0,
            };
        }
        Self {
            count: h.len(),
            mean: h.mean(),
            min: h.min(),
            p50: h.value_at_quantile(0.50),
            p95: h.value_at_quantile(0.95),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// Operations per second over `elapsed` (0 for an empty interval).
pub fn ops_per_sec(ops: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 {
        ops as f64 / s
    } else {
        0.0
    }
}

/// The measurement of one workload at one concurrency.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// Client connections.
    pub connections: usize,
    /// Queries kept in flight per connection.
    pub in_flight_per_connection: usize,
    /// Successful operations.
    pub ops: u64,
    /// Failed operations.
    pub errors: u64,
    /// Wall time from the common start until the last worker stopped.
    pub elapsed_secs: f64,
    /// `ops / elapsed_secs`.
    pub ops_per_sec: f64,
    /// Latency of successful operations (µs).
    pub latency_us: LatencySummary,
    /// A few distinct error messages, for diagnosis.
    pub error_samples: Vec<String>,
}

/// The bulk load that preceded the runs.
#[derive(Debug, Clone, Serialize)]
pub struct LoadResult {
    /// Documents inserted.
    pub docs: u64,
    /// Documents per insert query.
    pub batch: usize,
    /// Wall time.
    pub secs: f64,
    /// `docs / secs`.
    pub docs_per_sec: f64,
}

/// Everything one `ponder-bench load` invocation measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Server address.
    pub server: String,
    /// Workload name (`get`, `insert-hard`, `insert-soft`).
    pub workload: String,
    /// Documents in the table (as loaded or assumed).
    pub docs: u64,
    /// Requested payload bytes per document.
    pub doc_bytes: usize,
    /// Requested duration of each run.
    pub duration_secs: u64,
    /// The load phase, unless skipped.
    pub load: Option<LoadResult>,
    /// One result per connection count, in the order given.
    pub runs: Vec<RunResult>,
}

impl Report {
    /// The results as the text table printed to stdout.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "workload {}  server {}  docs {}  doc-bytes {}  duration {}s",
            self.workload, self.server, self.docs, self.doc_bytes, self.duration_secs
        );
        if let Some(l) = &self.load {
            let _ = writeln!(
                s,
                "load: {} docs in {:.2} s ({:.0} docs/s, batches of {})",
                l.docs, l.secs, l.docs_per_sec, l.batch
            );
        }
        let _ = writeln!(
            s,
            "{:>6} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "conns", "ops", "ops/s", "p50 us", "p95 us", "p99 us", "p99.9 us", "max us", "errors"
        );
        for r in &self.runs {
            let l = &r.latency_us;
            let _ = writeln!(
                s,
                "{:>6} {:>10} {:>11.1} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
                r.connections, r.ops, r.ops_per_sec, l.p50, l.p95, l.p99, l.p999, l.max, r.errors
            );
        }
        for r in &self.runs {
            for e in &r.error_samples {
                let _ = writeln!(s, "  error sample (c={}): {e}", r.connections);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within HdrHistogram's precision (3 significant digits → 0.1 %).
    fn close(actual: u64, expected: u64) -> bool {
        let tol = (expected as f64 * 0.001).max(1.0);
        (actual as f64 - expected as f64).abs() <= tol
    }

    #[test]
    fn summary_of_uniform_values() {
        let mut h = new_histogram();
        for v in 1..=10_000u64 {
            h.record(v).unwrap();
        }
        let s = LatencySummary::from_histogram(&h);
        assert_eq!(s.count, 10_000);
        assert_eq!(s.min, 1);
        assert!(close(s.p50, 5_000), "{}", s.p50);
        assert!(close(s.p95, 9_500), "{}", s.p95);
        assert!(close(s.p99, 9_900), "{}", s.p99);
        assert!(close(s.p999, 9_990), "{}", s.p999);
        assert!(close(s.max, 10_000), "{}", s.max);
        assert!((s.mean - 5_000.5).abs() < 5.0, "{}", s.mean);
    }

    #[test]
    fn summary_of_skewed_values_and_merge() {
        // 990 fast ops and 10 slow ones, recorded by two workers.
        let mut a = new_histogram();
        let mut b = new_histogram();
        for _ in 0..990 {
            record(&mut a, Duration::from_micros(100));
        }
        for _ in 0..10 {
            record(&mut b, Duration::from_millis(50));
        }
        a.add(&b).unwrap();
        let s = LatencySummary::from_histogram(&a);
        assert_eq!(s.count, 1000);
        assert!(close(s.p50, 100));
        assert!(close(s.p99, 100), "990/1000 ops are fast: {}", s.p99);
        assert!(close(s.p999, 50_000), "{}", s.p999);
        assert!(close(s.max, 50_000));
        assert!((s.mean - (990.0 * 100.0 + 10.0 * 50_000.0) / 1000.0).abs() < 60.0);
    }

    #[test]
    fn empty_and_clamped() {
        let s = LatencySummary::from_histogram(&new_histogram());
        assert_eq!(s.count, 0);
        assert_eq!(s.max, 0);
        let mut h = new_histogram();
        record(&mut h, Duration::ZERO);
        record(&mut h, Duration::from_secs(100_000));
        assert_eq!(h.len(), 2);
        assert_eq!(h.min(), 1);
        assert!(h.max() >= HIST_HIGH_US);
    }

    #[test]
    fn throughput() {
        assert_eq!(ops_per_sec(1000, Duration::from_secs(2)), 500.0);
        assert!((ops_per_sec(1, Duration::from_millis(250)) - 4.0).abs() < 1e-9);
        assert_eq!(ops_per_sec(5, Duration::ZERO), 0.0);
    }

    #[test]
    fn table_lists_every_run() {
        let run = |c| RunResult {
            connections: c,
            in_flight_per_connection: 1,
            ops: 10,
            errors: 1,
            elapsed_secs: 1.0,
            ops_per_sec: 10.0,
            latency_us: LatencySummary::from_histogram(&new_histogram()),
            error_samples: vec!["boom".into()],
        };
        let r = Report {
            server: "h:1".into(),
            workload: "get".into(),
            docs: 5,
            doc_bytes: 1000,
            duration_secs: 1,
            load: None,
            runs: vec![run(1), run(64)],
        };
        let t = r.to_table();
        assert!(t.contains("ops/s"));
        assert_eq!(t.lines().filter(|l| l.contains("error sample")).count(), 2);
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["runs"][1]["connections"], 64);
        assert_eq!(j["runs"][0]["latency_us"]["p999"], 0);
    }
}
