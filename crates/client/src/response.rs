//! Parsed server responses: `{"t": type, "r": [items], "e": error type,
//! "b": backtrace, "p": profile, "n": notes}`.

use proto::ql2::{ErrorType, ResponseType};
use serde_json::Value;

use crate::Error;

/// One response frame from the server.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The query token it answers.
    pub token: u64,
    /// The `t` field.
    pub kind: ResponseType,
    /// The `r` field: the result items as raw JSON (one for an atom, the
    /// batch for a sequence; the message for an error).
    pub items: Vec<Value>,
    /// The `e` field of error responses.
    pub error_type: Option<ErrorType>,
    /// The `b` field (backtrace) of error responses.
    pub backtrace: Option<Value>,
    /// The `p` field, present when the query ran with `profile: true`.
    pub profile: Option<Value>,
    /// The `n` field (changefeed notes), as wire numbers.
    pub notes: Vec<i64>,
}

/// An error response (`CLIENT_ERROR`, `COMPILE_ERROR` or `RUNTIME_ERROR`).
#[derive(Debug, Clone, PartialEq)]
pub struct ReqlError {
    /// Which of the three error response types.
    pub kind: ResponseType,
    /// The runtime error's sub-type, when given.
    pub error_type: Option<ErrorType>,
    /// The server's message.
    pub message: String,
    /// The backtrace, when given.
    pub backtrace: Option<Value>,
}

impl std::fmt::Display for ReqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.error_type {
            Some(e) => write!(f, "{} ({}): {}", self.kind, e, self.message),
            None => write!(f, "{}: {}", self.kind, self.message),
        }
    }
}

impl Response {
    /// Parses a response payload for `token`.
    pub fn parse(token: u64, payload: &[u8]) -> Result<Self, Error> {
        let v: Value = serde_json::from_slice(payload)
            .map_err(|e| Error::Protocol(format!("response is not JSON: {e}")))?;
        let Value::Object(mut obj) = v else {
            return Err(Error::Protocol("response is not a JSON object".into()));
        };
        let t = obj
            .get("t")
            .and_then(Value::as_i64)
            .ok_or_else(|| Error::Protocol("response lacks a numeric \"t\"".into()))?;
        let kind = ResponseType::from_i64(t)
            .ok_or_else(|| Error::Protocol(format!("unknown response type {t}")))?;
        let items = match obj.remove("r") {
            Some(Value::Array(a)) => a,
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err(Error::Protocol("response \"r\" is not an array".into())),
        };
        let error_type = obj
            .get("e")
            .and_then(Value::as_i64)
            .and_then(ErrorType::from_i64);
        let notes = match obj.get("n") {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_i64).collect(),
            _ => Vec::new(),
        };
        Ok(Self {
            token,
            kind,
            items,
            error_type,
            backtrace: obj.remove("b"),
            profile: obj.remove("p"),
            notes,
        })
    }

    /// Whether this is an error response.
    pub fn is_error(&self) -> bool {
        matches!(
            self.kind,
            ResponseType::CLIENT_ERROR | ResponseType::COMPILE_ERROR | ResponseType::RUNTIME_ERROR
        )
    }

    /// Whether more of the stream can be fetched with CONTINUE.
    pub fn is_partial(&self) -> bool {
        self.kind == ResponseType::SUCCESS_PARTIAL
    }

    /// The error carried by an error response, or `None` for a success.
    pub fn error(&self) -> Option<ReqlError> {
        if !self.is_error() {
            return None;
        }
        let message = match self.items.first() {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        Some(ReqlError {
            kind: self.kind,
            error_type: self.error_type,
            message,
            backtrace: self.backtrace.clone(),
        })
    }

    /// This response, or [`Error::Reql`] if it is an error response.
    pub fn into_result(self) -> Result<Self, Error> {
        match self.error() {
            Some(e) => Err(Error::Reql(e)),
            None => Ok(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_atom() {
        let r = Response::parse(7, br#"{"t":1,"r":[{"id":1}]}"#).unwrap();
        assert_eq!(r.token, 7);
        assert_eq!(r.kind, ResponseType::SUCCESS_ATOM);
        assert_eq!(r.items, vec![serde_json::json!({"id":1})]);
        assert!(r.error().is_none());
        assert!(!r.is_partial());
    }

    #[test]
    fn parses_error() {
        let r = Response::parse(
            1,
            br#"{"t":18,"e":3100000,"r":["Table `x` does not exist."],"b":[]}"#,
        )
        .unwrap();
        let e = r.error().unwrap();
        assert_eq!(e.kind, ResponseType::RUNTIME_ERROR);
        assert_eq!(e.error_type, Some(ErrorType::NON_EXISTENCE));
        assert_eq!(e.message, "Table `x` does not exist.");
        assert!(r.into_result().is_err());
    }

    #[test]
    fn parses_partial_with_notes() {
        let r = Response::parse(2, br#"{"t":3,"r":[1,2],"n":[1]}"#).unwrap();
        assert!(r.is_partial());
        assert_eq!(r.notes, vec![1]);
    }

    #[test]
    fn rejects_garbage() {
        assert!(Response::parse(1, b"nope").is_err());
        assert!(Response::parse(1, b"[]").is_err());
        assert!(Response::parse(1, br#"{"t":99,"r":[]}"#).is_err());
        assert!(Response::parse(1, br#"{"t":1,"r":5}"#).is_err());
    }
}
