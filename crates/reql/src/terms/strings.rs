//! Strings: `match` (RE2 regular expressions), `split`, `upcase`, `downcase`.
//!
//! RethinkDB matches with RE2; Ponder uses the `regex` crate, whose syntax is nearly
//! RE2's. The differences are bridged before compiling: RE2-only rejections (backrefs,
//! look-around, `(?x)`, `\<`, nested repetition, counts over 1000) fail with RE2's
//! error text (`Error in regexp `p` (portion `x`): reason: x`), and the Perl classes
//! `\d \w \s \b` are rewritten to RE2's ASCII meaning. Offsets are byte offsets, as in
//! RE2. `split` follows RethinkDB's UTF-8-aware algorithm (Unicode White_Space for the
//! default separator; `""` splits into characters keeping combining marks attached).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::LazyLock;

use datum::{Datum, Object, Str};
use regex::Regex;
use regex_syntax::ast::{self, Ast, ClassSet, ClassSetItem};

use crate::error::{logic, Result, WithFrame};
use crate::eval::{expect_int, expect_str, Ev};
use crate::value::Val;

// ---------------------------------------------------------------------------------------
// RE2 compatibility.

/// An RE2 error: reason (RE2's code text) and the offending portion.
#[derive(Debug, PartialEq)]
pub struct Re2Error {
    /// RE2's error code text, e.g. `invalid escape sequence`.
    pub reason: &'static str,
    /// The portion of the pattern RE2 blames.
    pub portion: String,
}

impl Re2Error {
    fn new(reason: &'static str, portion: impl Into<String>) -> Self {
        Re2Error {
            reason,
            portion: portion.into(),
        }
    }

    /// RethinkDB's message for this error on `pattern`.
    pub fn message(&self, pattern: &str) -> String {
        let status = if self.portion.is_empty() {
            self.reason.to_string()
        } else {
            format!("{}: {}", self.reason, self.portion)
        };
        format!(
            "Error in regexp `{pattern}` (portion `{}`): {status}",
            self.portion
        )
    }
}

fn slice(p: &str, a: usize, b: usize) -> &str {
    p.get(a..b.min(p.len())).unwrap_or("")
}

/// The text from the `(` of the group that starts before `at` up to `end`.
fn from_paren(p: &str, at: usize, end: usize) -> String {
    let start = p
        .get(..at.min(p.len()))
        .and_then(|s| s.rfind('('))
        .unwrap_or(0);
    slice(p, start, end).to_string()
}

fn map_ast_error(p: &str, e: &ast::Error) -> Re2Error {
    use ast::ErrorKind as K;
    let (s, t) = (e.span().start.offset, e.span().end.offset);
    let span = slice(p, s, t).to_string();
    match e.kind() {
        K::EscapeUnrecognized
        | K::UnsupportedBackreference
        | K::EscapeHexEmpty
        | K::EscapeHexInvalid
        | K::EscapeHexInvalidDigit
        | K::ClassEscapeInvalid
        | K::SpecialWordBoundaryUnclosed
        | K::SpecialWordBoundaryUnrecognized
        | K::SpecialWordOrRepetitionUnexpectedEof => Re2Error::new("invalid escape sequence", span),
        K::EscapeUnexpectedEof => Re2Error::new("trailing \\", ""),
        K::ClassUnclosed => Re2Error::new("missing ]", slice(p, s, p.len())),
        K::ClassRangeInvalid | K::ClassRangeLiteral => {
            Re2Error::new("invalid character class range", span)
        }
        K::GroupUnclosed | K::GroupUnopened => Re2Error::new("missing )", p),
        K::RepetitionMissing => {
            let rest = slice(p, s, p.len());
            let len = match rest.chars().next() {
                Some('{') => rest.find('}').map_or(1, |i| i + 1),
                Some(c) => c.len_utf8() + usize::from(rest.get(1..2) == Some("?")),
                None => 0,
            };
            Re2Error::new("no argument for repetition operator", slice(rest, 0, len))
        }
        K::RepetitionCountInvalid
        | K::RepetitionCountDecimalEmpty
        | K::RepetitionCountUnclosed
        | K::DecimalEmpty
        | K::DecimalInvalid => Re2Error::new("invalid repetition size", span),
        K::FlagUnrecognized
        | K::FlagDanglingNegation
        | K::FlagDuplicate { .. }
        | K::FlagRepeatedNegation { .. }
        | K::FlagUnexpectedEof => Re2Error::new("invalid perl operator", from_paren(p, s, t)),
        K::UnsupportedLookAround => {
            // RE2 stops at the first character after `(?` it does not know.
            let op = from_paren(p, s, t);
            Re2Error::new("invalid perl operator", slice(&op, 0, 3))
        }
        K::GroupNameEmpty
        | K::GroupNameInvalid
        | K::GroupNameUnexpectedEof
        | K::GroupNameDuplicate { .. } => {
            let start = from_paren(p, s, s).len();
            let begin = s.saturating_sub(start);
            let end = p
                .get(begin..)
                .and_then(|r| r.find('>'))
                .map_or(p.len(), |i| begin + i + 1);
            Re2Error::new("invalid named capture group", slice(p, begin, end))
        }
        K::NestLimitExceeded(_) | K::CaptureLimitExceeded => {
            Re2Error::new("expression nested too deeply", "")
        }
        _ => Re2Error::new("unexpected error", span),
    }
}

