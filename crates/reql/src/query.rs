//! A query frame's payload, parsed and compiled: what the server runs.
//!
//! `compile_query` is `proto::query::parse_query` followed by `compile_term` on the
//! term and on every global optarg of a `START`, with compile errors kept as values (the
//! server reports them only after its own checks, e.g. a duplicate token). A `START`
//! query is first compiled straight from the bytes (`term::direct`); whenever that path
//! is not certain to give the same answer and a success, the payload takes the
//! reference path above, so a driver sees exactly the reference path's results and
//! errors either way (the tests check the two against each other).

use std::sync::Arc;

use proto::ql2::QueryType;
use proto::query::{optarg_bool, parse_query, QueryParseError};

use crate::error::Result;
use crate::term::{compile_term, direct, Term};

/// A parsed query with its terms compiled.
#[derive(Debug)]
pub struct CompiledQuery {
    /// The query type.
    pub kind: QueryType,
    /// For `START`, the compiled term or its compile error; `None` for other types.
    pub term: Option<Result<Arc<Term>>>,
    /// For `START`, the global optargs in key order, each compiled (as a root term) or
    /// its compile error; empty for other types.
    pub optargs: Vec<(String, Result<Arc<Term>>)>,
    /// The `noreply` global optarg (`Query::noreply`).
    pub noreply: bool,
    /// The `profile` global optarg (`Query::profile`).
    pub profile: bool,
}

/// Parses and compiles a query payload; the errors are `parse_query`'s.
pub fn compile_query(payload: &[u8]) -> std::result::Result<CompiledQuery, QueryParseError> {
    match direct_query(payload) {
        Some(q) => Ok(q),
        None => reference(payload),
    }
}

/// The fast path: a successful `START` compiled from the bytes, or `None`.
fn direct_query(payload: &[u8]) -> Option<CompiledQuery> {
    let s = direct::compile_start(payload)?;
    let flag = |name: &str| {
        s.optargs
            .iter()
            .find(|(k, _, _)| k == name)
            .is_some_and(|(_, _, text)| {
                let v = serde_json::from_slice::<serde_json::Value>(text).ok();
                optarg_bool(v.as_ref(), false)
            })
    };
    let (noreply, profile) = (flag("noreply"), flag("profile"));
    Some(CompiledQuery {
        kind: QueryType::START,
        term: Some(Ok(s.term)),
        optargs: s.optargs.into_iter().map(|(k, t, _)| (k, Ok(t))).collect(),
        noreply,
        profile,
    })
}

/// The reference path: the payload parsed into a `serde_json::Value`, then compiled.
fn reference(payload: &[u8]) -> std::result::Result<CompiledQuery, QueryParseError> {
    let q = parse_query(payload)?;
    let start = q.kind == QueryType::START;
    Ok(CompiledQuery {
        kind: q.kind,
        term: q.term.as_ref().filter(|_| start).map(compile_term),
        optargs: if start {
            q.optargs
                .iter()
                .map(|(k, v)| (k.clone(), compile_term(v)))
                .collect()
        } else {
            Vec::new()
        },
        noreply: q.noreply(),
        profile: q.profile(),
    })
}

#[cfg(test)]
#[path = "query_tests.rs"]
mod tests;
