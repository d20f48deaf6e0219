//! The explanation of a violation: the deepest point the search reached (its longest
//! linearizable prefix), the value there, the operation that completed without a place,
//! and why each candidate could not come next.

use serde_json::Value;

use crate::history::Operation;
use crate::model::{step, Kind};
use crate::value::Interner;
use crate::wgl::Sop;

/// Why the search found no linearization: its deepest point.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// Operations in the longest linearizable prefix found.
    pub linearized: usize,
    /// Operations that had to be linearized (determinate ones).
    pub required: usize,
    /// The last operations of that prefix, in linearization order.
    pub prefix_tail: Vec<String>,
    /// The register's value after the prefix.
    pub state: Value,
    /// The operation that completed without any way to place it.
    pub stuck: String,
    /// The operations that could have come next, each with why it does not fit.
    pub candidates: Vec<String>,
}

impl std::fmt::Display for Explanation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "longest linearizable prefix: {} of {} operations, ending with:",
            self.linearized, self.required
        )?;
        for op in &self.prefix_tail {
            writeln!(f, "    {op}")?;
        }
        writeln!(f, "  value then: {}", self.state)?;
        writeln!(f, "  must be placed before it completes: {}", self.stuck)?;
        writeln!(f, "  candidates at that point:")?;
        for c in &self.candidates {
            writeln!(f, "    {c}")?;
        }
        Ok(())
    }
}

/// The deepest dead end seen, for the explanation.
pub(crate) struct Deepest {
    pub(crate) order: Vec<usize>,
    pub(crate) state: u32,
    pub(crate) stuck: usize,
    pub(crate) candidates: Vec<usize>,
}

pub(crate) fn explain(
    d: &Deepest,
    sops: &[Sop],
    ops: &[Operation],
    values: &Interner,
    required: usize,
) -> Explanation {
    const TAIL: usize = 6;
    const MAX_CANDIDATES: usize = 12;
    let state = values.value(d.state).clone();
    let prefix_tail = d.order[d.order.len().saturating_sub(TAIL)..]
        .iter()
        .map(|&o| ops[sops[o].src].describe())
        .collect();
    let candidates = d
        .candidates
        .iter()
        .take(MAX_CANDIDATES)
        .map(|&o| {
            let why = match (step(d.state, sops[o].kind), sops[o].kind) {
                (Some(_), _) => "fits, but nothing consistent follows".to_owned(),
                (None, Kind::Read(v)) => format!("reads {}, not {state}", values.value(v)),
                (
                    None,
                    Kind::Cas {
                        applied: Some(false),
                        ..
                    },
                ) => {
                    format!("not applied, yet the value {state} is its expected one")
                }
                (None, Kind::Cas { expect, .. }) => {
                    format!(
                        "applied, but the value {state} is not {}",
                        values.value(expect)
                    )
                }
                (None, Kind::Write(_)) => "a write always fits".to_owned(),
            };
            format!("{} — {why}", ops[sops[o].src].describe())
        })
        .collect();
    Explanation {
        linearized: d.order.len(),
        required,
        prefix_tail,
        state,
        stuck: ops[sops[d.stuck].src].describe(),
        candidates,
    }
}
