//! A hand-written JSON decoder for the hot path: stored documents (our own compact
//! JSON, keys already sorted) and query payloads.
//!
//! It builds exactly the `Datum` the serde decoder in `json.rs` would, and gives up
//! (`None`) on anything it is not sure about — invalid JSON, lone surrogates,
//! non-finite numbers, deep nesting — so that the caller falls back to serde and keeps
//! serde's error messages. It never panics on untrusted input (no indexing).
//!
//! `validate_canonical` (`fast/validate.rs`) answers, without allocating, whether text is an object that
//! `parse` would decode and call canonical; `from_json_owned` then defers the decoding
//! until the map is first used (documents returned unchanged never pay for it). The
//! object's lazy build panics if the two ever disagree, so they share the number code
//! and the tests check them against each other.
//!
//! Why: decoding 1 KB documents with serde was most of the cost of scans and point
//! reads (docs/decisions.md has the measurements).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::value::{Datum, Object, Str};

mod reader;
mod validate;
pub use reader::{JsonReader, TextMark};
pub(crate) use validate::{
    count_in_member_string, find_member, member, plain_object_end, validate_canonical, value_at,
    with_members, IdMember,
};

/// Nesting beyond this is left to serde (whose own limit is 128): as deep as a stored
/// document may be (`MAX_NESTING`), so that every stored document decodes here.
const MAX_DEPTH: u32 = crate::nesting::MAX_NESTING as u32;

/// Decodes `bytes` as one JSON value, or `None` when serde must decide. The flag says
/// whether the text is canonical: byte for byte what `write_json` prints for the value
/// (no whitespace, keys strictly ascending, serde's escapes, numbers as we print them).
pub(crate) fn parse(bytes: &[u8]) -> Option<(Datum, bool)> {
    let mut p = Parser::new(bytes);
    p.ws();
    let v = p.value()?;
    p.ws();
    (p.i == p.b.len()).then_some((v, p.canonical))
}

/// The map of an object that `parse` would decode as canonical, else `None`: the lazy
/// build of text that `validate_canonical` accepted (without wrapping the map in an
/// `Arc<Object>` only to unwrap it).
pub(crate) fn parse_canonical_object(bytes: &[u8]) -> Option<BTreeMap<Str, Datum>> {
    let mut p = Parser::new(bytes);
    if p.peek()? != b'{' {
        return None;
    }
    let map = p.members()?;
    (p.i == p.b.len() && p.canonical).then_some(map)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
    /// Nesting beyond this gives up (`MAX_DEPTH` unless a `JsonReader` sets another).
    limit: u32,
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

/// The length of the plain run at the start of `s`. Tests 8 bytes at a time; the
/// lowest flagged byte of a word is exact (a borrow only propagates upwards from a byte
/// that is itself flagged), so the stop byte is found from the mask without a byte loop.
/// Only the tail shorter than a word is searched byte by byte.
#[inline]
fn plain_run(s: &[u8]) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    /// Nonzero iff some byte of `x` is below `n` (n <= 0x80).
    #[inline]
    fn below(x: u64, n: u8) -> u64 {
        x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH
    }
    #[inline]
    fn stops(word: &[u8; 8]) -> u64 {
        let x = u64::from_ne_bytes(*word);
        let quote = x ^ (ONES * u64::from(b'"'));
        let backslash = x ^ (ONES * u64::from(b'\\'));
        below(x, 0x20) | below(quote, 1) | below(backslash, 1)
    }
    let mut done = 0;
    let mut rest = s;
    #[cfg(target_arch = "x86_64")]
    while let Some((chunk, tail)) = rest.split_first_chunk::<16>() {
        let m = stops16(chunk);
        if m != 0 {
            return done + m.trailing_zeros() as usize;
        }
        done += 16;
        rest = tail;
    }
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        let m = stops(word);
        if m != 0 {
            // The flag is the high bit of the byte: its index in memory order.
            let first = if cfg!(target_endian = "little") {
                m.trailing_zeros()
            } else {
                m.leading_zeros()
            };
            return done + (first / 8) as usize;
        }
        done += 8;
        rest = tail;
    }
    done + rest
        .iter()
        .position(|&c| STOP[usize::from(c)])
        .unwrap_or(rest.len())
}

