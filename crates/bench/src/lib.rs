//! `bench`: the library behind `ponder-bench`, which reproduces RethinkDB's
//! performance reports with Ponder and its peers (PostgreSQL, Redis)
//! measured side by side, over their own wire protocols only.
//!
//! - [`data`]: YCSB keys and records, key-value shapes, deterministic values;
//! - [`zipf`]: YCSB's zipfian and scrambled-zipfian key choosers;
//! - [`targets`]: one connection to each system and the operations on it;
//! - [`servers`]: `--start`: servers on loopback with throw-away directories;
//! - [`workloads`]: the workloads, the load phase, the closed-loop runner,
//!   read checks;
//! - [`session`]: a whole run (load, workloads, sweeps) over several systems;
//! - [`stats`], [`procstat`], [`results`]: measurements and the JSON file;
//! - [`report`]: Markdown and PNG plots from result files.

pub mod data;
pub mod procstat;
pub mod report;
pub mod results;
pub mod servers;
pub mod session;
pub mod stats;
pub mod targets;
pub mod workloads;
pub mod zipf;
