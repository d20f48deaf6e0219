//! The one boundary where evaluation results and `ReqlError`s become response frames.

use datum::Datum;
use proto::ql2::{ErrorType, ResponseType};
use proto::response::ResponseWriter;
use reql::{ErrorKind, Frame, ReqlError};

/// Maps an error class to its response type and error type.
pub fn error_types(kind: ErrorKind) -> (ResponseType, Option<ErrorType>) {
    use ErrorKind as K;
    match kind {
        K::Compile => (ResponseType::COMPILE_ERROR, None),
        K::Client => (ResponseType::CLIENT_ERROR, None),
        K::Internal => (ResponseType::RUNTIME_ERROR, Some(ErrorType::INTERNAL)),
        K::ResourceLimit => (ResponseType::RUNTIME_ERROR, Some(ErrorType::RESOURCE_LIMIT)),
        K::QueryLogic => (ResponseType::RUNTIME_ERROR, Some(ErrorType::QUERY_LOGIC)),
        K::NonExistence => (ResponseType::RUNTIME_ERROR, Some(ErrorType::NON_EXISTENCE)),
        K::OpFailed => (ResponseType::RUNTIME_ERROR, Some(ErrorType::OP_FAILED)),
        K::OpIndeterminate => (
            ResponseType::RUNTIME_ERROR,
            Some(ErrorType::OP_INDETERMINATE),
        ),
        K::User | K::EmptyUser => (ResponseType::RUNTIME_ERROR, Some(ErrorType::USER)),
        K::Permission => (
            ResponseType::RUNTIME_ERROR,
            Some(ErrorType::PERMISSION_ERROR),
        ),
    }
}

/// The frame answering `token` with an error.
pub fn error_frame(token: u64, e: &ReqlError) -> Vec<u8> {
    let (t, et) = error_types(e.kind);
    let mut w = ResponseWriter::error(t, et, &e.message);
    let frames: Vec<serde_json::Value> = e
        .backtrace()
        .into_iter()
        .map(|f| match f {
            Frame::Pos(i) => serde_json::Value::from(i),
            Frame::Opt(s) => serde_json::Value::from(s),
        })
        .collect();
    w.set_backtrace_raw(serde_json::Value::Array(frames).to_string().as_bytes());
    finish(w, token)
}

/// Finishes a writer into a frame; an over-long response becomes an error frame.
pub fn finish(w: ResponseWriter, token: u64) -> Vec<u8> {
    match w.finish_frame(token) {
        Ok(f) => f,
        Err(e) => {
            let w = ResponseWriter::error(
                ResponseType::RUNTIME_ERROR,
                Some(ErrorType::RESOURCE_LIMIT),
                &e.client_message(),
            );
            w.finish_frame(token).unwrap_or_default()
        }
    }
}

/// Fails when a result holds `r.minval`/`r.maxval`, which have no JSON form.
pub fn check_json(d: &Datum) -> Result<(), ReqlError> {
    reql::terms::control::check_json_able(d)
}

/// A profile value for `profile: true` queries, in RethinkDB's shape: one task for the
/// query whose sub-tasks are the plan steps that ran (`reql::terms::optimized::PlanLog`:
/// which index or scan, and the documents it read).
pub fn profile_json(ms: f64, plans: &[(String, f64)]) -> Vec<u8> {
    let steps: Vec<serde_json::Value> = plans
        .iter()
        .map(|(d, ms)| serde_json::json!({"description": d, "duration(ms)": ms, "sub_tasks": []}))
        .collect();
    serde_json::json!([{
        "description": "Evaluating query.",
        "duration(ms)": ms,
        "sub_tasks": steps
    }])
    .to_string()
    .into_bytes()
}
