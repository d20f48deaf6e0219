//! Target `frame`: the frame codec and the handshake (`proto::frame`,
//! `proto::handshake`, and the driver side in `client::scram`).
//!
//! The first input byte picks the mode; the rest is the client's byte stream.
//! - frames: `decode` over the whole buffer and over the same bytes arriving in
//!   chunks yields the same frames and the same error; re-encoding the frames gives
//!   back exactly the bytes consumed; an error is raised exactly when a header
//!   declares more than the limit.
//! - handshake (raw bytes, or after a valid V1_0 magic and client-first message so
//!   the SCRAM final message is reached): the transcript (every reply, the outcome,
//!   the bytes left for the frame decoder) does not depend on how the bytes are
//!   split; a rejection ends with NUL; a finished handshake refuses more input with
//!   `HandshakeError::Finished`, never a panic; nothing is left buffered beyond the
//!   message limits.
//! - full exchange: the driver's `ScramClient` against the server state machine
//!   with a fuzzed user, password and nonce: accepted exactly when the password is
//!   right (up to HMAC's zero padding of its key), and the driver verifies the server's signature.
//! - driver: `ScramClient` and `ScramVerifier` parse arbitrary server messages
//!   without panicking.

use std::collections::HashMap;

use bytes::{BufMut, BytesMut};
use client::scram::{ScramClient, MAX_ITERATIONS};
use proto::frame::{decode, encode_response, Frame, FrameError, HEADER_LEN};
use proto::handshake::{
    Handshake, HandshakeError, NonceSource, ScramCredentials, Step, MAX_AUTH_KEY_LEN,
    MAX_MESSAGE_LEN,
};
use proto::ql2::Version;

/// Runs one input.
pub fn check(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 5 {
        0 => frames(rest),
        1 => handshake_all_splits(rest),
        2 => {
            let mut input = valid_prefix(rest.first().copied().unwrap_or(0));
            input.extend_from_slice(rest.get(1..).unwrap_or_default());
            handshake_all_splits(&input);
        }
        3 => full_exchange(rest),
        _ => driver(rest),
    }
}

// ---- frames -------------------------------------------------------------------------

/// What decoding a byte stream gave: the frames, then the error that stopped it.
type Decoded = (Vec<Frame>, Option<FrameError>);

fn frames(data: &[u8]) {
    let (Some(&m), Some(&c)) = (data.first(), data.get(1)) else {
        return;
    };
    let body = data.get(2..).unwrap_or_default();
    // Small limits, so that both sides of the limit are reached.
    let max = usize::from(m) * 4;
    let chunk = usize::from(c % 16) + 1;

    let mut whole = BytesMut::from(body);
    let a = decode_all(&mut whole, max);
    let mut buf = BytesMut::new();
    let mut b: Decoded = (Vec::new(), None);
    'outer: for piece in body.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            let before = buf.len();
            match decode(&mut buf, max) {
                Ok(Some(f)) => b.0.push(f),
                Ok(None) => {
                    assert_eq!(buf.len(), before, "an incomplete frame consumed bytes");
                    break;
                }
                Err(e) => {
                    b.1 = Some(e);
                    break 'outer;
                }
            }
        }
    }
    assert_eq!(a, b, "decoding depends on how the bytes arrive");

    // Re-encoding gives back the bytes consumed.
    let mut enc = BytesMut::new();
    for f in &a.0 {
        assert!(f.payload.len() <= max);
        let r = encode_response(f.token, &f.payload, &mut enc);
        assert!(r.is_ok(), "a decoded frame does not encode: {r:?}");
    }
    assert_eq!(body.get(..enc.len()), Some(&enc[..]));
    let rest = body.get(enc.len()..).unwrap_or_default();
    match &a.1 {
        Some(FrameError::QueryTooLarge { token, size, .. }) => {
            let (t, s) = header(rest).unwrap_or_default();
            assert_eq!((*token, *size), (t, u64::from(s)));
            assert!(*size > max as u64);
        }
        Some(other) => panic!("unexpected decode error {other:?}"),
        None => {
            // Stopped for want of bytes: the header (if whole) fits the limit.
            if let Some((_, s)) = header(rest) {
                assert!(s as usize <= max && rest.len() < HEADER_LEN + s as usize);
            }
            assert_eq!(&whole[..], rest);
        }
    }
}

