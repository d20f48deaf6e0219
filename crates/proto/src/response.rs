//! Building response JSON exactly as RethinkDB 2.4 writes it.
//!
//! RethinkDB's `write_response_internal` (`src/client_protocol/json.cc`) emits
//! keys in this order: `"t"`, then `"e"` (only for `RUNTIME_ERROR` with an
//! error type), `"r"` (always, an array), `"b"` (if a backtrace is set; every
//! error response carries one, `[]` when empty), `"p"` (if profiling), and
//! `"n"` (always for `SUCCESS_PARTIAL`/`SUCCESS_SEQUENCE`, never otherwise).
//!
//! Invariants: the writer streams result items straight into the output
//! buffer (pre-serialized items are copied verbatim, never re-parsed), and it
//! keeps 12 bytes free at the front so [`ResponseWriter::finish_frame`] can
//! produce a complete wire frame without another copy. Raw JSON handed to the
//! `*_raw` methods is trusted to be valid: it comes from the server, not the
//! client.

use bytes::BufMut;
use serde_json::Value;

use crate::frame::{FrameError, HEADER_LEN, MAX_RESPONSE_BYTES};
use crate::ql2::{ErrorType, ResponseNote, ResponseType};

/// Incremental writer for one response's JSON.
#[derive(Debug, Clone)]
pub struct ResponseWriter {
    /// `HEADER_LEN` reserved bytes, then `{"t":..[,"e":..],"r":[items...`.
    buf: Vec<u8>,
    t: ResponseType,
    items: usize,
    backtrace: Option<Vec<u8>>,
    profile: Option<Vec<u8>>,
    notes: Vec<ResponseNote>,
}

/// Appends `v` serialized as JSON to `out` (writes `null` in the impossible
/// case that serialization fails, keeping the output valid JSON).
fn write_value(out: &mut Vec<u8>, v: &Value) {
    let mark = out.len();
    if serde_json::to_writer(&mut *out, v).is_err() {
        out.truncate(mark);
        out.extend_from_slice(b"null");
    }
}

/// Appends the decimal form of `n` without allocating.
fn write_int(out: &mut Vec<u8>, n: i64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut m = n.unsigned_abs();
    loop {
        i -= 1;
        digits[i] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[i..]);
}

impl ResponseWriter {
    /// Starts a response of type `t` with no error type.
    pub fn new(t: ResponseType) -> Self {
        Self::with_error_type(t, None)
    }

    /// Starts a response of type `t`; `error_type` is written as `"e"` only
    /// when `t` is `RUNTIME_ERROR` (RethinkDB omits it for other types).
    pub fn with_error_type(t: ResponseType, error_type: Option<ErrorType>) -> Self {
        Self::start(t, error_type, 128)
    }

    /// Starts a response of type `t` whose items will take about `items_len` bytes of
    /// JSON, so that writing them does not grow the buffer.
    pub fn with_capacity(t: ResponseType, items_len: usize) -> Self {
        // The frame header, `{"t":NN,"r":[`, and `]}`.
        Self::start(t, None, HEADER_LEN + 16 + items_len)
    }