/// Bit `i` set when byte `i` of `chunk` stops a plain run (a quote, a backslash or a
/// control character), with SSE2 (part of every x86_64 CPU).
#[cfg(target_arch = "x86_64")]
#[inline]
fn stops16(chunk: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: SSE2 is in the x86_64 baseline, so these intrinsics are always available;
    // the one load is unaligned and reads exactly the 16 bytes `chunk` borrows.
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // Unsigned v <= 0x1F exactly when max(v, 0x1F) == 0x1F.
        let low = _mm_set1_epi8(0x1f);
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, low), low);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
    }
}

/// The index of the first non-digit at or after `i`.
#[inline]
fn skip_digits(b: &[u8], mut i: usize) -> usize {
    while let Some(b'0'..=b'9') = b.get(i) {
        i += 1;
    }
    i
}

/// The number starting at `b[*i]`, by JSON's grammar strictly, and whether its text is
/// canonical (checked only when `check`, else `false`); `*i` moves past it. Integers of
/// up to 18 digits are converted directly, everything else by the standard library's
/// correctly rounded parser (serde_json is built with `float_roundtrip`, so both agree).
/// Shared by the parser and the validator so that they cannot disagree on numbers.
#[inline]
fn number_at(b: &[u8], i: &mut usize, check: bool) -> Option<(f64, bool)> {
    let start = *i;
    let mut j = start;
    let neg = b.get(j) == Some(&b'-');
    if neg {
        j += 1;
    }
    let int_start = j;
    match b.get(j)? {
        b'0' => j += 1,
        b'1'..=b'9' => j = skip_digits(b, j),
        _ => return None,
    }
    let int_end = j;
    let mut integral = true;
    if b.get(j) == Some(&b'.') {
        j += 1;
        integral = false;
        if !matches!(b.get(j), Some(b'0'..=b'9')) {
            return None;
        }
        j = skip_digits(b, j);
    }
    if let Some(b'e' | b'E') = b.get(j) {
        j += 1;
        integral = false;
        if let Some(b'+' | b'-') = b.get(j) {
            j += 1;
        }
        if !matches!(b.get(j), Some(b'0'..=b'9')) {
            return None;
        }
        j = skip_digits(b, j);
    }
    *i = j;
    if integral && int_end - int_start <= 18 {
        let mut n: i64 = 0;
        for &c in b.get(int_start..int_end)? {
            n = n * 10 + i64::from(c - b'0');
        }
        // Negated as a double, so that `-0` is -0.0 as serde makes it.
        let f = n as f64;
        // We print integral doubles as the integer they hold: the text is canonical
        // when the double holds it exactly (and it is not `-0`, printed `-0.0`).
        let canonical = f as i64 == n && !(neg && n == 0);
        return Some((if neg { -f } else { f }, canonical));
    }
    let token = b.get(start..j)?;
    let f: f64 = std::str::from_utf8(token).ok()?.parse().ok()?;
    if !f.is_finite() {
        return None;
    }
    Some((f, check && crate::json::prints_as(f, token)))
}

impl<'a> Parser<'a> {
    fn new(b: &'a [u8]) -> Self {
        Parser {
            b,
            i: 0,
            depth: 0,
            limit: MAX_DEPTH,
            scratch: Vec::new(),
            canonical: true,
        }
    }

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

    fn number(&mut self) -> Option<Datum> {
        let (f, canonical) = number_at(self.b, &mut self.i, self.canonical)?;
        self.canonical &= canonical;
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
        (self.depth <= self.limit).then_some(())
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
        Some(Datum::array(items))
    }

    fn object(&mut self) -> Option<Datum> {
        Some(Datum::Object(Arc::new(Object::from(self.members()?))))
    }

