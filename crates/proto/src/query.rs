//! Parsing of a query frame's JSON payload: `[QueryType, term?, global_optargs?]`.
//!
//! Invariants: parsing never panics on client input; every error maps to a
//! `CLIENT_ERROR` response whose text is RethinkDB 2.4's (see
//! `src/client_protocol/json.cc`, `src/client_protocol/protocols.cc` and
//! `json_term_storage_t` in `src/rdb_protocol/term_storage.cc`), except the
//! two Ponder-specific checks documented on their variants. Nesting depth is
//! bounded by [`MAX_QUERY_DEPTH`] (checked by a byte scan before parsing), so
//! neither parsing nor dropping the resulting `Value` can exhaust the stack.
//!
//! The server calls `reql::compile_query`, which compiles most `START` payloads straight
//! from their bytes and takes this parser (then `reql::compile_term`) as its reference
//! for everything else, every error included: texts here are what drivers see.

use serde_json::{Map, Value};

use crate::ql2::{ErrorType, QueryType, ResponseType, TermType};
use crate::response::ResponseWriter;

/// Deepest array/object nesting accepted in a query payload.
///
/// Ponder's choice (serde_json's default of 128 is too shallow for chained
/// ReQL, where every term adds two levels); RethinkDB has no fixed limit.
pub const MAX_QUERY_DEPTH: usize = 1024;

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The query type (first element).
    pub kind: QueryType,
    /// The term tree (second element), if present. Always present for a
    /// successfully parsed `START`.
    pub term: Option<Value>,
    /// Global optargs (third element); empty if absent.
    pub optargs: Map<String, Value>,
}

impl Query {
    /// Reads a boolean global optarg the way RethinkDB's
    /// `static_optarg_as_bool` does: accepts `true`/`false` or `[1, bool]`
    /// (a `DATUM` term); anything else yields `default`.
    pub fn static_optarg_bool(&self, key: &str, default: bool) -> bool {
        optarg_bool(self.optargs.get(key), default)
    }

    /// Whether the client asked for no reply (`noreply` global optarg).
    pub fn noreply(&self) -> bool {
        self.static_optarg_bool("noreply", false)
    }

    /// Whether the client asked for a profile (`profile` global optarg).
    pub fn profile(&self) -> bool {
        self.static_optarg_bool("profile", false)
    }
}

/// `static_optarg_as_bool` of a global optarg's value (`None`: not given).
pub fn optarg_bool(v: Option<&Value>, default: bool) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::Array(items)) => match items.as_slice() {
            [Value::Number(t), Value::Bool(b)] if t.as_i64() == Some(TermType::DATUM.as_i64()) => {
                *b
            }
            _ => default,
        },
        _ => default,
    }
}

/// Why a query payload could not be parsed. `Display` is the exact text to
/// send in the `CLIENT_ERROR` response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryParseError {
    /// The payload is not valid UTF-8 JSON (RethinkDB's
    /// `wire_protocol_t::unparseable_query_message`).
    #[error("Client is buggy (failed to deserialize query).")]
    InvalidJson,
    /// Ponder-specific: nesting deeper than [`MAX_QUERY_DEPTH`].
    #[error("Server could not parse query: Query is nested too deeply (more than {0} levels).")]
    TooDeep(usize),
    /// The top-level value is not an array.
    #[error("Server could not parse query: Expected a query to be an array, but found {0}.")]
    NotArray(&'static str),
    /// The top-level array has 0 or more than 3 elements.
    #[error("Server could not parse query: Expected 1 to 3 elements in the top-level query, but found {0}.")]
    BadArity(usize),
    /// The first element is not a number.
    #[error("Server could not parse query: Expected a query type as a number, but found {0}.")]
    TypeNotNumber(&'static str),
    /// The first element is not a known query type.
    #[error("Server could not parse query: Unrecognized QueryType: {0}.")]
    UnknownType(String),
    /// The third element is not an object.
    #[error("Server could not parse query: Expected global optargs as an object, but found {0}.")]
    OptargsNotObject(&'static str),
    /// Ponder-specific: a `START` query without a term (RethinkDB fails an
    /// internal sanity check here instead of answering).
    #[error("Server could not parse query: Expected a term in a START query.")]
    MissingTerm,
}

impl QueryParseError {
    /// The `ErrorType` RethinkDB attaches (only sent on the wire for
    /// `RUNTIME_ERROR`, kept here for completeness).
    pub fn error_type(&self) -> ErrorType {
        match self {
            QueryParseError::InvalidJson => ErrorType::RESOURCE_LIMIT,
            _ => ErrorType::QUERY_LOGIC,
        }
    }

    /// The complete `CLIENT_ERROR` response JSON for this error:
    /// `{"t":16,"r":["<message>"],"b":[]}`.
    pub fn response_json(&self) -> Vec<u8> {
        ResponseWriter::error(
            ResponseType::CLIENT_ERROR,
            Some(self.error_type()),
            &self.to_string(),
        )
        .finish()
    }
}

/// rapidjson's type names as RethinkDB prints them (`rapidjson_typestr`).
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NULL",
        Value::Bool(_) => "BOOL",
        Value::Number(_) => "NUMBER",
        Value::String(_) => "STRING",
        Value::Array(_) => "ARRAY",
        Value::Object(_) => "OBJECT",
    }
}