    fn start(t: ResponseType, error_type: Option<ErrorType>, capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity);
        buf.resize(HEADER_LEN, 0);
        buf.extend_from_slice(b"{\"t\":");
        write_int(&mut buf, t.as_i64());
        if let (ResponseType::RUNTIME_ERROR, Some(e)) = (t, error_type) {
            buf.extend_from_slice(b",\"e\":");
            write_int(&mut buf, e.as_i64());
        }
        buf.extend_from_slice(b",\"r\":[");
        Self {
            buf,
            t,
            items: 0,
            backtrace: None,
            profile: None,
            notes: Vec::new(),
        }
    }

    /// An error response (`CLIENT_ERROR`, `COMPILE_ERROR` or `RUNTIME_ERROR`)
    /// carrying `message` and an empty backtrace `[]`, as RethinkDB's
    /// `fill_error` with `EMPTY_BACKTRACE` produces. Replace the backtrace
    /// with [`ResponseWriter::set_backtrace_raw`] if there is one.
    pub fn error(t: ResponseType, error_type: Option<ErrorType>, message: &str) -> Self {
        let mut w = Self::with_error_type(t, error_type);
        w.push_value(&Value::String(message.to_owned()));
        w.backtrace = Some(b"[]".to_vec());
        w
    }

    /// The response type being written.
    pub fn response_type(&self) -> ResponseType {
        self.t
    }

    /// Number of result items written so far.
    pub fn item_count(&self) -> usize {
        self.items
    }

    /// Approximate size in bytes of the JSON written so far.
    pub fn json_len(&self) -> usize {
        self.buf.len() - HEADER_LEN
    }

    /// Appends one pre-serialized JSON result item (copied verbatim).
    pub fn push_raw(&mut self, json: &[u8]) {
        if self.items > 0 {
            self.buf.push(b',');
        }
        self.buf.extend_from_slice(json);
        self.items += 1;
    }

    /// Appends one result item that `write` serializes straight into the response.
    pub fn push_raw_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        if self.items > 0 {
            self.buf.push(b',');
        }
        write(&mut self.buf);
        self.items += 1;
    }

    /// Appends `count` pre-serialized items given as one comma-separated JSON list
    /// (without brackets), copied verbatim.
    pub fn push_raw_list(&mut self, json: &[u8], count: usize) {
        if count == 0 {
            return;
        }
        if self.items > 0 {
            self.buf.push(b',');
        }
        self.buf.extend_from_slice(json);
        self.items += count;
    }

    /// Appends one result item, serializing it.
    pub fn push_value(&mut self, v: &Value) {
        if self.items > 0 {
            self.buf.push(b',');
        }
        write_value(&mut self.buf, v);
        self.items += 1;
    }

    /// Chaining form of [`ResponseWriter::push_raw`].
    pub fn item_raw(mut self, json: &[u8]) -> Self {
        self.push_raw(json);
        self
    }

    /// Chaining form of [`ResponseWriter::push_value`].
    pub fn item(mut self, v: &Value) -> Self {
        self.push_value(v);
        self
    }

    /// Sets the backtrace (`"b"`) from pre-serialized JSON.
    pub fn set_backtrace_raw(&mut self, json: &[u8]) {
        self.backtrace = Some(json.to_vec());
    }

    /// Chaining: sets the backtrace (`"b"`).
    pub fn backtrace(mut self, bt: &Value) -> Self {
        let mut out = Vec::new();
        write_value(&mut out, bt);
        self.backtrace = Some(out);
        self
    }

    /// Sets the profile (`"p"`) from pre-serialized JSON.
    pub fn set_profile_raw(&mut self, json: &[u8]) {
        self.profile = Some(json.to_vec());
    }

    /// Chaining: sets the profile (`"p"`).
    pub fn profile(mut self, p: &Value) -> Self {
        let mut out = Vec::new();
        write_value(&mut out, p);
        self.profile = Some(out);
        self
    }

    /// Adds a response note; notes are only written for `SUCCESS_PARTIAL` and
    /// `SUCCESS_SEQUENCE` responses, as in RethinkDB.
    pub fn push_note(&mut self, note: ResponseNote) {
        self.notes.push(note);
    }

    /// Chaining form of [`ResponseWriter::push_note`] for several notes.
    pub fn notes(mut self, notes: &[ResponseNote]) -> Self {
        self.notes.extend_from_slice(notes);
        self
    }

    /// Closes the JSON object, leaving the reserved header bytes in front.
    fn close(mut self) -> Vec<u8> {
        self.buf.push(b']');
        if let Some(b) = &self.backtrace {
            self.buf.extend_from_slice(b",\"b\":");
            self.buf.extend_from_slice(b);
        }
        if let Some(p) = &self.profile {
            self.buf.extend_from_slice(b",\"p\":");
            self.buf.extend_from_slice(p);
        }
        if matches!(
            self.t,
            ResponseType::SUCCESS_PARTIAL | ResponseType::SUCCESS_SEQUENCE
        ) {
            self.buf.extend_from_slice(b",\"n\":[");
            for (i, n) in self.notes.iter().enumerate() {
                if i > 0 {
                    self.buf.push(b',');
                }
                write_int(&mut self.buf, n.as_i64());
            }
            self.buf.push(b']');
        }
        self.buf.push(b'}');
        self.buf
    }

    /// Finishes and returns the response JSON alone.
    pub fn finish(self) -> Vec<u8> {
        let mut buf = self.close();
        buf.drain(..HEADER_LEN);
        buf
    }

    /// Finishes and returns a complete wire frame (token, length, JSON) with
    /// no extra copy. Fails if the JSON exceeds [`MAX_RESPONSE_BYTES`].
    pub fn finish_frame(self, token: u64) -> Result<Vec<u8>, FrameError> {
        let mut buf = self.close();
        let json_len = buf.len() - HEADER_LEN;
        let len = u32::try_from(json_len)
            .ok()
            .filter(|&l| u64::from(l) <= MAX_RESPONSE_BYTES)
            .ok_or(FrameError::ResponseTooLarge {
                size: json_len as u64,
                max: MAX_RESPONSE_BYTES,
            })?;
        let mut header = &mut buf[..HEADER_LEN];
        header.put_u64_le(token);
        header.put_u32_le(len);
        Ok(buf)
    }
}

