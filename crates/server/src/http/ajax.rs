//! RethinkDB's HTTP query endpoint (`/ajax/reql`) as pure functions: the routes, the
//! request framing, the exact answers RethinkDB 2.4 gives, and the `"p"` profile it
//! adds to every answered query.
//!
//! The framing is the driver protocol's without the length on the way in
//! (`query_server_t::handle` in RethinkDB's `src/client_protocol/server.cc`): the
//! request body is the 8-byte little-endian token followed by the query's JSON; the
//! answer (`application/octet-stream`) is the token, a 4-byte little-endian length and
//! the response JSON — exactly the frame the driver port writes, so the session's
//! frames are sent as they are. Every answer that a query produced carries a profile;
//! when the query did not ask for one, RethinkDB adds `[{"duration(ms)": ms}]`.

use datum::Datum;
use proto::frame::HEADER_LEN;
use proto::ql2::{ErrorType, ResponseType};
use proto::response::ResponseWriter;

/// RethinkDB's 400 answer when `conn_id` is missing (content type `application/text`).
pub const CONN_ID_MISSING: &str = "Required parameter \"conn_id\" missing\n";
/// RethinkDB's 400 answer to a body shorter than a token.
pub const REQUEST_TOO_SMALL: &str = "Client is buggy (request too small).";
/// RethinkDB's 400 answer to a noreply query.
pub const NOREPLY_REFUSED: &str = "noreply queries are not supported over HTTP\n";
/// The in-band CLIENT_ERROR for an unknown (closed, expired) connection id.
pub const NOT_OPEN: &str = "This HTTP connection is not open.";
/// The in-band error of a query whose connection was closed while it ran.
pub const TERMINATED: &str = "This ReQL connection has been terminated.";
/// The in-band error of a query interrupted by the server's shutdown.
pub const SHUTTING_DOWN: &str = "Server is shutting down.";

/// The in-band error of a query whose connection expired while it ran.
pub fn expired_message(secs: u64) -> String {
    format!("HTTP ReQL query timed out after {secs} seconds.")
}

/// What a request under `/ajax/reql` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /ajax/reql/open-new-connection`.
    Open,
    /// `POST /ajax/reql/close-connection?conn_id=ID`.
    Close,
    /// Anything else under `/ajax/reql`: a query (`?conn_id=ID`).
    Query,
}

/// The route of `path`, if it is under `/ajax/reql`. As RethinkDB, opening and
/// closing are recognised only for POST; any other request there is a query.
pub fn route(path: &str, post: bool) -> Option<Route> {
    let rest = path.strip_prefix("/ajax/reql")?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    let last = rest.rsplit('/').next().unwrap_or("");
    Some(match last {
        "open-new-connection" if post => Route::Open,
        "close-connection" if post => Route::Close,
        _ => Route::Query,
    })
}

