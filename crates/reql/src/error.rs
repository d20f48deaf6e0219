//! `ReqlError`: the one error type of query compilation and evaluation.
//!
//! Each error carries RethinkDB's error class (`ErrorKind`), its exact message, and the
//! term it is charged to (`Blame`), which drivers draw as `^^^^` under that part of the
//! query. RethinkDB's rules (one path per error, chosen where it is raised):
//!
//! - every compiled term knows its `Path` from the root (`Term::path`);
//! - an error raised by a term's own code starts `Blame::Pending` with no frames and
//!   ends charged to the term being evaluated: `eval` resolves it against its term as it
//!   leaves (its own checks, and checks on plain datums, blame the operator);
//! - `at(i)`/`at_opt(name)` on a pending error charge it to argument `i` (the term that
//!   produced the value: a conversion of an evaluated argument);
//! - `ReqlError::here()` pins an error to the term being evaluated even when a helper
//!   later adds `at(i)` (the conversions that RethinkDB charges to the operator, such as
//!   "Cannot convert NUMBER to SEQUENCE");
//! - once resolved (`Blame::At`) the path never changes while the error unwinds.

use std::fmt;

/// RethinkDB's error classes, mapped 1:1 to response and error types on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `COMPILE_ERROR` response (ReqlCompileError).
    Compile,
    /// `CLIENT_ERROR` response (ReqlClientError): a malformed query.
    Client,
    /// ReqlInternalError.
    Internal,
    /// ReqlResourceLimitError.
    ResourceLimit,
    /// ReqlQueryLogicError.
    QueryLogic,
    /// ReqlNonExistenceError.
    NonExistence,
    /// ReqlOpFailedError.
    OpFailed,
    /// ReqlOpIndeterminateError.
    OpIndeterminate,
    /// ReqlUserError (`r.error`).
    User,
    /// `r.error()` with no message: inside a `default` fallback it re-raises the
    /// original error; elsewhere it is a ReqlUserError.
    EmptyUser,
    /// ReqlPermissionError.
    Permission,
}

/// One step of a backtrace: a positional argument or a named optarg.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// The n-th positional argument.
    Pos(usize),
    /// The optarg of this name.
    Opt(String),
}

/// The path of a term from the root of its query: a persistent list, so that every
/// compiled term holds its own at the cost of one small allocation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Path(Option<std::sync::Arc<PathNode>>);

#[derive(Debug, PartialEq)]
struct PathNode {
    parent: Path,
    frame: Frame,
}

impl Path {
    /// The root term's path (no frames).
    pub fn root() -> Path {
        Path(None)
    }

    /// The path of a sub-term one frame down.
    pub fn child(&self, frame: Frame) -> Path {
        Path(Some(std::sync::Arc::new(PathNode {
            parent: self.clone(),
            frame,
        })))
    }

    /// The frames, root first.
    pub fn frames(&self) -> Vec<Frame> {
        let mut out = Vec::new();
        let mut cur = self.0.as_ref();
        while let Some(n) = cur {
            out.push(n.frame.clone());
            cur = n.parent.0.as_ref();
        }
        out.reverse();
        out
    }
}

/// Which term an error is charged to.
#[derive(Debug, Clone, PartialEq)]
pub enum Blame {
    /// Not decided yet: relative to the term being evaluated, these frames (innermost
    /// first) lead to the blamed sub-term; none means the term itself. Errors raised
    /// outside any term (and compile errors) are sent with these frames reversed.
    Pending(Vec<Frame>),
    /// The term being evaluated, whatever frames are added later (`ReqlError::here`).
    Here,
    /// Decided: this term's path. Fixed from then on.
    At(Path),
}

/// An error raised while compiling or evaluating a query.
#[derive(Debug, Clone, PartialEq)]
pub struct ReqlError {
    /// The error class.
    pub kind: ErrorKind,
    /// RethinkDB's message text.
    pub message: String,
    /// The term the error is charged to (its backtrace).
    pub blame: Blame,
    /// Whether evaluating the same query on the same data always gives this error
    /// (an error of the query's own logic), as opposed to one that depends on the
    /// machine or the moment (storage failures, interruption, write conflicts). A
    /// replica applying a write operation must fail exactly when the leader did for a
    /// deterministic error, and may retry after a non-deterministic one.
    pub deterministic: bool,
    /// Whether the table could not be reached at all (a shard's primary not available,
    /// no quorum, contact lost: RethinkDB's `cannot_perform_query_exc_t`). Such an error
    /// ends the whole query, as in RethinkDB, instead of counting against one document in
    /// a write's `errors` and `first_error`; a client must see a write whose outcome is
    /// unknown as a ReqlOpIndeterminateError.
    pub unavailable: bool,
}

/// The result type of everything in this crate.
pub type Result<T, E = ReqlError> = std::result::Result<T, E>;

