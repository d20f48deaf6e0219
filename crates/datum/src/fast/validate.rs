//! The non-allocating side of the decoder: `validate_canonical` (is this text an object
//! that `parse` decodes and calls canonical?) and member lookup in such text
//! (`find_member`, `member`), which read stored documents without building their maps.
//! The validator mirrors `Parser` rule for rule (numbers through the same `number_at`);
//! `Object`'s lazy build panics if the two ever disagree, and `fast`'s tests check them
//! against each other.

use super::{number_at, plain_run, Parser, MAX_DEPTH};
use crate::value::Datum;

mod splice;
pub(crate) use splice::with_members;

/// True when `bytes` is a JSON object that `parse` decodes with `canonical == true`,
/// decided without allocating. `from_json_owned` relies on it to keep such a document
/// undecoded (`Object::lazy`), so it must never accept what `parse` rejects or reports
/// non-canonical: it mirrors `parse` rule for rule (numbers through the same
/// `number_at`), and the tests check that the two agree.
pub(crate) fn validate_canonical(bytes: &[u8]) -> bool {
    // Outside strings only ASCII is valid JSON, and inside them the plain runs are
    // split by ASCII only (quotes, backslashes, escapes that stand for ASCII), so the
    // whole text is valid UTF-8 exactly when every string `parse` decodes is.
    if bytes.first() != Some(&b'{') || std::str::from_utf8(bytes).is_err() {
        return false;
    }
    let mut v = Validator::at(bytes, 0, MAX_DEPTH, false);
    v.value().is_some() && v.i == bytes.len()
}

/// Where a plain object ends, and how many levels it nests: `bytes[from..end]` is a
/// JSON object that `parse` decodes with `canonical == true`, nested at most `limit`
/// levels (the object itself counted), holding no array and no `$reql_type$` key at
/// any depth (so no pseudo-type and nothing a query compiler would read as a term).
/// `None` when it is not one (or not UTF-8). Such text can be kept undecoded
/// (`Object::plain`), as `validate_canonical`'s is.
pub(crate) fn plain_object_end(
    bytes: &[u8],
    from: usize,
    limit: u32,
) -> Option<(usize, u32, IdMember)> {
    if bytes.get(from) != Some(&b'{') {
        return None;
    }
    let mut v = Validator::at(bytes, from, limit.min(MAX_DEPTH), true);
    v.value()?;
    // The validator reads strings as bytes: UTF-8 is checked on the object's text.
    std::str::from_utf8(bytes.get(from..v.i)?).ok()?;
    let id = match v.id_at {
        Some(at) => IdMember::At(u32::try_from(at - from).ok()?),
        None => IdMember::Absent,
    };
    Some((v.i, v.deepest, id))
}

/// Where an object's top-level member `id` (the default primary key) is, noted while
/// `plain_object_end` validated its text, so that an insert reading its primary key
/// does not scan the document a second time (`Object::field`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdMember {
    /// Not noted (text from elsewhere).
    Unknown,
    /// The object has no member `id`.
    Absent,
    /// The member's value starts at this offset of the object's text.
    At(u32),
}

/// The value that starts at `at` in canonical object text (as `member` decodes it).
pub(crate) fn value_at(bytes: &[u8], at: usize) -> Option<Datum> {
    let mut p = Parser::new(bytes);
    p.i = at;
    p.depth = 1;
    p.value()
}

/// Where the value of member `key` starts in object text that `validate_canonical`
/// accepted, or `None` when there is no such member. Keys are strictly ascending in such
/// text, so the search stops at the first greater key; values before it are skipped
/// without being decoded.
pub(crate) fn find_member(bytes: &[u8], key: &str) -> Option<usize> {
    let mut v = Validator::at(bytes, 0, MAX_DEPTH, false);
    v.expect(b'{')?;
    if v.peek()? == b'}' {
        return None;
    }
    loop {
        v.expect(b'"')?;
        let k = v.string()?;
        v.expect(b':')?;
        let order = if k.escaped {
            Unescape(k.text.iter()).cmp(key.bytes())
        } else {
            k.text.cmp(key.as_bytes())
        };
        match order {
            std::cmp::Ordering::Equal => return Some(v.i),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
        if v.peek()? == b'"' {
            v.i = skip_string(bytes, v.i + 1)?;
        } else {
            v.value()?;
        }
        v.expect(b',')?;
    }
}

/// Where a string of validated text ends (just past its closing quote), from just past
/// its opening quote. Validated text holds no raw control byte and only canonical
/// escapes, so the string ends at the first quote not escaped; the search jumps between
/// quotes and backslashes (`memchr2`) instead of checking every byte as the validator
/// must.
fn skip_string(bytes: &[u8], mut i: usize) -> Option<usize> {
    loop {
        i += memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
        if bytes.get(i)? == &b'"' {
            return Some(i + 1);
        }
        // `\x` stands for one character; the rest of `\u00xx` is hex digits.
        i += 2;
    }
}

/// The value of member `key` of validated canonical object text (see `find_member`).
pub(crate) fn member(bytes: &[u8], key: &str) -> Option<Datum> {
    let mut p = Parser::new(bytes);
    p.i = find_member(bytes, key)?;
    p.depth = 1;
    p.value()
}

/// How many times byte `b` occurs in the decoded string value of member `key` of
/// canonical object text, counted in the text itself: `None` when there is no such
/// member, it is not a string, or `b` could be part of an escape sequence. Canonical
/// escapes stand for quotes, backslashes and control characters only, and are spelled
/// with letters, digits and `\`; so an ASCII punctuation byte other than `"`, `\\`
/// and `/` (never escaped in canonical text, but escapable) occurs in the text exactly
/// where it occurs in the string.
pub(crate) fn count_in_member_string(bytes: &[u8], key: &str, b: u8) -> Option<usize> {
    if !(b.is_ascii_punctuation() || b == b' ') || matches!(b, b'"' | b'\\' | b'/') {
        return None;
    }
    let mut v = Validator::at(bytes, find_member(bytes, key)?, MAX_DEPTH, false);
    v.depth = 1;
    v.expect(b'"')?;
    // The validator's own scan: it ends the literal at the first unescaped quote and
    // accepts canonical escapes only.
    let text = v.string()?.text;
    Some(memchr::memchr_iter(b, text).count())
}

/// The state of `validate_canonical`: `parse`'s grammar with every non-canonical form
/// (whitespace, unsorted or repeated keys, escapes or numbers `write_json` would print
/// otherwise) rejected instead of noted.
struct Validator<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
    /// Nesting beyond this is refused.
    limit: u32,
    /// `plain_object_end`'s stricter grammar: no arrays, no `$reql_type$` key.
    plain: bool,
    /// The deepest level reached.
    deepest: u32,
    /// Where the outermost object's member `id` starts, once its key was read.
    id_at: Option<usize>,
}