    /// An object's members, from its `{` up to its `}`.
    fn members(&mut self) -> Option<BTreeMap<Str, Datum>> {
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
        Some(if sorted {
            // Strictly ascending keys (our own documents): bulk-built in one pass.
            pairs.into_iter().collect()
        } else {
            // As serde does: later duplicates replace earlier ones.
            let mut m = BTreeMap::new();
            for (k, v) in pairs {
                m.insert(k, v);
            }
            m
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// What the validator must accept: exactly the objects `parse` calls canonical.
    fn parse_says_canonical_object(b: &[u8]) -> bool {
        matches!(parse(b), Some((Datum::Object(_), true)))
    }

    /// The safety property (accepted ⇒ `parse` decodes it as a canonical object, equal
    /// to serde's decoding) and its converse (no canonical object is decoded eagerly).
    fn check_agrees(b: &[u8]) -> Result<(), TestCaseError> {
        let ok = validate_canonical(b);
        prop_assert_eq!(
            ok,
            parse_says_canonical_object(b),
            "{:?}",
            String::from_utf8_lossy(b)
        );
        if ok {
            let (fast, canonical) = parse(b).expect("accepted text parses");
            prop_assert!(canonical);
            let serde = crate::json::from_json_slice_serde(b).expect("serde accepts it too");
            prop_assert_eq!(fast.to_json_bytes(), b.to_vec());
            prop_assert_eq!(serde.to_json_bytes(), b.to_vec());
            prop_assert_eq!(format!("{fast:?}"), format!("{serde:?}"));
            let map = parse_canonical_object(b).expect("the lazy build succeeds");
            prop_assert_eq!(Datum::object(Object::from(map)).to_json_bytes(), b.to_vec());
        }
        prop_assert_eq!(
            parse_canonical_object(b).is_some(),
            parse_says_canonical_object(b)
        );
        Ok(())
    }

    fn number() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>().prop_filter("finite", |f| f.is_finite()),
            (-1_000_000i64..1_000_000).prop_map(|i| i as f64),
            any::<i64>().prop_map(|i| i as f64),
            (-1e3f64..1e3),
            Just(-0.0),
            Just(0.0),
            Just(9_007_199_254_740_993.0),
            Just(1e18),
            Just(9.3e18),
            Just(1e21),
            Just(5e-324),
        ]
    }

    /// Strings that need every kind of escape, and non-ASCII text.
    const STRING: &str = "[ab\"\\\\/\u{0}-\u{1f}\u{7f}é😀\u{2028}]{0,5}";

    fn datum() -> impl Strategy<Value = Datum> {
        let leaf = prop_oneof![
            Just(Datum::Null),
            any::<bool>().prop_map(Datum::Bool),
            number().prop_map(Datum::Number),
            STRING.prop_map(|s| Datum::str(&s)),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Datum::array),
                prop::collection::vec((STRING, inner), 0..4).prop_map(|kv| {
                    Datum::object(kv.into_iter().map(|(k, v)| (Str::from(k), v)).collect())
                }),
            ]
        })
    }

    /// Canonical object text: `write_json` of an object.
    fn canonical() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec((STRING, datum()), 0..5).prop_map(|kv| {
            let o: Object = kv.into_iter().map(|(k, v)| (Str::from(k), v)).collect();
            Datum::object(o).to_json_bytes()
        })
    }

    /// Bytes that make canonical text non-canonical or invalid in interesting ways.
    const NOISE: &[u8] = b" \t\n\r{}[]\":,\\/0123456789-+.eEubfnrtxaAF\x00\x1f\x7f\xc3\xa9\xff";

    /// Canonical text with one edit: a byte inserted, replaced or removed, a cut, or a
    /// piece repeated.
    fn mutated() -> impl Strategy<Value = Vec<u8>> {
        (
            canonical(),
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
            prop::sample::select(NOISE),
            0..5u8,
        )
            .prop_map(|(mut b, at, to, c, kind)| {
                let len = b.len();
                let i = at.index(len + 1);
                match kind {
                    0 => b.insert(i, c),
                    1 if i < len => b[i] = c,
                    2 if i < len => {
                        b.remove(i);
                    }
                    3 => b.truncate(i),
                    _ => {
                        let j = to.index(len + 1);
                        let (lo, hi) = (i.min(j), i.max(j));
                        let piece = b[lo..hi].to_vec();
                        b.splice(hi..hi, piece);
                    }
                }
                b
            })
    }

    /// Small texts in a JSON-like shape, dense in number forms and escapes.
    const SHAPED: &str = "\\{(\"[ab\\\\u0-9A-Fnt/\"]{0,5}\":(-?[0-9]{1,20}(\\.[0-9]{1,3})?([eE][-+]?[0-9]{1,3})?|\"[ab\\\\u0-9A-Fnt/]{0,7}\"|\\[\\]|\\{\\}|true|null),?){0,3}\\}";

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// A member read from the text equals the built map's, present or absent.
        #[test]
        fn member_agrees_with_the_map(b in canonical(), probe in STRING) {
            let map = parse_canonical_object(&b).expect("canonical");
            for k in map.keys().map(|k| k.to_string()).chain([probe]) {
                prop_assert_eq!(member(&b, &k), map.get(k.as_str()).cloned(), "{}", k);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// A byte counted in the text equals its count in the decoded string, whenever
        /// the text answers; and it answers for every punctuation byte it can.
        #[test]
        fn byte_counts_in_text_agree_with_the_string(
            s in "[.,a-c\"\\\\/\u{1}\n\u{7f}é u0-9 ]{0,24}",
            other in "[.a\"]{0,4}",
        ) {
            let doc = Datum::object(
                [("a", Datum::Number(1.0)), ("k", Datum::str(&s)), ("z", Datum::str(&other))]
                    .into_iter()
                    .map(|(k, v)| (Str::from(k), v))
                    .collect(),
            )
            .to_json_bytes();
            for b in [b'.', b',', b' ', b'/', b'"', b'\\', b'a', b'u', b'0', b'e'] {
                let want = s.bytes().filter(|&c| c == b).count();
                match count_in_member_string(&doc, "k", b) {
                    Some(n) => prop_assert_eq!(n, want, "{:?} {}", s, b as char),
                    None => prop_assert!(!b.is_ascii_punctuation() && b != b' '
                        || matches!(b, b'"' | b'\\' | b'/'), "{}", b as char),
                }
                prop_assert_eq!(count_in_member_string(&doc, "a", b), None);
                prop_assert_eq!(count_in_member_string(&doc, "missing", b), None);
            }
        }
    }

    #[test]
    fn member_of_documents() {
        let doc = |pairs: Vec<(&str, Datum)>| {
            Datum::object(pairs.into_iter().map(|(k, v)| (Str::from(k), v)).collect())
                .to_json_bytes()
        };
        let b = doc(vec![
            ("$reql_type$", Datum::str("TIME")),
            ("a\n", Datum::array(vec![Datum::Number(1.0)])),
            ("a\u{1}", Datum::Bool(true)),
            ("b", Datum::str("\"q")),
            ("c", Datum::Null),
        ]);
        assert!(validate_canonical(&b));
        assert_eq!(member(&b, "$reql_type$"), Some(Datum::str("TIME")));
        assert_eq!(
            member(&b, "a\n"),
            Some(Datum::array(vec![Datum::Number(1.0)]))
        );
        assert_eq!(member(&b, "a\u{1}"), Some(Datum::Bool(true)));
        assert_eq!(member(&b, "b"), Some(Datum::str("\"q")));
        assert_eq!(member(&b, "c"), Some(Datum::Null));
        assert_eq!(member(&b, "a"), None);
        assert_eq!(member(&b, "d"), None);
        assert_eq!(member(b"{}", "a"), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn validator_accepts_canonical_objects(b in canonical()) {
            prop_assert!(validate_canonical(&b), "{:?}", String::from_utf8_lossy(&b));
            check_agrees(&b)?;
        }

        #[test]
        fn validator_agrees_with_parse_on_edits(b in mutated()) {
            check_agrees(&b)?;
        }

        #[test]
        fn validator_agrees_with_parse_on_shaped_text(s in SHAPED) {
            check_agrees(s.as_bytes())?;
        }
    }

    proptest! {
        /// The word-at-a-time scan finds the same stop as a byte-by-byte one.
        #[test]
        fn plain_run_matches_bytewise(
            b in prop::collection::vec(prop_oneof![8 => 0x20u8..=0xff, 1 => any::<u8>()], 0..64),
            plain in 0..48usize,
        ) {
            let mut s = vec![b'x'; plain];
            s.extend(b);
            let want = s.iter().position(|&c| STOP[usize::from(c)]).unwrap_or(s.len());
            prop_assert_eq!(plain_run(&s), want);
        }
    }

    #[test]
    fn validator_rejects_non_canonical_text() {
        let rejected: &[&[u8]] = &[
            // Not an object, or not only one.
            b"",
            b"[]",
            b"1",
            b"\"a\"",
            b"null",
            b"{}x",
            b"{}{}",
            b"{",
            b"{\"a\":1",
            b"{\"a\":}",
            b"{\"a\"}",
            b"{\"a\":1,}",
            b"{,}",
            b"{1:1}",
            // Whitespace anywhere.
            b" {}",
            b"{} ",
            b"{ }",
            b"{\"a\": 1}",
            b"{\"a\" :1}",
            b"{\"a\":1 }",
            b"{\"a\":[1, 2]}",
            b"{\"a\":1,\n\"b\":2}",
            b"{\"a\":1}\n",
            // Key order: unsorted, duplicated, and orders that raw text gets wrong
            // (`\n` decodes below `"`, whose escape text sorts above it).
            b"{\"b\":1,\"a\":2}",
            b"{\"a\":1,\"a\":2}",
            b"{\"a\":{\"y\":1,\"x\":2}}",
            b"{\"a\\\"\":1,\"a\\n\":2}",
            b"{\"\\u0001\":1,\"\\u0001\":2}",
            b"{\"b\":1,\"\\u001f\":2}",
            // Escapes serde would print differently, and invalid ones.
            b"{\"a\":\"\\/\"}",
            b"{\"a\":\"\\u00e9\"}",
            b"{\"a\":\"\\u0041\"}",
            b"{\"a\":\"\\u001F\"}",
            b"{\"a\":\"\\u0008\"}",
            b"{\"a\":\"\\u0009\"}",
            b"{\"a\":\"\\u000a\"}",
            b"{\"a\":\"\\u000c\"}",
            b"{\"a\":\"\\u000d\"}",
            b"{\"a\":\"\\u007f\"}",
            b"{\"a\":\"\\ud83d\\ude00\"}",
            b"{\"a\":\"\\ud800\"}",
            b"{\"a\":\"\\u00\"}",
            b"{\"a\":\"\\x\"}",
            b"{\"a\":\"\\\"}",
            b"{\"\\/\":1}",
            // Raw control characters and invalid UTF-8.
            b"{\"a\":\"\x01\"}",
            b"{\"a\":\"\n\"}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\":\"\xc3\"}",
            b"{\"\xc3\":1}",
            b"{\"a\":\"\xed\xa0\x80\"}",
            b"{\"a\":\"\xc3\\n\xa9\"}",
            // Numbers in another form than ours, or not numbers at all.
            b"{\"a\":1.0}",
            b"{\"a\":1e3}",
            b"{\"a\":1E+20}",
            b"{\"a\":1e20}",
            b"{\"a\":-0}",
            b"{\"a\":0.10}",
            b"{\"a\":.5}",
            b"{\"a\":01}",
            b"{\"a\":+1}",
            b"{\"a\":1.}",
            b"{\"a\":-}",
            b"{\"a\":12345678901234567}",
            b"{\"a\":12345678901234567890}",
            b"{\"a\":100000000000000000000}",
            b"{\"a\":1e400}",
            b"{\"a\":-1e400}",
            b"{\"a\":NaN}",
            b"{\"a\":Infinity}",
            // Nested invalid or non-canonical values.
            b"{\"a\":[1,]}",
            b"{\"a\":[,1]}",
            b"{\"a\":{\"b\":nul}}",
            b"{\"a\":{\"b\":1.50}}",
            b"{\"a\":[{\"c\":1,\"b\":2}]}",
            b"{\"a\":tru}",
            b"{\"a\":True}",
        ];
        for b in rejected {
            assert!(!validate_canonical(b), "{:?}", String::from_utf8_lossy(b));
            check_agrees(b).unwrap();
        }
        let accepted: &[&[u8]] = &[
            b"{}",
            b"{\"a\":1}",
            b"{\"\":0,\"a\":-0.0,\"b\":1e+20,\"c\":0.1,\"d\":-1.5e-7,\"e\":1000000000000000000}",
            b"{\"a\":\"x\\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001f\\u000b\"}",
            b"{\"a\\n\":1,\"a\\\"\":2,\"a\\\\\":3,\"a\xc3\xa9\":4}",
            b"{\"\\u0001\":1,\"\\u001f\":2,\"\\\"\":3}",
            b"{\"a\":[[],{},[null,true,false]],\"b\":{\"c\":{\"d\":\"\xf0\x9f\x98\x80\x7f\"}}}",
            b"{\"a\":9007199254740992,\"b\":-9007199254740992}",
        ];
        for b in accepted {
            assert!(validate_canonical(b), "{:?}", String::from_utf8_lossy(b));
            check_agrees(b).unwrap();
        }
    }

    /// Nesting: the validator gives up exactly where `parse` does.
    #[test]
    fn validator_depth_limit_matches_parse() {
        let max = MAX_DEPTH as usize;
        for depth in [1usize, 50, max - 1, max, max + 1, max + 100] {
            let objects = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
            let arrays = format!("{{\"a\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
            for t in [objects, arrays] {
                check_agrees(t.as_bytes()).unwrap();
            }
        }
        assert!(validate_canonical(
            format!("{}1{}", "{\"a\":".repeat(max), "}".repeat(max)).as_bytes()
        ));
        assert!(!validate_canonical(
            format!("{}1{}", "{\"a\":".repeat(max + 1), "}".repeat(max + 1)).as_bytes()
        ));
    }

    /// What merging plain members into an object gives: its map with them inserted.
    fn merged_by_map(old: &Datum, patch: &Object) -> Vec<u8> {
        let mut map = old.as_object().unwrap().clone().into_map();
        for (k, v) in patch.iter() {
            map.insert(k.clone(), v.clone());
        }
        Datum::object(Object::from(map)).to_json_bytes()
    }

    fn plain_value() -> impl Strategy<Value = Datum> {
        prop_oneof![
            Just(Datum::Null),
            any::<bool>().prop_map(Datum::Bool),
            number().prop_map(Datum::Number),
            STRING.prop_map(|s| Datum::str(&s)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Plain members put into the text give the text of the merged map, kept as
        /// text; keys of every kind (escaped, non-ASCII) and values of every kind around.
        #[test]
        fn plain_members_put_into_the_text_match_the_merged_map(
            b in canonical(),
            kv in prop::collection::vec((STRING, plain_value()), 0..4),
        ) {
            let old = crate::json::from_json_owned(b.clone()).unwrap();
            let patch: Object = kv.into_iter().map(|(k, v)| (Str::from(k), v)).collect();
            let new = old.as_object().unwrap().with_plain_members(&patch).unwrap();
            let expected = merged_by_map(&old, &patch);
            let o = new.as_object().unwrap();
            prop_assert_eq!(o.raw_json(), Some(&expected[..]));
            prop_assert!(!o.is_built());
            prop_assert_eq!(&new, &crate::json::from_json_slice(&expected).unwrap());
        }
    }

    #[test]
    fn members_that_are_not_plain_or_a_pseudo_type_are_not_put_into_the_text() {
        let doc = |t: &str| crate::json::from_json_owned(t.as_bytes().to_vec()).unwrap();
        let patch = |t: &str| doc(t).as_object().unwrap().clone();
        let old = doc(r#"{"a":1,"b":{"c":[1,2]},"id":"k"}"#);
        let o = old.as_object().unwrap();
        // Plain: replaced, added before, between and after; the rest copied as it is.
        let new = o.with_plain_members(&patch(r#"{"0":null,"a":"x","bb":true,"z":2.5}"#));
        assert_eq!(
            new.unwrap().to_json_string(),
            r#"{"0":null,"a":"x","b":{"c":[1,2]},"bb":true,"id":"k","z":2.5}"#
        );
        assert_eq!(
            o.with_plain_members(&Object::new())
                .unwrap()
                .to_json_string(),
            old.to_json_string()
        );
        // A value that merges deeper, or a pseudo-type on either side: not here.
        assert!(o.with_plain_members(&patch(r#"{"b":{"d":1}}"#)).is_none());
        assert!(o.with_plain_members(&patch(r#"{"b":[1]}"#)).is_none());
        assert!(o
            .with_plain_members(&patch(r#"{"$reql_type$":"LITERAL"}"#))
            .is_none());
        let time = doc(r#"{"$reql_type$":"TIME","epoch_time":1,"timezone":"+00:00"}"#);
        let t = time.as_object().unwrap();
        assert!(t.with_plain_members(&patch(r#"{"a":1}"#)).is_none());
        // No text (a built map): not here either.
        let built = Object::from(o.clone().into_map());
        assert!(built.with_plain_members(&patch(r#"{"a":2}"#)).is_none());
        // Into an empty object.
        let empty = doc("{}");
        let new = empty
            .as_object()
            .unwrap()
            .with_plain_members(&patch(r#"{"a":2}"#));
        assert_eq!(new.unwrap().to_json_string(), r#"{"a":2}"#);
    }
}
