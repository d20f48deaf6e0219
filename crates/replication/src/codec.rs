//! Byte encodings: stored records (one format-version byte, then postcard) and
//! network frames (a 4-byte big-endian length, then postcard).
//!
//! postcard is compact and non-self-describing: a record's shape is fixed by its Rust
//! type, so every stored record carries [`FORMAT_VERSION`] and a reader refuses any
//! other version rather than misreading it (docs/storage-format.md).

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub use crate::error::CodecError;
use crate::error::TransportError;

/// The version byte in front of every record this crate stores.
pub const FORMAT_VERSION: u8 = 1;

/// The largest frame a peer may send (a bounded allocation before reading the body).
/// Snapshot chunks and append batches are sized well under it.
pub const MAX_FRAME_BYTES: u32 = 64 << 20;

/// Encodes a record for storage: the version byte, then the value.
pub fn encode_record<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    let mut out = vec![FORMAT_VERSION];
    postcard::to_io(value, &mut out).map_err(|e| CodecError(e.to_string()))?;
    Ok(out)
}

/// Decodes a stored record written by [`encode_record`].
pub fn decode_record<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    match bytes.split_first() {
        Some((&FORMAT_VERSION, body)) => {
            postcard::from_bytes(body).map_err(|e| CodecError(e.to_string()))
        }
        Some((v, _)) => Err(CodecError(format!(
            "record format version {v}, expected {FORMAT_VERSION}"
        ))),
        None => Err(CodecError("empty record".into())),
    }
}

/// Encodes a message body (no version byte: peers of one cluster run one version).
pub fn encode_message<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    postcard::to_stdvec(value).map_err(|e| CodecError(e.to_string()))
}

/// Decodes a message body written by [`encode_message`].
pub fn decode_message<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    postcard::from_bytes(bytes).map_err(|e| CodecError(e.to_string()))
}

/// Writes one frame: the body's length (u32, big-endian), then the body.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    body: &[u8],
) -> Result<(), TransportError> {
    let len = u32::try_from(body.len())
        .ok()
        .filter(|n| *n <= MAX_FRAME_BYTES)
        .ok_or(TransportError::FrameTooLarge(body.len()))?;
    w.write_all(&len.to_be_bytes()).await?;
    w.write_all(body).await?;
    w.flush().await?;
    Ok(())
}

/// Reads one frame written by [`write_frame`]; `Ok(None)` at a clean end of stream.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
) -> Result<Option<Vec<u8>>, TransportError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len);
    if len > MAX_FRAME_BYTES {
        return Err(TransportError::FrameTooLarge(len as usize));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).await?;
    Ok(Some(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_carry_their_version() {
        let bytes = encode_record(&(7u64, "x".to_string())).unwrap();
        assert_eq!(bytes[0], FORMAT_VERSION);
        let back: (u64, String) = decode_record(&bytes).unwrap();
        assert_eq!(back, (7, "x".to_string()));
        let mut other = bytes.clone();
        other[0] = 2;
        assert!(decode_record::<(u64, String)>(&other).is_err());
        assert!(decode_record::<(u64, String)>(&[]).is_err());
        assert!(decode_record::<(u64, String)>(&bytes[..2]).is_err());
    }

    #[tokio::test]
    async fn frames_round_trip_and_refuse_oversized_lengths() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"hello").await.unwrap();
        write_frame(&mut buf, b"").await.unwrap();
        let mut r = &buf[..];
        assert_eq!(read_frame(&mut r).await.unwrap().unwrap(), b"hello");
        assert_eq!(read_frame(&mut r).await.unwrap().unwrap(), b"");
        assert!(read_frame(&mut r).await.unwrap().is_none());

        let huge = (MAX_FRAME_BYTES + 1).to_be_bytes();
        let mut r = &huge[..];
        assert!(matches!(
            read_frame(&mut r).await,
            Err(TransportError::FrameTooLarge(_))
        ));
        // A truncated body is an error, not a clean end.
        let mut r = &[0u8, 0, 0, 9, 1, 2][..];
        assert!(read_frame(&mut r).await.is_err());
    }
}
