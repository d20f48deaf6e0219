//! Whose memory the engine's allocations are: the engine's, not the query's.
//!
//! The server charges every allocation on a thread to the query evaluating there
//! (`reql::memory`). Reads fill the engine's block cache, and writes its memtable:
//! memory the engine keeps and bounds by itself, which must not count against the
//! query that happened to cause it (with a large `--cache-size`, a scan would otherwise
//! be stopped for filling the cache). The engine marks its own work with
//! [`EngineScope`]; the allocator asks [`inside_engine`] before charging. What a read
//! hands out is charged to the reader: copies are made outside the scope, and a value
//! that is a view of the engine's buffers charges its length through the hook set with
//! [`set_view_charge`] while it lives.

use std::cell::Cell;
use std::sync::OnceLock;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// True while this thread runs inside the engine (its allocations are the engine's).
#[inline]
pub fn inside_engine() -> bool {
    DEPTH.try_with(|d| d.get() > 0).unwrap_or(false)
}

/// Marks this thread as working inside the engine until dropped (nests).
pub(crate) struct EngineScope(());

impl EngineScope {
    pub(crate) fn enter() -> EngineScope {
        let _ = DEPTH.try_with(|d| d.set(d.get() + 1));
        EngineScope(())
    }
}

impl Drop for EngineScope {
    fn drop(&mut self) {
        let _ = DEPTH.try_with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Charges (positive) or credits (negative) bytes to the reader's budget.
static VIEW_CHARGE: OnceLock<fn(isize)> = OnceLock::new();

/// Sets how a value that is a view of the engine's buffers is charged to whoever
/// holds it (once per process; later calls are ignored).
pub fn set_view_charge(f: fn(isize)) {
    let _ = VIEW_CHARGE.set(f);
}

/// An engine buffer handed out as a value: charged while it lives.
pub(crate) struct Charged<T: AsRef<[u8]>>(T);

impl<T: AsRef<[u8]>> Charged<T> {
    pub(crate) fn new(v: T) -> Charged<T> {
        if let Some(f) = VIEW_CHARGE.get() {
            f(v.as_ref().len() as isize);
        }
        Charged(v)
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Charged<T> {
    fn as_ref(&self) -> &[u8] {
        self.0.as_ref()
    }
}

impl<T: AsRef<[u8]>> Drop for Charged<T> {
    fn drop(&mut self) {
        if let Some(f) = VIEW_CHARGE.get() {
            f(-(self.0.as_ref().len() as isize));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest() {
        assert!(!inside_engine());
        {
            let _a = EngineScope::enter();
            let _b = EngineScope::enter();
            assert!(inside_engine());
        }
        assert!(!inside_engine());
    }
}
