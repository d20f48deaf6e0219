//! The register with compare-and-set, as the search sees it: values are ids from the
//! key's `value::Interner` (0 = `null`, the value of a key never written).
//!
//! Invariant: `step` is the whole sequential specification; the search and the
//! explanation both ask it, so they cannot disagree about what an operation needs.

/// The search's own form of an operation.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Read(u32),
    Write(u32),
    /// `applied: None` is an indeterminate cas.
    Cas {
        expect: u32,
        new: u32,
        applied: Option<bool>,
    },
}

/// Whether `kind` never changes the state (a read, a cas that was not applied). Such an
/// operation, once invoked and fitting the current state, can be linearized right away
/// without losing any linearization: nothing pending must precede it in real time (its
/// invocation is before every pending completion) and it leaves the state as it was. So
/// the search takes it without branching.
pub(crate) fn pure(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Read(_)
            | Kind::Cas {
                applied: Some(false),
                ..
            }
    )
}

/// The next state if `kind` may be linearized now: it fits `state`, and when the
/// operation just linearized is indeterminate (`before` is the state before it), `kind`
/// needs that operation — it does not fit `before`.
///
/// Why this loses nothing: if the operation after an indeterminate one fits the state
/// before it too, the indeterminate one can move one place later (an indeterminate
/// operation has no completion, so nothing orders it before another), and if it ends up
/// last or just before a write it can be dropped, as it then changes nothing anyone sees.
/// Repeating that turns any linearization into one this rule allows. It is what keeps
/// many indeterminate writes from multiplying the states: otherwise each could be placed,
/// or not, at every point.
pub(crate) fn next_state(state: u32, before: Option<u32>, kind: Kind) -> Option<u32> {
    let next = step(state, kind)?;
    match before {
        Some(b) if step(b, kind).is_some() => None,
        _ => Some(next),
    }
}

/// The register: the next state if `kind` can run in `state`.
pub(crate) fn step(state: u32, kind: Kind) -> Option<u32> {
    match kind {
        Kind::Read(v) => (state == v).then_some(state),
        Kind::Write(v) => Some(v),
        Kind::Cas {
            expect,
            new,
            applied,
        } => match applied {
            Some(true) | None => (state == expect).then_some(new),
            Some(false) => (state != expect).then_some(state),
        },
    }
}
