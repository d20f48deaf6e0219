//! `SpaceName`: the storage space a shard's documents or an index's entries live in,
//! which a replicated shard moves when a snapshot is installed (`Shard::attach`).
//!
//! Readers take the current name (an `Arc` clone: no allocation) before each engine
//! call, so a reader after a switch reads the new space; one that took the old name
//! just before reads the old space, which the replication layer drops only after the
//! switch (an engine snapshot taken before still sees it).

use std::sync::Arc;

use parking_lot::RwLock;

/// A space name that can be switched while readers use it.
pub(crate) struct SpaceName(RwLock<Arc<str>>);

impl SpaceName {
    pub(crate) fn new(name: &str) -> SpaceName {
        SpaceName(RwLock::new(Arc::from(name)))
    }

    /// The current name.
    pub(crate) fn get(&self) -> Arc<str> {
        self.0.read().clone()
    }

    /// Switches to `name`; true when it differs from the current one.
    pub(crate) fn set(&self, name: &str) -> bool {
        let mut cur = self.0.write();
        if &**cur == name {
            return false;
        }
        *cur = Arc::from(name);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_switches_and_says_whether_it_changed() {
        let s = SpaceName::new("a");
        let before = s.get();
        assert!(!s.set("a"));
        assert!(s.set("b"));
        assert_eq!(&*s.get(), "b");
        // A name taken before the switch stays what it was.
        assert_eq!(&*before, "a");
    }
}
