//! The JSON result file a run writes and `ponder-bench report` reads: what
//! was measured (phases), against what (systems, with versions and the
//! settings that matter such as PostgreSQL's `synchronous_commit`), and
//! where (host). Field names are the file format: add fields with
//! `#[serde(default)]` so older files still load.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::stats::{LatencySummary, SeriesStats};

/// Errors reading or writing result files.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a result file.
    #[error("{path}: not a ponder-bench result file: {source}")]
    Json {
        /// The file.
        path: String,
        /// The cause.
        source: serde_json::Error,
    },
}

/// One invocation's results.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResultFile {
    /// `ponder-bench` version.
    pub tool_version: String,
    /// Start time, seconds since the Unix epoch.
    pub started_unix: u64,
    /// The command line.
    pub command: String,
    /// The machine.
    pub host: HostInfo,
    /// The systems measured.
    pub systems: Vec<SystemInfo>,
    /// Every measured phase, in the order run.
    pub phases: Vec<Phase>,
}

/// The machine the run was on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostInfo {
    /// Online CPUs.
    pub cpus: usize,
    /// `uname -r`-style kernel release, when known.
    pub kernel: String,
    /// Total memory in KiB, when known.
    pub mem_total_kb: u64,
}

/// One system under test.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SystemInfo {
    /// `ponder`, `postgres` or `redis`.
    pub name: String,
    /// The server's version string.
    pub version: String,
    /// Where it listened.
    pub address: String,
    /// Whether ponder-bench started it (`--start`).
    pub started: bool,
    /// Settings that affect the figures (durability, read mode, …).
    pub settings: BTreeMap<String, String>,
}

/// What a phase did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    /// Bulk load of a data set.
    Load,
    /// A closed-loop workload.
    #[default]
    Run,
    /// The analytic query.
    Analytic,
    /// The optimizer's queries, on and off (`workloads::optimizer`).
    Optimizer,
}

/// Correctness checks made while running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckStats {
    /// Reads compared with the value last written (or loaded).
    pub checked: u64,
    /// Reads that could not be checked (a write to the key was in flight or
    /// had an uncertain outcome).
    pub unchecked: u64,
    /// Reads that returned something else: a correctness failure.
    pub mismatches: u64,
}

/// Server resources used during a phase, from `/proc`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerUsage {
    /// User plus system CPU seconds of the server's processes.
    pub cpu_secs: f64,
    /// `cpu_secs / elapsed`: cores kept busy on average.
    pub cpu_cores: f64,
    /// Highest memory of the processes seen (KiB, proportional set size, sampled).
    pub peak_rss_kb: u64,
}

/// The analytic query's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnalyticResult {
    /// Documents scanned per query.
    pub docs: u64,
    /// The value the query returned.
    pub value: u64,
    /// The value computed by the client from the loaded data.
    pub expected: u64,
    /// Wall time of each repetition.
    pub secs: Vec<f64>,
    /// Documents per second of the median repetition.
    pub docs_per_sec: f64,
}

/// One query of the `optimizer` workload, timed in two forms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OptimizerCase {
    /// The case (`filter-eq`, `count-gt`, `order-limit`, ...).
    pub name: String,
    /// What it is compared with (`optimizer off`, `order_by(index=)`).
    pub versus: String,
    /// Documents answered (or counted).
    pub docs: u64,
    /// Wall time of each run as the optimizer answers it.
    pub on_secs: Vec<f64>,
    /// Wall time of each run of the other form.
    pub other_secs: Vec<f64>,
    /// Median other time over median optimizer time.
    pub ratio: f64,
}

/// The `optimizer` workload's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OptimizerResult {
    /// Seconds to create the index and wait for its build (0-ish when it existed).
    pub index_build_secs: f64,
    /// Each query.
    pub cases: Vec<OptimizerCase>,
}

/// One measured phase: one workload on one system at one concurrency.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Phase {
    /// The system's name (see [`SystemInfo::name`]).
    pub system: String,
    /// Workload name (`ycsb-a`, `kv-insert`, …).
    pub workload: String,
    /// Load, run or analytic.
    pub kind: PhaseKind,
    /// Records in the data set.
    pub records: u64,
    /// Client connections.
    pub connections: usize,
    /// Cores the server was pinned to, when pinned.
    #[serde(default)]
    pub cores: Option<usize>,
    /// Key distribution, for workloads that choose keys.
    #[serde(default)]
    pub distribution: Option<String>,
    /// Wall time.
    pub elapsed_secs: f64,
    /// Successful operations (documents, for a load).
    pub ops: u64,
    /// Failed operations.
    pub errors: u64,
    /// `ops / elapsed_secs`.
    pub ops_per_sec: f64,
    /// Successful operations completed in each second of the phase.
    pub per_second: Vec<u64>,
    /// Statistics of `per_second` (the last, partial second left out).
    pub qps: SeriesStats,
    /// Latency per operation type (`read`, `update`, `insert`, `delete`), µs.
    pub latency_us: BTreeMap<String, LatencySummary>,
    /// Correctness checks.
    pub checks: CheckStats,
    /// Server CPU and memory, when the server's pid is known.
    #[serde(default)]
    pub server: Option<ServerUsage>,
    /// The benchmark client's own CPU and memory (it shares the machine).
    #[serde(default)]
    pub client: Option<ServerUsage>,
    /// The analytic query's result, for analytic phases.
    #[serde(default)]
    pub analytic: Option<AnalyticResult>,
    /// The optimizer workload's result, for optimizer phases.
    #[serde(default)]
    pub optimizer: Option<OptimizerResult>,
    /// A few distinct error messages.
    #[serde(default)]
    pub error_samples: Vec<String>,
}

impl ResultFile {
    /// Reads a result file.
    pub fn read(path: &Path) -> Result<Self, ResultsError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ResultsError::Io {
            path: p.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| ResultsError::Json { path: p, source })
    }

    /// Writes the file as pretty JSON.
    pub fn write(&self, path: &Path) -> Result<(), ResultsError> {
        let p = path.display().to_string();
        let json = serde_json::to_string_pretty(self).map_err(|source| ResultsError::Json {
            path: p.clone(),
            source,
        })?;
        std::fs::write(path, json + "\n").map_err(|source| ResultsError::Io { path: p, source })
    }

    /// The system named `name`, if measured.
    pub fn system(&self, name: &str) -> Option<&SystemInfo> {
        self.systems.iter().find(|s| s.name == name)
    }
}

/// Facts about this machine from `/proc` (zeros where unreadable).
pub fn host_info() -> HostInfo {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let mem_total_kb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    HostInfo {
        cpus,
        kernel,
        mem_total_kb,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let mut f = ResultFile {
            tool_version: "0.1.0".into(),
            ..ResultFile::default()
        };
        f.phases.push(Phase {
            system: "ponder".into(),
            workload: "ycsb-c".into(),
            per_second: vec![1, 2],
            ..Phase::default()
        });
        f.write(&path).unwrap();
        let g = ResultFile::read(&path).unwrap();
        assert_eq!(g.phases[0].per_second, vec![1, 2]);
        // Optional fields may be missing.
        let mut v = serde_json::to_value(&f).unwrap();
        v["phases"][0].as_object_mut().unwrap().remove("server");
        std::fs::write(&path, v.to_string()).unwrap();
        assert!(ResultFile::read(&path).is_ok());
        std::fs::write(&path, "{").unwrap();
        assert!(ResultFile::read(&path).is_err());
        assert!(host_info().cpus >= 1);
    }
}
