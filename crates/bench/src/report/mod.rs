//! `ponder-bench report`: a Markdown report with PNG plots from one or more
//! result files, the systems side by side.
//!
//! The report has: the systems (versions, durability settings), the load
//! phases, the analytic query, then one section per workload with a table
//! (rows: configuration × system; throughput as mean ± standard deviation
//! and 1st percentile of the per-second series, latency per operation type,
//! checks, server CPU and memory), the throughput ratio of Ponder to each
//! peer, and plots: throughput over time, latency percentiles, and the
//! connections and cores sweeps when there are several values.

mod plots;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::results::{Phase, PhaseKind, ResultFile};

pub use plots::PlotError;

/// Errors writing a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Drawing a plot failed.
    #[error(transparent)]
    Plot(#[from] PlotError),
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Written {
    /// The Markdown file.
    pub markdown: PathBuf,
    /// The plots.
    pub plots: Vec<PathBuf>,
}

/// The configuration a run phase was measured at (rows are grouped by it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Config {
    distribution: String,
    cores: Option<usize>,
    connections: usize,
}

fn config(p: &Phase) -> Config {
    Config {
        distribution: p.distribution.clone().unwrap_or_default(),
        cores: p.cores,
        connections: p.connections,
    }
}

fn mb(kb: u64) -> String {
    format!("{:.0}", kb as f64 / 1024.0)
}

