//! "No acknowledged write is lost", checked on the final reads (events marked `final`,
//! taken after the faults healed and the workload stopped).
//!
//! For every key with at least one final read that returned a value F, and every
//! acknowledged write W of that key (a write answered `ok`, or a cas answered `ok` and
//! applied) that completed before that final read was invoked, W's value must be F, or W
//! must be *superseded* by another operation S of the same key that may have taken effect
//! (an acknowledged write, an applied cas, or an indeterminate write or cas), invoked
//! before the final read completed, and either
//! - not completed before W was invoked (so it may be ordered after W in real time), or
//! - an applied cas whose expected value is W's value (it saw W: a cas chain).
//!
//! Otherwise W was the last write any linearization could end with, and F ≠ W's value
//! means it was lost. Also: a non-null F that no operation of the key may have written is
//! reported (a value from nowhere). Keys without a final read are listed, not checked.
//! Values are compared canonically; the check assumes written values are unique per key
//! (the recorder's are), else a later write of the same value can hide a loss.

use serde_json::Value;

use crate::check::partition;
use crate::history::{Call, Completion, Operation};
use crate::value::canonical;

/// One problem found.
#[derive(Debug, Clone, PartialEq)]
pub struct LostFinding {
    /// The key.
    pub key: Value,
    /// What is wrong, with the operations involved.
    pub message: String,
}

/// The outcome of [`check_lost`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LostReport {
    /// Keys with a final read.
    pub keys_checked: usize,
    /// Acknowledged writes checked against a final read.
    pub writes_checked: usize,
    /// Lost writes and values from nowhere.
    pub findings: Vec<LostFinding>,
    /// Keys that had operations but no final read that returned.
    pub keys_without_final_read: Vec<Value>,
}

fn acknowledged(op: &Operation) -> bool {
    matches!(
        (&op.call, &op.completion),
        (Call::Write(_), Completion::Written) | (Call::Cas { .. }, Completion::Cas(true))
    )
}

/// Whether `s` supersedes `w` (see the module note), and how.
fn supersedes(
    s: &Operation,
    w: &Operation,
    w_value: &str,
    final_done: u64,
) -> Option<&'static str> {
    if s.id == w.id || !s.may_write() || s.invoke_ns > final_done {
        return None;
    }
    if s.complete_ns.is_none_or(|done| done >= w.invoke_ns) {
        return Some("real time");
    }
    match (&s.call, &s.completion) {
        (Call::Cas { expect, .. }, Completion::Cas(true)) if canonical(expect) == w_value => {
            Some("cas chain")
        }
        _ => None,
    }
}

/// Runs the check over a whole history.
pub fn check_lost(ops: &[Operation]) -> LostReport {
    let mut report = LostReport::default();
    for (key, key_ops) in partition(ops) {
        let finals: Vec<(&Operation, &Value, u64)> = key_ops
            .iter()
            .filter(|o| o.final_read)
            .filter_map(|o| match (&o.completion, o.complete_ns) {
                (Completion::Read(v), Some(done)) => Some((o, v, done)),
                _ => None,
            })
            .collect();
        if finals.is_empty() {
            report.keys_without_final_read.push(key);
            continue;
        }
        report.keys_checked += 1;
        for (fin, value, done) in finals {
            let f_text = canonical(value);
            if !value.is_null()
                && !key_ops.iter().any(|o| {
                    o.may_write() && o.written_value().map(canonical) == Some(f_text.clone())
                })
            {
                report.findings.push(LostFinding {
                    key: key.clone(),
                    message: format!(
                        "final read {} returned a value no operation wrote",
                        fin.describe()
                    ),
                });
            }
            for w in key_ops.iter().filter(|w| acknowledged(w)) {
                if w.complete_ns.is_none_or(|c| c >= fin.invoke_ns) {
                    continue;
                }
                report.writes_checked += 1;
                let w_text = w.written_value().map(canonical).unwrap_or_default();
                if w_text == f_text
                    || key_ops
                        .iter()
                        .any(|s| supersedes(s, w, &w_text, done).is_some())
                {
                    continue;
                }
                report.findings.push(LostFinding {
                    key: key.clone(),
                    message: format!(
                        "acknowledged {} was lost: nothing could overwrite it, yet final read {} differs",
                        w.describe(),
                        fin.describe()
                    ),
                });
            }
        }
    }
    report
}
