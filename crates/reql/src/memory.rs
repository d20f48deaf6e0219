//! Per-query memory budgets.
//!
//! The server's global allocator reports every allocation and release to [`on_alloc`]
//! and [`on_dealloc`]; they charge the budget of the query whose evaluation runs on the
//! current thread (set by [`Budget::enter`] around evaluation: the start of a query, each
//! batch of its cursor, each range of a parallel scan). Charges gather in a
//! thread-local count and reach the shared counter in steps of [`STEP`] bytes, so the
//! allocator's hot path is a thread-local add. A budget that goes over its limit marks
//! itself and sets the query's interruption flag: evaluation stops at its next check
//! (every document read, function call and `r.range` step; `crate::interrupt`) and the
//! server answers with [`Budget::error`] instead of an interruption. Entering a budget
//! also lets the recursive datum operations see the query's flag (`datum::work`), so
//! printing or comparing a huge shared value stops too.
//!
//! What is counted: bytes allocated minus bytes released on the threads while they
//! evaluate the query, so memory a cursor keeps between batches stays charged and
//! temporary garbage does not accumulate. Memory allocated by one query and released
//! while another evaluates on the same thread is credited to the other (an
//! approximation; the count never goes below zero for the limit check). The functions
//! called by the allocator never allocate, lock or panic.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

/// Bytes gathered per thread before they are added to the shared counter.
pub const STEP: i64 = 64 << 10;

/// The memory budget of one query.
pub struct Budget {
    used: AtomicI64,
    limit: i64,
    over: AtomicBool,
    cancel: Arc<AtomicBool>,
}

thread_local! {
    /// The budget charged on this thread (null: none), and the bytes not yet added to it.
    static CURRENT: Cell<*const Budget> = const { Cell::new(std::ptr::null()) };
    static PENDING: Cell<i64> = const { Cell::new(0) };
}

impl Budget {
    /// A budget of `limit_bytes` that stops the query through `cancel` when exceeded.
    pub fn new(limit_bytes: u64, cancel: Arc<AtomicBool>) -> Arc<Budget> {
        Arc::new(Budget {
            used: AtomicI64::new(0),
            limit: i64::try_from(limit_bytes).unwrap_or(i64::MAX),
            over: AtomicBool::new(false),
            cancel,
        })
    }

    /// Charges this thread's allocations to the budget until the guard is dropped
    /// (nesting restores the previous budget).
    pub fn enter(self: &Arc<Budget>) -> Entered {
        flush();
        let previous = CURRENT.with(|c| c.replace(Arc::as_ptr(self)));
        Entered {
            _budget: self.clone(),
            previous,
            _watch: datum::work::watch(&self.cancel),
        }
    }

    /// Whether the query went over its budget.
    pub fn exceeded(&self) -> bool {
        self.over.load(Ordering::SeqCst)
    }

    /// Bytes charged so far (what has reached the shared counter).
    pub fn used(&self) -> i64 {
        self.used.load(Ordering::Relaxed)
    }

    /// The error a query over its budget fails with.
    pub fn error(&self) -> crate::error::ReqlError {
        crate::error::resource(format!(
            "Query exceeded its memory budget of {} MiB (`--query-memory-mb`).",
            self.limit >> 20
        ))
    }

    fn add(&self, bytes: i64) {
        let now = self.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if now > self.limit && !self.over.swap(true, Ordering::SeqCst) {
            self.cancel.store(true, Ordering::SeqCst);
        }
    }
}

/// The guard of [`Budget::enter`].
pub struct Entered {
    _budget: Arc<Budget>,
    previous: *const Budget,
    /// Lets long datum operations see the query's flag (`datum::work`).
    _watch: datum::work::Watch,
}

impl Drop for Entered {
    fn drop(&mut self) {
        flush();
        let previous = self.previous;
        let _ = CURRENT.try_with(|c| c.set(previous));
    }
}

/// Adds this thread's pending bytes to the current budget.
fn flush() {
    let _ = PENDING.try_with(|p| {
        let bytes = p.replace(0);
        if bytes != 0 {
            charge_now(bytes);
        }
    });
}

fn charge_now(bytes: i64) {
    let _ = CURRENT.try_with(|c| {
        let b = c.get();
        if !b.is_null() {
            // SAFETY: a non-null `CURRENT` points to the budget an `Entered` guard on
            // this thread keeps alive (it holds an `Arc`), and the guard resets it
            // before releasing that `Arc`.
            unsafe { &*b }.add(bytes);
        }
    });
}

#[inline]
fn charge(bytes: i64) {
    let _ = CURRENT.try_with(|c| {
        if c.get().is_null() {
            return;
        }
        let _ = PENDING.try_with(|p| {
            let pending = p.get() + bytes;
            if pending.abs() >= STEP {
                p.set(0);
                charge_now(pending);
            } else {
                p.set(pending);
            }
        });
    });
}

/// Called by the global allocator after allocating `size` bytes.
#[inline]
pub fn on_alloc(size: usize) {
    charge(size as i64);
}

/// Called by the global allocator after releasing `size` bytes.
#[inline]
pub fn on_dealloc(size: usize) {
    charge(-(size as i64));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_reach_the_budget_and_stop_the_query() {
        let cancel = Arc::new(AtomicBool::new(false));
        let b = Budget::new(1 << 20, cancel.clone());
        {
            let _g = b.enter();
            for _ in 0..8 {
                on_alloc(100 << 10);
            }
            on_dealloc(300 << 10);
        }
        assert_eq!(b.used(), 500 << 10);
        assert!(!b.exceeded() && !cancel.load(Ordering::SeqCst));
        {
            let _g = b.enter();
            on_alloc(600 << 10);
        }
        assert!(b.exceeded() && cancel.load(Ordering::SeqCst));
        assert!(b.error().message.contains("memory budget of 1 MiB"));
        // Outside any budget nothing is charged.
        on_alloc(10 << 20);
        assert_eq!(b.used(), 1100 << 10);
    }

    #[test]
    fn nested_budgets_restore_the_outer_one() {
        let a = Budget::new(u64::MAX, Arc::new(AtomicBool::new(false)));
        let b = Budget::new(u64::MAX, Arc::new(AtomicBool::new(false)));
        let _ga = a.enter();
        {
            let _gb = b.enter();
            on_alloc(STEP as usize);
        }
        on_alloc(STEP as usize);
        drop(_ga);
        assert_eq!((a.used(), b.used()), (STEP, STEP));
    }
}
