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
