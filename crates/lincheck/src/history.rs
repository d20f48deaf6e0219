//! The history model: events as recorded (one JSON line each, see the crate note), and
//! operations, an invocation paired with its completion.
//!
//! Invariants: a process has at most one operation outstanding; a completion names the
//! same `f` and key as the invocation it completes; an invocation with no completion by
//! the end of the history is indeterminate; an indeterminate operation has no completion
//! time (it stays concurrent with everything invoked after it).

use std::collections::HashMap;
use std::io::BufRead;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    /// The operation was sent.
    Invoke,
    /// It completed with a result.
    Ok,
    /// It definitely did not take effect.
    Fail,
    /// Its outcome is unknown: it may or may not have taken effect.
    Info,
}

/// The operation's function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Func {
    /// Read the key's value.
    Read,
    /// Set the key's value.
    Write,
    /// Set the key to `new` if its value is `expect`.
    Cas,
}

/// One line of a history file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The client (or client incarnation) that ran the operation.
    pub process: u64,
    /// Invocation or completion.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The function.
    pub f: Func,
    /// The key (any JSON value, compared canonically).
    pub key: Value,
    /// Read: the value read (on `ok`); write: the value written; cas: `[expect, new]`.
    #[serde(default)]
    pub value: Value,
    /// Cas `ok` only: whether it was applied (`false`: the value was not `expect`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<bool>,
    /// Monotonic time in nanoseconds from any fixed origin shared by the history.
    pub time_ns: u64,
    /// Marks the reads taken after the faults healed, for the lost-write check.
    #[serde(default, rename = "final", skip_serializing_if = "std::ops::Not::not")]
    pub final_read: bool,
    /// Why it failed or is indeterminate (diagnostics only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What an operation asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// Read.
    Read,
    /// Write this value.
    Write(Value),
    /// Compare-and-set.
    Cas {
        /// The value it must find.
        expect: Value,
        /// The value it sets.
        new: Value,
    },
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    /// A read returned this value (`null`: the key has no value).
    Read(Value),
    /// A write was acknowledged.
    Written,
    /// A cas completed: applied, or not because the value was not `expect`.
    Cas(bool),
    /// It definitely did not take effect.
    Failed,
    /// It may or may not have taken effect.
    Indeterminate,
}

/// An invocation with its completion.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// Position of the invocation among the history's invocations.
    pub id: usize,
    /// The process that ran it.
    pub process: u64,
    /// The key.
    pub key: Value,
    /// What it asked for.
    pub call: Call,
    /// How it ended.
    pub completion: Completion,
    /// Invocation time.
    pub invoke_ns: u64,
    /// Completion time; `None` when indeterminate.
    pub complete_ns: Option<u64>,
    /// A final read (after the faults healed).
    pub final_read: bool,
}

impl Operation {
    /// Whether it may have changed the key (an acknowledged or indeterminate write, an
    /// applied or indeterminate cas).
    pub fn may_write(&self) -> bool {
        matches!(
            (&self.call, &self.completion),
            (
                Call::Write(_),
                Completion::Written | Completion::Indeterminate
            ) | (
                Call::Cas { .. },
                Completion::Cas(true) | Completion::Indeterminate
            )
        )
    }

    /// The value it writes, for writes and cas.
    pub fn written_value(&self) -> Option<&Value> {
        match &self.call {
            Call::Read => None,
            Call::Write(v) => Some(v),
            Call::Cas { new, .. } => Some(new),
        }
    }

    /// A short human description, e.g. `p3 cas(1→2) ok applied [10..20]`.
    pub fn describe(&self) -> String {
        let call = match &self.call {
            Call::Read => "read".to_owned(),
            Call::Write(v) => format!("write({v})"),
            Call::Cas { expect, new } => format!("cas({expect}→{new})"),
        };
        let done = match &self.completion {
            Completion::Read(v) => format!("→ {v}"),
            Completion::Written => "ok".to_owned(),
            Completion::Cas(true) => "ok (applied)".to_owned(),
            Completion::Cas(false) => "ok (not applied)".to_owned(),
            Completion::Failed => "failed".to_owned(),
            Completion::Indeterminate => "indeterminate".to_owned(),
        };
        let end = self
            .complete_ns
            .map_or_else(|| "∞".to_owned(), |t| t.to_string());
        format!(
            "#{} p{} {call} {done} [{}..{end}]",
            self.id, self.process, self.invoke_ns
        )
    }
}

/// A history that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Reading the input failed.
    #[error("reading the history: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not a valid event.
    #[error("line {line}: {message}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The events do not pair up.
    #[error("event {event}: {message}")]
    Pairing {
        /// 0-based index of the offending event.
        event: usize,
        /// What is wrong.
        message: String,
    },
}

