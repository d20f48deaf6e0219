//! A whole benchmark session: start (or reach) the systems, then for each
//! data set load it on every system, and for each workload, cores setting
//! and connection count run every system one after the other with the same
//! client and the same data, so that drift on a shared machine hits all of
//! them alike. Servers started here are stopped when the session ends,
//! however it ends.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::data::KvShape;
use crate::procstat::pin_tree;
use crate::results::{host_info, PhaseKind, ResultFile, SystemInfo};
use crate::servers::{start, Server, StartOptions};
use crate::targets::{Conn, Durability, Endpoint, SystemKind};
use crate::workloads::load::{analytic, load};
use crate::workloads::optimizer::optimizer;
use crate::workloads::runner::{run, DataState, RunError, RunSpec};
use crate::workloads::{DataSpec, Workload};
use crate::zipf::Distribution;

/// Errors that end a session.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A server could not be started.
    #[error("starting {0}: {1}")]
    Start(&'static str, crate::servers::StartError),
    /// A phase could not run.
    #[error(transparent)]
    Run(#[from] RunError),
    /// Bad options.
    #[error("{0}")]
    Options(String),
    /// Pinning to cores failed.
    #[error("{0}")]
    Pin(String),
}

/// Everything a session needs to know.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Systems, Ponder first.
    pub systems: Vec<SystemKind>,
    /// Start the servers (else connect to running ones).
    pub start: bool,
    /// Host of running servers.
    pub host: String,
    /// Port per system.
    pub ports: BTreeMap<SystemKind, u16>,
    /// Ponder's user and password.
    pub ponder_user: String,
    /// Ponder's password.
    pub ponder_password: String,
    /// Ponder's read mode for the runs.
    pub read_mode: String,
    /// Pids of running servers (for CPU and memory) when not started here.
    pub pids: BTreeMap<SystemKind, u32>,
    /// Settings of started servers.
    pub start_options: StartOptions,
    /// Workloads in the order to run.
    pub workloads: Vec<Workload>,
    /// YCSB records.
    pub records: u64,
    /// Small key-value records (also YugabyteDB's).
    pub kv_records: u64,
    /// Large-value records.
    pub large_records: u64,
    /// Connection counts (a sweep when several).
    pub connections: Vec<usize>,
    /// Workers per connection.
    pub in_flight: usize,
    /// Length of each run phase.
    pub duration: Duration,
    /// Operation budget of each run phase, if any.
    pub ops: Option<u64>,
    /// Key distributions to measure.
    pub distributions: Vec<Distribution>,
    /// Cores to pin started servers to (a sweep when several; empty: no pinning).
    pub cores: Vec<usize>,
    /// Repetitions of the analytic query.
    pub analytic_reps: usize,
    /// Per-operation timeout.
    pub op_timeout: Duration,
    /// Progress bars.
    pub progress: bool,
    /// The command line, recorded.
    pub command: String,
}

impl SessionOptions {
    fn records_for(&self, spec: DataSpec) -> u64 {
        match spec {
            DataSpec::Ycsb => self.records,
            DataSpec::Kv(s) if s == KvShape::LARGE => self.large_records,
            DataSpec::Kv(_) => self.kv_records,
        }
    }

    fn endpoint(&self, kind: SystemKind) -> Endpoint {
        let (user, password) = match kind {
            SystemKind::Ponder => (self.ponder_user.clone(), self.ponder_password.clone()),
            SystemKind::Postgres => ("bench".to_owned(), String::new()),
            SystemKind::Redis => (String::new(), String::new()),
        };
        Endpoint {
            kind,
            host: if self.start {
                "127.0.0.1".into()
            } else {
                self.host.clone()
            },
            port: self
                .ports
                .get(&kind)
                .copied()
                .unwrap_or(kind.default_port()),
            user,
            password,
            read_mode: self.read_mode.clone(),
        }
    }
}

/// Workloads grouped by the data set they share, keeping their order.
fn groups(workloads: &[Workload]) -> Vec<(DataSpec, Vec<Workload>)> {
    let mut out: Vec<(DataSpec, Vec<Workload>)> = Vec::new();
    for &w in workloads {
        match out.iter_mut().find(|(d, _)| *d == w.data()) {
            Some((_, ws)) => ws.push(w),
            None => out.push((w.data(), vec![w])),
        }
    }
    out
}