fn decode_all(buf: &mut BytesMut, max: usize) -> Decoded {
    let mut out = Vec::new();
    loop {
        match decode(buf, max) {
            Ok(Some(f)) => out.push(f),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

fn header(b: &[u8]) -> Option<(u64, u32)> {
    let t = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    let s = u32::from_le_bytes(b.get(8..12)?.try_into().ok()?);
    Some((t, s))
}

// ---- handshake ----------------------------------------------------------------------

/// Deterministic "randomness", so that two runs of one input give one transcript.
struct Counter(u8);

impl NonceSource for Counter {
    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            self.0 = self.0.wrapping_mul(31).wrapping_add(7);
            *b = self.0;
        }
    }
}

/// Few PBKDF2 rounds: the fuzzer's time goes into parsing, not hashing.
const ITERATIONS: u32 = 2;

fn users() -> HashMap<String, ScramCredentials> {
    let mut m = HashMap::new();
    m.insert(
        "admin".to_string(),
        ScramCredentials::derive("", b"salt", ITERATIONS),
    );
    m.insert(
        "fuzz".to_string(),
        ScramCredentials::derive("pw", b"pepper", ITERATIONS),
    );
    m
}

fn v1_magic() -> [u8; 4] {
    (Version::V1_0.as_i64() as u32).to_le_bytes()
}

/// A V1_0 magic and a valid client-first message for user `fuzz` (or `admin`), so that
/// what follows is parsed as the client-final message.
fn valid_prefix(sel: u8) -> Vec<u8> {
    let user = if sel & 1 == 0 { "fuzz" } else { "admin" };
    let mut out = v1_magic().to_vec();
    out.extend_from_slice(
        format!(
            "{{\"protocol_version\":0,\"authentication_method\":\"SCRAM-SHA-256\",\"authentication\":\"n,,n={user},r=abcdefgh\"}}\0"
        )
        .as_bytes(),
    );
    out
}

/// One run's transcript: replies, how it ended, the bytes left for the frame decoder.
#[derive(Debug, PartialEq)]
struct Transcript {
    replies: Vec<Vec<u8>>,
    end: String,
    left: Vec<u8>,
}

fn run_handshake(input: &[u8], chunk: usize) -> Transcript {
    let users = users();
    let mut hs = Handshake::new(Counter(1));
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let mut replies = Vec::new();
    let end = loop {
        match hs.feed(&mut buf, &users) {
            Ok(Step::NeedMore) => {
                assert!(
                    buf.len() < MAX_MESSAGE_LEN.max(MAX_AUTH_KEY_LEN + 4),
                    "{} bytes buffered without progress",
                    buf.len()
                );
                let Some(piece) = input.get(fed..(fed + chunk).min(input.len())) else {
                    break "need more".to_string();
                };
                if piece.is_empty() {
                    break "need more".to_string();
                }
                buf.put_slice(piece);
                fed += piece.len();
            }
            Ok(Step::Send(b)) => replies.push(b),
            Ok(Step::Done {
                user,
                reply,
                version,
            }) => {
                replies.push(reply);
                break format!("done {user} {version:?}");
            }
            Ok(Step::Reject { reply, failure }) => {
                assert_eq!(reply.last(), Some(&0), "a rejection must end with NUL");
                replies.push(reply);
                break format!("reject {failure:?}");
            }
            Err(e) => panic!("misuse before the end: {e}"),
        }
    };
    if hs.is_finished() {
        let again = hs.feed(&mut buf, &users);
        assert!(matches!(again, Err(HandshakeError::Finished)), "{again:?}");
    }
    let mut left = buf.to_vec();
    left.extend_from_slice(input.get(fed..).unwrap_or_default());
    Transcript { replies, end, left }
}

fn handshake_all_splits(input: &[u8]) {
    let whole = run_handshake(input, input.len().max(1));
    for chunk in [1, 3, 7] {
        assert_eq!(
            whole,
            run_handshake(input, chunk),
            "handshake depends on how the bytes arrive"
        );
    }
}

/// The driver's SCRAM against the server's, with a fuzzed user, password and nonce.
fn full_exchange(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\u{1}');
    let user = parts.next().unwrap_or_default();
    let password = parts.next().unwrap_or_default();
    let nonce: String = parts
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_graphic() && *c != ',')
        .collect();
    let nonce = if nonce.is_empty() {
        "n".to_string()
    } else {
        nonce
    };
    let users = users();
    let client = ScramClient::new(user, password, &nonce);
    let mut hs = Handshake::new(Counter(3));
    let mut buf = BytesMut::from(&v1_magic()[..]);
    let step = hs.feed(&mut buf, &users);
    assert!(matches!(step, Ok(Step::Send(_))), "{step:?}");
    let first = serde_json::json!({
        "protocol_version": 0,
        "authentication_method": "SCRAM-SHA-256",
        "authentication": client.client_first(),
    });
    buf.put_slice(first.to_string().as_bytes());
    buf.put_u8(0);
    let server_first = match hs.feed(&mut buf, &users) {
        Ok(Step::Send(reply)) => authentication(&reply),
        Ok(Step::Reject { .. }) => return, // e.g. a NUL inside the user name
        other => panic!("unexpected step {other:?}"),
    };
    let Some(server_first) = server_first else {
        panic!("server-first without authentication")
    };
    let (client_final, verifier) = match client.handle_server_first(&server_first) {
        Ok(x) => x,
        Err(e) => panic!("the driver refuses the server's first message: {e}"),
    };
    let msg = serde_json::json!({ "authentication": client_final });
    buf.put_slice(msg.to_string().as_bytes());
    buf.put_u8(0);
    // HMAC pads its key with zeros to 64 bytes (RFC 2104), so in SCRAM without
    // SASLprep (RethinkDB's and ours) a password and the same password followed by NULs,
    // up to 64 bytes, are the same password.
    let padded = |p: &str| p.len() <= 64 && p.bytes().all(|b| b == 0);
    let known = match (user, password) {
        ("admin", p) => padded(p),
        ("fuzz", p) => p.strip_prefix("pw").is_some_and(padded),
        _ => false,
    };
    match hs.feed(&mut buf, &users) {
        Ok(Step::Done { user: u, reply, .. }) => {
            assert!(known, "accepted a wrong password for {user:?}");
            assert_eq!(u, user);
            let Some(fin) = authentication(&reply) else {
                panic!("server-final without authentication")
            };
            let v = verifier.verify_server_final(&fin);
            assert!(v.is_ok(), "{v:?}");
        }
        Ok(Step::Reject { failure, .. }) => {
            assert!(
                !known,
                "refused the right password for {user:?}: {failure:?}"
            )
        }
        other => panic!("unexpected step {other:?}"),
    }
}

/// The `authentication` string of a NUL-terminated JSON reply.
fn authentication(reply: &[u8]) -> Option<String> {
    let body = reply.strip_suffix(&[0])?;
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v.get("authentication")?.as_str().map(str::to_string)
}

/// The driver's parsing of arbitrary server messages.
fn driver(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (first, fin) = text.split_once('\n').unwrap_or((&text, ""));
    // A server may name up to `MAX_ITERATIONS` PBKDF2 rounds; bounded here only to keep
    // each run short.
    let slow = first.split(',').any(|a| {
        a.strip_prefix("i=")
            .and_then(|i| i.parse::<u32>().ok())
            .is_some_and(|i| i > 64 && i <= MAX_ITERATIONS)
    });
    if slow {
        return;
    }
    let client = ScramClient::new("fuzz", "pw", "abc");
    if let Ok((msg, verifier)) = client.handle_server_first(first) {
        assert!(msg.starts_with("c=biws,r=abc"));
        let _ = verifier.verify_server_final(fin);
    }
}
