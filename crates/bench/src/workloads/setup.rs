//! Preparing the `bench.usertable` table: create the database and table, and
//! bulk-load documents in batches with several insert queries in flight.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use client::{term, Connection};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{Map, Value};

use super::{BenchError, Target, DB, TABLE};
use crate::data::{key, DocGen};
use crate::stats::{ops_per_sec, LoadResult};

/// Documents per bulk insert query.
pub const LOAD_BATCH: usize = 500;
/// Connections used by the bulk load.
pub const LOAD_CONNECTIONS: usize = 4;
/// Insert queries in flight per load connection.
pub const LOAD_IN_FLIGHT: usize = 2;

fn contains_str(list: &Value, name: &str) -> bool {
    list.as_array()
        .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(name)))
}

/// Makes sure `bench` exists, and (unless `keep`) that `usertable` is new
/// and empty: an existing one is dropped and created again. With `keep`
/// the table must already exist.
pub async fn prepare_table(conn: &Connection, keep: bool) -> Result<(), BenchError> {
    let dbs = conn.run(term::db_list(), Value::Null).await?;
    if !contains_str(&dbs, DB) {
        if keep {
            return Err(BenchError::Setup(format!(
                "database `{DB}` does not exist; run without --skip-load first"
            )));
        }
        conn.run(term::db_create(DB), Value::Null).await?;
    }
    let tables = conn.run(term::table_list(DB), Value::Null).await?;
    let exists = contains_str(&tables, TABLE);
    if keep {
        return if exists {
            Ok(())
        } else {
            Err(BenchError::Setup(format!(
                "table `{DB}.{TABLE}` does not exist; run without --skip-load first"
            )))
        };
    }
    if exists {
        conn.run(term::table_drop(DB, TABLE), Value::Null).await?;
    }
    conn.run(term::table_create(DB, TABLE), Value::Null).await?;
    Ok(())
}

/// Number of documents in the table (`r.db('bench').table('usertable').count()`).
pub async fn count(conn: &Connection) -> Result<u64, BenchError> {
    let n = conn
        .run(term::count(term::table(DB, TABLE)), Value::Null)
        .await?;
    n.as_u64()
        .ok_or_else(|| BenchError::Setup(format!("count returned {n}")))
}

/// Checks an insert's result: `inserted == expected` and no `errors`.
pub fn check_insert_result(v: &Value, expected: u64) -> Result<(), String> {
    let inserted = v.get("inserted").and_then(Value::as_u64);
    let errors = v.get("errors").and_then(Value::as_u64).unwrap_or(0);
    if inserted == Some(expected) && errors == 0 {
        Ok(())
    } else {
        let first = v
            .get("first_error")
            .and_then(Value::as_str)
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        Err(format!(
            "insert of {expected} returned inserted={inserted:?} errors={errors}{first}"
        ))
    }
}

/// Inserts the documents `0..docs` (keys [`key`]) in batches of
/// [`LOAD_BATCH`], with [`LOAD_CONNECTIONS`] × [`LOAD_IN_FLIGHT`] inserts in
/// flight, using the default (hard) durability. Any failed batch aborts.
pub async fn bulk_load(
    target: &Target,
    docs: u64,
    doc_bytes: usize,
) -> Result<LoadResult, BenchError> {
    let gen = DocGen::new(doc_bytes);
    let batches = docs.div_ceil(LOAD_BATCH as u64);
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let mut conns = Vec::new();
    for _ in 0..LOAD_CONNECTIONS {
        conns.push(target.connect().await?);
    }
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (ci, conn) in conns.iter().enumerate() {
        for w in 0..LOAD_IN_FLIGHT {
            let conn = conn.clone();
            let next = next.clone();
            let done = done.clone();
            let seed = (ci * LOAD_IN_FLIGHT + w) as u64;
            tasks.spawn(async move {
                let mut rng = StdRng::seed_from_u64(0x5eed_0000 + seed);
                let table = term::table(DB, TABLE);
                loop {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    if b >= batches {
                        return Ok::<(), BenchError>(());
                    }
                    let lo = b * LOAD_BATCH as u64;
                    let hi = (lo + LOAD_BATCH as u64).min(docs);
                    let batch: Vec<Value> = (lo..hi).map(|i| gen.doc(&mut rng, key(i))).collect();
                    let q = term::insert(table.clone(), &Value::Array(batch), Map::new());
                    let r = conn.run(q, Value::Null).await?;
                    check_insert_result(&r, hi - lo).map_err(BenchError::Setup)?;
                    done.fetch_add(hi - lo, Ordering::Relaxed);
                }
            });
        }
    }
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tasks.abort_all();
                return Err(e);
            }
            Err(e) => return Err(BenchError::Setup(format!("load task failed: {e}"))),
        }
    }
    let elapsed = start.elapsed();
    let loaded = done.load(Ordering::Relaxed);
    Ok(LoadResult {
        docs: loaded,
        batch: LOAD_BATCH,
        secs: elapsed.as_secs_f64(),
        docs_per_sec: ops_per_sec(loaded, elapsed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn insert_results() {
        assert!(check_insert_result(&json!({"inserted": 500, "errors": 0}), 500).is_ok());
        assert!(check_insert_result(
            &json!({"inserted": 499, "errors": 1, "first_error": "dup"}),
            500
        )
        .unwrap_err()
        .contains("dup"));
        assert!(check_insert_result(&json!(null), 1).is_err());
    }

    #[test]
    fn lists() {
        assert!(contains_str(&json!(["a", "bench"]), "bench"));
        assert!(!contains_str(&json!(["a"]), "bench"));
        assert!(!contains_str(&json!("bench"), "bench"));
    }
}