/// A key's text between its quotes, and whether it holds escapes.
#[derive(Clone, Copy)]
struct Key<'a> {
    text: &'a [u8],
    escaped: bool,
}

impl Key<'_> {
    /// `parse`'s key order (`str`'s, by bytes) on the decoded keys.
    fn less(self, other: Key<'_>) -> bool {
        if !self.escaped && !other.escaped {
            return self.text < other.text;
        }
        Unescape(self.text.iter()).lt(Unescape(other.text.iter()))
    }
}

/// The bytes of a validated string: every canonical escape stands for one ASCII byte.
struct Unescape<'a>(std::slice::Iter<'a, u8>);

impl Iterator for Unescape<'_> {
    type Item = u8;
    fn next(&mut self) -> Option<u8> {
        let c = *self.0.next()?;
        if c != b'\\' {
            return Some(c);
        }
        Some(match *self.0.next()? {
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                // `\u00XX`: the value is below 0x20.
                let mut v = 0u32;
                for _ in 0..4 {
                    v = v * 16 + char::from(*self.0.next()?).to_digit(16)?;
                }
                u8::try_from(v).ok()?
            }
            other => other,
        })
    }
}

impl<'a> Validator<'a> {
    /// A validator of `b` from offset `i`, nesting at most `limit` levels, with
    /// `plain_object_end`'s grammar when `plain`.
    fn at(b: &'a [u8], i: usize, limit: u32, plain: bool) -> Self {
        Validator {
            b,
            i,
            depth: 0,
            limit,
            plain,
            deepest: 0,
            id_at: None,
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
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

    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                self.string().map(drop)
            }
            b'-' | b'0'..=b'9' => match number_at(self.b, &mut self.i, true)? {
                (_, true) => Some(()),
                (_, false) => None,
            },
            b'{' => self.object(),
            b'[' => self.array(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i.checked_add(word.len())?;
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// A string whose opening quote was consumed (UTF-8 was checked up front).
    fn string(&mut self) -> Option<Key<'a>> {
        let start = self.i;
        let mut escaped = false;
        loop {
            self.i += plain_run(self.b.get(self.i..)?);
            match self.peek()? {
                b'"' => {
                    let text = self.b.get(start..self.i)?;
                    self.i += 1;
                    return Some(Key { text, escaped });
                }
                b'\\' => {
                    self.i += 1;
                    escaped = true;
                    self.escape()?;
                }
                // A raw control byte: invalid JSON.
                _ => return None,
            }
        }
    }

    /// The escape after a backslash, accepted only in the form serde prints: the short
    /// escapes except `\/`, and `\u00xx` (lower case) for the other control characters.
    fn escape(&mut self) -> Option<()> {
        let e = self.peek()?;
        self.i += 1;
        match e {
            b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => Some(()),
            b'u' => {
                let end = self.i.checked_add(4)?;
                let hex = self.b.get(self.i..end)?;
                self.i = end;
                match hex {
                    [b'0', b'0', b'0', b'8' | b'9' | b'a' | b'c' | b'd'] => None,
                    [b'0', b'0', b'0' | b'1', b'0'..=b'9' | b'a'..=b'f'] => Some(()),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        self.deepest = self.deepest.max(self.depth);
        (self.depth <= self.limit).then_some(())
    }

    fn array(&mut self) -> Option<()> {
        if self.plain {
            return None;
        }
        self.i += 1;
        self.enter()?;
        if self.peek()? == b']' {
            self.i += 1;
        } else {
            loop {
                self.value()?;
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
        Some(())
    }

    fn object(&mut self) -> Option<()> {
        self.i += 1;
        self.enter()?;
        if self.peek()? == b'}' {
            self.i += 1;
        } else {
            let mut last: Option<Key<'a>> = None;
            loop {
                self.expect(b'"')?;
                let k = self.string()?;
                // A canonical escape stands for a control byte, so an escaped key is
                // never `$reql_type$`.
                if self.plain && k.text == b"$reql_type$" {
                    return None;
                }
                // Strictly ascending: no duplicates (serde would keep the last one).
                if last.is_some_and(|l| !l.less(k)) {
                    return None;
                }
                last = Some(k);
                self.expect(b':')?;
                // An escaped key's text holds a backslash, so it never matches here.
                if self.depth == 1 && k.text == b"id" {
                    self.id_at = Some(self.i);
                }
                self.value()?;
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
        Some(())
    }
}
