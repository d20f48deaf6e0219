//! Statistics: per-thread recorders, merging, summaries and the per-second
//! time series.
//!
//! Latencies are recorded in nanoseconds into HdrHistograms (3 significant
//! digits for the whole run, 2 for each second of the time series) and reported
//! in microseconds. Rates use the workload's wall-clock time: ops/s is
//! operations divided by seconds, MB/s is bytes divided by 10⁶ per second (as
//! fio's `bw_bytes`; MiB/s is also given in JSON).

use std::time::Duration;

use hdrhistogram::Histogram;

/// Kind of a completed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// A read.
    Read,
    /// A write.
    Write,
}

/// An auto-resizing histogram. (Values are recorded with `record`, which
/// grows it; `saturating_record` would clamp to the initial tiny range.)
/// Recording can only fail when a resize overflows `usize`, so errors are ignored.
fn new_hist(sigfig: u8) -> Histogram<u64> {
    // Auto-resizing histograms with valid sigfig values cannot fail to build.
    match Histogram::new(sigfig) {
        Ok(h) => h,
        Err(e) => unreachable!("histogram with {sigfig} significant digits: {e}"),
    }
}

/// One second of the time series (of one thread, or merged).
#[derive(Debug, Clone)]
pub struct Second {
    /// Operations completed in this second.
    pub ops: u64,
    /// Bytes transferred in this second.
    pub bytes: u64,
    /// Latencies of the operations completed in this second, in ns.
    pub hist: Histogram<u64>,
}

impl Second {
    fn new() -> Self {
        Second {
            ops: 0,
            bytes: 0,
            hist: new_hist(2),
        }
    }
}

/// Everything one thread (or, once merged, one workload) measured.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Read latencies, ns.
    pub reads: Histogram<u64>,
    /// Write latencies, ns.
    pub writes: Histogram<u64>,
    /// Flush (fsync/fdatasync/msync) latencies, ns.
    pub flushes: Histogram<u64>,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Per-second buckets, indexed by whole seconds since the common start.
    pub series: Vec<Second>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Recorder {
            reads: new_hist(3),
            writes: new_hist(3),
            flushes: new_hist(3),
            bytes_read: 0,
            bytes_written: 0,
            series: Vec::new(),
        }
    }

    /// Records one operation of `bytes` bytes that took `latency` and
    /// completed `since_start` after the common start.
    pub fn record(&mut self, kind: OpKind, bytes: u64, latency: Duration, since_start: Duration) {
        let ns = latency.as_nanos().min(u64::MAX as u128) as u64;
        match kind {
            OpKind::Read => {
                let _ = self.reads.record(ns);
                self.bytes_read += bytes;
            }
            OpKind::Write => {
                let _ = self.writes.record(ns);
                self.bytes_written += bytes;
            }
        }
        let sec = since_start.as_secs() as usize;
        if self.series.len() <= sec {
            self.series.resize_with(sec + 1, Second::new);
        }
        let s = &mut self.series[sec];
        s.ops += 1;
        s.bytes += bytes;
        let _ = s.hist.record(ns);
    }

    /// Records one flush that took `latency`.
    pub fn record_flush(&mut self, latency: Duration) {
        let _ = self
            .flushes
            .record(latency.as_nanos().min(u64::MAX as u128) as u64);
    }

    /// Adds everything `other` recorded into `self`.
    pub fn merge(&mut self, other: &Recorder) {
        // Adding auto-resizing histograms of equal precision cannot fail.
        let _ = self.reads.add(&other.reads);
        let _ = self.writes.add(&other.writes);
        let _ = self.flushes.add(&other.flushes);
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        if self.series.len() < other.series.len() {
            self.series.resize_with(other.series.len(), Second::new);
        }
        for (mine, theirs) in self.series.iter_mut().zip(&other.series) {
            mine.ops += theirs.ops;
            mine.bytes += theirs.bytes;
            let _ = mine.hist.add(&theirs.hist);
        }
    }

    /// All operations' latencies (reads and writes together).
    pub fn all_ops(&self) -> Histogram<u64> {
        let mut h = self.reads.clone();
        let _ = h.add(&self.writes);
        h
    }

    /// Operations completed (reads + writes).
    pub fn ops(&self) -> u64 {
        self.reads.len() + self.writes.len()
    }
}

