//! Query/response framing used after the handshake.
//!
//! Every message in either direction is `token: u64 LE` + `length: u32 LE` +
//! `length` bytes of UTF-8 JSON. Invariants:
//! - [`decode`] never consumes bytes of an incomplete frame (it returns
//!   `Ok(None)` and leaves the buffer untouched);
//! - the length is checked against the limit from the 12-byte header alone, so
//!   an oversized frame is rejected before any of its body is buffered or
//!   allocated;
//! - [`encode_response`] refuses payloads whose length does not fit the `u32`
//!   length field instead of truncating it.
//!
//! Query parsing and response building live in [`crate::query`] and
//! [`crate::response`] and are re-exported here.

use bytes::{Buf, BufMut, Bytes, BytesMut};

pub use crate::query::{parse_query, Query, QueryParseError, MAX_QUERY_DEPTH};
pub use crate::response::{response_json, ResponseWriter};

/// Size of the frame header: 8-byte token + 4-byte length.
pub const HEADER_LEN: usize = 12;

/// Default largest accepted query payload, in bytes: 64 MiB.
///
/// This is Ponder's choice. RethinkDB 2.4 rejects queries of 128 MiB or more
/// (`wire_protocol_t::TOO_LARGE_QUERY_SIZE` in `src/client_protocol/protocols.cc`);
/// we halve that to bound per-connection memory. A frame whose declared
/// length exceeds the limit is refused from its header alone.
pub const MAX_QUERY_BYTES: usize = 64 * 1024 * 1024;

/// One decoded frame: the client's token and its raw JSON payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Query token chosen by the client; echoed in the response.
    pub token: u64,
    /// The frame body (UTF-8 JSON, not yet validated).
    pub payload: Bytes,
}

/// Errors from framing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A query declared a length above the limit; the connection must be
    /// closed after answering `CLIENT_ERROR`/`RESOURCE_LIMIT` with
    /// [`FrameError::client_message`] on `token`.
    #[error("Query size ({size}) greater than maximum ({max}).")]
    QueryTooLarge {
        /// Token of the offending query (its header was consumed).
        token: u64,
        /// Declared payload length.
        size: u64,
        /// The limit in force.
        max: u64,
    },
    /// A response payload is too long for the `u32` length field.
    #[error("Response size ({size}) greater than maximum ({max}).")]
    ResponseTooLarge {
        /// Length of the payload that could not be framed.
        size: u64,
        /// Largest length representable (`u32::MAX - 1`, as RethinkDB reports).
        max: u64,
    },
}

impl FrameError {
    /// RethinkDB's text for this error (`too_large_query_message` /
    /// `too_large_response_message` in `src/client_protocol/protocols.cc`).
    pub fn client_message(&self) -> String {
        self.to_string()
    }
}

/// Decodes one frame from the front of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed (nothing is consumed), and
/// `Err(QueryTooLarge)` as soon as the header declares more than `max` bytes
/// (the header is consumed, the body is never buffered by this function).
pub fn decode(buf: &mut BytesMut, max: usize) -> Result<Option<Frame>, FrameError> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let mut header = header;
    let token = header.get_u64_le();
    let size = header.get_u32_le();
    if u64::from(size) > max as u64 {
        buf.advance(HEADER_LEN);
        return Err(FrameError::QueryTooLarge {
            token,
            size: u64::from(size),
            max: max as u64,
        });
    }
    let size = size as usize;
    let total = HEADER_LEN + size;
    if buf.len() < total {
        // Deliberately no `reserve` here: the buffer grows only as bytes
        // actually arrive, so a header alone never costs `size` bytes.
        return Ok(None);
    }
    buf.advance(HEADER_LEN);
    let payload = buf.split_to(size).freeze();
    Ok(Some(Frame { token, payload }))
}

/// A stateful wrapper around [`decode`] that remembers the size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDecoder {
    max: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(MAX_QUERY_BYTES)
    }
}

impl FrameDecoder {
    /// A decoder accepting payloads of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        Self { max }
    }

    /// The payload size limit in force.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Decodes one frame from `buf`; see [`decode`].
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        decode(buf, self.max)
    }
}

