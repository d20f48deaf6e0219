//! `bench`: the library behind `ponder-bench`, which measures RethinkDB-protocol
//! servers (Ponder and its peers) over their wire protocol only.
//!
//! - [`data`]: keys and documents of the YCSB-style `bench.usertable`;
//! - [`workloads`]: table setup, bulk load, and the closed-loop runs of the
//!   `get`, `insert-hard` and `insert-soft` workloads;
//! - [`report`]: latency summaries, the printed table and the JSON report.
//!
//! This first version covers the point-read and insert figures; the full
//! set of RethinkDB's performance reports will grow as more workloads here.

pub mod data;
pub mod stats;
pub mod workloads;
