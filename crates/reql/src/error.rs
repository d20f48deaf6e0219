//! `ReqlError`: the one error type of query compilation and evaluation.
//!
//! Each error carries RethinkDB's error class (`ErrorKind`), its exact message, and a
//! backtrace of frames (argument positions or optarg names) from the root term down to
//! the failing term. Frames are pushed as the error propagates up through `eval`, so the
//! innermost term pushes first and the list is reversed once at the wire boundary.

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

/// An error raised while compiling or evaluating a query.
#[derive(Debug, Clone, PartialEq)]
pub struct ReqlError {
    /// The error class.
    pub kind: ErrorKind,
    /// RethinkDB's message text.
    pub message: String,
    /// Frames, innermost first (reversed when sent).
    pub frames: Vec<Frame>,
    /// Whether evaluating the same query on the same data always gives this error
    /// (an error of the query's own logic), as opposed to one that depends on the
    /// machine or the moment (storage failures, interruption, write conflicts). A
    /// replica applying a write operation must fail exactly when the leader did for a
    /// deterministic error, and may retry after a non-deterministic one.
    pub deterministic: bool,
}

/// The result type of everything in this crate.
pub type Result<T, E = ReqlError> = std::result::Result<T, E>;

impl ReqlError {
    /// A new error with an empty backtrace.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ReqlError {
            kind,
            message: message.into(),
            frames: Vec::new(),
            deterministic: true,
        }
    }

    /// This error, marked as depending on the machine or the moment rather than on the
    /// query and the data (see `deterministic`).
    pub fn nondeterministic(mut self) -> Self {
        self.deterministic = false;
        self
    }

    /// Adds the frame of the term this error passed through.
    pub fn with_frame(mut self, f: Frame) -> Self {
        self.frames.push(f);
        self
    }

    /// The backtrace root-first, as the wire wants it.
    pub fn backtrace(&self) -> Vec<Frame> {
        self.frames.iter().rev().cloned().collect()
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

/// Attaches a frame to the error of a result.
pub trait WithFrame<T> {
    /// Adds `Frame::Pos(i)` on error.
    fn at(self, i: usize) -> Result<T>;
    /// Adds `Frame::Opt(name)` on error.
    fn at_opt(self, name: &str) -> Result<T>;
}

impl<T> WithFrame<T> for Result<T> {
    fn at(self, i: usize) -> Result<T> {
        self.map_err(|e| e.with_frame(Frame::Pos(i)))
    }
    fn at_opt(self, name: &str) -> Result<T> {
        self.map_err(|e| e.with_frame(Frame::Opt(name.to_string())))
    }
}
