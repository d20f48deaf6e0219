//! `TableHandle`: one table as `reql` sees it, backed by its shard.

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use reql::error::{internal, logic, op_failed};
use reql::{Change, DatumStream, Durability, ReqlError, Ticket};
use store::{GroupCommit, Shard, StoreChange, StoreError};

/// A table: its configuration and its shard.
pub struct TableHandle {
    pub(crate) db: String,
    pub(crate) name: String,
    pub(crate) primary_key: String,
    pub(crate) durability: Durability,
    pub(crate) shard: Arc<Shard>,
    pub(crate) commit: Arc<GroupCommit>,
}

/// Maps a store error to RethinkDB's error classes.
pub fn store_err(e: StoreError) -> ReqlError {
    match e {
        StoreError::Key(m) => logic(m),
        StoreError::Corrupt(m) => internal(format!("Corrupt document in storage: {m}")),
        StoreError::Storage(e) => op_failed(format!("Storage failure: {e}")),
        StoreError::NotDurable(m) => op_failed(format!("Write could not be made durable: {m}")),
    }
}

struct ReqlFromStore(ReqlError);

impl From<StoreError> for ReqlFromStore {
    fn from(e: StoreError) -> Self {
        ReqlFromStore(store_err(e))
    }
}

impl reql::Table for TableHandle {
    fn db(&self) -> &str {
        &self.db
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn primary_key(&self) -> &str {
        &self.primary_key
    }
    fn durability(&self) -> Durability {
        self.durability
    }
    fn get(&self, key: &Datum) -> reql::Result<Option<Datum>> {
        self.shard.get(key).map_err(store_err)
    }
    fn scan(
        &self,
        lower: Bound<Datum>,
        upper: Bound<Datum>,
        reverse: bool,
    ) -> reql::Result<DatumStream> {
        let it = self.shard.scan(lower, upper, reverse).map_err(store_err)?;
        Ok(Box::new(it.map(|r| r.map_err(store_err))))
    }
    fn count(&self) -> reql::Result<u64> {
        Ok(self.shard.count())
    }
    fn modify(
        &self,
        key: &Datum,
        f: &mut dyn FnMut(Option<&Datum>) -> reql::Result<Change>,
    ) -> reql::Result<(Option<Datum>, Option<Datum>, Option<Ticket>)> {
        let mut g = |old: Option<&Datum>| -> Result<StoreChange, ReqlFromStore> {
            match f(old) {
                Ok(Change::Keep) => Ok(StoreChange::Keep),
                Ok(Change::Put(d)) => Ok(StoreChange::Put(d)),
                Ok(Change::Delete) => Ok(StoreChange::Delete),
                Err(e) => Err(ReqlFromStore(e)),
            }
        };
        self.shard.modify(key, &mut g).map_err(|e| e.0)
    }
    fn sync_ticket(&self) -> Ticket {
        self.commit.last_ticket()
    }
}