/// The value of query parameter `name` in `query` (the part after `?`),
/// percent-decoded; `+` stays `+` (connection ids are standard base64).
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| {
            percent_encoding::percent_decode_str(v)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

/// Splits a query request's body into its token and JSON; None when it is shorter
/// than a token (RethinkDB: [`REQUEST_TOO_SMALL`]).
pub fn split_request(body: &[u8]) -> Option<(u64, &[u8])> {
    let (token, json) = body.split_first_chunk::<8>()?;
    Some((u64::from_le_bytes(*token), json))
}

/// A CLIENT_ERROR frame answering `token` with `message` (no `"e"`, empty backtrace).
pub fn client_error(token: u64, message: &str) -> Vec<u8> {
    frame_of(
        token,
        ResponseWriter::error(ResponseType::CLIENT_ERROR, None, message),
    )
}

/// A RUNTIME_ERROR/OP_INDETERMINATE frame answering `token` with `message` (a query
/// interrupted by its connection's end or the server's shutdown).
pub fn interrupted(token: u64, message: &str) -> Vec<u8> {
    frame_of(
        token,
        ResponseWriter::error(
            ResponseType::RUNTIME_ERROR,
            Some(ErrorType::OP_INDETERMINATE),
            message,
        ),
    )
}

fn frame_of(token: u64, w: ResponseWriter) -> Vec<u8> {
    crate::wire::finish(w, token)
}

/// Adds RethinkDB's `"p":[{"duration(ms)":ms}]` to a response frame that has no
/// profile: before `"n"` when there is one (RethinkDB's key order is t, e, r, b, p,
/// n), else at the end. The frame's length field is rewritten. A frame that is not
/// a well-formed response object is returned unchanged.
pub fn add_duration_profile(frame: Vec<u8>, ms: f64) -> Vec<u8> {
    let Some(json) = frame.get(HEADER_LEN..) else {
        return frame;
    };
    let keys = top_level_keys(json);
    if json.last() != Some(&b'}') || keys.iter().any(|(k, _)| *k == b"p") {
        return frame;
    }
    // Insert before the comma that precedes `"n"`, or before the closing brace.
    let at = match keys.iter().find(|(k, _)| *k == b"n") {
        Some((_, start)) if *start > 0 && json.get(start - 1) == Some(&b',') => start - 1,
        Some(_) => return frame,
        None => json.len() - 1,
    };
    let profile = format!(
        ",\"p\":[{{\"duration(ms)\":{}}}]",
        Datum::Number(ms).to_json_string()
    );
    let mut out = Vec::with_capacity(frame.len() + profile.len());
    out.extend_from_slice(&frame[..HEADER_LEN]);
    out.extend_from_slice(&json[..at]);
    out.extend_from_slice(profile.as_bytes());
    out.extend_from_slice(&json[at..]);
    let Ok(len) = u32::try_from(out.len() - HEADER_LEN) else {
        return frame;
    };
    out[8..HEADER_LEN].copy_from_slice(&len.to_le_bytes());
    out
}

/// The keys of a JSON object's top level, each with the offset of its opening quote.
/// Strings (with escapes) and nested values are skipped, so a key inside a result
/// never counts.
fn top_level_keys(json: &[u8]) -> Vec<(&[u8], usize)> {
    let mut keys = Vec::new();
    let (mut depth, mut in_str, mut escaped, mut expect_key) = (0usize, false, false, false);
    let mut key_start = None;
    for (i, &b) in json.iter().enumerate() {
        if in_str {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_str = false;
                if let Some(s) = key_start.take() {
                    if let Some(k) = json.get(s + 1..i) {
                        keys.push((k, s));
                    }
                }
            }
            continue;
        }
        match b {
            b'"' => {
                in_str = true;
                if depth == 1 && expect_key {
                    key_start = Some(i);
                    expect_key = false;
                }
            }
            b'{' | b'[' => {
                depth += 1;
                expect_key = depth == 1 && b == b'{';
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => expect_key = true,
            _ => {}
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(token: u64, json: &str) -> Vec<u8> {
        let mut f = token.to_le_bytes().to_vec();
        f.extend_from_slice(&(json.len() as u32).to_le_bytes());
        f.extend_from_slice(json.as_bytes());
        f
    }

    fn json_of(f: &[u8]) -> &str {
        let len = u32::from_le_bytes(f[8..12].try_into().unwrap()) as usize;
        assert_eq!(len, f.len() - 12, "length field");
        std::str::from_utf8(&f[12..]).unwrap()
    }

    #[test]
    fn routes_as_rethinkdb() {
        assert_eq!(
            route("/ajax/reql/open-new-connection", true),
            Some(Route::Open)
        );
        assert_eq!(
            route("/ajax/reql/open-new-connection", false),
            Some(Route::Query)
        );
        assert_eq!(
            route("/ajax/reql/close-connection", true),
            Some(Route::Close)
        );
        assert_eq!(route("/ajax/reql/", true), Some(Route::Query));
        assert_eq!(route("/ajax/reql", true), Some(Route::Query));
        assert_eq!(route("/ajax/reqlx", true), None);
        assert_eq!(route("/index.html", true), None);
    }

    #[test]
    fn query_params_are_percent_decoded_but_plus_stays() {
        let q = Some("a=1&conn_id=G+r4%2FLT%3D%3D&b");
        assert_eq!(query_param(q, "conn_id").as_deref(), Some("G+r4/LT=="));
        assert_eq!(query_param(q, "b").as_deref(), Some(""));
        assert_eq!(query_param(q, "c"), None);
        assert_eq!(query_param(None, "conn_id"), None);
    }

    #[test]
    fn the_token_is_eight_little_endian_bytes() {
        let mut body = 0x0102_0304_0506_0708u64.to_le_bytes().to_vec();
        body.extend_from_slice(b"[1,1]");
        assert_eq!(
            split_request(&body),
            Some((0x0102_0304_0506_0708, &b"[1,1]"[..]))
        );
        assert_eq!(
            split_request(&body[..8]),
            Some((0x0102_0304_0506_0708, &[][..]))
        );
        assert_eq!(split_request(&body[..7]), None);
        assert_eq!(split_request(&[]), None);
    }

    #[test]
    fn the_duration_profile_goes_before_the_notes_or_at_the_end() {
        let f = add_duration_profile(frame(7, r#"{"t":1,"r":[2]}"#), 1.5);
        assert_eq!(&f[..8], &7u64.to_le_bytes());
        assert_eq!(json_of(&f), r#"{"t":1,"r":[2],"p":[{"duration(ms)":1.5}]}"#);
        let f = add_duration_profile(frame(7, r#"{"t":3,"r":[{"n":[1]}],"n":[]}"#), 2.0);
        assert_eq!(
            json_of(&f),
            r#"{"t":3,"r":[{"n":[1]}],"p":[{"duration(ms)":2}],"n":[]}"#
        );
        let f = add_duration_profile(frame(7, r#"{"t":2,"r":["\"p\":1",{"p":2}],"n":[]}"#), 3.0);
        assert_eq!(
            json_of(&f),
            r#"{"t":2,"r":["\"p\":1",{"p":2}],"p":[{"duration(ms)":3}],"n":[]}"#
        );
    }

    #[test]
    fn an_existing_profile_is_kept() {
        let f = frame(1, r#"{"t":1,"r":[2],"p":[]}"#);
        assert_eq!(add_duration_profile(f.clone(), 1.0), f);
        let short = vec![1u8, 2, 3];
        assert_eq!(add_duration_profile(short.clone(), 1.0), short);
    }

    #[test]
    fn error_frames_have_rethinkdbs_shape() {
        let f = client_error(5, NOT_OPEN);
        assert_eq!(
            json_of(&f),
            r#"{"t":16,"r":["This HTTP connection is not open."],"b":[]}"#
        );
        let f = interrupted(5, &expired_message(300));
        assert_eq!(
            json_of(&f),
            r#"{"t":18,"e":4200000,"r":["HTTP ReQL query timed out after 300 seconds."],"b":[]}"#
        );
    }
}
