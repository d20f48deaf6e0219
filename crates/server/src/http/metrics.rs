//! `/metrics`: the server's counters in Prometheus' text exposition format (version
//! 0.0.4). A pure function of a `Snapshot`: the counters are the ones
//! `rethinkdb.stats` reads (`cluster::Cluster::metrics`), plus what only the shell
//! knows (open `/ajax/reql` connections, the disk).

use std::fmt::Write as _;

use cluster::system::{Metrics, LATENCY_BOUNDS};

/// Everything one scrape reports.
pub struct Snapshot {
    /// The cluster's counters.
    pub cluster: Metrics,
    /// Open `/ajax/reql` connections.
    pub ajax_connections: usize,
    /// The data directory's size and its file system's free space, if readable.
    pub disk: Option<storage::DiskUsage>,
    /// This build's version.
    pub version: &'static str,
}

/// The content type of the exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value with `\`, `"` and newlines escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn one(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    header(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// Renders a scrape.
pub fn render(s: &Snapshot) -> String {
    let m = &s.cluster;
    let mut out = String::with_capacity(4096);
    header(&mut out, "ponder_build_info", "gauge", "Build information.");
    let _ = writeln!(
        out,
        "ponder_build_info{{version=\"{}\"}} 1",
        label(s.version)
    );
    one(
        &mut out,
        "ponder_queries_total",
        "counter",
        "Queries started (driver and HTTP).",
        m.queries,
    );
    one(
        &mut out,
        "ponder_client_connections",
        "gauge",
        "Open client connections (driver and /ajax/reql).",
        m.connections,
    );
    one(
        &mut out,
        "ponder_http_reql_connections",
        "gauge",
        "Open /ajax/reql connections.",
        s.ajax_connections,
    );
    one(
        &mut out,
        "ponder_jobs",
        "gauge",
        "Queries running or holding a cursor.",
        m.jobs,
    );
    one(
        &mut out,
        "ponder_cursors_open",
        "gauge",
        "Open cursors, changefeeds included.",
        m.cursors,
    );
    one(
        &mut out,
        "ponder_changefeeds_open",
        "gauge",
        "Open changefeeds.",
        m.feeds,
    );
    for (name, help, pick) in [
        (
            "ponder_table_documents_read_total",
            "Documents read, per table.",
            (|t: &cluster::system::TableMetrics| t.read)
                as fn(&cluster::system::TableMetrics) -> u64,
        ),
        (
            "ponder_table_documents_written_total",
            "Documents written, per table.",
            |t: &cluster::system::TableMetrics| t.written,
        ),
    ] {
        header(&mut out, name, "counter", help);
        for t in &m.tables {
            let _ = writeln!(
                out,
                "{name}{{db=\"{}\",table=\"{}\"}} {}",
                label(&t.db),
                label(&t.table),
                pick(t)
            );
        }
    }
    let name = "ponder_query_duration_seconds";
    header(
        &mut out,
        name,
        "histogram",
        "Time from a query's START to its first answer.",
    );
    let total = m.latency_buckets.last().copied().unwrap_or(0);
    for (i, count) in m.latency_buckets.iter().enumerate() {
        match LATENCY_BOUNDS.get(i) {
            Some(b) => {
                let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {count}");
            }
            None => {
                let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
            }
        }
    }
    let _ = writeln!(out, "{name}_sum {}", m.latency_sum);
    let _ = writeln!(out, "{name}_count {total}");
    if let Some(d) = s.disk {
        one(
            &mut out,
            "ponder_storage_bytes",
            "gauge",
            "Bytes of the data directory's files.",
            d.used_bytes,
        );
        one(
            &mut out,
            "ponder_disk_free_bytes",
            "gauge",
            "Free bytes of the data directory's file system.",
            d.free_bytes,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let s = Snapshot {
            cluster: Metrics {
                queries: 5,
                connections: 2,
                jobs: 1,
                cursors: 1,
                feeds: 0,
                tables: vec![cluster::system::TableMetrics {
                    db: "test".into(),
                    table: "a\"b".into(),
                    read: 3,
                    written: 4,
                }],
                latency_buckets: vec![1; LATENCY_BOUNDS.len() + 1],
                latency_sum: 0.25,
            },
            ajax_connections: 1,
            disk: Some(storage::DiskUsage {
                used_bytes: 10,
                free_bytes: 20,
            }),
            version: "0.1.0",
        };
        let text = render(&s);
        assert!(text.contains("ponder_queries_total 5\n"));
        assert!(
            text.contains("ponder_table_documents_written_total{db=\"test\",table=\"a\\\"b\"} 4\n")
        );
        assert!(text.contains("ponder_query_duration_seconds_bucket{le=\"0.0005\"} 1\n"));
        assert!(text.contains("ponder_query_duration_seconds_bucket{le=\"+Inf\"} 1\n"));
        assert!(text.contains("ponder_query_duration_seconds_count 1\n"));
        assert!(text.contains("ponder_disk_free_bytes 20\n"));
        // Every sample line is `name[{labels}] value`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