fn supports(kind: SystemKind, w: Workload) -> bool {
    match kind {
        SystemKind::Ponder => true,
        SystemKind::Postgres => w.supported_by_postgres(),
        SystemKind::Redis => w.supported_by_redis(),
    }
}

/// Runs a session and returns its results; every started server is stopped.
pub async fn run_session(opts: &SessionOptions) -> Result<ResultFile, SessionError> {
    if opts.systems.is_empty() || opts.connections.is_empty() || opts.distributions.is_empty() {
        return Err(SessionError::Options(
            "need at least one system, connection count and distribution".into(),
        ));
    }
    if !opts.cores.is_empty() && !opts.start {
        return Err(SessionError::Options(
            "--cores needs --start (servers are pinned by pid)".into(),
        ));
    }
    let mut servers: Vec<Server> = Vec::new();
    if opts.start {
        for &kind in &opts.systems {
            let ep = opts.endpoint(kind);
            eprintln!("starting {} on 127.0.0.1:{} ...", kind.name(), ep.port);
            let s = start(kind, ep.port, &opts.start_options)
                .map_err(|e| SessionError::Start(kind.name(), e))?;
            servers.push(s);
        }
    }
    let result = session_body(opts, &servers).await;
    for mut s in servers {
        s.stop();
    }
    result
}

async fn session_body(
    opts: &SessionOptions,
    servers: &[Server],
) -> Result<ResultFile, SessionError> {
    let pid = |kind: SystemKind| {
        servers
            .iter()
            .find(|s| s.kind == kind)
            .and_then(Server::pid)
            .or_else(|| opts.pids.get(&kind).copied())
    };
    let mut file = ResultFile {
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        command: opts.command.clone(),
        host: host_info(),
        ..ResultFile::default()
    };
    for &kind in &opts.systems {
        let ep = opts.endpoint(kind);
        let conn = Conn::connect(&ep, Durability::Hard)
            .await
            .map_err(|source| RunError::Target {
                system: kind.name(),
                source,
            })?;
        let (mut version, settings) = conn.describe().await.map_err(|source| RunError::Target {
            system: kind.name(),
            source,
        })?;
        if let Some(s) = servers.iter().find(|s| s.kind == kind) {
            if version.is_empty() || kind == SystemKind::Ponder {
                version = s.version.clone();
            }
        }
        file.systems.push(SystemInfo {
            name: kind.name().to_owned(),
            version,
            address: ep.addr(),
            started: opts.start,
            settings,
        });
    }

    let cores: Vec<Option<usize>> = if opts.cores.is_empty() {
        vec![None]
    } else {
        opts.cores.iter().map(|&c| Some(c)).collect()
    };
    for (spec, workloads) in groups(&opts.workloads) {
        let records = opts.records_for(spec);
        let mut data: BTreeMap<SystemKind, Arc<DataState>> = BTreeMap::new();
        for &kind in &opts.systems {
            if !workloads.iter().any(|&w| supports(kind, w)) {
                continue;
            }
            let ep = opts.endpoint(kind);
            let (state, phase) = load(&ep, spec, records, pid(kind), opts.progress).await?;
            eprintln!(
                "{:>8} load {}: {} records in {:.2} s ({:.0}/s)",
                kind.name(),
                spec.name(),
                phase.ops,
                phase.elapsed_secs,
                phase.ops_per_sec
            );
            data.insert(kind, state);
            file.phases.push(phase);
        }
        for &w in &workloads {
            if w == Workload::Analytic {
                for &kind in &opts.systems {
                    let Some(d) = data.get(&kind).filter(|_| supports(kind, w)) else {
                        continue;
                    };
                    let p = analytic(&opts.endpoint(kind), d, opts.analytic_reps, true, pid(kind))
                        .await?;
                    if let Some(a) = &p.analytic {
                        eprintln!(
                            "{:>8} analytic: {} docs/s (median of {}), result {} (expected {})",
                            kind.name(),
                            a.docs_per_sec.round(),
                            a.secs.len(),
                            a.value,
                            a.expected
                        );
                    }
                    file.phases.push(p);
                }
                continue;
            }
            if w == Workload::Optimizer {
                for &kind in &opts.systems {
                    let Some(d) = data.get(&kind).filter(|_| supports(kind, w)) else {
                        continue;
                    };
                    let ep = opts.endpoint(kind);
                    let p = optimizer(&ep, d, opts.analytic_reps, pid(kind)).await?;
                    for c in p.optimizer.iter().flat_map(|o| &o.cases) {
                        eprintln!(
                            "{:>8} optimizer {}: {:.3} ms vs {:.3} ms ({}), {:.1}x, {} docs",
                            kind.name(),
                            c.name,
                            crate::stats::median(&c.on_secs) * 1e3,
                            crate::stats::median(&c.other_secs) * 1e3,
                            c.versus,
                            c.ratio,
                            c.docs
                        );
                    }
                    file.phases.push(p);
                }
                continue;
            }
            // Pure inserts choose no existing key: one distribution is enough.
            let dists: &[Distribution] = if w.mix().insert == 100 {
                &opts.distributions[..1]
            } else {
                &opts.distributions
            };
            for &c in &cores {
                if let Some(n) = c {
                    for s in servers {
                        if let Some(p) = s.pid() {
                            pin_tree(p, n).map_err(SessionError::Pin)?;
                        }
                    }
                }
                for &dist in dists {
                    for &conns in &opts.connections {
                        for &kind in &opts.systems {
                            let Some(d) = data.get(&kind).filter(|_| supports(kind, w)) else {
                                continue;
                            };
                            let spec = RunSpec {
                                workload: w,
                                connections: conns,
                                in_flight: opts.in_flight,
                                duration: opts.duration,
                                ops: opts.ops,
                                distribution: dist,
                                op_timeout: opts.op_timeout,
                                cores: c,
                                progress: opts.progress,
                            };
                            let p = run(&opts.endpoint(kind), d, &spec, pid(kind)).await?;
                            let p99 = p.latency_us.values().map(|l| l.p99).max().unwrap_or(0);
                            eprintln!(
                                "{:>8} {} {:?} c={} cores={}: {:.0} ops/s, p99 {} us, {} errors, {} checked, {} mismatches",
                                kind.name(),
                                w.name(),
                                dist,
                                conns,
                                c.map_or("all".to_owned(), |n| n.to_string()),
                                p.ops_per_sec,
                                p99,
                                p.errors,
                                p.checks.checked,
                                p.checks.mismatches
                            );
                            file.phases.push(p);
                        }
                    }
                }
            }
        }
    }
    if !opts.cores.is_empty() {
        let all = host_info().cpus.max(1);
        for s in servers {
            if let Some(p) = s.pid() {
                let _ = pin_tree(p, all);
            }
        }
    }
    Ok(file)
}

