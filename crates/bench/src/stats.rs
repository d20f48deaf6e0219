//! The maths of a measurement: latency histograms (HdrHistogram, in
//! microseconds) and their summaries, throughput, and the mean / standard
//! deviation / 1-percentiles of a per-second series.
//!
//! Throughput counts successful operations only; failed ones (error
//! responses, wrong results, timeouts, dropped connections) are counted
//! apart and left out of the latency histograms.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

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
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of recorded latencies.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// Smallest.
    pub min: u64,
    /// 1st percentile.
    pub p1: u64,
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
            return Self::default();
        }
        Self {
            count: h.len(),
            mean: h.mean(),
            stddev: h.stdev(),
            min: h.min(),
            p1: h.value_at_quantile(0.01),
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

/// Mean, standard deviation and percentiles of a series of samples (the
/// per-second throughput of a run), as RethinkDB's report tables gave them.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SeriesStats {
    /// Number of samples.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation.
    pub stddev: f64,
    /// Smallest sample.
    pub min: f64,
    /// 1st percentile (nearest rank).
    pub p1: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest sample.
    pub max: f64,
}

impl SeriesStats {
    /// Statistics of `xs` (all zeros when empty).
    pub fn of(xs: &[f64]) -> Self {
        if xs.is_empty() {
            return Self::default();
        }
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        let mut sorted = xs.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = |q: f64| {
            // Nearest rank: the smallest sample with at least q of the samples at or below it.
            let r = (q * n as f64).ceil() as usize;
            sorted[r.clamp(1, n) - 1]
        };
        Self {
            n,
            mean,
            stddev: var.sqrt(),
            min: sorted[0],
            p1: rank(0.01),
            p50: rank(0.50),
            p99: rank(0.99),
            max: sorted[n - 1],
        }
    }
}

/// The median of `xs` (0 when empty): the middle sample, or the mean of the two middle ones.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
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
    fn series_statistics() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = SeriesStats::of(&xs);
        assert_eq!(s.n, 100);
        assert!((s.mean - 50.5).abs() < 1e-9);
        assert!((s.stddev - 28.866_070_047_722_12).abs() < 1e-9);
        assert_eq!(
            (s.min, s.p1, s.p50, s.p99, s.max),
            (1.0, 1.0, 50.0, 99.0, 100.0)
        );
        let c = SeriesStats::of(&[5.0; 7]);
        assert_eq!(c.stddev, 0.0);
        assert_eq!(c.p1, 5.0);
        assert_eq!(SeriesStats::of(&[]).n, 0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn latency_spread() {
        let mut h = new_histogram();
        for v in [100u64, 300] {
            for _ in 0..500 {
                h.record(v).unwrap();
            }
        }
        let s = LatencySummary::from_histogram(&h);
        assert!((s.mean - 200.0).abs() < 1.0);
        assert!((s.stddev - 100.0).abs() < 1.0, "{}", s.stddev);
        assert_eq!(s.p1, 100);
    }
}
