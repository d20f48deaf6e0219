//! `ponder-bench`: RethinkDB's performance reports, reproduced with Ponder
//! and its peers side by side.
//!
//! ```text
//! ponder-bench run --start --systems ponder,postgres --workloads ycsb-c,ycsb-a \
//!     --records 100000 --connections 64 --duration 15 --out results.json
//! ponder-bench report results.json --out-dir bench-report
//! ponder-bench smoke --port 28015
//! ```
//!
//! `run` measures; `report` writes Markdown and PNG plots from result files;
//! `smoke` runs every workload against one Ponder briefly with tiny data and
//! exits non-zero on any error or wrong result (for CI).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use bench::results::ResultFile;
use bench::servers::StartOptions;
use bench::session::{default_ponder_bin, failures, run_session, SessionOptions};
use bench::targets::SystemKind;
use bench::workloads::Workload;
use bench::zipf::Distribution;
use clap::{Args, Parser, Subcommand};

/// Longest accepted phase, in seconds.
const MAX_DURATION_SECS: u64 = 3600;
/// Most accepted connections in one phase.
const MAX_CONNECTIONS: usize = 4096;

#[derive(Parser, Debug)]
#[command(
    name = "ponder-bench",
    version,
    about = "RethinkDB's performance reports, Ponder and its peers side by side"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load the data sets and measure workloads on one or more systems.
    Run(Box<RunArgs>),
    /// Write a Markdown report with PNG plots from result files.
    Report(ReportArgs),
    /// Every workload against one Ponder, briefly, with tiny data; non-zero exit on errors.
    Smoke(Box<SmokeArgs>),
}

#[derive(Args, Debug, Clone)]
struct Common {
    /// Host of running servers (ignored with --start: loopback).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Ponder's driver port (default 28115 with --start, else 28015).
    #[arg(long)]
    ponder_port: Option<u16>,
    /// Ponder user.
    #[arg(long, default_value = "admin")]
    user: String,
    /// Ponder password.
    #[arg(long, default_value = "")]
    password: String,
    /// Ponder's read_mode for reads (single, outdated).
    #[arg(long, default_value = "single")]
    read_mode: String,
    /// Start each server on loopback with a throw-away directory.
    #[arg(long)]
    start: bool,
    /// The ponder binary for --start.
    #[arg(long)]
    ponder_bin: Option<PathBuf>,
    /// Seconds after which one operation counts as failed.
    #[arg(long, default_value_t = 30)]
    op_timeout: u64,
    /// Hide progress bars.
    #[arg(long)]
    no_progress: bool,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// Systems to measure, Ponder first.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "ponder,postgres,redis"
    )]
    systems: Vec<SystemKind>,
    /// Workloads, comma-separated, or `all`.
    #[arg(long, value_delimiter = ',', default_value = "analytic,ycsb-c,ycsb-a")]
    workloads: Vec<String>,
    /// PostgreSQL port.
    #[arg(long, default_value_t = SystemKind::Postgres.default_port())]
    postgres_port: u16,
    /// Redis port.
    #[arg(long, default_value_t = SystemKind::Redis.default_port())]
    redis_port: u16,
    /// Pids of running servers, for CPU and memory (e.g. ponder=1234,postgres=99).
    #[arg(long, value_delimiter = ',')]
    pid: Vec<String>,
    /// YCSB records.
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Key-value records (small values and YugabyteDB's workload).
    #[arg(long, default_value_t = 100_000)]
    kv_records: u64,
    /// Records of the 4–64 KB large-value workload.
    #[arg(long, default_value_t = 2_000)]
    large_records: u64,
    /// Connection counts (several make a sweep).
    #[arg(long, value_delimiter = ',', default_value = "64")]
    connections: Vec<usize>,
    /// Queries in flight per connection.
    #[arg(long, default_value_t = 1)]
    in_flight: usize,
    /// Seconds per run phase.
    #[arg(long, default_value_t = 15)]
    duration: u64,
    /// Stop each run phase after this many operations (still bounded by --duration).
    #[arg(long)]
    ops: Option<u64>,
    /// Key distributions (zipfian, uniform).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "zipfian")]
    distribution: Vec<Distribution>,
    /// Pin started servers to 1..N cores in turn with taskset (e.g. 1,2).
    #[arg(long, value_delimiter = ',')]
    cores: Vec<usize>,
    /// Repetitions of the analytic query (and of each optimizer query, at least 3).
    #[arg(long, default_value_t = 5)]
    analytic_reps: usize,
    /// PostgreSQL synchronous_commit for --start.
    #[arg(long, default_value = "on")]
    pg_synchronous_commit: String,
    /// PostgreSQL shared_buffers for --start.
    #[arg(long, default_value = "512MB")]
    pg_shared_buffers: String,
    /// Redis appendfsync for --start (always, everysec, no).
    #[arg(long, default_value = "always")]
    redis_appendfsync: String,
    /// An extra argument for `ponder serve` with --start (repeatable), e.g.
    /// `--ponder-arg=--doc-cache-size=32`.
    #[arg(long, allow_hyphen_values = true)]
    ponder_arg: Vec<String>,
    /// Write the results here (JSON).
    #[arg(long, default_value = "ponder-bench-results.json")]
    out: PathBuf,
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// Result files from `run`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Directory for report.md and the PNGs.
    #[arg(long, default_value = "ponder-bench-report")]
    out_dir: PathBuf,
}