impl ReqlError {
    /// A new error with an empty backtrace.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ReqlError {
            kind,
            message: message.into(),
            blame: Blame::Pending(Vec::new()),
            deterministic: true,
            unavailable: false,
        }
    }

    /// This error, marked as depending on the machine or the moment rather than on the
    /// query and the data (see `deterministic`).
    pub fn nondeterministic(mut self) -> Self {
        self.deterministic = false;
        self
    }

    /// This error, marked as the table being unreachable (see `unavailable`); it is
    /// also non-deterministic.
    pub fn table_unavailable(mut self) -> Self {
        self.unavailable = true;
        self.nondeterministic()
    }

    /// Charges a pending error one frame further up: `f` leads from the enclosing term
    /// to the term the error is charged to so far. No effect on a decided error.
    pub fn with_frame(mut self, f: Frame) -> Self {
        if let Blame::Pending(frames) = &mut self.blame {
            frames.push(f);
        }
        self
    }

    /// This error, charged to the term being evaluated (the operator) even if a helper
    /// then charges it to an argument.
    pub fn here(mut self) -> Self {
        if let Blame::Pending(_) = self.blame {
            self.blame = Blame::Here;
        }
        self
    }

    /// This error, charged to the term at `path` unless already decided.
    pub fn blame_path(mut self, path: &Path) -> Self {
        if let Blame::Pending(frames) = &self.blame {
            let mut p = path.clone();
            for f in frames.iter().rev() {
                p = p.child(f.clone());
            }
            self.blame = Blame::At(p);
        } else if self.blame == Blame::Here {
            self.blame = Blame::At(path.clone());
        }
        self
    }

    /// Decides a pending error as it leaves the evaluation of `term`: charged to `term`
    /// itself, or to the argument its first frame names (that argument's own path, which
    /// differs from `term`'s path plus the index for arguments spliced by `r.args`).
    pub fn blame_in(self, term: &crate::term::Term) -> Self {
        self.blame_with(&term.path, |f| match f {
            Frame::Pos(i) => term.args.get(*i).map(|a| a.path.clone()),
            Frame::Opt(n) => term.optarg(n).map(|a| a.path.clone()),
        })
    }

    /// `blame_in` for a term known by its path and the paths of its arguments (`sub`).
    pub fn blame_with(mut self, path: &Path, sub: impl Fn(&Frame) -> Option<Path>) -> Self {
        if let Blame::Pending(frames) = &mut self.blame {
            if let Some(base) = frames.last().and_then(&sub) {
                frames.pop();
                return self.blame_path(&base);
            }
        }
        self.blame_path(path)
    }

    /// The backtrace root-first, as the wire wants it.
    pub fn backtrace(&self) -> Vec<Frame> {
        match &self.blame {
            Blame::Pending(frames) => frames.iter().rev().cloned().collect(),
            Blame::Here => Vec::new(),
            Blame::At(p) => p.frames(),
        }
    }
}

impl fmt::Display for ReqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for ReqlError {}

/// A ReqlQueryLogicError.
pub fn logic(msg: impl Into<String>) -> ReqlError {
    ReqlError::new(ErrorKind::QueryLogic, msg)
}

/// A ReqlNonExistenceError.
pub fn nonexist(msg: impl Into<String>) -> ReqlError {
    ReqlError::new(ErrorKind::NonExistence, msg)
}

/// A ReqlOpFailedError.
pub fn op_failed(msg: impl Into<String>) -> ReqlError {
    ReqlError::new(ErrorKind::OpFailed, msg)
}

/// A ReqlCompileError.
pub fn compile(msg: impl Into<String>) -> ReqlError {
    ReqlError::new(ErrorKind::Compile, msg)
}

/// A ReqlResourceLimitError.
pub fn resource(msg: impl Into<String>) -> ReqlError {
    ReqlError::new(ErrorKind::ResourceLimit, msg)
}

/// A ReqlInternalError.
pub fn internal(msg: impl Into<String>) -> ReqlError {
    ReqlError::new(ErrorKind::Internal, msg)
}

/// Charges the error of a result to an argument of the term being evaluated (the term
/// that produced the value being converted), unless it is already decided.
pub trait WithFrame<T> {
    /// Charges a pending error to positional argument `i`.
    fn at(self, i: usize) -> Result<T>;
    /// Charges a pending error to optarg `name`.
    fn at_opt(self, name: &str) -> Result<T>;
    /// Charges a pending error to the term being evaluated (see [`ReqlError::here`]).
    fn here(self) -> Result<T>;
}

impl<T> WithFrame<T> for Result<T> {
    fn at(self, i: usize) -> Result<T> {
        self.map_err(|e| e.with_frame(Frame::Pos(i)))
    }
    fn at_opt(self, name: &str) -> Result<T> {
        self.map_err(|e| e.with_frame(Frame::Opt(name.to_string())))
    }
    fn here(self) -> Result<T> {
        self.map_err(ReqlError::here)
    }
}
