//! The trait a higher layer implements to have its state replicated: [`StateMachine`].
//!
//! A machine keeps its state in a few storage spaces of the group's engine, named by
//! *kind* (`"docs"`, `"index"`, ...). The adaptor ([`crate::StateMachineStore`]) owns the
//! actual space names: after a snapshot is installed the state lives in a fresh set of
//! spaces, and the machine is told through [`StateMachine::attach`].
//!
//! Invariants the machine must keep:
//! * `apply` is deterministic: the same state and the same command give the same writes
//!   and the same reply on every replica. No clock, no randomness, no I/O besides `ctx`.
//! * All its state lives in the spaces of its kinds, written only through `ctx` inside
//!   `apply` (the adaptor commits them atomically with the applied log position, and
//!   snapshots copy exactly those spaces).
//! * A command it cannot decode or execute is answered with an error *reply* (which the
//!   proposer decodes); an `Err` from `apply` means the storage failed and stops the
//!   node.
//! * State derived from the spaces and kept in memory (caches, counters, notifications
//!   to readers) changes only after the writes it follows are committed: the machine
//!   calls [`ApplyCtx::commit`] inside `apply` (the entry's writes and log position are
//!   then one committed batch) and updates that state before returning, under whatever
//!   locks it took to read; and rebuilds it in [`StateMachine::attach`].

use storage::{Engine, StorageError, WriteBatch};

/// A deterministic state machine whose commands arrive through the Raft log.
pub trait StateMachine: Send + Sync + 'static {
    /// The kinds of spaces the state lives in; fixed for the machine's lifetime (their
    /// position is how snapshot chunks name them).
    fn space_kinds(&self) -> Vec<String>;

    /// Applies one command. Reads through `ctx` see the state as of before this entry;
    /// writes made through `ctx` are committed atomically with the entry's log position.
    fn apply(&mut self, ctx: &mut ApplyCtx<'_>, command: &[u8]) -> Result<Vec<u8>, StorageError>;

    /// Tells the machine where its state lives: called at open and after every snapshot
    /// install (the state was replaced wholesale; caches derived from it are stale).
    /// `spaces[i]` is the space of kind `space_kinds()[i]`. Readers outside `apply` must
    /// learn the new names from here (e.g. a shared handle the machine updates): the
    /// previous spaces are dropped right after this call, and only engine snapshots
    /// taken before still see them.
    ///
    /// An `Err` means the storage failed (it stops the node, like one from `apply`).
    fn attach(&mut self, spaces: &[String]) -> Result<(), StorageError> {
        let _ = spaces;
        Ok(())
    }
}

/// The state machine's access to its spaces while one entry is applied.
pub struct ApplyCtx<'a> {
    engine: &'a dyn Engine,
    kinds: &'a [String],
    spaces: &'a [String],
    index: u64,
    /// Where the entry's position is recorded, and its record (written with the batch).
    position: (&'a str, &'a [u8], Vec<u8>),
    pub(crate) batch: WriteBatch,
    committed: bool,
}

impl<'a> ApplyCtx<'a> {
    pub(crate) fn new(
        engine: &'a dyn Engine,
        kinds: &'a [String],
        spaces: &'a [String],
        index: u64,
        position: (&'a str, &'a [u8], Vec<u8>),
    ) -> Self {
        Self {
            engine,
            kinds,
            spaces,
            index,
            position,
            batch: WriteBatch::new(),
            committed: false,
        }
    }

    /// Commits the writes staged so far with the entry's log position, as one atomic
    /// batch, now rather than after `apply` returns: the machine can then update the
    /// in-memory state derived from them before returning (module note). Writes after
    /// it are refused; the adaptor commits nothing more for the entry.
    pub fn commit(&mut self) -> Result<(), StorageError> {
        if self.committed {
            return Err(Self::closed());
        }
        let mut batch = std::mem::take(&mut self.batch);
        let (space, key, record) = (self.position.0, self.position.1, &self.position.2);
        batch.put(space, key, record.as_slice());
        self.committed = true;
        self.engine.apply(batch)
    }

    /// True once [`Self::commit`] ran.
    pub fn is_committed(&self) -> bool {
        self.committed
    }

    /// The batch of the entry's writes, for a machine that stages them itself (in the
    /// spaces [`Self::space`] names); committed like those of [`Self::put`].
    pub fn batch_mut(&mut self) -> Result<&mut WriteBatch, StorageError> {
        if self.committed {
            return Err(Self::closed());
        }
        Ok(&mut self.batch)
    }

    fn closed() -> StorageError {
        StorageError::Engine("the entry's writes were already committed".into())
    }

    /// The log index of the entry being applied.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// The space currently holding `kind`.
    pub fn space(&self, kind: &str) -> Result<&'a str, StorageError> {
        self.kinds
            .iter()
            .position(|k| k == kind)
            .and_then(|i| self.spaces.get(i))
            .map(String::as_str)
            .ok_or_else(|| StorageError::NoSuchSpace(kind.to_owned()))
    }

    /// The value of `key` in `kind`'s space, as of before this entry.
    pub fn get(&self, kind: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.engine.get(self.space(kind)?, key)
    }

    /// The engine, for reads beyond point gets (take a snapshot and scan [`Self::space`]).
    pub fn engine(&self) -> &'a dyn Engine {
        self.engine
    }

    /// Stores `value` under `key` in `kind`'s space when the entry commits.
    pub fn put(&mut self, kind: &str, key: &[u8], value: &[u8]) -> Result<(), StorageError> {
        let space = self.space(kind)?;
        self.batch_mut()?.put(space, key, value);
        Ok(())
    }

    /// Deletes `key` from `kind`'s space when the entry commits.
    pub fn delete(&mut self, kind: &str, key: &[u8]) -> Result<(), StorageError> {
        let space = self.space(kind)?;
        self.batch_mut()?.delete(space, key);
        Ok(())
    }
}

#[cfg(test)]
#[path = "state_machine_tests.rs"]
mod tests;
