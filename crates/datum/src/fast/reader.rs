//! `JsonReader`: the fast decoder as a cursor, for a front end that builds something
//! other than a `Datum` from the outer structure of a text and Datums from its parts
//! (the query compiler in `reql` reads term arrays itself and decodes literals here).
//!
//! Same contract as `parse`: every method answers `None` (or `false`) where the decoder
//! would give up, so a caller that reads a whole text without a `None` has read valid
//! JSON that serde decodes to the same values; on `None` it must fall back to serde.
//! Nesting is counted across both sides (`enter`/`leave` for the caller's brackets,
//! the decoder's own for the Datums it reads) against one limit.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::{number_at, validate_canonical, Parser};
use crate::value::{Datum, Object, Str};

/// Where a value whose text may be kept starts (`JsonReader::mark`).
pub struct TextMark {
    from: usize,
    /// Whether the text before the mark was canonical (restored at its end).
    outer: bool,
}

/// A cursor over JSON text; see the module note.
pub struct JsonReader<'a> {
    p: Parser<'a>,
}

impl<'a> JsonReader<'a> {
    /// A reader at the start of `bytes` that gives up beyond `max_depth` levels of
    /// arrays and objects.
    pub fn new(bytes: &'a [u8], max_depth: usize) -> Self {
        let mut p = Parser::new(bytes);
        p.limit = u32::try_from(max_depth).unwrap_or(u32::MAX);
        JsonReader { p }
    }

    /// The next byte after whitespace, not consumed.
    #[inline]
    pub fn peek(&mut self) -> Option<u8> {
        self.p.ws();
        self.p.peek()
    }

