//! Interrupting long operations over one datum.
//!
//! Values share their parts (`Arc`), so a small value can stand for an exponentially
//! larger tree: `r.range(40).fold([1], (acc, x) => [acc, acc])` holds 41 arrays but
//! prints, compares or encodes as 2^40 elements. The recursive operations over datums
//! (`order::cmp`, the JSON writers, key encoding) therefore call [`tick`] once per value
//! they visit; every 4,096 ticks it reads the interruption flag of the query evaluating
//! on this thread (set with [`watch`], by `reql::memory::Budget::enter`) and, once that
//! flag is set (STOP, a closed connection, a memory budget spent), unwinds with
//! [`Cancelled`]. The evaluator's threads catch the unwind and the server answers as for
//! any interrupted query. Without a watched flag nothing is checked.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

thread_local! {
    static FLAG: Cell<*const AtomicBool> = const { Cell::new(std::ptr::null()) };
    static TICKS: Cell<u32> = const { Cell::new(0) };
}

/// The payload of the unwind that stops a datum operation whose query was interrupted.
pub struct Cancelled;

/// Watches `flag` on this thread until the guard is dropped (nesting restores the
/// previous flag).
pub fn watch(flag: &Arc<AtomicBool>) -> Watch {
    let previous = FLAG.with(|f| f.replace(Arc::as_ptr(flag)));
    Watch {
        _flag: flag.clone(),
        previous,
    }
}

/// The guard of [`watch`].
pub struct Watch {
    _flag: Arc<AtomicBool>,
    previous: *const AtomicBool,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let previous = self.previous;
        let _ = FLAG.try_with(|f| f.set(previous));
    }
}

/// Runs `f` with no flag watched: for work that must not stop half way (a storage
/// write, which keeps the data, caches and feeds in step).
pub fn unwatched<T>(f: impl FnOnce() -> T) -> T {
    let previous = FLAG.with(|fl| fl.replace(std::ptr::null()));
    struct Restore(*const AtomicBool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0;
            let _ = FLAG.try_with(|fl| fl.set(previous));
        }
    }
    let _restore = Restore(previous);
    f()
}

/// One unit of work; unwinds with [`Cancelled`] when the watched flag is set. Recursive
/// walks over datums elsewhere call it too.
#[inline]
pub fn tick() {
    let n = TICKS.with(|t| {
        let n = t.get().wrapping_add(1);
        t.set(n);
        n
    });
    if n.is_multiple_of(4096) {
        check();
    }
}

#[cold]
fn check() {
    let cancelled = FLAG.with(|f| {
        let p = f.get();
        // SAFETY: a non-null `FLAG` points to the flag a `Watch` on this thread keeps
        // alive (it holds an `Arc`), and the guard resets it before releasing that `Arc`.
        !p.is_null() && unsafe { &*p }.load(Ordering::Relaxed)
    });
    if cancelled {
        std::panic::resume_unwind(Box::new(Cancelled));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Datum;

    fn doubled(n: usize) -> Datum {
        let mut d = Datum::Number(1.0);
        for _ in 0..n {
            d = Datum::array(vec![d.clone(), d]);
        }
        d
    }

    #[test]
    fn a_huge_shared_value_stops_once_its_query_is_interrupted() {
        let flag = Arc::new(AtomicBool::new(false));
        let a = doubled(60);
        let b = doubled(60);
        let setter = {
            let flag = flag.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                flag.store(true, Ordering::Relaxed);
            })
        };
        let _w = watch(&flag);
        let r = std::panic::catch_unwind(|| crate::cmp(&a, &b));
        setter.join().unwrap();
        assert!(r.err().is_some_and(|e| e.is::<Cancelled>()));
    }

    #[test]
    fn nothing_is_checked_without_a_watched_flag() {
        let d = doubled(8);
        assert_eq!(crate::cmp(&d, &d.clone()), std::cmp::Ordering::Equal);
        assert_eq!(d.to_json_bytes().len(), d.clone().to_json_bytes().len());
    }
}
