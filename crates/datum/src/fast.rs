//! A hand-written JSON decoder for the hot path: stored documents (our own compact
//! JSON, keys already sorted) and query payloads.
//!
//! It builds exactly the `Datum` the serde decoder in `json.rs` would, and gives up
//! (`None`) on anything it is not sure about — invalid JSON, lone surrogates,
//! non-finite numbers, deep nesting — so that the caller falls back to serde and keeps
//! serde's error messages. It never panics on untrusted input (no indexing).
//!
//! Why: decoding 1 KB documents with serde was most of the cost of scans and point
//! reads (docs/decisions.md has the measurements).

use std::sync::Arc;

use crate::value::{Datum, Object, Str};

/// Nesting beyond this is left to serde (whose own limit is 128).
const MAX_DEPTH: u32 = 100;

/// Decodes `bytes` as one JSON value, or `None` when serde must decide. The flag says
/// whether the text is canonical: byte for byte what `write_json` prints for the value
/// (no whitespace, keys strictly ascending, serde's escapes, numbers as we print them).
pub(crate) fn parse(bytes: &[u8]) -> Option<(Datum, bool)> {
    let mut p = Parser {
        b: bytes,
        i: 0,
        depth: 0,
        scratch: Vec::new(),
        canonical: true,
    };
    p.ws();
    let v = p.value()?;
    p.ws();
    (p.i == p.b.len()).then_some((v, p.canonical))
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
    /// Reused for strings with escapes.
    scratch: Vec<u8>,
    /// Cleared at the first byte `write_json` would not have printed.
    canonical: bool,
}

/// Bytes that end a plain run inside a string: quote, backslash, control characters.
static STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// The length of the plain run at the start of `s`.
#[inline]
fn plain_run(s: &[u8]) -> usize {
    s.iter()
        .position(|&c| STOP[usize::from(c)])
        .unwrap_or(s.len())
}

