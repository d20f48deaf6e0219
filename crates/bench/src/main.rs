//! `ponder-bench`: benchmarks a RethinkDB-protocol server.
//!
//! ```text
//! ponder-bench load --port 28015 --docs 100000 --connections 1,64 --duration 10 --workload get
//! ```
//!
//! `load` prepares `bench.usertable` (dropping and re-creating it, then
//! bulk-loading `--docs` documents) unless `--skip-load` is given, then runs
//! the workload once per connection count and prints ops/s and latency
//! percentiles; `--json` also writes them to a file.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use bench::stats::Report;
use bench::workloads::{self, setup, RunConfig, Target, Workload};
use clap::{Args, Parser, Subcommand};

/// Longest accepted `--duration`, in seconds.
const MAX_DURATION_SECS: u64 = 3600;
/// Most accepted connections in one run.
const MAX_CONNECTIONS: usize = 4096;

#[derive(Parser, Debug)]
#[command(
    name = "ponder-bench",
    version,
    about = "Benchmarks a RethinkDB-protocol server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load `bench.usertable`, then measure a key-value workload.
    Load(LoadArgs),
}

#[derive(Args, Debug)]
struct LoadArgs {
    /// Server host.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Server driver port.
    #[arg(long, default_value_t = 28015)]
    port: u16,
    /// User name.
    #[arg(long, default_value = "admin")]
    user: String,
    /// Password.
    #[arg(long, default_value = "")]
    password: String,
    /// Documents to load (and, with --skip-load, assumed present).
    #[arg(long, default_value_t = 100_000)]
    docs: u64,
    /// Payload bytes per document, spread over 10 random string fields.
    #[arg(long, default_value_t = 1000)]
    doc_bytes: usize,
    /// Connection counts to measure, comma-separated (e.g. 1,64).
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    connections: Vec<usize>,
    /// Queries kept in flight per connection (closed loop).
    #[arg(long, default_value_t = 1)]
    in_flight: usize,
    /// Seconds each run lasts.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Seconds after which one operation counts as failed.
    #[arg(long, default_value_t = 30)]
    op_timeout: u64,
    /// The operation to measure.
    #[arg(long, value_enum, default_value_t = Workload::Get)]
    workload: Workload,
    /// Use the existing table instead of re-creating and loading it.
    #[arg(long)]
    skip_load: bool,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
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
        Command::Load(args) => rt.block_on(load(args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ponder-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn load(args: LoadArgs) -> Result<(), String> {
    if args.duration == 0 || args.duration > MAX_DURATION_SECS {
        return Err(format!(
            "--duration must be 1..={MAX_DURATION_SECS} seconds"
        ));
    }
    if args.connections.is_empty()
        || args
            .connections
            .iter()
            .any(|&c| c == 0 || c > MAX_CONNECTIONS)
    {
        return Err(format!(
            "--connections must list counts in 1..={MAX_CONNECTIONS}"
        ));
    }
    if args.docs == 0 && args.workload.needs_loaded_docs() {
        return Err("--docs must be at least 1 for the get workload".into());
    }
    let target = Target {
        host: args.host.clone(),
        port: args.port,
        user: args.user.clone(),
        password: args.password.clone(),
    };
    let err = |e: workloads::BenchError| e.to_string();

    let admin = target
        .connect()
        .await
        .map_err(|e| format!("connecting to {}: {e}", target.addr()))?;
    setup::prepare_table(&admin, args.skip_load)
        .await
        .map_err(err)?;
    let load = if args.skip_load {
        None
    } else {
        eprintln!(
            "loading {} documents of ~{} bytes into bench.usertable ...",
            args.docs, args.doc_bytes
        );
        let l = setup::bulk_load(&target, args.docs, args.doc_bytes)
            .await
            .map_err(err)?;
        eprintln!(
            "loaded {} docs in {:.2} s ({:.0} docs/s)",
            l.docs, l.secs, l.docs_per_sec
        );
        Some(l)
    };
    if args.workload.needs_loaded_docs() {
        let n = setup::count(&admin).await.map_err(err)?;
        if n < args.docs {
            return Err(format!(
                "bench.usertable holds {n} documents, fewer than --docs {}; run without --skip-load",
                args.docs
            ));
        }
    }
    drop(admin);

    let mut cfg = RunConfig {
        workload: args.workload,
        docs: args.docs,
        doc_bytes: args.doc_bytes,
        duration: Duration::from_secs(args.duration),
        op_timeout: Duration::from_secs(args.op_timeout.max(1)),
        in_flight: args.in_flight.max(1),
        run_tag: bench::data::run_tag(&mut rand::thread_rng()),
        run_index: 0,
    };
    let mut report = Report {
        server: target.addr(),
        workload: args.workload.name().to_owned(),
        docs: args.docs,
        doc_bytes: args.doc_bytes,
        duration_secs: args.duration,
        load,
        runs: Vec::new(),
    };
    for (i, &c) in args.connections.iter().enumerate() {
        cfg.run_index = i;
        eprintln!(
            "running {} with {c} connection(s) for {} s ...",
            args.workload.name(),
            args.duration
        );
        let r = workloads::run(&target, &cfg, c).await.map_err(err)?;
        eprintln!(
            "  {:.1} ops/s, p50 {} us, p99 {} us, {} errors",
            r.ops_per_sec, r.latency_us.p50, r.latency_us.p99, r.errors
        );
        report.runs.push(r);
    }
    print!("{}", report.to_table());
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, json + "\n")
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