#[derive(Args, Debug)]
struct SmokeArgs {
    #[command(flatten)]
    common: Common,
    /// Ponder's driver port (same as --ponder-port).
    #[arg(long)]
    port: Option<u16>,
    /// Seconds per workload.
    #[arg(long, default_value_t = 1)]
    secs: u64,
    /// Records per data set.
    #[arg(long, default_value_t = 300)]
    records: u64,
    /// Connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Also write the results here.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ponder-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Run(a) => rt.block_on(with_ctrl_c(run(*a))),
        Command::Report(a) => report(a),
        Command::Smoke(a) => rt.block_on(with_ctrl_c(smoke(*a))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ponder-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Ctrl-C ends the session through its normal path, so started servers stop.
async fn with_ctrl_c(
    f: impl std::future::Future<Output = Result<(), String>>,
) -> Result<(), String> {
    tokio::select! {
        r = f => r,
        _ = tokio::signal::ctrl_c() => Err("interrupted".into()),
    }
}

fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

fn parse_workloads(names: &[String]) -> Result<Vec<Workload>, String> {
    if names.iter().any(|n| n == "all") {
        return Ok(Workload::ALL.to_vec());
    }
    let mut out = Vec::new();
    for n in names {
        let w = Workload::ALL
            .into_iter()
            .find(|w| w.name() == n)
            .ok_or_else(|| {
                let all: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
                format!("unknown workload {n}; known: {}, all", all.join(", "))
            })?;
        out.push(w);
    }
    // Keep the canonical order (the analytic query before any update).
    out.sort_by_key(|w| Workload::ALL.iter().position(|x| x == w));
    out.dedup();
    Ok(out)
}

fn base_options(c: &Common) -> SessionOptions {
    let ponder_port = c.ponder_port.unwrap_or(if c.start {
        SystemKind::Ponder.default_port()
    } else {
        28015
    });
    let mut ports = BTreeMap::new();
    ports.insert(SystemKind::Ponder, ponder_port);
    SessionOptions {
        systems: vec![SystemKind::Ponder],
        start: c.start,
        host: c.host.clone(),
        ports,
        ponder_user: c.user.clone(),
        ponder_password: c.password.clone(),
        read_mode: c.read_mode.clone(),
        pids: BTreeMap::new(),
        start_options: StartOptions {
            ponder_bin: c.ponder_bin.clone().unwrap_or_else(default_ponder_bin),
            pg_synchronous_commit: "on".into(),
            pg_max_connections: 600,
            pg_shared_buffers: "512MB".into(),
            redis_appendfsync: "always".into(),
            ponder_args: Vec::new(),
        },
        workloads: Vec::new(),
        records: 0,
        kv_records: 0,
        large_records: 0,
        connections: vec![1],
        in_flight: 1,
        duration: Duration::from_secs(1),
        ops: None,
        distributions: vec![Distribution::Zipfian],
        cores: Vec::new(),
        analytic_reps: 1,
        op_timeout: Duration::from_secs(c.op_timeout.max(1)),
        progress: !c.no_progress,
        command: command_line(),
    }
}

async fn run(a: RunArgs) -> Result<(), String> {
    if a.duration == 0 || a.duration > MAX_DURATION_SECS {
        return Err(format!(
            "--duration must be 1..={MAX_DURATION_SECS} seconds"
        ));
    }
    if a.connections.is_empty() || a.connections.iter().any(|&c| c == 0 || c > MAX_CONNECTIONS) {
        return Err(format!(
            "--connections must list counts in 1..={MAX_CONNECTIONS}"
        ));
    }
    if a.records == 0 || a.kv_records == 0 || a.large_records == 0 {
        return Err("--records, --kv-records and --large-records must be at least 1".into());
    }
    let mut o = base_options(&a.common);
    o.systems = a.systems.clone();
    o.systems.sort();
    o.systems.dedup();
    o.ports.insert(SystemKind::Postgres, a.postgres_port);
    o.ports.insert(SystemKind::Redis, a.redis_port);
    for p in &a.pid {
        let (name, pid) = p
            .split_once('=')
            .ok_or_else(|| format!("--pid wants system=pid, got {p}"))?;
        let kind = [SystemKind::Ponder, SystemKind::Postgres, SystemKind::Redis]
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| format!("--pid: unknown system {name}"))?;
        let pid = pid.parse().map_err(|_| format!("--pid: bad pid {pid}"))?;
        o.pids.insert(kind, pid);
    }
    o.start_options.pg_synchronous_commit = a.pg_synchronous_commit.clone();
    o.start_options.pg_shared_buffers = a.pg_shared_buffers.clone();
    o.start_options.pg_max_connections =
        (a.connections.iter().copied().max().unwrap_or(1) + 20).max(100) as u32;
    o.start_options.redis_appendfsync = a.redis_appendfsync.clone();
    o.start_options.ponder_args = a.ponder_arg.clone();
    o.workloads = parse_workloads(&a.workloads)?;
    o.records = a.records;
    o.kv_records = a.kv_records;
    o.large_records = a.large_records;
    o.connections = a.connections.clone();
    o.in_flight = a.in_flight.max(1);
    o.duration = Duration::from_secs(a.duration);
    o.ops = a.ops;
    o.distributions = a.distribution.clone();
    o.cores = a.cores.clone();
    o.analytic_reps = a.analytic_reps.max(1);
    let file = run_session(&o).await.map_err(|e| e.to_string())?;
    file.write(&a.out).map_err(|e| e.to_string())?;
    eprintln!("wrote {}", a.out.display());
    for f in failures(&file) {
        eprintln!("warning: {f}");
    }
    Ok(())
}

fn report(a: ReportArgs) -> Result<(), String> {
    let files = a
        .files
        .iter()
        .map(|p| ResultFile::read(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let w = bench::report::write_report(&files, &a.out_dir).map_err(|e| e.to_string())?;
    println!("{}", w.markdown.display());
    for p in &w.plots {
        println!("{}", p.display());
    }
    Ok(())
}

async fn smoke(a: SmokeArgs) -> Result<(), String> {
    let mut c = a.common.clone();
    if a.port.is_some() {
        c.ponder_port = a.port;
    }
    let mut o = base_options(&c);
    o.workloads = Workload::ALL.to_vec();
    o.records = a.records.max(10);
    o.kv_records = a.records.max(10);
    o.large_records = (a.records / 10).max(10);
    o.connections = vec![a.connections.max(1)];
    o.duration = Duration::from_secs(a.secs.clamp(1, 60));
    o.distributions = vec![Distribution::Zipfian, Distribution::Uniform];
    let file = run_session(&o).await.map_err(|e| e.to_string())?;
    if let Some(out) = &a.out {
        file.write(out).map_err(|e| e.to_string())?;
    }
    let bad = failures(&file);
    let runs = file.phases.len();
    if bad.is_empty() {
        println!("smoke: {runs} phases, 0 failed");
        Ok(())
    } else {
        for b in &bad {
            eprintln!("smoke: {b}");
        }
        Err(format!("smoke: {runs} phases, {} failed", bad.len()))
    }
}