impl Parser<'_> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
            self.canonical = false;
        }
    }

    #[inline]
    fn expect(&mut self, c: u8) -> Option<()> {
        if self.peek()? == c {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    fn value(&mut self) -> Option<Datum> {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                Some(Datum::String(self.string()?))
            }
            b'-' | b'0'..=b'9' => self.number(),
            b'{' => self.object(),
            b'[' => self.array(),
            b't' => self.literal(b"true", Datum::Bool(true)),
            b'f' => self.literal(b"false", Datum::Bool(false)),
            b'n' => self.literal(b"null", Datum::Null),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8], d: Datum) -> Option<Datum> {
        let end = self.i.checked_add(word.len())?;
        if self.b.get(self.i..end)? == word {
            self.i = end;
            Some(d)
        } else {
            None
        }
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    /// JSON's number grammar, strictly; integers of up to 18 digits are converted
    /// directly, everything else by the standard library's correctly rounded parser
    /// (serde_json is built with `float_roundtrip`, so both agree).
    fn number(&mut self) -> Option<Datum> {
        let start = self.i;
        let neg = self.peek() == Some(b'-');
        if neg {
            self.i += 1;
        }
        let int_start = self.i;
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        let int_end = self.i;
        let mut integral = true;
        if self.peek() == Some(b'.') {
            self.i += 1;
            integral = false;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return None;
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            integral = false;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return None;
            }
            self.digits();
        }
        if integral && int_end - int_start <= 18 {
            let mut n: i64 = 0;
            for &c in self.b.get(int_start..int_end)? {
                n = n * 10 + i64::from(c - b'0');
            }
            // Negated as a double, so that `-0` is -0.0 as serde makes it.
            let f = n as f64;
            // We print integral doubles as the integer they hold: the text is canonical
            // when the double holds it exactly (and it is not `-0`, printed `-0.0`).
            if f as i64 != n || (neg && n == 0) {
                self.canonical = false;
            }
            return Some(Datum::Number(if neg { -f } else { f }));
        }
        let token = self.b.get(start..self.i)?;
        let f: f64 = std::str::from_utf8(token).ok()?.parse().ok()?;
        if !f.is_finite() {
            return None;
        }
        if self.canonical {
            let mut printed = Vec::with_capacity(token.len());
            crate::json::write_number(f, &mut printed);
            self.canonical = printed == token;
        } else {
            self.canonical = false;
        }
        Some(Datum::Number(f))
    }

    /// A string whose opening quote was consumed.
    fn string(&mut self) -> Option<Str> {
        let rest = self.b.get(self.i..)?;
        let n = plain_run(rest);
        let run = rest.get(..n)?;
        match rest.get(n)? {
            b'"' => {
                self.i += n + 1;
                Some(Str::from(std::str::from_utf8(run).ok()?))
            }
            b'\\' => {
                let mut buf = std::mem::take(&mut self.scratch);
                buf.clear();
                buf.extend_from_slice(run);
                self.i += n;
                let done = self.escaped(&mut buf);
                let s = done.and_then(|()| std::str::from_utf8(&buf).ok().map(Str::from));
                self.scratch = buf;
                s
            }
            _ => None,
        }
    }

    /// The rest of a string with escapes, from a backslash up to the closing quote.
    fn escaped(&mut self, buf: &mut Vec<u8>) -> Option<()> {
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    self.i += 1;
                    let e = self.peek()?;
                    self.i += 1;
                    let c = match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => {
                            self.canonical = false;
                            b'/'
                        }
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let ch = self.unicode_escape()?;
                            let mut tmp = [0u8; 4];
                            buf.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                            continue;
                        }
                        _ => return None,
                    };
                    buf.push(c);
                }
                c if c < 0x20 => return None,
                _ => {
                    // Copy the run up to the next quote, backslash or control byte.
                    let rest = self.b.get(self.i..)?;
                    let n = plain_run(rest);
                    buf.extend_from_slice(rest.get(..n)?);
                    self.i += n;
                }
            }
        }
    }

    /// `XXXX` after `\u`, with a following `\uXXXX` low surrogate when needed; lone
    /// surrogates are left to serde.
    fn unicode_escape(&mut self) -> Option<char> {
        let hex = self.b.get(self.i..self.i.checked_add(4)?)?;
        let lower = !hex.iter().any(u8::is_ascii_uppercase);
        let hi = self.hex4()?;
        // serde writes `\u00xx` (lower case) for control characters without a short form.
        if !(lower && hi < 0x20 && !matches!(hi, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d)) {
            self.canonical = false;
        }
        if (0xD800..0xDC00).contains(&hi) {
            let end = self.i.checked_add(2)?;
            if self.b.get(self.i..end)? != b"\\u" {
                return None;
            }
            self.i = end;
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                return None;
            }
            char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
        } else {
            char::from_u32(hi)
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let end = self.i.checked_add(4)?;
        let mut v = 0u32;
        for &c in self.b.get(self.i..end)? {
            v = v * 16 + char::from(c).to_digit(16)?;
        }
        self.i = end;
        Some(v)
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    fn array(&mut self) -> Option<Datum> {
        self.i += 1;
        self.enter()?;
        let mut items = Vec::new();
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
        } else {
            loop {
                self.ws();
                items.push(self.value()?);
                self.ws();
                match self.peek()? {
                    b',' => self.i += 1,
                    b']' => {
                        self.i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(Datum::Array(Arc::new(items)))
    }

    fn object(&mut self) -> Option<Datum> {
        self.i += 1;
        self.enter()?;
        let mut pairs: Vec<(Str, Datum)> = Vec::new();
        let mut sorted = true;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
        } else {
            loop {
                self.ws();
                self.expect(b'"')?;
                let k = self.string()?;
                self.ws();
                self.expect(b':')?;
                self.ws();
                let v = self.value()?;
                if let Some((last, _)) = pairs.last() {
                    sorted &= **last < *k;
                }
                self.canonical &= sorted;
                pairs.push((k, v));
                self.ws();
                match self.peek()? {
                    b',' => self.i += 1,
                    b'}' => {
                        self.i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        let map: Object = if sorted {
            // Strictly ascending keys (our own documents): bulk-built in one pass.
            pairs.into_iter().collect()
        } else {
            // As serde does: later duplicates replace earlier ones.
            let mut m = Object::new();
            for (k, v) in pairs {
                m.insert(k, v);
            }
            m
        };
        Some(Datum::Object(Arc::new(map)))
    }
}
