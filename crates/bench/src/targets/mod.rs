//! The systems under test and one client connection to each, behind one
//! enum ([`Conn`]) with the operations the workloads need. Each system
//! stores the same data the way its users would:
//!
//! | data | Ponder | PostgreSQL | Redis |
//! | --- | --- | --- | --- |
//! | YCSB record | document `{id, field0..9}` in `bench.usertable` | `usertable(ycsb_key text primary key, doc jsonb)` | a hash `field0..9` |
//! | key-value pair | document `{id, v}` in `bench.kv` | `kv(k text primary key, v text)` | a string |
//!
//! Durability is a property of the connection ([`Durability`]): Ponder
//! passes `durability` with each write; PostgreSQL sets the session's
//! `synchronous_commit`; Redis has only its server-wide `appendfsync`.

mod ponder;
pub use ponder::{DB as PONDER_DB, USERTABLE};
mod postgres;
mod redis;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A system under test.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    clap::ValueEnum,
    Serialize,
    Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SystemKind {
    /// Ponder over the RethinkDB driver protocol.
    Ponder,
    /// PostgreSQL over its wire protocol, prepared statements, JSONB.
    Postgres,
    /// Redis over RESP.
    Redis,
}

impl SystemKind {
    /// Lower-case name, as in result files.
    pub fn name(self) -> &'static str {
        match self {
            SystemKind::Ponder => "ponder",
            SystemKind::Postgres => "postgres",
            SystemKind::Redis => "redis",
        }
    }

    /// The port a started server gets by default.
    pub fn default_port(self) -> u16 {
        match self {
            SystemKind::Ponder => 28115,
            SystemKind::Postgres => 25432,
            SystemKind::Redis => 26379,
        }
    }
}

/// How writes are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// On disk before the acknowledgement (Ponder `hard`, PostgreSQL
    /// `synchronous_commit=on`).
    Hard,
    /// Acknowledged before the flush (Ponder `soft`, PostgreSQL
    /// `synchronous_commit=off`).
    Soft,
}

impl Durability {
    /// `hard` or `soft`.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Hard => "hard",
            Durability::Soft => "soft",
        }
    }
}

/// The two data sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dataset {
    /// YCSB's usertable.
    Ycsb,
    /// Key-value pairs.
    Kv,
}

/// Where a system is and how to talk to it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Which system.
    pub kind: SystemKind,
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
    /// User (Ponder: `admin`; PostgreSQL: `bench`).
    pub user: String,
    /// Password.
    pub password: String,
    /// Ponder's `read_mode` table option (`single`, `outdated`, `majority`).
    pub read_mode: String,
}

impl Endpoint {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Errors of one operation or of setup.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// From the Ponder driver.
    #[error("ponder: {0}")]
    Ponder(#[from] client::Error),
    /// From PostgreSQL.
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// From Redis.
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    /// The server answered, but not as expected.
    #[error("unexpected answer: {0}")]
    Unexpected(String),
    /// The system has no equivalent of the operation.
    #[error("{0} is not supported by {1}")]
    Unsupported(&'static str, &'static str),
}

/// One connection to a system under test.
pub enum Conn {
    /// Ponder.
    Ponder(ponder::PonderConn),
    /// PostgreSQL (boxed: it holds its prepared statements).
    Postgres(Box<postgres::PgConn>),
    /// Redis.
    Redis(redis::RedisConn),
}

/// Dispatches a call to the connection's system.
macro_rules! each {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            Conn::Ponder($c) => $e,
            Conn::Postgres($c) => $e,
            Conn::Redis($c) => $e,
        }
    };
}

impl Conn {
    /// Opens one connection whose writes have durability `d`.
    pub async fn connect(ep: &Endpoint, d: Durability) -> Result<Conn, TargetError> {
        Ok(match ep.kind {
            SystemKind::Ponder => Conn::Ponder(ponder::PonderConn::connect(ep, d).await?),
            SystemKind::Postgres => {
                Conn::Postgres(Box::new(postgres::PgConn::connect(ep, d).await?))
            }
            SystemKind::Redis => Conn::Redis(redis::RedisConn::connect(ep).await?),
        })
    }

    /// The server's version and the settings that matter to the figures.
    pub async fn describe(&self) -> Result<(String, BTreeMap<String, String>), TargetError> {
        each!(self, c => c.describe().await)
    }

    /// Drops and creates the data set's table (Redis: `FLUSHALL`).
    pub async fn reset(&self, ds: Dataset) -> Result<(), TargetError> {
        each!(self, c => c.reset(ds).await)
    }

    /// Inserts YCSB records (key, 10 fields) in one request.
    pub async fn ycsb_insert(&self, recs: &[(String, Vec<String>)]) -> Result<(), TargetError> {
        each!(self, c => c.ycsb_insert(recs).await)
    }

    /// Reads a YCSB record's 10 fields (`None` if absent).
    pub async fn ycsb_read(&self, key: &str) -> Result<Option<Vec<String>>, TargetError> {
        each!(self, c => c.ycsb_read(key).await)
    }

    /// Sets one field of an existing YCSB record.
    pub async fn ycsb_update(
        &self,
        key: &str,
        field: usize,
        value: &str,
    ) -> Result<(), TargetError> {
        each!(self, c => c.ycsb_update(key, field, value).await)
    }

    /// Runs a ReQL term (JSON wire form) with global optargs: Ponder only (the
    /// `optimizer` workload's queries).
    pub async fn reql(&self, term: Value, optargs: Value) -> Result<Value, TargetError> {
        match self {
            Conn::Ponder(c) => c.run_raw(term, optargs).await,
            Conn::Postgres(_) => Err(TargetError::Unsupported("ReQL queries", "postgres")),
            Conn::Redis(_) => Err(TargetError::Unsupported("ReQL queries", "redis")),
        }
    }

    /// `table.map(r.row('field0').split('.').count()).sum()` or its equivalent.
    pub async fn analytic(&self) -> Result<u64, TargetError> {
        each!(self, c => c.analytic().await)
    }

    /// Inserts key-value pairs in one request.
    pub async fn kv_insert_many(&self, kvs: &[(String, String)]) -> Result<(), TargetError> {
        each!(self, c => c.kv_insert_many(kvs).await)
    }

    /// Reads a value (`None` if absent).
    pub async fn kv_get(&self, key: &str) -> Result<Option<String>, TargetError> {
        each!(self, c => c.kv_get(key).await)
    }

    /// Inserts or replaces a value.
    pub async fn kv_put(&self, key: &str, value: &str) -> Result<(), TargetError> {
        each!(self, c => c.kv_put(key, value).await)
    }

    /// Inserts a value under a new key (an existing key is an error).
    pub async fn kv_insert(&self, key: &str, value: &str) -> Result<(), TargetError> {
        each!(self, c => c.kv_insert(key, value).await)
    }

    /// Deletes a key (absent is fine).
    pub async fn kv_delete(&self, key: &str) -> Result<(), TargetError> {
        each!(self, c => c.kv_delete(key).await)
    }
}

/// The YCSB record's fields, in order, from a JSON document (Ponder and PostgreSQL store
/// the record the same way); a missing or non-string field is an error.
pub(crate) fn ycsb_fields(doc: &serde_json::Value, key: &str) -> Result<Vec<String>, TargetError> {
    (0..crate::data::FIELDS)
        .map(|f| {
            doc.get(crate::data::field_name(f))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| TargetError::Unexpected(format!("{key} lacks field{f}")))
        })
        .collect()
}
