//! The `TableAccess` seam: everything the evaluator needs from the catalog and tables.
//!
//! `reql` defines these traits and the `cluster` crate implements them, so evaluation is
//! testable with an in-memory double and knows nothing of storage.

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;

use crate::error::Result;
use crate::value::DatumStream;

/// Write durability: `Hard` is acknowledged only once on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Acknowledge after fsync.
    Hard,
    /// Acknowledge after the write is applied; flushed soon after.
    Soft,
}

impl Durability {
    /// Parses RethinkDB's `durability` option value.
    pub fn parse(s: &str) -> Option<Durability> {
        match s {
            "hard" => Some(Durability::Hard),
            "soft" => Some(Durability::Soft),
            _ => None,
        }
    }

    /// The option's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Hard => "hard",
            Durability::Soft => "soft",
        }
    }
}

/// Options of `table_create`.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// The primary key field (default `id`).
    pub primary_key: String,
    /// The table's default durability.
    pub durability: Durability,
    /// Shards requested (recorded; one shard is served today).
    pub shards: u32,
    /// Replicas requested (recorded).
    pub replicas: u32,
}

/// What a read-modify-write wants done with one document.
#[derive(Debug, Clone)]
pub enum Change {
    /// Leave the document as it is.
    Keep,
    /// Store this document (insert or replace).
    Put(Datum),
    /// Delete the document.
    Delete,
}

/// A commit ticket: a write applied in memory that becomes durable once the storage
/// flush watermark reaches it.
pub type Ticket = u64;

/// One table as the evaluator sees it.
pub trait Table: Send + Sync {
    /// The database name.
    fn db(&self) -> &str;
    /// The table name.
    fn name(&self) -> &str;
    /// The primary key field.
    fn primary_key(&self) -> &str;
    /// The table's default durability.
    fn durability(&self) -> Durability;
    /// A document by primary key.
    fn get(&self, key: &Datum) -> Result<Option<Datum>>;
    /// Documents in primary-key order between two bounds, lazily.
    fn scan(&self, lower: Bound<Datum>, upper: Bound<Datum>, reverse: bool) -> Result<DatumStream>;
    /// The number of documents.
    fn count(&self) -> Result<u64>;
    /// Atomically reads the document under `key`, asks `f` what to do, and applies it.
    /// Returns the old and new document and the ticket of the write, if one was made.
    fn modify(
        &self,
        key: &Datum,
        f: &mut dyn FnMut(Option<&Datum>) -> Result<Change>,
    ) -> Result<(Option<Datum>, Option<Datum>, Option<Ticket>)>;
    /// A ticket covering every write made so far (for `sync`).
    fn sync_ticket(&self) -> Ticket;
}

/// The catalog and table lookup.
pub trait TableAccess: Send + Sync {
    /// `db_create`: the result object.
    fn db_create(&self, name: &str) -> Result<Datum>;
    /// `db_drop`: the result object.
    fn db_drop(&self, name: &str) -> Result<Datum>;
    /// `db_list`.
    fn db_list(&self) -> Result<Vec<String>>;
    /// The configuration document of a database (`{id, name}`).
    fn db_config(&self, name: &str) -> Result<Datum>;
    /// Fails with RethinkDB's error when the database does not exist.
    fn check_db(&self, name: &str) -> Result<()>;
    /// `table_create`: the result object.
    fn table_create(&self, db: &str, name: &str, opts: TableOptions) -> Result<Datum>;
    /// `table_drop`: the result object.
    fn table_drop(&self, db: &str, name: &str) -> Result<Datum>;
    /// `table_list`.
    fn table_list(&self, db: &str) -> Result<Vec<String>>;
    /// A table by name.
    fn table(&self, db: &str, name: &str) -> Result<Arc<dyn Table>>;
    /// The configuration document of a table (as `table.config()` shows it).
    fn table_config(&self, db: &str, name: &str) -> Result<Datum>;
}
