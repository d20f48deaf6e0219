//! The load phase (timed: the table is dropped, created, and filled with
//! several batched inserts in flight, writes with hard durability) and the
//! analytic query (repeated; its result is checked against the value the
//! client computes from the loaded data).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::runner::{progress_bar, DataState, Meter, RunError, UsageProbe};
use super::DataSpec;
use crate::data::{initial_field, initial_record, ycsb_key};
use crate::results::{AnalyticResult, Phase, PhaseKind};
use crate::stats::{median, ops_per_sec};
use crate::targets::{Conn, Durability, Endpoint, TargetError};

/// Connections used by a load.
pub const LOAD_CONNECTIONS: usize = 4;
/// Batches in flight per load connection.
pub const LOAD_IN_FLIGHT: usize = 2;

/// Records per insert request for a data set: about 256 KB per batch.
pub fn batch_size(spec: DataSpec) -> u64 {
    match spec {
        DataSpec::Ycsb => 250,
        DataSpec::Kv(s) => {
            (256 * 1024 / ((s.value_min + s.value_max) / 2 + 16)).clamp(8, 2000) as u64
        }
    }
}

fn target_err(ep: &Endpoint) -> impl Fn(TargetError) -> RunError + '_ {
    move |source| RunError::Target {
        system: ep.kind.name(),
        source,
    }
}

async fn insert_batch(conn: &Conn, spec: DataSpec, lo: u64, hi: u64) -> Result<(), TargetError> {
    match spec {
        DataSpec::Ycsb => {
            let recs: Vec<(String, Vec<String>)> =
                (lo..hi).map(|i| (ycsb_key(i), initial_record(i))).collect();
            conn.ycsb_insert(&recs).await
        }
        DataSpec::Kv(shape) => {
            let kvs: Vec<(String, String)> = (lo..hi)
                .map(|i| (shape.key(i), shape.initial_value(i)))
                .collect();
            conn.kv_insert_many(&kvs).await
        }
    }
}

/// Drops, creates and fills the data set on one system; returns its state
/// (for the runs that follow) and the timed load phase.
pub async fn load(
    ep: &Endpoint,
    spec: DataSpec,
    records: u64,
    server_pid: Option<u32>,
    progress: bool,
) -> Result<(Arc<DataState>, Phase), RunError> {
    let err = target_err(ep);
    {
        // A connection of its own: PostgreSQL sessions keep prepared statements.
        let admin = Conn::connect(ep, Durability::Hard).await.map_err(&err)?;
        admin.reset(spec.dataset()).await.map_err(&err)?;
    }
    let batch = batch_size(spec);
    let batches = records.div_ceil(batch);
    let next = Arc::new(AtomicU64::new(0));
    let mut conns = Vec::new();
    for _ in 0..LOAD_CONNECTIONS {
        conns.push(Arc::new(
            Conn::connect(ep, Durability::Hard).await.map_err(&err)?,
        ));
    }
    let pb = progress_bar(
        progress,
        records,
        format!("{} load {}", ep.kind.name(), spec.name()),
        "records",
    );
    let start = Instant::now();
    let meter = Arc::new(Meter::new(start, 3600));
    let probe = UsageProbe::start(server_pid);
    let mut tasks = tokio::task::JoinSet::new();
    for conn in &conns {
        for _ in 0..LOAD_IN_FLIGHT {
            let (conn, next, meter, pb) = (conn.clone(), next.clone(), meter.clone(), pb.clone());
            tasks.spawn(async move {
                loop {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    if b >= batches {
                        return Ok::<(), TargetError>(());
                    }
                    let lo = b * batch;
                    let hi = (lo + batch).min(records);
                    insert_batch(&conn, spec, lo, hi).await?;
                    meter.add(hi - lo);
                    pb.inc(hi - lo);
                }
            });
        }
    }
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tasks.abort_all();
                return Err(err(e));
            }
            Err(e) => return Err(RunError::Task(e.to_string())),
        }
    }
    let elapsed = start.elapsed();
    pb.finish_and_clear();
    let server = probe.map(|p| p.finish(elapsed));
    let (per_second, qps) = meter.series(elapsed);
    let phase = Phase {
        system: ep.kind.name().to_owned(),
        workload: format!("load {}", spec.name()),
        kind: PhaseKind::Load,
        records,
        connections: LOAD_CONNECTIONS,
        elapsed_secs: elapsed.as_secs_f64(),
        ops: meter.total(),
        ops_per_sec: ops_per_sec(meter.total(), elapsed),
        per_second,
        qps,
        server,
        ..Phase::default()
    };
    Ok((Arc::new(DataState::new(spec, records)), phase))
}

/// What the analytic query must return over the loaded records `0..records`:
/// the number of `.`-separated pieces of every `field0`.
pub fn analytic_expected(records: u64) -> u64 {
    (0..records)
        .map(|i| initial_field(i, 0).bytes().filter(|&b| b == b'.').count() as u64 + 1)
        .sum()
}

/// Runs the analytic query `reps` times (after one untimed warm-up when
/// `warm_up`) and checks every result. Run it before any update phase, so
/// that `field0` still holds the loaded values.
pub async fn analytic(
    ep: &Endpoint,
    data: &DataState,
    reps: usize,
    warm_up: bool,
    server_pid: Option<u32>,
) -> Result<Phase, RunError> {
    let err = target_err(ep);
    let conn = Conn::connect(ep, Durability::Hard).await.map_err(&err)?;
    let expected = analytic_expected(data.records);
    if warm_up {
        conn.analytic().await.map_err(&err)?;
    }
    let probe = UsageProbe::start(server_pid);
    let t0 = Instant::now();
    let mut secs = Vec::new();
    let mut value = 0;
    let mut errors = 0;
    let mut samples = Vec::new();
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        value = conn.analytic().await.map_err(&err)?;
        secs.push(t.elapsed().as_secs_f64());
        if value != expected {
            errors += 1;
            samples.push(format!(
                "analytic query returned {value}, expected {expected}"
            ));
        }
    }
    let elapsed = t0.elapsed();
    let server = probe.map(|p| p.finish(elapsed));
    let med = median(&secs);
    let docs_per_sec = if med > 0.0 {
        data.records as f64 / med
    } else {
        0.0
    };
    Ok(Phase {
        system: ep.kind.name().to_owned(),
        workload: "analytic".into(),
        kind: PhaseKind::Analytic,
        records: data.records,
        connections: 1,
        elapsed_secs: elapsed.as_secs_f64(),
        ops: secs.len() as u64 - errors,
        errors,
        ops_per_sec: ops_per_sec(secs.len() as u64, elapsed),
        server,
        analytic: Some(AnalyticResult {
            docs: data.records,
            value,
            expected,
            secs,
            docs_per_sec,
        }),
        error_samples: samples,
        ..Phase::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::KvShape;

    #[test]
    fn batches_fit_requests() {
        assert_eq!(batch_size(DataSpec::Ycsb), 250);
        assert!(batch_size(DataSpec::Kv(KvShape::SMALL)) >= 1000);
        assert!(batch_size(DataSpec::Kv(KvShape::LARGE)) <= 16);
        let e = analytic_expected(100);
        assert!(e > 100, "some fields contain dots: {e}");
    }
}
