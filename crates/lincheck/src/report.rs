//! The whole-history answer: per-key verdicts plus the lost-write check, rendered for
//! people, and the exit status `ponder-lincheck check` uses.
//!
//! Exit status: 0 when every key is linearizable and nothing was lost; 1 on any
//! violation or lost write; 3 when there is none but some key is unknown.

use std::fmt::Write as _;

use crate::check::{check_operations, KeyReport};
use crate::history::{pair, Event, HistoryError};
use crate::lost::{check_lost, LostReport};
use crate::wgl::{Budget, Verdict};

/// Everything the checks found.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// One verdict per key, sorted by key.
    pub keys: Vec<KeyReport>,
    /// The lost-write check.
    pub lost: LostReport,
}

/// Pairs the events and runs both checks.
pub fn check_history(events: &[Event], budget: &Budget) -> Result<Report, HistoryError> {
    let ops = pair(events)?;
    Ok(Report {
        keys: check_operations(&ops, budget),
        lost: check_lost(&ops),
    })
}

impl Report {
    /// Whether any key is not linearizable or any acknowledged write was lost.
    pub fn has_violation(&self) -> bool {
        !self.lost.findings.is_empty()
            || self
                .keys
                .iter()
                .any(|k| matches!(k.verdict, Verdict::Violation(_)))
    }

    /// Whether some key's search ran out of budget.
    pub fn has_unknown(&self) -> bool {
        self.keys
            .iter()
            .any(|k| matches!(k.verdict, Verdict::Unknown(_)))
    }

    /// The process exit status (see the module note).
    pub fn exit_code(&self) -> i32 {
        if self.has_violation() {
            1
        } else if self.has_unknown() {
            3
        } else {
            0
        }
    }

    /// A human-readable report, one line per key plus details of any problem.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for k in &self.keys {
            let ms = k.elapsed.as_secs_f64() * 1000.0;
            let _ = match &k.verdict {
                Verdict::Linearizable => writeln!(
                    out,
                    "key {}: linearizable ({} operations, {ms:.1} ms)",
                    k.key, k.operations
                ),
                Verdict::Unknown(why) => writeln!(
                    out,
                    "key {}: UNKNOWN ({} operations): {why}",
                    k.key, k.operations
                ),
                Verdict::Violation(e) => writeln!(
                    out,
                    "key {}: NOT LINEARIZABLE ({} operations)\n  {e}",
                    k.key, k.operations
                ),
            };
        }
        let l = &self.lost;
        let _ = writeln!(
            out,
            "lost writes: {} acknowledged writes checked on {} keys with final reads, {} problems",
            l.writes_checked,
            l.keys_checked,
            l.findings.len()
        );
        for f in &l.findings {
            let _ = writeln!(out, "  key {}: {}", f.key, f.message);
        }
        if !l.keys_without_final_read.is_empty() {
            let keys: Vec<String> = l
                .keys_without_final_read
                .iter()
                .map(|k| k.to_string())
                .collect();
            let _ = writeln!(
                out,
                "  keys without a final read (not checked): {}",
                keys.join(", ")
            );
        }
        let verdict = match self.exit_code() {
            0 => "OK: linearizable, no acknowledged write lost",
            1 => "VIOLATION",
            _ => "UNKNOWN: no violation found, but some key ran out of budget",
        };
        let _ = writeln!(out, "{verdict}");
        out
    }
}
