//! P-compositionality: a history is linearizable exactly when each key's sub-history is,
//! so the operations are split by key and each key is searched on its own (in parallel,
//! one thread per core), each within its own budget.
//!
//! Invariant: keys are compared by canonical text (`value::canonical`), and the reports
//! come back sorted by it, so output is stable from run to run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::history::Operation;
use crate::value::canonical;
use crate::wgl::{check_key, Budget, Verdict};

/// The verdict for one key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyReport {
    /// The key.
    pub key: Value,
    /// Its operations (all, including failed ones).
    pub operations: usize,
    /// The answer.
    pub verdict: Verdict,
    /// How long its search took.
    pub elapsed: Duration,
}

/// Splits `ops` by key, keeping their order within a key.
pub fn partition(ops: &[Operation]) -> Vec<(Value, Vec<Operation>)> {
    let mut by_key: BTreeMap<String, (Value, Vec<Operation>)> = BTreeMap::new();
    for op in ops {
        by_key
            .entry(canonical(&op.key))
            .or_insert_with(|| (op.key.clone(), Vec::new()))
            .1
            .push(op.clone());
    }
    by_key.into_values().collect()
}

/// Checks every key of `ops`.
pub fn check_operations(ops: &[Operation], budget: &Budget) -> Vec<KeyReport> {
    let keys = partition(ops);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(keys.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<KeyReport>>> = Mutex::new(vec![None; keys.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((key, key_ops)) = keys.get(i) else {
                    break;
                };
                let started = Instant::now();
                let verdict = check_key(key_ops, budget);
                let report = KeyReport {
                    key: key.clone(),
                    operations: key_ops.len(),
                    verdict,
                    elapsed: started.elapsed(),
                };
                if let Ok(mut r) = results.lock() {
                    r[i] = Some(report);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect()
}