    /// Consumes `c` (after whitespace) if it is next.
    #[inline]
    pub fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.p.i += 1;
            true
        } else {
            false
        }
    }

    /// Consumes `c` (after whitespace), or `None` if something else is next.
    #[inline]
    pub fn expect(&mut self, c: u8) -> Option<()> {
        self.eat(c).then_some(())
    }

    /// Consumes an opening bracket `c` and counts one level of nesting: `None` if `c`
    /// is not next or the level is too deep.
    pub fn open(&mut self, c: u8) -> Option<()> {
        self.expect(c)?;
        self.p.enter()
    }

    /// Consumes a closing bracket `c` and ends the level `open` counted.
    pub fn close(&mut self, c: u8) -> Option<()> {
        self.expect(c)?;
        self.p.depth = self.p.depth.saturating_sub(1);
        Some(())
    }

    /// A string (after whitespace).
    pub fn string(&mut self) -> Option<Str> {
        self.expect(b'"')?;
        self.p.string()
    }

    /// Any JSON value (after whitespace), decoded as a Datum.
    pub fn datum(&mut self) -> Option<Datum> {
        self.p.ws();
        self.p.value()
    }

    /// The object next (after whitespace) kept as its text, undecoded (`Object::lazy`),
    /// when that text is canonical and holds no array and no `$reql_type$` key at any
    /// depth (`plain_object_end`), within the nesting left; `None`, with nothing but
    /// whitespace consumed, otherwise. For a front end where arrays and pseudo-types mean more than
    /// their JSON: what such text decodes to is the same whoever reads it. A bulk insert's
    /// documents are read this way, so storing them copies their text and nothing
    /// builds their maps.
    pub fn plain_object(&mut self) -> Option<Datum> {
        self.p.ws();
        let from = self.p.i;
        let left = self.p.limit.saturating_sub(self.p.depth);
        let (end, levels, id) = super::plain_object_end(self.p.b, from, left)?;
        let text = self.p.b.get(from..end)?;
        self.p.i = end;
        Some(Datum::Object(Arc::new(Object::plain(
            Bytes::copy_from_slice(text),
            levels,
            id,
        ))))
    }

    /// A number written as a plain non-negative integer of at most 18 digits (no sign,
    /// fraction or exponent: what serde reads as an unsigned integer), else `None`.
    pub fn small_integer(&mut self) -> Option<i64> {
        self.p.ws();
        let start = self.p.i;
        let mut end = start;
        let (f, _) = number_at(self.p.b, &mut end, false)?;
        let token = self.p.b.get(start..end)?;
        if token.len() > 18 || !token.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.p.i = end;
        // Exact: below 10^18 < 2^63, and every integer below 2^53 is a double; larger
        // ones went through the same integer path in `number_at`.
        let mut n: i64 = 0;
        for &c in token {
            n = n * 10 + i64::from(c - b'0');
        }
        debug_assert_eq!(n as f64, f);
        Some(n)
    }

    /// Marks the start of a value (after whitespace) whose text the caller may keep:
    /// from here the reader notes whether what it reads is canonical (what `write_json`
    /// prints for it). End it with `canonical_since`.
    pub fn mark(&mut self) -> TextMark {
        self.p.ws();
        let m = TextMark {
            from: self.p.i,
            outer: self.p.canonical,
        };
        self.p.canonical = true;
        m
    }

    /// Ends `m`: the text read since it when the reader found all of it canonical —
    /// no whitespace, escapes and numbers as `write_json` prints them, the keys of the
    /// objects it decoded in order. What the caller read itself (an object's keys and
    /// their order, which values are literals) the caller must check.
    pub fn canonical_since(&mut self, m: TextMark) -> Option<&'a [u8]> {
        let canonical = self.p.canonical;
        self.p.canonical = m.outer && canonical;
        if canonical {
            self.p.b.get(m.from..self.p.i)
        } else {
            None
        }
    }

    /// Tells the reader that what the caller read itself is not canonical (an object's
    /// keys out of order), for the marks around it.
    pub fn not_canonical(&mut self) {
        self.p.canonical = false;
    }

    /// The object `map` keeping `text` (`Object::raw_json`), so that writing it out
    /// again (to store it) is a copy, not an encoding. The caller guarantees that `text`
    /// is canonical (`canonical_since`) and that `map` is what it decodes to.
    pub fn object_with_text(map: BTreeMap<Str, Datum>, text: &[u8]) -> Datum {
        let mut obj = Object::from(map);
        debug_assert!(
            validate_canonical(text),
            "{}",
            String::from_utf8_lossy(text)
        );
        debug_assert_eq!(Datum::object(obj.clone()).to_json_bytes(), text);
        obj.set_raw(Bytes::copy_from_slice(text));
        Datum::object(obj)
    }

    /// The byte offset of the cursor.
    pub fn offset(&self) -> usize {
        self.p.i
    }

    /// True when only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.p.ws();
        self.p.i == self.p.b.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_structure_and_values() {
        let mut r = JsonReader::new(br#" [ 15 , {"a" : [1, "x\n"]} ] "#, 8);
        assert_eq!(r.open(b'['), Some(()));
        assert_eq!(r.small_integer(), Some(15));
        assert!(r.eat(b','));
        assert_eq!(r.peek(), Some(b'{'));
        assert_eq!(
            r.datum().map(|d| d.to_json_string()),
            Some(r#"{"a":[1,"x\n"]}"#.to_string())
        );
        assert_eq!(r.close(b']'), Some(()));
        assert!(r.at_end());
    }

    #[test]
    fn canonical_since_a_mark() {
        for (text, kept) in [
            (r#"{"a":1,"b":"x"}"#, true),
            (r#"{"a":1, "b":"x"}"#, false),
            (r#"{"b":1,"a":"x"}"#, false),
            (r#"{"a":1.0}"#, false),
            (r#"{"a":"\/"}"#, false),
        ] {
            let whole = format!("[ {text},1]");
            let mut r = JsonReader::new(whole.as_bytes(), 8);
            assert_eq!(r.open(b'['), Some(()));
            let m = r.mark();
            let Some(Datum::Object(o)) = r.datum() else {
                panic!("{text}")
            };
            let got = r.canonical_since(m);
            assert_eq!(got, kept.then_some(text.as_bytes()), "{text}");
            if let Some(t) = got {
                let d = JsonReader::object_with_text(o.as_ref().clone().into_map(), t);
                assert_eq!(d.as_object().and_then(Object::raw_json), Some(t));
            }
            // The space before the mark still counts for the text around it.
            let m = r.mark();
            assert!(r.eat(b','));
            assert_eq!(r.small_integer(), Some(1));
            assert_eq!(r.canonical_since(m), Some(&b",1"[..]));
            assert_eq!(r.close(b']'), Some(()));
            assert!(!r.p.canonical);
        }
    }

    /// The member `id` noted by the validating pass answers `field("id")` as a scan of
    /// the text does: first, last, absent, only nested, and beside `id`-like keys.
    #[test]
    fn a_plain_objects_id_is_read_where_validation_noted_it() {
        for text in [
            r#"{"id":"a","z":1}"#,
            r#"{"a":{"id":3},"id":{"x":"y"}}"#,
            r#"{"a":{"id":3},"b":2}"#,
            r#"{"i":1,"ic":2,"id0":3}"#,
            r#"{"i":1,"id":-2.5,"ida":3}"#,
            r#"{}"#,
        ] {
            let mut r = JsonReader::new(text.as_bytes(), 8);
            let got = r.plain_object().expect(text);
            let scanned = crate::fast::member(text.as_bytes(), "id");
            let o = got.as_object().unwrap();
            assert_eq!(o.field("id"), scanned, "{text}");
            assert!(!o.is_built(), "{text}");
            assert_eq!(o.field("a"), crate::fast::member(text.as_bytes(), "a"));
        }
    }

    #[test]
    fn plain_objects_are_kept_undecoded() {
        for (text, plain) in [
            (r#"{"a":1,"b":"x","c":{"d":null}}"#, true),
            (r#"{}"#, true),
            (r#"{"a":[1]}"#, false),
            (r#"{"a":{"$reql_type$":"TIME"}}"#, false),
            (r#"{"$reql_type$":"x"}"#, false),
            (r#"{"a":1, "b":2}"#, false),
            (r#"{"b":1,"a":2}"#, false),
            (r#"{"a":1,"a":2}"#, false),
            (r#"{"a":1.0}"#, false),
        ] {
            let whole = format!("[ {text},1]");
            let mut r = JsonReader::new(whole.as_bytes(), 8);
            assert_eq!(r.open(b'['), Some(()));
            assert_eq!(r.peek(), Some(b'{'));
            let at = r.offset();
            let got = r.plain_object();
            assert_eq!(got.is_some(), plain, "{text}");
            let Some(d) = got else {
                assert_eq!(r.offset(), at, "nothing consumed: {text}");
                continue;
            };
            let o = d.as_object().unwrap();
            assert!(!o.is_built());
            assert_eq!(o.raw_json(), Some(text.as_bytes()));
            assert_eq!(d, crate::from_json_slice(text.as_bytes()).unwrap());
            assert!(r.eat(b','));
        }
        let mut r = JsonReader::new(b"[{\"a\":\"\xff\"}]", 8);
        assert_eq!(r.open(b'['), Some(()));
        assert!(r.plain_object().is_none(), "not UTF-8");
        // Nesting counts against what the reader has left.
        let mut r = JsonReader::new(br#"[{"a":{}}]"#, 3);
        assert_eq!(r.open(b'['), Some(()));
        assert!(r.plain_object().is_some());
        let mut r = JsonReader::new(br#"[{"a":{"b":{}}}]"#, 3);
        assert_eq!(r.open(b'['), Some(()));
        assert!(r.plain_object().is_none());
    }

    #[test]
    fn small_integers_only() {
        for (t, want) in [
            ("0", Some(0)),
            ("17", Some(17)),
            ("999999999999999999", Some(999_999_999_999_999_999)),
            ("9999999999999999999", None),
            ("-1", None),
            ("-0", None),
            ("1.0", None),
            ("1e0", None),
            // The `0` alone; the `1` after it is then no separator for the caller.
            ("01", Some(0)),
            ("x", None),
            ("\"1\"", None),
        ] {
            assert_eq!(
                JsonReader::new(t.as_bytes(), 8).small_integer(),
                want,
                "{t}"
            );
        }
    }

    #[test]
    fn depth_counts_both_sides() {
        let mut r = JsonReader::new(b"[[[1]]]", 2);
        assert_eq!(r.open(b'['), Some(()));
        assert_eq!(r.datum(), None, "the third level is one too many");
        let mut r = JsonReader::new(b"[[1]]", 2);
        assert_eq!(r.open(b'['), Some(()));
        assert!(r.datum().is_some());
        assert_eq!(r.close(b']'), Some(()));
        let mut r = JsonReader::new(b"[[[]]]", 2);
        assert_eq!(r.open(b'['), Some(()));
        assert_eq!(r.open(b'['), Some(()));
        assert_eq!(r.open(b'['), None);
    }

    #[test]
    fn gives_up_where_the_decoder_does() {
        let texts: [&[u8]; 6] = [
            br#""\ud800""#,
            b"1e400",
            b"[1,]",
            b"nul",
            b"\"\x01\"",
            b"\"\xff\"",
        ];
        for t in texts {
            assert_eq!(JsonReader::new(t, 8).datum(), None, "{t:?}");
        }
        let mut r = JsonReader::new(b"\"a\\u00e9\"", 8);
        assert_eq!(r.string().as_deref(), Some("a\u{e9}"));
    }
}