/// Latency percentiles, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 95th percentile.
    pub p95_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest.
    pub max_us: f64,
}

impl Latency {
    /// The percentiles of a histogram of nanoseconds (all zeros when empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            mean_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.50)),
            p95_us: us(h.value_at_quantile(0.95)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

/// Rates and latencies of one kind of operation over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Operations completed.
    pub ops: u64,
    /// Bytes transferred.
    pub bytes: u64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Megabytes (10⁶ bytes) per second.
    pub mb_per_sec: f64,
    /// Mebibytes (2²⁰ bytes) per second.
    pub mib_per_sec: f64,
    /// Latency percentiles.
    pub latency: Latency,
}

impl Summary {
    /// Summarises `ops` operations of `bytes` bytes with latencies `h` over `elapsed`.
    pub fn new(h: &Histogram<u64>, bytes: u64, elapsed: Duration) -> Self {
        let ops = h.len();
        Summary {
            ops,
            bytes,
            ops_per_sec: rate(ops as f64, elapsed),
            mb_per_sec: rate(bytes as f64, elapsed) / 1e6,
            mib_per_sec: rate(bytes as f64, elapsed) / (1u64 << 20) as f64,
            latency: Latency::of(h),
        }
    }
}

/// One point of the per-second time series.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Point {
    /// Seconds since the start (the end of this one-second interval).
    pub t: f64,
    /// Operations per second during the interval.
    pub ops_per_sec: f64,
    /// MB (10⁶ bytes) per second during the interval.
    pub mb_per_sec: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th-percentile latency, µs.
    pub p99_us: f64,
    /// Largest latency, µs.
    pub max_us: f64,
}

/// Turns per-second buckets into rate points. The last bucket is usually
/// partial: it is scaled by its real length (`elapsed` minus whole seconds),
/// and dropped if shorter than 50 ms, where a rate would be noise, unless it
/// is the only one (a run shorter than 50 ms).
pub fn series_points(series: &[Second], elapsed: Duration) -> Vec<Point> {
    let total = elapsed.as_secs_f64();
    series
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let start = i as f64;
            let len = (total - start).min(1.0);
            if len <= 0.0 || (len < 0.05 && i > 0) {
                return None;
            }
            let lat = Latency::of(&s.hist);
            Some(Point {
                t: start + len,
                ops_per_sec: s.ops as f64 / len,
                mb_per_sec: s.bytes as f64 / len / 1e6,
                p50_us: lat.p50_us,
                p99_us: lat.p99_us,
                max_us: lat.max_us,
            })
        })
        .collect()
}

/// `count` per second of `elapsed` (0 for an empty interval).
pub fn rate(count: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        count / secs
    } else {
        0.0
    }
}

