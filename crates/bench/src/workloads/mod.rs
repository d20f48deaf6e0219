//! The workloads of RethinkDB's performance reports (and YugabyteDB's KV
//! workload): which data set each uses, its operation mix, and the
//! durability of its writes.
//!
//! | workload | data set | mix | writes |
//! | --- | --- | --- | --- |
//! | `ycsb-a` | YCSB usertable | 50% read, 50% update of one field | hard |
//! | `ycsb-c` | YCSB usertable | 100% read | — |
//! | `analytic` | YCSB usertable | `map(split('.').count()).sum()` | — |
//! | `optimizer` | YCSB usertable | indexed `filter`, `count`, `order_by.limit`, optimizer on/off (Ponder) | — |
//! | `kv-canonical` | small KV | 70% get, 15% update, 10% insert, 5% delete | hard |
//! | `kv-select` | small KV | 100% get | — |
//! | `kv-insert` | small KV | 100% insert of new keys | soft |
//! | `kv-insert-strong` | small KV | 100% insert of new keys | hard |
//! | `insert-1k` | 1 KB KV | 100% insert of new keys | soft |
//! | `insert-1k-strong` | 1 KB KV | 100% insert of new keys | hard |
//! | `kv-large` | 4–64 KB values | 50% get, 50% update | hard |
//! | `yb-read` / `yb-write` | 40-byte keys, 16-byte values | 100% get / 100% upsert | hard |
//!
//! The canonical mix is our reading of RethinkDB's "canonical" workload
//! (mostly reads, some of every kind of write); the report states it.

pub mod check;
pub mod load;
pub mod optimizer;
pub mod runner;

use serde::{Deserialize, Serialize};

use crate::data::KvShape;
use crate::targets::{Dataset, Durability};

/// One measured workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// YCSB workload A: 50% reads, 50% updates.
    YcsbA,
    /// YCSB workload C: 100% reads.
    YcsbC,
    /// The analytic map-reduce query over the whole usertable.
    Analytic,
    /// Queries the query optimizer answers from an index, on and off (Ponder only).
    Optimizer,
    /// Mixed gets, updates, inserts and deletes on small values.
    KvCanonical,
    /// Gets only.
    KvSelect,
    /// Inserts of new keys, soft durability.
    KvInsert,
    /// Inserts of new keys, hard durability.
    KvInsertStrong,
    /// Inserts of new 1 KB documents, soft durability.
    Insert1k,
    /// Inserts of new 1 KB documents, hard durability (the durability figures).
    Insert1kStrong,
    /// Gets and updates of 4–64 KB values.
    KvLarge,
    /// YugabyteDB's KV workload, 100% reads.
    YbRead,
    /// YugabyteDB's KV workload, 100% writes.
    YbWrite,
}

/// The kinds of operation, each with its own latency histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// A point read.
    Read,
    /// A write to an existing key.
    Update,
    /// A write of a new key.
    Insert,
    /// A delete.
    Delete,
}

impl OpKind {
    /// All kinds, in histogram order.
    pub const ALL: [OpKind; 4] = [OpKind::Read, OpKind::Update, OpKind::Insert, OpKind::Delete];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Update => "update",
            OpKind::Insert => "insert",
            OpKind::Delete => "delete",
        }
    }

    /// Index into [`OpKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Percentages of each kind of operation (summing to 100).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Reads.
    pub read: u8,
    /// Updates.
    pub update: u8,
    /// Inserts.
    pub insert: u8,
    /// Deletes.
    pub delete: u8,
}

impl Mix {
    /// The kind for a roll in `0..100`.
    pub fn pick(&self, roll: u64) -> OpKind {
        let r = roll % 100;
        let (a, b, c) = (
            u64::from(self.read),
            u64::from(self.read) + u64::from(self.update),
            u64::from(self.read) + u64::from(self.update) + u64::from(self.insert),
        );
        if r < a {
            OpKind::Read
        } else if r < b {
            OpKind::Update
        } else if r < c {
            OpKind::Insert
        } else {
            OpKind::Delete
        }
    }
}

/// The data a workload runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataSpec {
    /// YCSB's usertable.
    Ycsb,
    /// Key-value pairs of a shape.
    Kv(KvShape),
}

impl DataSpec {
    /// The table it lives in.
    pub fn dataset(self) -> Dataset {
        match self {
            DataSpec::Ycsb => Dataset::Ycsb,
            DataSpec::Kv(_) => Dataset::Kv,
        }
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            DataSpec::Ycsb => "ycsb usertable (10 x 100 B fields)",
            DataSpec::Kv(s) if s == KvShape::SMALL => "kv: 8-16 B keys, 8-128 B values",
            DataSpec::Kv(s) if s == KvShape::LARGE => "kv: 8-16 B keys, 4-64 KB values",
            DataSpec::Kv(s) if s == KvShape::ONE_KB => "kv: 8-16 B keys, 1000 B values",
            DataSpec::Kv(_) => "kv: 40 B keys, 16 B values",
        }
    }
}

