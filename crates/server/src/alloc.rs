//! The binary's global allocator: mimalloc, reporting every allocation and release to
//! `reql::memory`, which charges them to the budget of the query evaluating on the
//! current thread (if any), except those the storage engine makes for its own caches
//! (`storage::accounting`). The wrapper itself allocates nothing and never panics.

use std::alloc::{GlobalAlloc, Layout};

/// mimalloc with per-query accounting.
pub struct Counting;

static INNER: mimalloc::MiMalloc = mimalloc::MiMalloc;

// SAFETY: every call is forwarded unchanged to mimalloc, a correct `GlobalAlloc`; the
// accounting calls only touch thread-local cells and atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { INNER.alloc(layout) };
        if !p.is_null() {
            charge_alloc(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { INNER.alloc_zeroed(layout) };
        if !p.is_null() {
            charge_alloc(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { INNER.dealloc(ptr, layout) };
        charge_dealloc(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { INNER.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            charge_dealloc(layout.size());
            charge_alloc(new_size);
        }
        p
    }
}

#[inline]
fn charge_alloc(size: usize) {
    if !storage::accounting::inside_engine() {
        reql::memory::on_alloc(size);
    }
}

#[inline]
fn charge_dealloc(size: usize) {
    if !storage::accounting::inside_engine() {
        reql::memory::on_dealloc(size);
    }
}

/// How a value that is a view of the engine's buffers is charged to its holder.
pub fn charge_view(bytes: isize) {
    if bytes >= 0 {
        reql::memory::on_alloc(bytes.unsigned_abs());
    } else {
        reql::memory::on_dealloc(bytes.unsigned_abs());
    }
}
