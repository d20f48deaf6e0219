//! `lincheck`: records histories of reads, writes and compare-and-set on a handful of keys
//! of a RethinkDB-protocol server, and checks them: linearizability per key (Wing–Gong
//! search with Lowe's memoization, as Porcupine does, [`wgl`]), and that no acknowledged
//! write is lost ([`lost`]). `ponder-lincheck check` and `ponder-lincheck run` wrap
//! [`check_history`] and [`run::run`].
//!
//! # History format
//!
//! JSON lines, one event per line, in the order they happened (the recorder writes each
//! line under one lock, so the file is in time order):
//!
//! ```text
//! {"process":1,"type":"invoke","f":"write","key":"k0","value":5,"time_ns":1000}
//! {"process":2,"type":"invoke","f":"cas","key":"k0","value":[5,6],"time_ns":1100}
//! {"process":1,"type":"ok","f":"write","key":"k0","value":5,"time_ns":2000}
//! {"process":2,"type":"ok","f":"cas","key":"k0","value":[5,6],"applied":true,"time_ns":2500}
//! {"process":3,"type":"invoke","f":"read","key":"k0","time_ns":3000,"final":true}
//! {"process":3,"type":"ok","f":"read","key":"k0","value":6,"time_ns":3100,"final":true}
//! ```
//!
//! - `process`: an integer; a process has at most one operation outstanding, and a
//!   completion belongs to that process's outstanding invocation.
//! - `type`: `invoke`; `ok` (completed, with its result); `fail` (definitely did not take
//!   effect); `info` (indeterminate — e.g. `ReqlOpIndeterminateError`, a timeout or a lost
//!   connection: it may or may not have taken effect, at any time after its invocation).
//!   An invocation never completed by the end of the file counts as `info`.
//! - `f`: `read`, `write` or `cas`.
//! - `key`: any JSON value (histories are checked per key; keys compare canonically).
//! - `value`: read `ok`: the value read, `null` when the key has none (a key never written
//!   reads `null`); write: the value written; cas: `[expect, new]`. Values are small JSON
//!   values, equal when their canonical forms are (object members in any order, `1` =
//!   `1.0`).
//! - `applied` (cas `ok` only, default `true`): `false` when the cas completed without
//!   applying because the value was not `expect` — checked too (the value must then
//!   differ from `expect` at its linearization point).
//! - `time_ns`: monotonic nanoseconds from an origin shared by the whole history.
//! - `final` (optional, reads): a read taken after faults healed and the workload
//!   stopped; used by the lost-write check.
//! - `error` (optional): why it failed or is indeterminate, for people.
//!
//! # Verdicts
//!
//! Per key: linearizable; a violation, with the longest linearizable prefix the search
//! found and the operations that could not extend it; or unknown, when the key's
//! [`Budget`] (search steps, time, cache memory) ran out — never a guess.

pub mod bitset;
pub mod check;
mod dead;
pub mod explain;
pub mod history;
pub mod lost;
pub mod model;
pub mod record;
pub mod report;
pub mod run;
pub mod value;
pub mod wgl;

pub use check::{check_operations, KeyReport};
pub use explain::Explanation;
pub use history::{
    pair, read_jsonl, Call, Completion, Event, EventType, Func, HistoryError, Operation,
};
pub use lost::{check_lost, LostReport};
pub use report::{check_history, Report};
pub use wgl::{check_key, Budget, Verdict};