fn fmt_qps(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// Run phases by workload, in first-seen order.
fn by_workload(phases: &[&Phase]) -> Vec<(String, Vec<Phase>)> {
    let mut out: Vec<(String, Vec<Phase>)> = Vec::new();
    for p in phases.iter().filter(|p| p.kind == PhaseKind::Run) {
        match out.iter_mut().find(|(w, _)| *w == p.workload) {
            Some((_, v)) => v.push((*p).clone()),
            None => out.push((p.workload.clone(), vec![(*p).clone()])),
        }
    }
    out
}

/// Writes `report.md` and its plots into `out_dir` from the result files.
pub fn write_report(files: &[ResultFile], out_dir: &Path) -> Result<Written, ReportError> {
    std::fs::create_dir_all(out_dir).map_err(|source| ReportError::Io {
        path: out_dir.display().to_string(),
        source,
    })?;
    let phases: Vec<&Phase> = files.iter().flat_map(|f| f.phases.iter()).collect();
    let mut md = String::new();
    let mut plots = Vec::new();
    let _ = writeln!(md, "# ponder-bench report\n");
    for f in files {
        let _ = writeln!(
            md,
            "- run `{}` (ponder-bench {}), {} CPUs, {} MiB memory, kernel {}",
            f.command,
            f.tool_version,
            f.host.cpus,
            f.host.mem_total_kb / 1024,
            f.host.kernel
        );
    }
    let _ = writeln!(
        md,
        "\nAll systems ran on the same machine as the client, one after the other for each \
         configuration, with the same data and the same client. On a small shared machine the \
         figures are noisy: compare ratios within one run, not absolute numbers across runs.\n"
    );
    let _ = writeln!(
        md,
        "## Systems\n\n| system | version | address | settings |\n| --- | --- | --- | --- |"
    );
    let mut seen = Vec::new();
    for s in files.iter().flat_map(|f| f.systems.iter()) {
        if seen.contains(&(&s.name, &s.version)) {
            continue;
        }
        seen.push((&s.name, &s.version));
        let settings: Vec<String> = s.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            s.name,
            s.version.replace('|', "/"),
            s.address,
            settings.join("; ").replace('|', "/")
        );
    }

    let loads: Vec<&&Phase> = phases
        .iter()
        .filter(|p| p.kind == PhaseKind::Load)
        .collect();
    if !loads.is_empty() {
        let _ = writeln!(
            md,
            "\n## Load phases\n\n| system | data | records | seconds | records/s | server CPU s | server peak MB |\n| --- | --- | --- | --- | --- | --- | --- |"
        );
        for p in loads {
            let (cpu, rss) = p
                .server
                .map(|s| (format!("{:.1}", s.cpu_secs), mb(s.peak_rss_kb)))
                .unwrap_or_default();
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.2} | {:.0} | {cpu} | {rss} |",
                p.system, p.workload, p.records, p.elapsed_secs, p.ops_per_sec
            );
        }
    }

    let analytic: Vec<&&Phase> = phases
        .iter()
        .filter(|p| p.kind == PhaseKind::Analytic)
        .collect();
    if !analytic.is_empty() {
        let _ = writeln!(
            md,
            "\n## Analytic query\n\n`table.map(r.row('field0').split('.').count()).sum()`; PostgreSQL: \
             `SELECT sum(array_length(string_to_array(doc->>'field0', '.'), 1)) FROM usertable`.\n\n\
             | system | documents | median s | documents/s | result | expected | equal |\n| --- | --- | --- | --- | --- | --- | --- |"
        );
        for p in &analytic {
            if let Some(a) = &p.analytic {
                let med = crate::stats::median(&a.secs);
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.3} | {:.0} | {} | {} | {} |",
                    p.system,
                    a.docs,
                    med,
                    a.docs_per_sec,
                    a.value,
                    a.expected,
                    if a.value == a.expected {
                        "yes"
                    } else {
                        "**no**"
                    }
                );
            }
        }
        let _ = writeln!(md);
        ratio_lines(
            &mut md,
            analytic
                .iter()
                .filter_map(|p| {
                    p.analytic
                        .as_ref()
                        .map(|a| (p.system.clone(), a.docs_per_sec))
                })
                .collect(),
        );
    }

    for (workload, ps) in by_workload(&phases) {
        let _ = writeln!(md, "\n## {workload}\n");
        let _ = writeln!(
            md,
            "| system | dist | cores | conns | ops/s | qps mean ± sd | qps 1% | latency µs (mean / p50 / p95 / p99 / p99.9 / max) | errors | checked / mismatched | server CPU cores | server peak MB | client CPU cores |\n\
             | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        );
        let mut rows = ps.clone();
        rows.sort_by(|a, b| config(a).cmp(&config(b)).then(a.system.cmp(&b.system)));
        for p in &rows {
            let lat: Vec<String> = p
                .latency_us
                .iter()
                .map(|(k, l)| {
                    format!(
                        "{k}: {:.0} / {} / {} / {} / {} / {}",
                        l.mean, l.p50, l.p95, l.p99, l.p999, l.max
                    )
                })
                .collect();
            let (cpu, rss) = p
                .server
                .map(|s| (format!("{:.2}", s.cpu_cores), mb(s.peak_rss_kb)))
                .unwrap_or_default();
            let ccpu = p
                .client
                .map(|c| format!("{:.2}", c.cpu_cores))
                .unwrap_or_default();
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} ± {} | {} | {} | {} | {} / {} | {cpu} | {rss} | {ccpu} |",
                p.system,
                p.distribution.as_deref().unwrap_or(""),
                p.cores.map_or("all".to_owned(), |c| c.to_string()),
                p.connections,
                fmt_qps(p.ops_per_sec),
                fmt_qps(p.qps.mean),
                fmt_qps(p.qps.stddev),
                fmt_qps(p.qps.p1),
                lat.join("<br>"),
                p.errors,
                p.checks.checked,
                p.checks.mismatches
            );
        }
        // Ratios per configuration.
        let mut by_cfg: BTreeMap<Config, Vec<(String, f64)>> = BTreeMap::new();
        for p in &ps {
            by_cfg
                .entry(config(p))
                .or_default()
                .push((p.system.clone(), p.ops_per_sec));
        }
        let _ = writeln!(md);
        for (c, v) in by_cfg {
            if v.len() > 1 {
                let _ = write!(
                    md,
                    "- {} c={}{}: ",
                    c.distribution,
                    c.connections,
                    c.cores.map_or(String::new(), |n| format!(" cores={n}"))
                );
                ratio_lines(&mut md, v);
            }
        }
        for path in plots::workload_plots(&workload, &ps, out_dir)? {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let _ = writeln!(md, "\n![{name}]({name})");
            plots.push(path);
        }
    }
    let markdown = out_dir.join("report.md");
    std::fs::write(&markdown, md).map_err(|source| ReportError::Io {
        path: markdown.display().to_string(),
        source,
    })?;
    Ok(Written { markdown, plots })
}

