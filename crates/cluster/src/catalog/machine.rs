//! The catalog replicated on Raft: [`CatalogMachine`], the `replication::StateMachine`
//! whose log entries are `CatalogCommand`s (`super::wire`).
//!
//! Every replica applies an entry through the catalog's one apply path
//! (`CatalogGuard::commit_with`): under the catalog lock, the pure `stage` validates the
//! command against the state and stages every changed record; the staged batch becomes
//! the entry's, committed with its log position by `ApplyCtx::commit`; only then does
//! the in-memory catalog switch, and the node's side effects follow from the `Outcome`
//! ([`CatalogEffects::applied`], still under the lock, so they follow committed
//! entries in log order). A single server's path differs only in its commit (its own
//! batch, fsynced).
//!
//! The records live in two spaces named by kind, [`CATALOG_KIND`] and [`USERS_KIND`],
//! in the same format as a single server's `catalog` and `users` spaces, plus the
//! `format` record, written with the first entry that finds it missing. After a
//! snapshot install, `attach` moves the catalog to the installed spaces, reads its
//! state from them and calls [`CatalogEffects::reloaded`].
//!
//! Invariants: `apply` is deterministic: commands carry every id, split point and
//! credential (chosen by the proposer), and applying one reads only the catalog's state
//! and generates nothing. A command that does not decode, fails validation, or whose
//! records the engine cannot hold is answered with a refusal reply carrying RethinkDB's
//! error and writes nothing; only a storage failure is an `Err`. The catalog's local
//! `apply` is refused on a replicated catalog, so its records change only by entries.

use std::ops::Bound;
use std::sync::Arc;

use replication::{ApplyCtx, StateMachine};
use storage::{Engine, StorageError, WriteBatch};

use super::apply::{ApplyError, Catalog, Outcome, Spaces, FORMAT_KEY, FORMAT_VERSION};
use super::wire::{decode_command, encode_applied, encode_refusal};
use super::ClusterError;
use reql::error::op_failed;

/// The space kind of the databases' and tables' records.
pub const CATALOG_KIND: &str = "catalog";
/// The space kind of the users' records.
pub const USERS_KIND: &str = "users";

/// What a node does when its replicated catalog changes: the side effects outside the
/// catalog (tables' storage and handles, index builds, feeds). Given to the machine at
/// open; the node's `Cluster` is one (`Cluster::open_replicated`); which of them apply
/// on this node (placement) is the implementation's decision.
///
/// Both are called from the task applying the group's entries, in log order:
/// `applied` under the catalog lock, `reloaded` right after the switch. Neither may
/// take the catalog lock (nor wait for anything that does).
pub trait CatalogEffects: Send + Sync + 'static {
    /// A committed entry changed the catalog as `outcome` says (the records are
    /// committed and the in-memory catalog switched).
    fn applied(&self, outcome: &Outcome);

    /// The catalog was replaced wholesale by a snapshot install: reconcile with it.
    fn reloaded(&self);
}

/// One record of a catalog: its space kind, key and value.
pub type Record = (String, Vec<u8>, Vec<u8>);

/// The catalog as a replicated state machine.
pub struct CatalogMachine {
    catalog: Arc<Catalog>,
    effects: Arc<dyn CatalogEffects>,
}

/// The machine's space kinds, in order.
pub fn space_kinds() -> Vec<String> {
    vec![CATALOG_KIND.to_owned(), USERS_KIND.to_owned()]
}

pub(crate) fn spaces_of(names: &[String]) -> Result<Spaces, StorageError> {
    match names {
        [catalog, users] => Ok(Spaces {
            catalog: catalog.clone(),
            users: users.clone(),
        }),
        _ => Err(StorageError::NoSuchSpace(USERS_KIND.into())),
    }
}

/// The catalog of the group stored under `prefix`, opened where its state is now.
pub(crate) fn open_catalog(engine: Arc<dyn Engine>, prefix: &str) -> Result<Catalog, ClusterError> {
    let names = replication::state_spaces(&*engine, prefix, &space_kinds())
        .map_err(|e| ClusterError::Corrupt(format!("replicated catalog state: {e}")))?;
    Catalog::open_replicated(engine, spaces_of(&names)?)
}