/// Whether a session's results show failures: errors, read mismatches, a
/// wrong analytic result, or a run phase that completed nothing.
pub fn failures(file: &ResultFile) -> Vec<String> {
    let mut out = Vec::new();
    for p in &file.phases {
        let name = format!("{} {} c={}", p.system, p.workload, p.connections);
        if p.errors > 0 {
            out.push(format!(
                "{name}: {} errors ({})",
                p.errors,
                p.error_samples.join("; ")
            ));
        }
        if p.checks.mismatches > 0 {
            out.push(format!(
                "{name}: {} reads did not return the value last written",
                p.checks.mismatches
            ));
        }
        if let Some(a) = &p.analytic {
            if a.value != a.expected {
                out.push(format!(
                    "{name}: analytic result {} != {}",
                    a.value, a.expected
                ));
            }
        }
        if p.kind == PhaseKind::Run && p.ops == 0 {
            out.push(format!("{name}: no operation completed"));
        }
    }
    out
}

/// Where `ponder` is when not told: `target/release/ponder` beside this binary's workspace.
pub fn default_ponder_bin() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("ponder")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("target/release/ponder"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_share_loads() {
        let g = groups(&Workload::ALL);
        assert_eq!(g.len(), 5, "ycsb, small kv, 1 KB kv, large kv, yugabyte");
        assert_eq!(
            g[0].1,
            vec![
                Workload::Analytic,
                Workload::Optimizer,
                Workload::YcsbC,
                Workload::YcsbA
            ]
        );
        assert_eq!(g[1].1.len(), 4);
        assert_eq!(g[2].1, vec![Workload::Insert1k, Workload::Insert1kStrong]);
        assert!(!supports(SystemKind::Redis, Workload::Analytic));
        assert!(supports(SystemKind::Postgres, Workload::Analytic));
    }

    #[test]
    fn failures_are_found() {
        let mut f = ResultFile::default();
        f.phases.push(crate::results::Phase {
            ops: 5,
            ..Default::default()
        });
        assert!(failures(&f).is_empty());
        f.phases[0].errors = 1;
        f.phases.push(crate::results::Phase::default());
        assert_eq!(failures(&f).len(), 2);
    }
}
