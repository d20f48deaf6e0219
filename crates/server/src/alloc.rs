//! The binary's global allocator: mimalloc, reporting every allocation and release to
//! `reql::memory`, which charges them to the budget of the query evaluating on the
//! current thread (if any), except those the storage engine makes for its own caches
//! (`storage::accounting`). The wrapper itself allocates nothing and never panics.
//!
//! [`configure`] sets mimalloc's purge delay: how long memory freed back to mimalloc
//! stays committed (resident) before it is returned to the OS. mimalloc 3's default is
//! a second, and Ponder keeps it: 10 ms (mimalloc 2's default) took the server's peak
//! memory in YCSB A and in the load from about 300 and 140 MB to 280 and 117 MB (32 MiB
//! memtables, 96 MB cache; docs/decisions.md), but each freed page is then faulted back
//! in by the next burst, and page faults were already 12–15% of the bulk load's server
//! CPU. `MIMALLOC_PURGE_DELAY` still decides when set.

use std::alloc::{GlobalAlloc, Layout};

/// mimalloc's `mi_option_purge_delay` (its place in `mi_option_e`, the same in
/// mimalloc 2 and 3; libmimalloc-sys names no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Milliseconds freed memory stays resident before mimalloc returns it (module notes).
pub const PURGE_DELAY_MS: i32 = 1000;

/// Sets mimalloc's options; call first thing in `main` (options are read as they
/// are used, so this takes effect for everything freed afterwards). mimalloc's own
/// `MIMALLOC_PURGE_DELAY` environment variable, when set, still decides.
pub fn configure() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: `mi_option_set` only stores the value in mimalloc's option table.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS.into());
    }
}

/// The purge delay mimalloc uses now, in ms.
pub fn purge_delay_ms() -> std::ffi::c_long {
    // SAFETY: reads mimalloc's option table.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configure_sets_the_purge_delay() {
        configure();
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(purge_delay_ms(), std::ffi::c_long::from(PURGE_DELAY_MS));
        }
    }
}