/// Reads a JSON-lines history (blank lines are skipped).
pub fn read_jsonl(input: impl BufRead) -> Result<Vec<Event>, HistoryError> {
    let mut events = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let ev = serde_json::from_str(&line).map_err(|e| HistoryError::Parse {
            line: i + 1,
            message: e.to_string(),
        })?;
        events.push(ev);
    }
    Ok(events)
}

fn pairing(event: usize, message: impl Into<String>) -> HistoryError {
    HistoryError::Pairing {
        event,
        message: message.into(),
    }
}

fn cas_args(event: usize, v: &Value) -> Result<(Value, Value), HistoryError> {
    match v {
        Value::Array(a) if a.len() == 2 => Ok((a[0].clone(), a[1].clone())),
        _ => Err(pairing(event, "a cas value must be [expect, new]")),
    }
}

/// Pairs invocations with completions, in invocation order.
pub fn pair(events: &[Event]) -> Result<Vec<Operation>, HistoryError> {
    let mut ops: Vec<Operation> = Vec::new();
    let mut open: HashMap<u64, usize> = HashMap::new();
    for (i, ev) in events.iter().enumerate() {
        if ev.kind == EventType::Invoke {
            if open.contains_key(&ev.process) {
                return Err(pairing(i, format!("process {} invoked twice", ev.process)));
            }
            let call = match ev.f {
                Func::Read => Call::Read,
                Func::Write => Call::Write(ev.value.clone()),
                Func::Cas => {
                    let (expect, new) = cas_args(i, &ev.value)?;
                    Call::Cas { expect, new }
                }
            };
            open.insert(ev.process, ops.len());
            ops.push(Operation {
                id: ops.len(),
                process: ev.process,
                key: ev.key.clone(),
                call,
                completion: Completion::Indeterminate,
                invoke_ns: ev.time_ns,
                complete_ns: None,
                final_read: ev.final_read,
            });
            continue;
        }
        let Some(idx) = open.remove(&ev.process) else {
            return Err(pairing(
                i,
                format!("process {} completes nothing", ev.process),
            ));
        };
        let op = &mut ops[idx];
        let expected_f = match op.call {
            Call::Read => Func::Read,
            Call::Write(_) => Func::Write,
            Call::Cas { .. } => Func::Cas,
        };
        if ev.f != expected_f
            || crate::value::canonical(&ev.key) != crate::value::canonical(&op.key)
        {
            return Err(pairing(i, "completion does not match its invocation"));
        }
        if ev.time_ns < op.invoke_ns {
            return Err(pairing(i, "completion is earlier than its invocation"));
        }
        op.final_read |= ev.final_read;
        op.completion = match (ev.kind, ev.f) {
            (EventType::Ok, Func::Read) => Completion::Read(ev.value.clone()),
            (EventType::Ok, Func::Write) => Completion::Written,
            (EventType::Ok, Func::Cas) => Completion::Cas(ev.applied.unwrap_or(true)),
            (EventType::Fail, _) => Completion::Failed,
            (EventType::Info | EventType::Invoke, _) => Completion::Indeterminate,
        };
        if ev.kind != EventType::Info {
            op.complete_ns = Some(ev.time_ns);
        }
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_leaves_unfinished_indeterminate() {
        let text = r#"
{"process":1,"type":"invoke","f":"write","key":"a","value":1,"time_ns":1}
{"process":2,"type":"invoke","f":"cas","key":"a","value":[1,2],"time_ns":2}
{"process":1,"type":"ok","f":"write","key":"a","value":1,"time_ns":3}
{"process":2,"type":"ok","f":"cas","key":"a","value":[1,2],"applied":false,"time_ns":4}
{"process":1,"type":"invoke","f":"read","key":"a","time_ns":5,"final":true}
"#;
        let ops = pair(&read_jsonl(text.as_bytes()).unwrap()).unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0].completion, Completion::Written);
        assert_eq!(ops[1].completion, Completion::Cas(false));
        assert_eq!(ops[2].completion, Completion::Indeterminate);
        assert_eq!(ops[2].complete_ns, None);
        assert!(ops[2].final_read);
    }

    #[test]
    fn rejects_bad_pairing() {
        let two = r#"{"process":1,"type":"invoke","f":"read","key":"a","time_ns":1}
{"process":1,"type":"invoke","f":"read","key":"a","time_ns":2}"#;
        assert!(pair(&read_jsonl(two.as_bytes()).unwrap()).is_err());
        let orphan = r#"{"process":1,"type":"ok","f":"read","key":"a","time_ns":1}"#;
        assert!(pair(&read_jsonl(orphan.as_bytes()).unwrap()).is_err());
        let mismatch = r#"{"process":1,"type":"invoke","f":"read","key":"a","time_ns":1}
{"process":1,"type":"ok","f":"read","key":"b","time_ns":2}"#;
        assert!(pair(&read_jsonl(mismatch.as_bytes()).unwrap()).is_err());
        assert!(read_jsonl("{not json".as_bytes()).is_err());
    }
}
