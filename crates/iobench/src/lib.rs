//! `ponder-iobench`: precise disk drill-down measurements, the successor of
//! RethinkDB's Rebench.
//!
//! The pieces, each small and testable alone:
//! - [`workload`]: the workload-line language and its parser;
//! - [`dist`]: random numbers, uniform/normal/Zipf distributions, offset generators;
//! - [`target`]: the file or block device, creating and filling it, safety rules, open flags;
//! - [`engine`]: one thread's loop per I/O family (pread, lseek, io_uring, mmap);
//! - [`runner`]: several workloads with several threads each, started together;
//! - [`stats`]: histograms, summaries and the per-second series;
//! - [`report`] and [`plot`]: text, JSON and PNG output.

pub mod dist;
pub mod engine;
pub mod error;
pub mod plot;
pub mod report;
pub mod runner;
pub mod stats;
pub mod target;
pub mod units;
pub mod workload;

pub use error::{Error, Result};
