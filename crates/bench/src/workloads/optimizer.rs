//! The `optimizer` workload: unmodified queries Ponder's query optimizer answers from a
//! secondary index, each timed with the optimizer on and off (the `optimizer: false`
//! global optarg), on the YCSB usertable with an index on `field1` (created, and its
//! build timed, by the workload). Ponder only: the queries are ReQL.
//!
//! | case | query | compared with |
//! | --- | --- | --- |
//! | `filter-eq` | `filter({'field1': v})` (one document) | optimizer off (a scan) |
//! | `filter-gt` | `filter(r.row('field1') > "\x7f{")` (~1/1024 of the table) | optimizer off |
//! | `count-eq` | `filter({'field1': v}).count()` | optimizer off |
//! | `count-gt` | `filter(r.row('field1') > "\x7f{").count()` | optimizer off |
//! | `count-wide` | `filter(r.row('field1') > "`").count()` (~half) | optimizer off |
//! | `order-limit` | `order_by('field1').limit(10)` | `order_by(index='field1').limit(10)` |
//!
//! YCSB values are bytes `' '..='?'` and `` '`'..=DEL `` (`crate::data`), so a bound of
//! DEL then `{` leaves 4 of 64 second characters after a 1-in-64 first one. Every
//! answer is checked against the other form's: a difference is an error of the phase.

use std::time::Instant;

use client::term::{self, call};
use proto::ql2::TermType as T;
use serde_json::{json, Map, Value};

use super::runner::{DataState, RunError, UsageProbe};
use crate::data::{field_name, initial_field};
use crate::results::{OptimizerCase, OptimizerResult, Phase, PhaseKind};
use crate::stats::{median, ops_per_sec};
use crate::targets::{Conn, Durability, Endpoint, TargetError, PONDER_DB as DB, USERTABLE};

/// The indexed field.
const FIELD: usize = 1;

fn no_opts() -> Map<String, Value> {
    Map::new()
}

fn table() -> Value {
    term::table(DB, USERTABLE)
}

fn filter(pred: Value) -> Value {
    call(T::FILTER, vec![table(), pred], no_opts())
}

fn gt(bound: &str) -> Value {
    term::func1(call(
        T::GT,
        vec![
            term::get_field(term::var(1), &field_name(FIELD)),
            json!(bound),
        ],
        no_opts(),
    ))
}

fn order_limit(by_index: bool) -> Value {
    let name = field_name(FIELD);
    let ordered = if by_index {
        let mut o = Map::new();
        o.insert("index".into(), json!(name));
        call(T::ORDER_BY, vec![table()], o)
    } else {
        call(T::ORDER_BY, vec![table(), json!(name)], no_opts())
    };
    call(T::LIMIT, vec![ordered, json!(10)], no_opts())
}

/// The cases: name, the query, and the query it is compared with (`None`: the same
/// query with the optimizer off).
fn cases(records: u64) -> Vec<(&'static str, Value, Option<Value>)> {
    let mut one = Map::new();
    one.insert(field_name(FIELD), json!(initial_field(records / 2, FIELD)));
    let eq = Value::Object(one);
    let narrow = "\u{7f}{";
    vec![
        ("filter-eq", filter(eq.clone()), None),
        ("filter-gt", filter(gt(narrow)), None),
        ("count-eq", term::count(filter(eq)), None),
        ("count-gt", term::count(filter(gt(narrow))), None),
        ("count-wide", term::count(filter(gt("`"))), None),
        ("order-limit", order_limit(false), Some(order_limit(true))),
    ]
}

/// Runs of a fast query go on until this much time has passed (or `MAX_RUNS`), so
/// that a sub-millisecond median is not a handful of samples on a busy machine.
const MIN_TIMED_SECS: f64 = 0.5;
const MAX_RUNS: usize = 2_000;