impl CatalogMachine {
    /// Opens the catalog of the group stored under `prefix` on the spaces where its
    /// state is now (so the `StateMachineStore::open` that follows, with the same
    /// prefix, attaches it where it already is). A new group's catalog is empty.
    pub fn open(
        engine: Arc<dyn Engine>,
        prefix: &str,
        effects: Arc<dyn CatalogEffects>,
    ) -> Result<CatalogMachine, ClusterError> {
        let catalog = Arc::new(open_catalog(engine, prefix)?);
        Ok(CatalogMachine::with_catalog(catalog, effects))
    }

    pub(crate) fn with_catalog(
        catalog: Arc<Catalog>,
        effects: Arc<dyn CatalogEffects>,
    ) -> CatalogMachine {
        CatalogMachine { catalog, effects }
    }

    /// Every record of the catalog now: `(kind, key, value)`, in key order (replicas
    /// with the same catalog have the same records, byte for byte).
    pub fn records(&self) -> Result<Vec<Record>, StorageError> {
        let spaces = self.catalog.lock().spaces();
        let snap = self.catalog.engine().snapshot();
        let mut out = Vec::new();
        for (kind, space) in [(CATALOG_KIND, spaces.catalog), (USERS_KIND, spaces.users)] {
            for kv in snap.range(&space, Bound::Unbounded, Bound::Unbounded, false)? {
                let (k, v) = kv?;
                out.push((kind.to_owned(), k.to_vec(), v.to_vec()));
            }
        }
        Ok(out)
    }

    /// The names of the databases and tables (`db.table`), sorted.
    pub fn names(&self) -> (Vec<String>, Vec<String>) {
        let st = self.catalog.read_state();
        let dbs = st.dbs.keys().cloned().collect();
        let tables = st.tables.keys().map(|(d, t)| format!("{d}.{t}")).collect();
        (dbs, tables)
    }
}

impl StateMachine for CatalogMachine {
    fn space_kinds(&self) -> Vec<String> {
        space_kinds()
    }

    fn apply(&mut self, ctx: &mut ApplyCtx<'_>, command: &[u8]) -> Result<Vec<u8>, StorageError> {
        let cmd = match decode_command(command) {
            Ok(c) => c,
            Err(e) => return Ok(encode_refusal(&e)),
        };
        let mut g = self.catalog.lock();
        let spaces = g.spaces();
        if ctx.space(CATALOG_KIND)? != spaces.catalog || ctx.space(USERS_KIND)? != spaces.users {
            // The catalog must be where the adaptor keeps the state (`attach`).
            return Err(StorageError::Engine(
                "the catalog is not attached to its group's spaces".into(),
            ));
        }
        let mut extra = WriteBatch::new();
        if ctx.get(CATALOG_KIND, FORMAT_KEY)?.is_none() {
            let version = FORMAT_VERSION.to_string().into_bytes();
            extra.put(&spaces.catalog, FORMAT_KEY.to_vec(), version);
        }
        let commit = |mut b: WriteBatch| {
            // Records the engine cannot hold (e.g. a key over its limit): refused alike
            // on every replica, with the error a single server's write gives.
            if let Err(e) = b.validate() {
                return Err(ApplyError::Refused(op_failed(format!(
                    "Could not write the catalog: {e}"
                ))));
            }
            // The machine stages nothing through the context itself: its batch is empty.
            std::mem::swap(ctx.batch_mut().map_err(ApplyError::Storage)?, &mut b);
            ctx.commit().map_err(ApplyError::Storage)
        };
        match g.commit_with(std::slice::from_ref(&cmd), extra, commit) {
            Ok(mut outs) => {
                let out = outs.pop().unwrap_or_default();
                self.effects.applied(&out);
                Ok(encode_applied(&out))
            }
            Err(ApplyError::Refused(e)) => Ok(encode_refusal(&e)),
            Err(ApplyError::Storage(e)) => Err(e),
        }
    }

    fn attach(&mut self, spaces: &[String]) -> Result<(), StorageError> {
        let moved = self
            .catalog
            .attach(spaces_of(spaces)?)
            .map_err(|e| match e {
                ClusterError::Storage(e) => e,
                e => StorageError::Engine(e.to_string()),
            })?;
        if moved {
            self.effects.reloaded();
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