/// Builds a whole response JSON in one call (see [`ResponseWriter`] for the
/// exact layout): `{"t":..,["e":..,]"r":[..][,"b":..][,"p":..][,"n":[..]]}`.
pub fn response_json(
    t: ResponseType,
    items: &[Value],
    backtrace: Option<&Value>,
    profile: Option<&Value>,
    notes: &[ResponseNote],
    error_type: Option<ErrorType>,
) -> Vec<u8> {
    let mut w = ResponseWriter::with_error_type(t, error_type);
    for item in items {
        w.push_value(item);
    }
    if let Some(bt) = backtrace {
        w = w.backtrace(bt);
    }
    if let Some(p) = profile {
        w = w.profile(p);
    }
    w.notes(notes).finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn s(v: Vec<u8>) -> String {
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn integers_are_written_as_to_string_writes_them() {
        for n in [0, 1, 9, 10, 18, 1000, -1, -42, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            write_int(&mut out, n);
            assert_eq!(s(out), n.to_string());
        }
    }

    #[test]
    fn items_written_in_place_are_as_pushed_ones() {
        let mut a = ResponseWriter::with_capacity(ResponseType::SUCCESS_ATOM, 7);
        a.push_raw_with(|out| out.extend_from_slice(br#"{"a":1}"#));
        let mut b = ResponseWriter::new(ResponseType::SUCCESS_ATOM);
        b.push_raw(br#"{"a":1}"#);
        assert_eq!(a.finish_frame(7).unwrap(), b.finish_frame(7).unwrap());
        let mut seq = ResponseWriter::new(ResponseType::SUCCESS_SEQUENCE);
        seq.push_raw_with(|out| out.push(b'1'));
        seq.push_raw_with(|out| out.push(b'2'));
        assert_eq!(s(seq.finish()), r#"{"t":2,"r":[1,2],"n":[]}"#);
    }

    #[test]
    fn atom() {
        let out = ResponseWriter::new(ResponseType::SUCCESS_ATOM)
            .item(&json!({"a": 1}))
            .finish();
        assert_eq!(s(out), r#"{"t":1,"r":[{"a":1}]}"#);
    }

    #[test]
    fn sequence_has_notes_even_when_empty() {
        let out = ResponseWriter::new(ResponseType::SUCCESS_SEQUENCE)
            .item_raw(b"1")
            .item_raw(b"\"x\"")
            .finish();
        assert_eq!(s(out), r#"{"t":2,"r":[1,"x"],"n":[]}"#);
        let out = ResponseWriter::new(ResponseType::SUCCESS_PARTIAL)
            .notes(&[ResponseNote::SEQUENCE_FEED, ResponseNote::INCLUDES_STATES])
            .finish();
        assert_eq!(s(out), r#"{"t":3,"r":[],"n":[1,5]}"#);
        // Notes are dropped for other types, as in RethinkDB.
        let out = ResponseWriter::new(ResponseType::SUCCESS_ATOM)
            .notes(&[ResponseNote::ATOM_FEED])
            .item_raw(b"null")
            .finish();
        assert_eq!(s(out), r#"{"t":1,"r":[null]}"#);
    }

    #[test]
    fn runtime_error_has_e_before_r() {
        let out = response_json(
            ResponseType::RUNTIME_ERROR,
            &[json!("Table `test.x` does not exist.")],
            Some(&json!([0])),
            None,
            &[],
            Some(ErrorType::OP_FAILED),
        );
        assert_eq!(
            s(out),
            r#"{"t":18,"e":4100000,"r":["Table `test.x` does not exist."],"b":[0]}"#
        );
        let out = ResponseWriter::error(
            ResponseType::COMPILE_ERROR,
            Some(ErrorType::QUERY_LOGIC),
            "bad",
        )
        .finish();
        assert_eq!(s(out), r#"{"t":17,"r":["bad"],"b":[]}"#);
    }

    #[test]
    fn profile_and_frame() {
        let w = ResponseWriter::new(ResponseType::SUCCESS_ATOM)
            .item_raw(b"2")
            .profile(&json!([]));
        let frame = w.finish_frame(5).unwrap();
        let json = br#"{"t":1,"r":[2],"p":[]}"#;
        assert_eq!(&frame[..8], &5u64.to_le_bytes());
        assert_eq!(&frame[8..12], &(json.len() as u32).to_le_bytes());
        assert_eq!(&frame[12..], json);
    }
}