/// Walks the AST: rejects what RE2 rejects and records `(start, end, replacement)` edits
/// that give Perl classes and word boundaries RE2's ASCII meaning.
struct Walk<'a> {
    p: &'a str,
    edits: Vec<(usize, usize, &'static str)>,
}

impl Walk<'_> {
    fn perl(&mut self, c: &ast::ClassPerl) {
        let rep = match (&c.kind, c.negated) {
            (ast::ClassPerlKind::Digit, false) => "[0-9]",
            (ast::ClassPerlKind::Digit, true) => "[^0-9]",
            (ast::ClassPerlKind::Word, false) => "[0-9A-Za-z_]",
            (ast::ClassPerlKind::Word, true) => "[^0-9A-Za-z_]",
            (ast::ClassPerlKind::Space, false) => r"[\t\n\f\r ]",
            (ast::ClassPerlKind::Space, true) => r"[^\t\n\f\r ]",
        };
        self.edits
            .push((c.span.start.offset, c.span.end.offset, rep));
    }

    fn flags(&mut self, f: &ast::Flags) -> Result<(), Re2Error> {
        for item in &f.items {
            if let ast::FlagsItemKind::Flag(
                ast::Flag::Unicode | ast::Flag::CRLF | ast::Flag::IgnoreWhitespace,
            ) = item.kind
            {
                let (s, t) = (item.span.start.offset, item.span.end.offset);
                return Err(Re2Error::new(
                    "invalid perl operator",
                    from_paren(self.p, s, t),
                ));
            }
        }
        Ok(())
    }

    fn class_item(&mut self, it: &ClassSetItem) -> Result<(), Re2Error> {
        match it {
            ClassSetItem::Perl(c) => self.perl(c),
            ClassSetItem::Bracketed(b) => self.class_set(&b.kind)?,
            ClassSetItem::Union(u) => {
                for i in &u.items {
                    self.class_item(i)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn class_set(&mut self, s: &ClassSet) -> Result<(), Re2Error> {
        match s {
            ClassSet::Item(it) => self.class_item(it),
            ClassSet::BinaryOp(op) => {
                self.class_set(&op.lhs)?;
                self.class_set(&op.rhs)
            }
        }
    }

    fn ast(&mut self, a: &Ast) -> Result<(), Re2Error> {
        match a {
            Ast::Flags(f) => self.flags(&f.flags)?,
            Ast::Assertion(x) => {
                use ast::AssertionKind as A;
                let (s, t) = (x.span.start.offset, x.span.end.offset);
                match x.kind {
                    A::WordBoundary => self.edits.push((s, t, r"(?-u:\b)")),
                    A::NotWordBoundary => self.edits.push((s, t, r"(?-u:\B)")),
                    A::StartLine | A::EndLine | A::StartText | A::EndText => {}
                    _ => {
                        return Err(Re2Error::new(
                            "invalid escape sequence",
                            slice(self.p, s, (s + 2).min(t)),
                        ))
                    }
                }
            }
            Ast::ClassPerl(c) => self.perl(c),
            Ast::ClassBracketed(b) => self.class_set(&b.kind)?,
            Ast::Repetition(r) => {
                let (s, t) = (r.op.span.start.offset, r.op.span.end.offset);
                if let ast::RepetitionKind::Range(range) = &r.op.kind {
                    let too_big = match *range {
                        ast::RepetitionRange::Exactly(n) | ast::RepetitionRange::AtLeast(n) => {
                            n > 1000
                        }
                        ast::RepetitionRange::Bounded(a, b) => a > 1000 || b > 1000,
                    };
                    if too_big {
                        return Err(Re2Error::new(
                            "invalid repetition size",
                            slice(self.p, s, t),
                        ));
                    }
                }
                if let Ast::Repetition(inner) = &*r.ast {
                    return Err(Re2Error::new(
                        "bad repetition operator",
                        slice(self.p, inner.op.span.start.offset, t),
                    ));
                }
                self.ast(&r.ast)?;
            }
            Ast::Group(g) => {
                match &g.kind {
                    ast::GroupKind::NonCapturing(f) => self.flags(f)?,
                    // RE2 (as RethinkDB bundles it) only knows `(?P<name>…)`.
                    ast::GroupKind::CaptureName {
                        starts_with_p: false,
                        ..
                    } => {
                        let s = g.span.start.offset;
                        return Err(Re2Error::new(
                            "invalid perl operator",
                            slice(self.p, s, s + 3),
                        ));
                    }
                    _ => {}
                }
                self.ast(&g.ast)?;
            }
            Ast::Alternation(x) => {
                for a in &x.asts {
                    self.ast(a)?;
                }
            }
            Ast::Concat(x) => {
                for a in &x.asts {
                    self.ast(a)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Compiles `pattern` with RE2's syntax and meaning, or RE2's error.
pub fn compile_re2(pattern: &str) -> Result<Regex, Re2Error> {
    let parsed = ast::parse::Parser::new().parse(pattern);
    let tree = parsed.map_err(|e| map_ast_error(pattern, &e))?;
    if let Err(e) = regex_syntax::hir::translate::Translator::new().translate(pattern, &tree) {
        let (s, t) = (e.span().start.offset, e.span().end.offset);
        return Err(Re2Error::new(
            "invalid character class range",
            slice(pattern, s, t),
        ));
    }
    let mut walk = Walk {
        p: pattern,
        edits: Vec::new(),
    };
    walk.ast(&tree)?;
    walk.edits.sort_by_key(|e| e.0);
    let mut rewritten = String::with_capacity(pattern.len() + 16);
    let mut at = 0;
    for (s, t, rep) in walk.edits {
        if s < at {
            continue;
        }
        rewritten.push_str(slice(pattern, at, s));
        rewritten.push_str(rep);
        at = t;
    }
    rewritten.push_str(slice(pattern, at, pattern.len()));
    Regex::new(&rewritten).map_err(|e| match e {
        regex::Error::CompiledTooBig(_) => Re2Error::new("pattern too large - compile failed", ""),
        _ => Re2Error::new("unexpected error", ""),
    })
}

thread_local! {
    static CACHE: RefCell<HashMap<String, Regex>> = RefCell::new(HashMap::new());
}

fn cached_regex(pattern: &str) -> Result<Regex> {
    if let Some(r) = CACHE.with(|c| c.borrow().get(pattern).cloned()) {
        return Ok(r);
    }
    let re = compile_re2(pattern).map_err(|e| logic(e.message(pattern)))?;
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= 128 {
            c.clear();
        }
        c.insert(pattern.to_string(), re.clone());
    });
    Ok(re)
}

fn span_obj(s: &str, start: usize, end: usize) -> Datum {
    let mut m = Object::new();
    m.insert(Str::from("str"), Datum::str(s));
    m.insert(Str::from("start"), Datum::Number(start as f64));
    m.insert(Str::from("end"), Datum::Number(end as f64));
    Datum::object(m)
}

/// The match object RethinkDB returns, or null.
pub fn match_datum(re: &Regex, s: &str) -> Datum {
    let Some(caps) = re.captures(s) else {
        return Datum::Null;
    };
    let Some(whole) = caps.get(0) else {
        return Datum::Null;
    };
    let groups = (1..caps.len())
        .map(|i| {
            caps.get(i)
                .map_or(Datum::Null, |g| span_obj(g.as_str(), g.start(), g.end()))
        })
        .collect();
    let mut m = Object::new();
    m.insert(Str::from("str"), Datum::str(whole.as_str()));
    m.insert(Str::from("start"), Datum::Number(whole.start() as f64));
    m.insert(Str::from("end"), Datum::Number(whole.end() as f64));
    m.insert(Str::from("groups"), Datum::array(groups));
    Datum::object(m)
}

/// MATCH.
pub fn match_(ev: &Ev) -> Result<Val> {
    let s = ev.string(0)?;
    let pattern = ev.string(1)?;
    let re = cached_regex(&pattern)?;
    Ok(Val::Datum(match_datum(&re, &s)))
}

// ---------------------------------------------------------------------------------------
// split

static COMBINING: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^\p{M}$").ok());

fn is_combining(c: char) -> bool {
    let mut buf = [0u8; 4];
    COMBINING
        .as_ref()
        .is_some_and(|re| re.is_match(c.encode_utf8(&mut buf)))
}

/// Byte index of the first char at or after `from` satisfying `f` (or `s.len()`).
fn find_char(s: &str, from: usize, f: impl Fn(char) -> bool) -> usize {
    s.get(from..)
        .and_then(|r| r.char_indices().find(|&(_, c)| f(c)).map(|(i, _)| from + i))
        .unwrap_or(s.len())
}

fn next_char(s: &str, at: usize) -> usize {
    s.get(at..)
        .and_then(|r| r.chars().next())
        .map_or(s.len(), |c| at + c.len_utf8())
}

/// How many pieces `split_str(s, delim, None)` gives, without building them: with a
/// non-empty delimiter every (non-overlapping) occurrence ends a piece, and the last
/// piece follows the last occurrence, empty or not.
pub fn count_pieces(s: &str, delim: Option<&str>) -> usize {
    match delim.map(str::as_bytes) {
        Some([b]) => memchr::memchr_iter(*b, s.as_bytes()).count() + 1,
        Some(d) if !d.is_empty() => memchr::memmem::find_iter(s.as_bytes(), d).count() + 1,
        _ => split_str(s, delim, None).len(),
    }
}

/// RethinkDB's `utf8_aware_split`; `max` is the most splits (None = unlimited).
/// The pieces borrow from `s`.
pub fn split_str<'s>(s: &'s str, delim: Option<&str>, max: Option<usize>) -> Vec<&'s str> {
    let end = s.len();
    let mut res: Vec<&str> = Vec::new();
    let mut cur = 0;
    let piece = |a: usize, b: usize| slice(s, a, b);
    // A one-byte delimiter is an ASCII character: found by a byte search, without
    // building a substring searcher for every piece.
    let find = |rest: &str, d: &str| match d.as_bytes() {
        [b] => rest.bytes().position(|c| c == *b),
        _ => rest.find(d),
    };
    loop {
        if Some(res.len()) == max {
            match delim {
                Some(d) => {
                    if !d.is_empty() || cur != end {
                        res.push(piece(cur, end));
                    }
                }
                None => {
                    let start = find_char(s, cur, |c| !c.is_whitespace());
                    if start != end {
                        res.push(piece(start, end));
                    }
                }
            }
            break;
        }
        match delim {
            Some("") => {
                let next = next_char(s, cur);
                let with_combining = find_char(s, next, |c| !is_combining(c));
                if cur != with_combining {
                    res.push(piece(cur, with_combining));
                }
                cur = with_combining;
                if cur == end {
                    break;
                }
            }
            Some(d) => {
                let next = s
                    .get(cur..)
                    .and_then(|r| find(r, d))
                    .map_or(end, |i| cur + i);
                res.push(piece(cur, next));
                if next == end {
                    break;
                }
                cur = next + d.len();
            }
            None => {
                let next = find_char(s, cur, char::is_whitespace);
                if next == end {
                    let start = find_char(s, cur, |c| !c.is_whitespace());
                    if start != end {
                        res.push(piece(start, end));
                    }
                    break;
                }
                if cur != next {
                    res.push(piece(cur, next));
                }
                cur = next_char(s, next);
            }
        }
    }
    res
}

/// SPLIT: `split()`, `split(sep)`, `split(sep, max)`, `split(null, max)`.
pub fn split(ev: &Ev) -> Result<Val> {
    let s = ev.string(0)?;
    let delim = if ev.nargs() > 1 {
        match ev.datum(1)? {
            Datum::Null => None,
            d => Some(expect_str(&d).at(1)?.to_string()),
        }
    } else {
        None
    };
    let mut max = None;
    if ev.nargs() > 2 {
        let d = ev.datum(2)?;
        let n = expect_int(&d).at(2)?;
        let limit = ev.ctx.array_limit as i64;
        if n < -1 || n > limit - 1 {
            return Err(logic(format!(
                "Error: `split` size argument must be in range [-1, {}].",
                limit - 1
            )));
        }
        if n >= 0 {
            max = Some(n as usize);
        }
    }
    let parts = split_str(&s, delim.as_deref(), max);
    crate::terms::control::check_array_size(ev, parts.len())?;
    Ok(Val::Datum(Datum::array(
        parts.into_iter().map(Datum::str).collect(),
    )))
}

/// UPCASE (ASCII only, as RethinkDB's `toupper`).
pub fn upcase(ev: &Ev) -> Result<Val> {
    let s = ev.string(0)?;
    Ok(Val::Datum(Datum::from(s.to_ascii_uppercase())))
}

/// DOWNCASE (ASCII only, as RethinkDB's `tolower`).
pub fn downcase(ev: &Ev) -> Result<Val> {
    let s = ev.string(0)?;
    Ok(Val::Datum(Datum::from(s.to_ascii_lowercase())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(s: &str, d: Option<&str>, m: Option<usize>) -> Vec<String> {
        split_str(s, d, m).into_iter().map(str::to_owned).collect()
    }

    fn m(p: &str, s: &str) -> String {
        match compile_re2(p) {
            Ok(re) => match_datum(&re, s).to_json_string(),
            Err(e) => e.message(p),
        }
    }

    #[test]
    fn split_forms() {
        assert_eq!(sp("foo  bar\tbaz ", None, None), ["foo", "bar", "baz"]);
        assert_eq!(sp("  ", None, None), Vec::<String>::new());
        assert_eq!(sp("", None, None), Vec::<String>::new());
        assert_eq!(
            sp("12,37,,22,", Some(","), None),
            ["12", "37", "", "22", ""]
        );
        assert_eq!(sp("", Some(","), None), [""]);
        assert_eq!(sp("a,b,c", Some(","), Some(1)), ["a", "b,c"]);
        assert_eq!(sp("a,b,c", Some(","), Some(0)), ["a,b,c"]);
        assert_eq!(sp("a b  c", None, Some(1)), ["a", "b  c"]);
        assert_eq!(sp("a b  c ", None, Some(0)), ["a b  c "]);
        assert_eq!(sp("  a b", None, Some(0)), ["a b"]);
        assert_eq!(sp("abc", Some(""), None), ["a", "b", "c"]);
        assert_eq!(sp("abc", Some(""), Some(1)), ["a", "bc"]);
        assert_eq!(sp("", Some(""), None), Vec::<String>::new());
        assert_eq!(sp("e\u{301}x", Some(""), None), ["e\u{301}", "x"]);
        assert_eq!(sp("a\u{3000}b", None, None), ["a", "b"]);
        assert_eq!(sp("a<>b<>", Some("<>"), None), ["a", "b", ""]);
    }

    #[test]
    fn count_pieces_is_the_number_of_pieces() {
        let words = [
            "", ".", "..", "a.b", ".a.", "aaa", "aa", "a", "<>", "a<><>b", " x  y ", "é.é",
        ];
        let delims = [
            None,
            Some(""),
            Some("."),
            Some("a"),
            Some("aa"),
            Some("<>"),
            Some("é"),
        ];
        for a in words {
            for b in words {
                let s = format!("{a}{b}{a}");
                for d in delims {
                    assert_eq!(
                        count_pieces(&s, d),
                        split_str(&s, d, None).len(),
                        "{s:?} {d:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn match_groups() {
        assert_eq!(
            m("a(b.e)|b(c.e)", "abcdefg"),
            r#"{"end":5,"groups":[null,{"end":5,"start":2,"str":"cde"}],"start":1,"str":"bcde"}"#
        );
        assert_eq!(m("a(b.e)|B(c.e)", "abcdefg"), "null");
        assert_eq!(
            m("(?i)a(b.e)|B(c.e)", "abcdefg"),
            r#"{"end":5,"groups":[null,{"end":5,"start":2,"str":"cde"}],"start":1,"str":"bcde"}"#
        );
        assert_eq!(
            m("é(.)", "aéb"),
            r#"{"end":4,"groups":[{"end":4,"start":3,"str":"b"}],"start":1,"str":"éb"}"#
        );
        // RE2's Perl classes are ASCII.
        assert_eq!(m(r"\d", "٣"), "null");
        assert_eq!(
            m(r"[\w]+", "éab"),
            r#"{"end":4,"groups":[],"start":2,"str":"ab"}"#
        );
        assert_eq!(
            m(r"\bb", "éb"),
            r#"{"end":3,"groups":[],"start":2,"str":"b"}"#
        );
    }

    #[test]
    fn re2_errors() {
        assert_eq!(
            m(r"ab\9", ""),
            r"Error in regexp `ab\9` (portion `\9`): invalid escape sequence: \9"
        );
        assert_eq!(
            m("a(b", ""),
            "Error in regexp `a(b` (portion `a(b`): missing ): a(b"
        );
        assert_eq!(
            m("a[b", ""),
            "Error in regexp `a[b` (portion `[b`): missing ]: [b"
        );
        assert_eq!(
            m("*a", ""),
            "Error in regexp `*a` (portion `*`): no argument for repetition operator: *"
        );
        assert_eq!(
            m("a**", ""),
            "Error in regexp `a**` (portion `**`): bad repetition operator: **"
        );
        assert_eq!(
            m("a{1001}", ""),
            "Error in regexp `a{1001}` (portion `{1001}`): invalid repetition size: {1001}"
        );
        assert_eq!(
            m("(?=a)", ""),
            "Error in regexp `(?=a)` (portion `(?=`): invalid perl operator: (?="
        );
        assert_eq!(
            m("(?<=a)", ""),
            "Error in regexp `(?<=a)` (portion `(?<`): invalid perl operator: (?<"
        );
        assert_eq!(
            m("(?<n>a)", ""),
            "Error in regexp `(?<n>a)` (portion `(?<`): invalid perl operator: (?<"
        );
        assert_eq!(
            m("(?x)a", ""),
            "Error in regexp `(?x)a` (portion `(?x`): invalid perl operator: (?x"
        );
        assert_eq!(
            m(r"a\", ""),
            r"Error in regexp `a\` (portion ``): trailing \"
        );
        assert_eq!(
            m("[z-a]", ""),
            "Error in regexp `[z-a]` (portion `z-a`): invalid character class range: z-a"
        );
    }
}