/// Times at least `reps` runs of `q` (after one untimed warm-up), more while under
/// `MIN_TIMED_SECS`; returns the seconds of each and the last answer.
async fn timed(
    conn: &Conn,
    q: &Value,
    optargs: &Value,
    reps: usize,
) -> Result<(Vec<f64>, Value), TargetError> {
    let mut v = conn.reql(q.clone(), optargs.clone()).await?;
    let mut secs = Vec::with_capacity(reps);
    let began = Instant::now();
    while secs.len() < reps.max(1)
        || (began.elapsed().as_secs_f64() < MIN_TIMED_SECS && secs.len() < MAX_RUNS)
    {
        let t = Instant::now();
        v = conn.reql(q.clone(), optargs.clone()).await?;
        secs.push(t.elapsed().as_secs_f64());
    }
    Ok((secs, v))
}

/// Documents in an answer (an array's length, or a count).
fn size(v: &Value) -> u64 {
    match v {
        Value::Array(a) => a.len() as u64,
        v => v.as_u64().unwrap_or(0),
    }
}

/// Creates the index (unless there) and waits for it: seconds it took.
async fn ensure_index(conn: &Conn) -> Result<f64, TargetError> {
    let t = Instant::now();
    let list = conn
        .reql(call(T::INDEX_LIST, vec![table()], no_opts()), json!({}))
        .await?;
    let name = field_name(FIELD);
    let exists = list
        .as_array()
        .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(name.as_str())));
    if !exists {
        let create = call(T::INDEX_CREATE, vec![table(), json!(name)], no_opts());
        conn.reql(create, json!({})).await?;
    }
    let wait = call(T::INDEX_WAIT, vec![table(), json!(name)], no_opts());
    conn.reql(wait, json!({})).await?;
    Ok(t.elapsed().as_secs_f64())
}

/// Runs every case, at least `reps` timed runs of each form (at least 3, for a median).
pub async fn optimizer(
    ep: &Endpoint,
    data: &DataState,
    reps: usize,
    server_pid: Option<u32>,
) -> Result<Phase, RunError> {
    let err = |source| RunError::Target {
        system: ep.kind.name(),
        source,
    };
    let reps = reps.max(3);
    let conn = Conn::connect(ep, Durability::Hard).await.map_err(err)?;
    let index_build_secs = ensure_index(&conn).await.map_err(err)?;
    let probe = UsageProbe::start(server_pid);
    let t0 = Instant::now();
    let (mut errors, mut samples, mut out) = (0u64, Vec::new(), Vec::new());
    for (name, q, versus) in cases(data.records) {
        let (on, v_on) = timed(&conn, &q, &json!({}), reps).await.map_err(err)?;
        let (other, off_opts) = match &versus {
            Some(v) => (v, json!({})),
            None => (&q, json!({"optimizer": false})),
        };
        let (off, v_off) = timed(&conn, other, &off_opts, reps).await.map_err(err)?;
        if v_on != v_off {
            errors += 1;
            samples.push(format!("{name}: the two forms answered differently"));
        }
        let (m_on, m_off) = (median(&on), median(&off));
        out.push(OptimizerCase {
            name: name.to_owned(),
            versus: if versus.is_some() {
                "order_by(index=)".into()
            } else {
                "optimizer off".into()
            },
            docs: size(&v_on),
            on_secs: on,
            other_secs: off,
            ratio: if m_on > 0.0 { m_off / m_on } else { 0.0 },
        });
    }
    let elapsed = t0.elapsed();
    let ops = out
        .iter()
        .map(|c| (c.on_secs.len() + c.other_secs.len()) as u64)
        .sum::<u64>();
    Ok(Phase {
        system: ep.kind.name().to_owned(),
        workload: "optimizer".into(),
        kind: PhaseKind::Optimizer,
        records: data.records,
        connections: 1,
        elapsed_secs: elapsed.as_secs_f64(),
        ops: ops - errors,
        errors,
        ops_per_sec: ops_per_sec(ops, elapsed),
        server: probe.map(|p| p.finish(elapsed)),
        optimizer: Some(OptimizerResult {
            index_build_secs,
            cases: out,
        }),
        error_samples: samples,
        ..Phase::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_distinct_queries() {
        let c = cases(100);
        assert_eq!(c.len(), 6);
        let names: std::collections::BTreeSet<_> = c.iter().map(|x| x.0).collect();
        assert_eq!(names.len(), c.len());
        assert!(c.iter().filter(|x| x.2.is_some()).count() == 1);
        assert_eq!(size(&json!([1, 2])), 2);
        assert_eq!(size(&json!(7)), 7);
    }
}