/// "ponder / postgres = 2.31×" for each peer of Ponder.
fn ratio_lines(md: &mut String, v: Vec<(String, f64)>) {
    let Some(ponder) = v.iter().find(|(s, _)| s == "ponder").map(|(_, x)| *x) else {
        let _ = writeln!(md);
        return;
    };
    let parts: Vec<String> = v
        .iter()
        .filter(|(s, x)| s != "ponder" && *x > 0.0)
        .map(|(s, x)| format!("ponder / {s} = {:.2}×", ponder / x))
        .collect();
    let _ = writeln!(md, "{}", parts.join(", "));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{AnalyticResult, SystemInfo};
    use crate::stats::{LatencySummary, SeriesStats};

    fn phase(system: &str, workload: &str, conns: usize, qps: f64) -> Phase {
        let mut latency_us = BTreeMap::new();
        latency_us.insert(
            "read".to_owned(),
            LatencySummary {
                count: 10,
                mean: 150.0,
                p50: 120,
                p95: 300,
                p99: 500,
                p999: 900,
                max: 1200,
                ..LatencySummary::default()
            },
        );
        Phase {
            system: system.into(),
            workload: workload.into(),
            kind: PhaseKind::Run,
            records: 1000,
            connections: conns,
            distribution: Some("zipfian".into()),
            elapsed_secs: 3.0,
            ops: (qps * 3.0) as u64,
            ops_per_sec: qps,
            per_second: vec![qps as u64 - 10, qps as u64, qps as u64 + 10],
            qps: SeriesStats::of(&[qps - 10.0, qps, qps + 10.0]),
            latency_us,
            ..Phase::default()
        }
    }

    #[test]
    fn small_json_gives_markdown_and_pngs() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = ResultFile {
            command: "ponder-bench run --test".into(),
            ..ResultFile::default()
        };
        f.systems.push(SystemInfo {
            name: "postgres".into(),
            version: "15".into(),
            ..SystemInfo::default()
        });
        for (c, a, b) in [(1usize, 900.0, 500.0), (8, 4000.0, 2000.0)] {
            f.phases.push(phase("ponder", "ycsb-c", c, a));
            f.phases.push(phase("postgres", "ycsb-c", c, b));
        }
        f.phases.push(Phase {
            system: "ponder".into(),
            workload: "analytic".into(),
            kind: PhaseKind::Analytic,
            analytic: Some(AnalyticResult {
                docs: 1000,
                value: 1200,
                expected: 1200,
                secs: vec![0.01],
                docs_per_sec: 100_000.0,
            }),
            ..Phase::default()
        });
        // Through a file, as `report` reads it.
        let json = dir.path().join("r.json");
        f.write(&json).unwrap();
        let f = ResultFile::read(&json).unwrap();
        let out = dir.path().join("report");
        let w = write_report(&[f], &out).unwrap();
        let md = std::fs::read_to_string(&w.markdown).unwrap();
        assert!(md.contains("## ycsb-c"), "{md}");
        assert!(md.contains("ponder / postgres = 2.00×"), "{md}");
        assert!(md.contains("| ponder | 1000 |"), "{md}");
        assert!(
            md.contains("read: 150 / 120 / 300 / 500 / 900 / 1200"),
            "{md}"
        );
        // Throughput over time, latency, and the connections sweep.
        assert_eq!(w.plots.len(), 3, "{:?}", w.plots);
        for p in &w.plots {
            let bytes = std::fs::read(p).unwrap();
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", p.display());
            assert!(bytes.len() > 2000);
            assert!(md.contains(&p.file_name().unwrap().to_string_lossy().into_owned()));
        }
    }
}
