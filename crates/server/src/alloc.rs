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
//!
//! It also turns transparent huge pages off for the process (`PR_SET_THP_DISABLE`, what
//! mimalloc does itself when started with `MIMALLOC_ALLOW_THP=0`, which still decides
//! when set). With them, every fault in a fresh 2 MiB region of mimalloc's arenas zeroed
//! the whole huge page: a quarter of the bulk load's server CPU was `clear_page_erms`,
//! and system time half of it; without them a load costs about a quarter less CPU per
//! document and peak memory is 30-55 MB lower, reads and updates unchanged within the
//! noise (docs/performance.md, twelfth session).

use std::alloc::{GlobalAlloc, Layout};

use libmimalloc_sys as mi;

/// mimalloc's `mi_option_purge_delay` (its place in `mi_option_e`, the same in
/// mimalloc 2 and 3; libmimalloc-sys names no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Milliseconds freed memory stays resident before mimalloc returns it (module notes).
pub const PURGE_DELAY_MS: i32 = 1000;

/// Sets mimalloc's options; call first thing in `main` (options are read as they
/// are used, so this takes effect for everything freed afterwards). mimalloc's own
/// `MIMALLOC_PURGE_DELAY` environment variable, when set, still decides.
pub fn configure() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        disable_huge_pages();
    }
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: `mi_option_set` only stores the value in mimalloc's option table.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS.into());
    }
}

/// Asks the kernel not to back this process's memory with transparent huge pages
/// (module notes). The flag is checked at each fault, so it covers the regions
/// mimalloc reserved before `main`. Best effort: a kernel without the call leaves
/// things as they were, which is only slower.
#[cfg(target_os = "linux")]
fn disable_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes plain integer arguments and changes a flag of
    // this process's memory descriptor only.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

#[cfg(not(target_os = "linux"))]
fn disable_huge_pages() {}

/// Whether transparent huge pages are off for this process.
#[cfg(target_os = "linux")]
pub fn huge_pages_disabled() -> bool {
    // SAFETY: PR_GET_THP_DISABLE only reads the flag.
    unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1 }
}

/// The purge delay mimalloc uses now, in ms.
pub fn purge_delay_ms() -> std::ffi::c_long {
    // SAFETY: reads mimalloc's option table.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
}

/// mimalloc with per-query accounting.
pub struct Counting;

/// The alignment every mimalloc block has whatever its size: blocks are whole words.
/// A layout asking no more goes to `mi_malloc` and friends; `MiMalloc` sends every
/// layout to `mi_malloc_aligned`, whose fast path only serves blocks of at most 1 KiB
/// and checks the alignment even then: 460 instructions more per point read, which
/// makes about ten allocations (docs/performance.md, eleventh session).
const WORD_ALIGN: usize = std::mem::size_of::<usize>();

// SAFETY: every call is forwarded to mimalloc: to its plain functions when the layout
// asks for no more than word alignment (which all of mimalloc's blocks have), else to
// its aligned ones, as `MiMalloc` does; both kinds of block are freed by `mi_free`.
// The accounting calls only touch thread-local cells and atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation functions accept any size and alignment.
        let p = unsafe {
            if layout.align() <= WORD_ALIGN {
                mi::mi_malloc(layout.size())
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align())
            }
        }
        .cast::<u8>();
        if !p.is_null() {
            charge_alloc(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe {
            if layout.align() <= WORD_ALIGN {
                mi::mi_zalloc(layout.size())
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align())
            }
        }
        .cast::<u8>();
        if !p.is_null() {
            charge_alloc(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from one of mimalloc's functions above.
        unsafe { mi::mi_free(ptr.cast()) };
        charge_dealloc(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from mimalloc with `layout`; the alignment is kept.
        let p = unsafe {
            if layout.align() <= WORD_ALIGN {
                mi::mi_realloc(ptr.cast(), new_size)
            } else {
                mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align())
            }
        }
        .cast::<u8>();
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

    #[cfg(target_os = "linux")]
    #[test]
    fn configure_turns_huge_pages_off() {
        configure();
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
            assert!(huge_pages_disabled());
        }
    }
}
