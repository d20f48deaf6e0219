//! `Array`: the items of an array datum, a `Vec<Datum>` that drops without recursion.
//!
//! It dereferences to its `Vec`, so it reads and writes like one. The derived drop of
//! nested vectors recursed once per level, so a deep value (built by a loop, before the
//! nesting bound of `nesting.rs` stops it) could overflow the stack while being freed
//! and abort the process. `Array` and `Object` instead hand the containers they own
//! alone to `drop_deep`, which frees them from an explicit stack.

use std::sync::Arc;

use crate::value::Datum;

/// The items of an array datum (see the module note).
#[derive(Clone, Default, PartialEq)]
pub struct Array(Vec<Datum>);

impl Array {
    /// The items, moved out.
    pub fn into_vec(mut self) -> Vec<Datum> {
        std::mem::take(&mut self.0)
    }
}

impl std::ops::Deref for Array {
    type Target = Vec<Datum>;
    fn deref(&self) -> &Vec<Datum> {
        &self.0
    }
}

impl std::ops::DerefMut for Array {
    fn deref_mut(&mut self) -> &mut Vec<Datum> {
        &mut self.0
    }
}

impl From<Vec<Datum>> for Array {
    fn from(v: Vec<Datum>) -> Array {
        Array(v)
    }
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Drop for Array {
    fn drop(&mut self) {
        if self.0.iter().any(owns_container) {
            drop_deep(std::mem::take(&mut self.0));
        }
    }
}

/// Whether dropping `d` may free a nested container (one this handle owns alone).
pub(crate) fn owns_container(d: &Datum) -> bool {
    match d {
        Datum::Array(a) => Arc::strong_count(a) == 1,
        Datum::Object(o) => Arc::strong_count(o) == 1,
        _ => false,
    }
}

/// Frees `items` and everything they own alone, level by level from an explicit stack:
/// each container owned alone gives its children up to the stack before it is freed
/// (empty), so no drop recurses more than one level.
pub(crate) fn drop_deep(mut items: Vec<Datum>) {
    while let Some(d) = items.pop() {
        match d {
            Datum::Array(a) => {
                if let Some(mut a) = Arc::into_inner(a) {
                    items.append(&mut a.0);
                }
            }
            Datum::Object(o) => {
                if let Some(mut o) = Arc::into_inner(o) {
                    items.extend(o.take_values());
                }
            }
            _ => {}
        }
    }
}