/// Largest response payload RethinkDB will frame (`TOO_LARGE_RESPONSE_SIZE - 1`).
pub const MAX_RESPONSE_BYTES: u64 = u32::MAX as u64 - 1;

/// Appends a response frame (`token`, length, `json`) to `out`.
///
/// Fails without writing anything if `json` is longer than
/// [`MAX_RESPONSE_BYTES`]; the caller should then answer a `RUNTIME_ERROR` /
/// `RESOURCE_LIMIT` carrying [`FrameError::client_message`], as RethinkDB does.
pub fn encode_response(token: u64, json: &[u8], out: &mut BytesMut) -> Result<(), FrameError> {
    let len = u32::try_from(json.len())
        .ok()
        .filter(|&l| u64::from(l) <= MAX_RESPONSE_BYTES)
        .ok_or(FrameError::ResponseTooLarge {
            size: json.len() as u64,
            max: MAX_RESPONSE_BYTES,
        })?;
    out.reserve(HEADER_LEN + json.len());
    out.put_u64_le(token);
    out.put_u32_le(len);
    out.put_slice(json);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame_bytes(token: u64, body: &[u8]) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_u64_le(token);
        b.put_u32_le(body.len() as u32);
        b.put_slice(body);
        b
    }

    #[test]
    fn decodes_one_frame_and_leaves_rest() {
        let mut b = frame_bytes(7, b"[1,[1,[5]],{}]");
        b.put_slice(&[1, 2, 3]);
        let f = decode(&mut b, MAX_QUERY_BYTES).unwrap().unwrap();
        assert_eq!(f.token, 7);
        assert_eq!(&f.payload[..], b"[1,[1,[5]],{}]");
        assert_eq!(&b[..], &[1, 2, 3]);
    }

    #[test]
    fn truncated_frames_need_more() {
        let full = frame_bytes(1, b"[2]");
        for cut in 0..full.len() {
            let mut b = BytesMut::from(&full[..cut]);
            assert_eq!(decode(&mut b, MAX_QUERY_BYTES).unwrap(), None);
            assert_eq!(b.len(), cut, "nothing consumed");
        }
    }

    #[test]
    fn oversized_header_rejected_before_body() {
        let mut b = BytesMut::new();
        b.put_u64_le(9);
        b.put_u32_le(u32::MAX);
        let err = decode(&mut b, MAX_QUERY_BYTES).unwrap_err();
        assert_eq!(
            err,
            FrameError::QueryTooLarge {
                token: 9,
                size: u32::MAX as u64,
                max: MAX_QUERY_BYTES as u64
            }
        );
        assert!(b.capacity() < 1024, "no allocation for the body");
        assert_eq!(
            err.client_message(),
            "Query size (4294967295) greater than maximum (67108864)."
        );
        // Exactly at the limit is accepted (needs more bytes).
        let mut b = BytesMut::new();
        b.put_u64_le(1);
        b.put_u32_le(10);
        assert_eq!(decode(&mut b, 10).unwrap(), None);
        let mut b = BytesMut::new();
        b.put_u64_le(1);
        b.put_u32_le(11);
        assert!(decode(&mut b, 10).is_err());
    }

    #[test]
    fn encode_response_layout() {
        let mut out = BytesMut::new();
        encode_response(0x0102030405060708, b"{}", &mut out).unwrap();
        assert_eq!(&out[..], &[8, 7, 6, 5, 4, 3, 2, 1, 2, 0, 0, 0, b'{', b'}']);
    }

    proptest! {
        #[test]
        fn encode_decode_round_trip(token: u64, body in proptest::collection::vec(any::<u8>(), 0..256), split in 0usize..300) {
            let mut enc = BytesMut::new();
            encode_response(token, &body, &mut enc).unwrap();
            let split = split.min(enc.len());
            let mut buf = BytesMut::from(&enc[..split]);
            let mut got = decode(&mut buf, 1024).unwrap();
            if got.is_none() {
                buf.extend_from_slice(&enc[split..]);
                got = decode(&mut buf, 1024).unwrap();
            }
            let f = got.unwrap();
            prop_assert_eq!(f.token, token);
            prop_assert_eq!(&f.payload[..], &body[..]);
        }
    }
}
