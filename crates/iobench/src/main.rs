//! The `ponder-iobench` command line.
//!
//! `ponder-iobench [OPTIONS] TARGET [WORKLOAD]...` runs every workload at the
//! same time against TARGET. Without WORKLOAD arguments, workloads are read from
//! standard input, one per line, as Rebench did.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use iobench::report::Report;
use iobench::runner::{run, RunOptions};
use iobench::units::{format_size, parse_size};
use iobench::workload::{parse_line, parse_lines, Workload};
use iobench::{plot, target, Error, Result};

const WORKLOAD_HELP: &str = "\
WORKLOAD is a list of key=value settings (quote it as one argument):
  name=LABEL  pattern=random|seq  dist=uniform|normal[:MEAN,SD]|zipf[:S]
  direction=forward|backward  stride=SIZE  bs=SIZE  align=SIZE
  op=read|write|mix[:READ_PCT]  read_pct=PCT  duration=10s | ops=N
  qd=N (engine=uring)  threads=N  fd=own|shared  engine=pread|lseek|uring|mmap
  direct=yes|no  sync=none|fsync[:N]|fdatasync[:N]|dsync|osync
  flags=append,noatime,direct,dsync,sync,nofollow  fadvise=auto|none|normal|sequential|random
  offset=SIZE  span=SIZE  seed=N
Sizes take k/m/g/t (binary) suffixes. MEAN and SD of normal are fractions of the region.

Examples:
  ponder-iobench --size 1g /tmp/f 'dist=zipf:1.1 bs=4k direct=1 duration=10s'
  ponder-iobench /dev/nvme0n1 'pattern=seq bs=1m engine=uring qd=32'
  printf 'op=read threads=4\\nop=write sync=fdatasync:1\\n' | ponder-iobench --destructive /tmp/f";

/// Precise disk drill-down measurements (the successor of RethinkDB's Rebench).
#[derive(Parser, Debug)]
#[command(name = "ponder-iobench", version, after_help = WORKLOAD_HELP)]
struct Cli {
    /// A block device or a file (created and filled when --size is given).
    target: PathBuf,

    /// Workloads, each one quoted argument; read from standard input, one per line, when absent.
    workloads: Vec<String>,

    /// Size of the target to use; a missing or shorter file is created or extended to it.
    #[arg(long, value_parser = parse_size)]
    size: Option<u64>,

    /// Allow writing to a block device or to a file that already holds data.
    #[arg(long)]
    destructive: bool,

    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,

    /// Also write a PNG plot of throughput and latency over time to this file.
    #[arg(long, value_name = "FILE.png")]
    plot: Option<PathBuf>,

    /// Print the per-second time series in the text report.
    #[arg(long)]
    series: bool,

    /// Keep the target's pages in the page cache (by default they are dropped before the run, like fio).
    #[arg(long)]
    keep_cache: bool,

    /// Only create and fill the target, then exit.
    #[arg(long)]
    prepare_only: bool,
}

fn workloads(cli: &Cli) -> Result<Vec<Workload>> {
    if !cli.workloads.is_empty() {
        return cli
            .workloads
            .iter()
            .enumerate()
            .map(|(i, l)| parse_line(l, i))
            .collect();
    }
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!(
            "enter workloads, one per line (e.g. `bs=4k op=read duration=5s`); end with Ctrl-D"
        );
    }
    let mut text = String::new();
    stdin
        .read_to_string(&mut text)
        .map_err(|e| Error::io("read", "<stdin>", e))?;
    let ws = parse_lines(&text)?;
    if ws.is_empty() {
        return Err(Error::BadParameter(
            "no workload: give one after the target or one per line on standard input".into(),
        ));
    }
    Ok(ws)
}

fn real_main(cli: Cli) -> Result<()> {
    let ws = if cli.prepare_only {
        Vec::new()
    } else {
        workloads(&cli)?
    };
    let writes = ws.iter().any(|w| w.op.writes());
    target::precheck(&cli.target, &ws)?;
    let t = target::prepare(&cli.target, cli.size, writes, cli.destructive)?;
    if t.created {
        eprintln!(
            "prepared {} ({}, {})",
            t.path.display(),
            t.fs,
            format_size(t.size)
        );
    }
    if cli.prepare_only {
        return Ok(());
    }
    let results = run(
        &t,
        &ws,
        RunOptions {
            keep_cache: cli.keep_cache,
        },
    )?;
    let report = Report::new(&t, &results);
    if cli.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text(cli.series));
    }
    if let Some(p) = &cli.plot {
        plot::draw(&report, p)?;
        if !cli.json {
            println!("plot written to {}", p.display());
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match real_main(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ponder-iobench: {e}");
            ExitCode::FAILURE
        }
    }
}