/// Arithmetic mean (0 for an empty slice).
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Sample standard deviation (n − 1 in the denominator; 0 below two values).
pub fn std_dev(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn mean_and_sd() {
        assert_eq!(mean(&[]), 0.0);
        assert_eq!(mean(&[1.0, 2.0, 3.0, 4.0]), 2.5);
        assert_eq!(std_dev(&[5.0]), 0.0);
        // Known value: sample sd of 2,4,4,4,5,5,7,9 is sqrt(32/7).
        let sd = std_dev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert!((sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn rates() {
        assert_eq!(rate(1000.0, Duration::from_secs(2)), 500.0);
        assert_eq!(rate(5.0, Duration::ZERO), 0.0);
    }

    #[test]
    fn percentiles_of_uniform_latencies() {
        // Latencies 1..=10000 µs, one each: pXX is XX% of 10000 µs.
        let mut r = Recorder::new();
        for us in 1..=10_000u64 {
            r.record(OpKind::Read, 4096, Duration::from_micros(us), ms(0));
        }
        let l = Latency::of(&r.reads);
        let close = |got: f64, want: f64| (got - want).abs() / want < 0.002;
        assert!(close(l.p50_us, 5000.0), "{l:?}");
        assert!(close(l.p95_us, 9500.0), "{l:?}");
        assert!(close(l.p99_us, 9900.0), "{l:?}");
        assert!(close(l.p999_us, 9990.0), "{l:?}");
        assert!(close(l.max_us, 10_000.0), "{l:?}");
        assert!(close(l.mean_us, 5000.5), "{l:?}");
    }

    #[test]
    fn summary_rates_and_split_by_kind() {
        let mut r = Recorder::new();
        for i in 0..300u64 {
            let kind = if i % 3 == 0 {
                OpKind::Write
            } else {
                OpKind::Read
            };
            r.record(kind, 1_000_000, Duration::from_micros(100), ms(i * 10));
        }
        assert_eq!(r.ops(), 300);
        assert_eq!(r.writes.len(), 100);
        assert_eq!(r.bytes_written, 100_000_000);
        let s = Summary::new(
            &r.all_ops(),
            r.bytes_read + r.bytes_written,
            Duration::from_secs(3),
        );
        assert_eq!(s.ops_per_sec, 100.0);
        assert_eq!(s.mb_per_sec, 100.0);
        assert!((s.mib_per_sec - 100e6 / 1048576.0).abs() < 1e-9);
        assert!((s.latency.p50_us - 100.0).abs() < 0.1);
        assert_eq!(
            Summary::new(&Recorder::new().reads, 0, Duration::from_secs(1)).latency,
            Latency::default()
        );
    }

    #[test]
    fn merge_adds_counts_and_series() {
        let mut a = Recorder::new();
        let mut b = Recorder::new();
        a.record(OpKind::Read, 10, Duration::from_micros(5), ms(100));
        b.record(OpKind::Read, 10, Duration::from_micros(50), ms(1500));
        b.record(OpKind::Write, 20, Duration::from_micros(500), ms(2500));
        b.record_flush(Duration::from_millis(1));
        a.merge(&b);
        assert_eq!(a.ops(), 3);
        assert_eq!((a.bytes_read, a.bytes_written), (20, 20));
        assert_eq!(a.flushes.len(), 1);
        assert_eq!(a.series.len(), 3);
        assert_eq!(
            a.series.iter().map(|s| s.ops).collect::<Vec<_>>(),
            [1, 1, 1]
        );
        assert_eq!(a.all_ops().max(), b.writes.max());
    }

    #[test]
    fn series_scales_the_partial_last_second() {
        let mut r = Recorder::new();
        for i in 0..250u64 {
            // 100 ops in second 0, 100 in second 1, 50 in the half second 2.
            r.record(OpKind::Read, 1000, Duration::from_micros(10), ms(i * 10));
        }
        let pts = series_points(&r.series, ms(2500));
        assert_eq!(pts.len(), 3);
        assert_eq!(pts[0].ops_per_sec, 100.0);
        assert_eq!(pts[0].t, 1.0);
        assert_eq!(pts[2].t, 2.5);
        assert!((pts[2].ops_per_sec - 100.0).abs() < 1e-9);
        assert!((pts[2].mb_per_sec - 0.1).abs() < 1e-12);
        // A sliver of a last second is dropped, but not a run's only point.
        assert_eq!(series_points(&r.series, ms(2020)).len(), 2);
        let pts = series_points(&r.series[..1], ms(20));
        assert_eq!(pts.len(), 1);
        assert!((pts[0].ops_per_sec - 5000.0).abs() < 1e-9);
        assert!(series_points(&r.series[..1], Duration::ZERO).is_empty());
    }
}