impl Workload {
    /// Every workload, in the order a full run measures them.
    pub const ALL: [Workload; 13] = [
        Workload::Analytic,
        Workload::Optimizer,
        Workload::YcsbC,
        Workload::YcsbA,
        Workload::KvSelect,
        Workload::KvCanonical,
        Workload::KvInsert,
        Workload::KvInsertStrong,
        Workload::Insert1k,
        Workload::Insert1kStrong,
        Workload::KvLarge,
        Workload::YbRead,
        Workload::YbWrite,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::YcsbA => "ycsb-a",
            Workload::YcsbC => "ycsb-c",
            Workload::Analytic => "analytic",
            Workload::Optimizer => "optimizer",
            Workload::KvCanonical => "kv-canonical",
            Workload::KvSelect => "kv-select",
            Workload::KvInsert => "kv-insert",
            Workload::KvInsertStrong => "kv-insert-strong",
            Workload::Insert1k => "insert-1k",
            Workload::Insert1kStrong => "insert-1k-strong",
            Workload::KvLarge => "kv-large",
            Workload::YbRead => "yb-read",
            Workload::YbWrite => "yb-write",
        }
    }

    /// Its data.
    pub fn data(self) -> DataSpec {
        match self {
            Workload::YcsbA | Workload::YcsbC | Workload::Analytic | Workload::Optimizer => {
                DataSpec::Ycsb
            }
            Workload::KvCanonical
            | Workload::KvSelect
            | Workload::KvInsert
            | Workload::KvInsertStrong => DataSpec::Kv(KvShape::SMALL),
            Workload::KvLarge => DataSpec::Kv(KvShape::LARGE),
            Workload::Insert1k | Workload::Insert1kStrong => DataSpec::Kv(KvShape::ONE_KB),
            Workload::YbRead | Workload::YbWrite => DataSpec::Kv(KvShape::YUGABYTE),
        }
    }

    /// Its operation mix.
    pub fn mix(self) -> Mix {
        let m = |read, update, insert, delete| Mix {
            read,
            update,
            insert,
            delete,
        };
        match self {
            Workload::YcsbA | Workload::KvLarge => m(50, 50, 0, 0),
            Workload::YcsbC
            | Workload::Analytic
            | Workload::Optimizer
            | Workload::KvSelect
            | Workload::YbRead => m(100, 0, 0, 0),
            Workload::KvCanonical => m(70, 15, 10, 5),
            Workload::KvInsert
            | Workload::KvInsertStrong
            | Workload::Insert1k
            | Workload::Insert1kStrong => m(0, 0, 100, 0),
            Workload::YbWrite => m(0, 100, 0, 0),
        }
    }

    /// Durability of its writes.
    pub fn durability(self) -> Durability {
        match self {
            Workload::KvInsert | Workload::Insert1k => Durability::Soft,
            _ => Durability::Hard,
        }
    }

    /// Whether Redis has an equivalent.
    pub fn supported_by_redis(self) -> bool {
        !matches!(self, Workload::Analytic | Workload::Optimizer)
    }

    /// Whether PostgreSQL has an equivalent (the optimizer's queries are ReQL).
    pub fn supported_by_postgres(self) -> bool {
        self != Workload::Optimizer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_add_up_and_pick() {
        for w in Workload::ALL {
            let m = w.mix();
            assert_eq!(
                u32::from(m.read) + u32::from(m.update) + u32::from(m.insert) + u32::from(m.delete),
                100,
                "{}",
                w.name()
            );
        }
        let c = Workload::KvCanonical.mix();
        let mut counts = [0u32; 4];
        for r in 0..100 {
            counts[c.pick(r).index()] += 1;
        }
        assert_eq!(counts, [70, 15, 10, 5]);
        assert_eq!(Workload::YcsbA.mix().pick(49), OpKind::Read);
        assert_eq!(Workload::YcsbA.mix().pick(50), OpKind::Update);
        assert_eq!(Workload::KvInsert.durability(), Durability::Soft);
        assert_eq!(Workload::KvInsertStrong.durability(), Durability::Hard);
        assert_eq!(Workload::YbRead.data(), DataSpec::Kv(KvShape::YUGABYTE));
        assert!(!Workload::Analytic.supported_by_redis());
    }
}
