//! The workload's three operations as ReQL terms, and how each answer is read.
//!
//! - read: `r.db(d).table(t, {read_mode: "majority"}).get(k)`; the value is the document's
//!   `v`, `null` when there is no document.
//! - write: `table.insert({id: k, v: x}, {conflict: "replace", durability: "hard"})`;
//!   ok when exactly one document was inserted, replaced or left unchanged.
//! - cas: `table.get(k).update(row => r.branch(row("v").eq(expect), {v: new},
//!   r.error("cas failed")), {durability: "hard"})`: `replaced` (or `unchanged`) = applied;
//!   the per-document error "cas failed" or `skipped` (no document, so no `v` equal to a
//!   non-null `expect`) = completed, not applied.
//!
//! Classification of errors (conservative: only what certainly did not run is `fail`):
//! client and compile errors and `OP_FAILED` runtime errors are `fail`; every other
//! runtime error (`OP_INDETERMINATE` among them), a timeout, a closed or failed
//! connection, and any write answer not understood above are `info`.

use client::term::{self, call, datum};
use client::{Error, ErrorType, ResponseType};
use proto::ql2::TermType as T;
use serde_json::{json, Map, Value};

use crate::history::EventType;

/// The message the cas raises when the value is not the expected one.
pub const CAS_FAILED: &str = "cas failed";

fn table(db: &str, t: &str) -> Value {
    term::table(db, t)
}

fn hard() -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("durability".into(), json!("hard"));
    o
}

/// The read term.
pub fn read_term(db: &str, t: &str, key: &Value) -> Value {
    let mut o = Map::new();
    o.insert("read_mode".into(), json!("majority"));
    term::get(term::table_with(db, t, o), key)
}

/// The write term.
pub fn write_term(db: &str, t: &str, key: &Value, value: &Value) -> Value {
    let mut o = hard();
    o.insert("conflict".into(), json!("replace"));
    term::insert(table(db, t), &json!({"id": key, "v": value}), o)
}

/// The cas term.
pub fn cas_term(db: &str, t: &str, key: &Value, expect: &Value, new: &Value) -> Value {
    let row_v = term::get_field(term::var(1), "v");
    let matches = call(T::EQ, vec![row_v, datum(expect)], Map::new());
    let fail = call(T::ERROR, vec![json!(CAS_FAILED)], Map::new());
    let body = call(
        T::BRANCH,
        vec![matches, datum(&json!({"v": new})), fail],
        Map::new(),
    );
    call(
        T::UPDATE,
        vec![term::get(table(db, t), key), term::func1(body)],
        hard(),
    )
}

/// A read's value from the `get` answer.
pub fn read_value(answer: &Value) -> Value {
    match answer {
        Value::Object(doc) => doc.get("v").cloned().unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

fn count(answer: &Value, field: &str) -> i64 {
    answer.get(field).and_then(Value::as_i64).unwrap_or(0)
}

fn first_error(answer: &Value) -> String {
    answer
        .get("first_error")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// A write's outcome from its write result: `Ok(())`, or `Err(why)` when indeterminate.
pub fn write_outcome(answer: &Value) -> Result<(), String> {
    let done = count(answer, "inserted") + count(answer, "replaced") + count(answer, "unchanged");
    if count(answer, "errors") == 0 && done == 1 {
        Ok(())
    } else {
        Err(format!("unexpected write result {answer}"))
    }
}

/// A cas's outcome: `Ok(applied)`, or `Err(why)` when indeterminate.
pub fn cas_outcome(answer: &Value) -> Result<bool, String> {
    let errors = count(answer, "errors");
    if errors == 0 && count(answer, "replaced") + count(answer, "unchanged") == 1 {
        return Ok(true);
    }
    if errors == 0 && count(answer, "skipped") == 1 {
        return Ok(false);
    }
    if errors == 1 && first_error(answer).contains(CAS_FAILED) {
        return Ok(false);
    }
    Err(format!("unexpected cas result {answer}"))
}

/// How a failed query is recorded: `fail` or `info`, with the reason.
pub fn classify(err: &Error) -> (EventType, String) {
    let kind = match err {
        Error::Reql(e) => match (e.kind, e.error_type) {
            (ResponseType::CLIENT_ERROR | ResponseType::COMPILE_ERROR, _) => EventType::Fail,
            (_, Some(ErrorType::OP_FAILED)) => EventType::Fail,
            _ => EventType::Info,
        },
        _ => EventType::Info,
    };
    (kind, err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_as_documented() {
        assert_eq!(read_value(&json!({"id": "k", "v": 3})), json!(3));
        assert_eq!(read_value(&Value::Null), Value::Null);
        assert!(write_outcome(&json!({"inserted": 1, "errors": 0})).is_ok());
        assert!(write_outcome(&json!({"replaced": 1})).is_ok());
        assert!(write_outcome(&json!({"errors": 1, "first_error": "x"})).is_err());
        assert_eq!(cas_outcome(&json!({"replaced": 1, "errors": 0})), Ok(true));
        assert_eq!(cas_outcome(&json!({"skipped": 1})), Ok(false));
        assert_eq!(
            cas_outcome(&json!({"errors": 1, "first_error": "cas failed"})),
            Ok(false)
        );
        assert!(cas_outcome(&json!({"errors": 1, "first_error": "other"})).is_err());
    }

    #[test]
    fn cas_term_passes_a_function_not_an_array() {
        let t = cas_term("d", "t", &json!("k"), &json!(1), &json!([2]));
        assert_eq!(t[0], json!(T::UPDATE.as_i64()));
        assert_eq!(t[1][1][0], json!(T::FUNC.as_i64()));
        assert_eq!(t[2], json!({"durability": "hard"}));
    }

    #[test]
    fn errors_are_classified_conservatively() {
        let reql = |kind, error_type| {
            Error::Reql(client::ReqlError {
                kind,
                error_type,
                message: "m".into(),
                backtrace: None,
            })
        };
        assert_eq!(
            classify(&reql(ResponseType::COMPILE_ERROR, None)).0,
            EventType::Fail
        );
        let failed = reql(ResponseType::RUNTIME_ERROR, Some(ErrorType::OP_FAILED));
        assert_eq!(classify(&failed).0, EventType::Fail);
        let unsure = reql(
            ResponseType::RUNTIME_ERROR,
            Some(ErrorType::OP_INDETERMINATE),
        );
        assert_eq!(classify(&unsure).0, EventType::Info);
        assert_eq!(classify(&Error::Timeout).0, EventType::Info);
        assert_eq!(classify(&Error::Closed("x".into())).0, EventType::Info);
    }
}