/// Maps the first element of a query to a [`QueryType`].
fn query_type(v: &Value) -> Result<QueryType, QueryParseError> {
    let Value::Number(n) = v else {
        return Err(QueryParseError::TypeNotNumber(type_name(v)));
    };
    let as_int = n.as_i64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| f as i64)
    });
    as_int
        .and_then(QueryType::from_i64)
        .ok_or_else(|| QueryParseError::UnknownType(n.to_string()))
}

/// Parses a query payload `[QueryType, term?, global_optargs?]`.
///
/// `START` must carry a term; the other types are normally `[type]` and any
/// extra elements are returned as-is (RethinkDB ignores them).
pub fn parse_query(payload: &[u8]) -> Result<Query, QueryParseError> {
    if datum::text_nesting_exceeds(payload, MAX_QUERY_DEPTH) {
        return Err(QueryParseError::TooDeep(MAX_QUERY_DEPTH));
    }
    let mut de = serde_json::Deserializer::from_slice(payload);
    de.disable_recursion_limit(); // depth bounded by `text_nesting_exceeds` above
    let value: Value = serde::Deserialize::deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|_| QueryParseError::InvalidJson)?;
    let Value::Array(items) = value else {
        return Err(QueryParseError::NotArray(type_name(&value)));
    };
    if items.is_empty() || items.len() > 3 {
        return Err(QueryParseError::BadArity(items.len()));
    }
    let mut items = items.into_iter();
    let kind = match items.next() {
        Some(first) => query_type(&first)?,
        None => return Err(QueryParseError::BadArity(0)),
    };
    let term = items.next();
    let optargs = match items.next() {
        None => Map::new(),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(QueryParseError::OptargsNotObject(type_name(&other))),
    };
    if kind == QueryType::START && term.is_none() {
        return Err(QueryParseError::MissingTerm);
    }
    Ok(Query {
        kind,
        term,
        optargs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(s: &str) -> String {
        parse_query(s.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn parses_start_with_optargs() {
        let q = parse_query(br#"[1,[15,[[14,["test"]],"t"]],{"db":[14,["x"]],"noreply":true}]"#)
            .unwrap();
        assert_eq!(q.kind, QueryType::START);
        assert_eq!(q.term, Some(json!([15, [[14, ["test"]], "t"]])));
        assert!(q.noreply());
        assert!(!q.profile());
        assert_eq!(q.optargs.len(), 2);
    }

    #[test]
    fn parses_simple_types() {
        for (s, k) in [
            ("[2]", QueryType::CONTINUE),
            ("[3]", QueryType::STOP),
            ("[4]", QueryType::NOREPLY_WAIT),
            ("[5]", QueryType::SERVER_INFO),
        ] {
            let q = parse_query(s.as_bytes()).unwrap();
            assert_eq!(q.kind, k);
            assert_eq!(q.term, None);
            assert!(q.optargs.is_empty());
        }
    }

    #[test]
    fn static_optarg_datum_form() {
        let q = parse_query(br#"[1,1,{"profile":[1,true],"noreply":[2,[true]]}]"#).unwrap();
        assert!(q.profile());
        assert!(!q.noreply());
    }

    #[test]
    fn rethinkdb_error_texts() {
        assert_eq!(err("[1,"), "Client is buggy (failed to deserialize query).");
        assert_eq!(
            err("[1] x"),
            "Client is buggy (failed to deserialize query)."
        );
        assert_eq!(
            err("{}"),
            "Server could not parse query: Expected a query to be an array, but found OBJECT."
        );
        assert_eq!(
            err("[]"),
            "Server could not parse query: Expected 1 to 3 elements in the top-level query, but found 0."
        );
        assert_eq!(
            err("[1,2,{},4]"),
            "Server could not parse query: Expected 1 to 3 elements in the top-level query, but found 4."
        );
        assert_eq!(
            err(r#"["1"]"#),
            "Server could not parse query: Expected a query type as a number, but found STRING."
        );
        assert_eq!(
            err("[9]"),
            "Server could not parse query: Unrecognized QueryType: 9."
        );
        assert_eq!(
            err("[1,1,[]]"),
            "Server could not parse query: Expected global optargs as an object, but found ARRAY."
        );
        assert_eq!(
            err("[1]"),
            "Server could not parse query: Expected a term in a START query."
        );
        assert_eq!(
            parse_query(b"nope").unwrap_err().error_type(),
            ErrorType::RESOURCE_LIMIT
        );
    }

    #[test]
    fn client_error_response_shape() {
        let e = parse_query(b"[9]").unwrap_err();
        assert_eq!(
            String::from_utf8(e.response_json()).unwrap(),
            r#"{"t":16,"r":["Server could not parse query: Unrecognized QueryType: 9."],"b":[]}"#
        );
    }

    #[test]
    fn depth_is_bounded_and_deep_queries_work() {
        let ok = format!(
            "[1,{}1{},{{}}]",
            "[".repeat(MAX_QUERY_DEPTH - 1),
            "]".repeat(MAX_QUERY_DEPTH - 1)
        );
        let q = parse_query(ok.as_bytes()).unwrap();
        assert_eq!(q.kind, QueryType::START);
        let bad = format!(
            "[1,{}1{}]",
            "[".repeat(MAX_QUERY_DEPTH),
            "]".repeat(MAX_QUERY_DEPTH)
        );
        assert_eq!(
            parse_query(bad.as_bytes()),
            Err(QueryParseError::TooDeep(MAX_QUERY_DEPTH))
        );
        // Brackets inside strings do not count.
        let s = format!(r#"[1,"{}"]"#, "[".repeat(5000));
        assert!(parse_query(s.as_bytes()).is_ok());
    }
}
