//! `ponder-lincheck`: `check <history.jsonl>` prints a verdict per key and exits 1 on a
//! violation (3 when only unknown, 0 when clean); `run --addr host:port ... --out FILE`
//! records a history against a server (and with `--check`, checks it at once).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use lincheck::record::Recorder;
use lincheck::run::{run, RunOptions};
use lincheck::{check_history, read_jsonl, Budget};

#[derive(Parser)]
#[command(
    name = "ponder-lincheck",
    about = "Record and check register histories for linearizability"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a JSON-lines history.
    Check {
        /// The history file.
        history: PathBuf,
        #[command(flatten)]
        budget: BudgetArgs,
    },
    /// Drive a server with concurrent clients and record the history.
    Run(Box<RunArgs>),
}

#[derive(Args)]
struct BudgetArgs {
    /// Search steps per key before answering "unknown".
    #[arg(long, default_value_t = 50_000_000)]
    max_steps: u64,
    /// Seconds per key before answering "unknown".
    #[arg(long, default_value_t = 60.0)]
    max_seconds: f64,
    /// Memoization cache per key, in MiB, before answering "unknown".
    #[arg(long, default_value_t = 512)]
    max_cache_mb: usize,
}

impl BudgetArgs {
    fn budget(&self) -> Budget {
        Budget {
            max_steps: self.max_steps,
            max_time: Duration::from_secs_f64(self.max_seconds.max(0.0)),
            max_cache_bytes: self.max_cache_mb.saturating_mul(1 << 20),
        }
    }
}

#[derive(Args)]
struct RunArgs {
    /// Server driver address `host:port` (repeat for several; clients spread over them).
    #[arg(long = "addr", required = true)]
    addrs: Vec<String>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 5)]
    clients: usize,
    /// Keys.
    #[arg(long, default_value_t = 5)]
    keys: usize,
    /// Operations to start, at most.
    #[arg(long, default_value_t = 2000)]
    ops: u64,
    /// Seconds to run, at most.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Seconds one query (or connecting) may take before it counts as indeterminate.
    #[arg(long, default_value_t = 5.0)]
    op_timeout: f64,
    /// Where to write the history.
    #[arg(long)]
    out: PathBuf,
    /// Database.
    #[arg(long, default_value = "test")]
    db: String,
    /// Table.
    #[arg(long, default_value = "lincheck")]
    table: String,
    /// Replicas of the table it creates (a cluster's servers each hold one).
    #[arg(long, default_value_t = 1)]
    replicas: u32,
    /// Shards of the table it creates.
    #[arg(long, default_value_t = 1)]
    shards: u32,
    /// Keep the table's contents instead of dropping and re-creating it (only sound if
    /// its keys were never written before).
    #[arg(long)]
    keep_table: bool,
    /// Skip the final read of every key.
    #[arg(long)]
    no_final_reads: bool,
    /// User.
    #[arg(long, default_value = "admin")]
    user: String,
    /// Password.
    #[arg(long, default_value = "")]
    password: String,
    /// Seed of the clients' random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Check the history after recording it (exit status as for `check`).
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    budget: BudgetArgs,
}

fn parse_addr(s: &str) -> Result<(String, u16), String> {
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("address {s:?} is not host:port"))?;
    let port = port
        .parse()
        .map_err(|_| format!("address {s:?} has a bad port"))?;
    Ok((host.trim_matches(['[', ']']).to_owned(), port))
}

fn check_file(path: &PathBuf, budget: &Budget) -> Result<i32, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let events = read_jsonl(std::io::BufReader::new(file)).map_err(|e| e.to_string())?;
    let report = check_history(&events, budget).map_err(|e| e.to_string())?;
    print!("{}", report.render());
    Ok(report.exit_code())
}

fn record(a: &RunArgs) -> Result<i32, String> {
    let addrs = a
        .addrs
        .iter()
        .map(|s| parse_addr(s))
        .collect::<Result<Vec<_>, _>>()?;
    let opts = RunOptions {
        addrs,
        clients: a.clients,
        keys: a.keys,
        ops: a.ops,
        duration: Duration::from_secs_f64(a.duration.max(0.0)),
        op_timeout: Duration::from_secs_f64(a.op_timeout.max(0.001)),
        db: a.db.clone(),
        table: a.table.clone(),
        fresh_table: !a.keep_table,
        replicas: a.replicas,
        shards: a.shards,
        final_reads: !a.no_final_reads,
        user: a.user.clone(),
        password: a.password.clone(),
        seed: a.seed,
    };
    let rec = Arc::new(Recorder::create(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let counts = rt.block_on(run(opts, rec)).map_err(|e| e.to_string())?;
    println!(
        "recorded {} operations: {} ok, {} fail, {} info → {}",
        counts.invoke,
        counts.ok,
        counts.fail,
        counts.info,
        a.out.display()
    );
    if a.check {
        check_file(&a.out, &a.budget.budget())
    } else {
        Ok(0)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Check { history, budget } => check_file(history, &budget.budget()),
        Command::Run(a) => record(a),
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("ponder-lincheck: {e}");
            ExitCode::from(2)
        }
    }
}
