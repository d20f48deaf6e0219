//! The fast path of the hottest query, a point read by primary key:
//! `r.table(T).get(K)` or `r.db(D).table(T).get(K)`, with no global optarg or `db` only,
//! and no table optarg or a valid `read_mode` only.
//!
//! `recognise` reads the query frame's bytes as they are (no JSON tree, no compiled
//! term) and accepts only that exact shape, written compactly as the drivers write it:
//! valid names (so no name error can arise), a key that is a string without escapes or
//! an integer of at most 15 digits (exact as a number), no term optargs. It accepts a
//! strict subset of what `proto::query` parses into that same query; anything else
//! gives None and the query takes the normal path.
//!
//! `Session::point_read` answers a recognised query as the normal path does
//! (`session::run_start` evaluating `reql::terms::db::get`), through the same seams: the
//! connection's `TableAccess` (a user's permission is checked by the `Permissions` layer
//! on `get`), the query and read counters of `stats` (the read's in the table's `get`),
//! the query's memory budget, its interruption flag and the latency histogram. It is not
//! listed in `rethinkdb.jobs`: it is counted once its read is done, when a row could
//! only show a finished query. Before anything observable happens, every
//! doubt — a duplicate token, a missing database or table, a system table, a key that is
//! not a valid primary key — hands the query back untouched to the normal path, so those
//! errors have one source. An error of the read itself is blamed as the normal path
//! blames it, on the compiled term (compiled then, on that rare path).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use datum::Datum;
use proto::ql2::ResponseType;
use proto::response::ResponseWriter;
use reql::memory::Budget;
use reql::{ReqlError, Table};

use super::Session;
use crate::wire::{check_json, error_frame, finish};

/// A recognised point read, borrowing the frame's bytes.
#[derive(Debug, PartialEq)]
pub(super) struct PointGet<'a> {
    /// `D` of `r.db(D)` in the term.
    db: Option<&'a str>,
    /// The `db` global optarg.
    default_db: Option<&'a str>,
    table: &'a str,
    /// The table term's `read_mode` optarg (the only one accepted), parsed.
    read_mode: reql::ReadMode,
    key: Key<'a>,
}

#[derive(Debug, PartialEq)]
enum Key<'a> {
    Str(&'a str),
    Int(i64),
}

impl PointGet<'_> {
    /// The database the table is looked up in, as the normal path chooses it.
    fn db(&self) -> &str {
        self.db.or(self.default_db).unwrap_or("test")
    }

    /// Whether `datum::keys::encode_primary` refuses the key. A recognised key is a
    /// string without control characters (so without NUL) or an integer of at most 15
    /// digits (printed short enough), so only a string's length can be refused.
    fn key_refused(&self) -> bool {
        matches!(self.key, Key::Str(s) if s.len() > datum::keys::MAX_PRIMARY_KEY_CHARS)
    }

    fn key(&self) -> Datum {
        match self.key {
            Key::Str(s) => Datum::str(s),
            // At most 15 digits: exact as an f64, as serde_json's reading of it is.
            Key::Int(n) => Datum::Number(n as f64),
        }
    }
}

/// Reads the exact point-read shape, in the compact form drivers send (no whitespace);
/// None for anything else.
pub(super) fn recognise(payload: &[u8]) -> Option<PointGet<'_>> {
    // The whole frame is checked as UTF-8 once (JSON text is), so every piece taken
    // between ASCII delimiters below is a `str` without a check of its own.
    let mut c = Cursor {
        s: std::str::from_utf8(payload).ok()?,
        i: 0,
    };
    // [1,[16,[[15,[[14,["D"]],"T"]],K]],{"db":[14,["D"]]}]
    c.lit(b"[1,[16,[[15,[")?;
    let db = match c.lit(b"[14,[") {
        Some(()) => {
            let d = c.name()?;
            c.lit(b"]],")?;
            Some(d)
        }
        None => None,
    };
    let table = c.name()?;
    c.lit(b"]")?;
    let read_mode = match c.lit(b",{\"read_mode\":") {
        Some(()) => {
            let mode = reql::ReadMode::parse(c.string()?)?;
            c.lit(b"}")?;
            mode
        }
        None => reql::ReadMode::Single,
    };
    c.lit(b"],")?;
    let key = c.key()?;
    c.lit(b"]]")?;
    let default_db = match c.lit(b",{\"db\":[14,[") {
        Some(()) => {
            let d = c.name()?;
            c.lit(b"]]}")?;
            Some(d)
        }
        None => {
            // No optargs, or none at all.
            let _ = c.lit(b",{}");
            None
        }
    };
    c.lit(b"]")?;
    (c.i == payload.len()).then_some(PointGet {
        db,
        default_db,
        table,
        read_mode,
        key,
    })
}

/// A position in the frame's text; `i` is at most its length and always on an ASCII
/// delimiter's boundary (so on a character boundary).
struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    /// The bytes from the cursor on.
    #[inline]
    fn rest(&self) -> &'a [u8] {
        self.s.as_bytes().get(self.i..).unwrap_or_default()
    }

    /// Exactly `t` next (the cursor moves only on a match). A number in `t` is
    /// complete because what follows it in `t` is `,` or `]`.
    #[inline]
    fn lit(&mut self, t: &[u8]) -> Option<()> {
        if self.rest().starts_with(t) {
            self.i += t.len();
            Some(())
        } else {
            None
        }
    }

    /// The text of a string up to its first `"`, which the cursor passes (an escaped
    /// quote ends it early; the callers refuse the backslash before it).
    #[inline]
    fn quoted(&mut self) -> Option<&'a str> {
        self.lit(b"\"")?;
        let len = memchr::memchr(b'"', self.rest())?;
        let text = self.s.get(self.i..self.i + len)?;
        self.i += len + 1;
        Some(text)
    }

    /// A string of a valid database or table name (`A-Z`, `a-z`, `0-9`, `_`, `-`, as
    /// `reql::terms::db::valid_name` wants).
    fn name(&mut self) -> Option<&'a str> {
        let text = self.quoted()?;
        let valid = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
        (!text.is_empty() && text.bytes().all(valid)).then_some(text)
    }

    /// A JSON string without escapes or control characters.
    fn string(&mut self) -> Option<&'a str> {
        let text = self.quoted()?;
        // No early exit: the loop stays branch-free over the short key.
        let plain = text
            .bytes()
            .fold(true, |ok, c| ok & (c >= 0x20) & (c != b'\\'));
        plain.then_some(text)
    }

    /// A string, or an integer of 1 to 15 digits in JSON's form (no leading zero, and
    /// not `-0`, which is a float).
    fn key(&mut self) -> Option<Key<'a>> {
        let b = self.s.as_bytes();
        if b.get(self.i) == Some(&b'"') {
            return self.string().map(Key::Str);
        }
        let negative = b.get(self.i) == Some(&b'-');
        if negative {
            self.i += 1;
        }
        let digits = self.i;
        let mut n: i64 = 0;
        while let Some(&c @ b'0'..=b'9') = b.get(self.i) {
            n = n * 10 + i64::from(c - b'0');
            self.i += 1;
            if self.i - digits > 15 {
                return None;
            }
        }
        match b.get(digits..self.i)? {
            [] => None,
            [b'0', ..] if negative || self.i - digits > 1 => None,
            _ => Some(Key::Int(if negative { -n } else { n })),
        }
    }
}

impl Session {
    /// Answers the query frame `payload` on `token` if it is a recognised point read.
    /// None: not one, or in doubt; nothing has happened and the normal path answers.
    pub(super) fn point_read(&self, token: u64, payload: &Bytes) -> Option<Vec<u8>> {
        let q = recognise(payload)?;
        if self.tokens.lock().in_use(token) {
            return None;
        }
        let db = q.db();
        // System tables have their own rules for names and rows: the normal path.
        if db == "rethinkdb" {
            return None;
        }
        let access = &self.who.access;
        // `r.db(D)` checks that D exists (with its own backtrace).
        if q.db.is_some() && access.check_db(db).is_err() {
            return None;
        }
        if q.key_refused() {
            return None;
        }
        let table = match q.read_mode {
            reql::ReadMode::Single => access.table(db, q.table),
            mode => access.table_read_mode(db, q.table, mode),
        }
        .ok()?;
        let key = q.key();

        // From here the query runs and is answered here, as `run_start` would.
        let began = Instant::now();
        let cancel = Arc::new(AtomicBool::new(false));
        let memory = Budget::new(self.state.query_memory, cancel.clone());
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _memory = memory.enter();
            read(table.as_ref(), &key, &cancel).map(|doc| doc.map(|doc| answer(token, &doc)))
        }));
        // A replicated table's read that would wait (routed, or `majority`): the
        // evaluation pool's, through the normal path, before anything is counted.
        if let Ok(Ok(None)) = run {
            return None;
        }
        // The read never waits and is done: counted for `stats`, but not listed in
        // `rethinkdb.jobs`, where its row could show only a finished query (deleting
        // it would interrupt nothing).
        self.state.cluster.count_query();
        let frame = match run {
            Ok(Ok(None)) => return None,
            Ok(Ok(Some(frame))) => frame,
            Ok(Err(e)) => self
                .interrupted(token, &cancel, &memory)
                .unwrap_or_else(|| error_frame(token, &blamed(payload, e))),
            Err(_) => self
                .interrupted(token, &cancel, &memory)
                .unwrap_or_else(|| {
                    error_frame(
                        token,
                        &reql::error::internal("The query failed unexpectedly."),
                    )
                }),
        };
        self.state
            .cluster
            .observe_query_latency(began.elapsed().as_secs_f64());
        Some(frame)
    }
}

/// The read, as `reql::terms::db::get` over an interruptible table and `run_start`'s
/// conversion of its value do it: the document under `key` (null when there is none); None when the table cannot
/// answer without waiting (`Table::get_now`).
fn read(table: &dyn Table, key: &Datum, cancel: &AtomicBool) -> Result<Option<Datum>, ReqlError> {
    if cancel.load(Ordering::Relaxed) {
        return Err(reql::interrupt::error());
    }
    let Some(doc) = table.get_now(key) else {
        return Ok(None);
    };
    let doc = doc?.unwrap_or(Datum::Null);
    check_json(&doc)?;
    Ok(Some(doc))
}

/// The SUCCESS_ATOM frame of `doc`, written in one buffer of the right size (a stored
/// document keeps its JSON, `datum::Object::raw_json`).
fn answer(token: u64, doc: &Datum) -> Vec<u8> {
    let size = (doc.as_object().and_then(|o| o.raw_json())).map_or(64, <[u8]>::len);
    let mut w = ResponseWriter::with_capacity(ResponseType::SUCCESS_ATOM, size);
    w.push_raw_with(|out| doc.write_json(out));
    finish(w, token)
}

/// `e` blamed on the compiled query, as evaluating the compiled `get` term blames it.
fn blamed(payload: &[u8], e: ReqlError) -> ReqlError {
    let term = proto::query::parse_query(payload)
        .ok()
        .and_then(|q| q.term)
        .and_then(|t| reql::compile_term(&t).ok());
    match term {
        Some(t) => e.blame_in(&t),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(s: &str) -> Option<PointGet<'_>> {
        recognise(s.as_bytes())
    }

    #[test]
    fn the_drivers_point_reads_are_recognised() {
        let q = get(r#"[1,[16,[[15,["t"]],"k"]],{}]"#).unwrap();
        assert_eq!((q.db, q.default_db, q.table), (None, None, "t"));
        assert_eq!(q.key, Key::Str("k"));
        assert_eq!(q.db(), "test");
        let q = get(r#"[1,[16,[[15,[[14,["d"]],"t"]],-42]]]"#).unwrap();
        assert_eq!((q.db(), q.table, q.key()), ("d", "t", Datum::Number(-42.0)));
        let q = get(r#"[1,[16,[[15,["t"]],"é k"]],{"db":[14,["x"]]}]"#).unwrap();
        assert_eq!((q.db(), q.key()), ("x", Datum::str("é k")));
        // The term's database wins over the optarg's.
        let q = get(r#"[1,[16,[[15,[[14,["d"]],"t"]],0]],{"db":[14,["x"]]}]"#);
        assert_eq!(q.map(|q| q.db().to_string()), Some("d".into()));
        assert_eq!(
            get(r#"[1,[16,[[15,["t"]],"k"]]]"#).unwrap().read_mode,
            reql::ReadMode::Single
        );
        for (text, mode) in [
            ("single", reql::ReadMode::Single),
            ("majority", reql::ReadMode::Majority),
            ("outdated", reql::ReadMode::Outdated),
            ("_debug_direct", reql::ReadMode::Outdated),
        ] {
            let s = format!(r#"[1,[16,[[15,[[14,["d"]],"t"],{{"read_mode":"{text}"}}],"k"]]]"#);
            let q = get(&s).unwrap();
            assert_eq!((q.db(), q.table, q.read_mode), ("d", "t", mode), "{s}");
        }
    }

    #[test]
    fn anything_else_takes_the_normal_path() {
        for s in [
            // Other query types, terms, optargs.
            r#"[2,[16,[[15,["t"]],"k"]],{}]"#,
            r#"[1,[16,[[15,["t"]],"k"]],{"profile":true}]"#,
            r#"[1,[16,[[15,["t"]],"k"]],{"noreply":true}]"#,
            r#"[1,[16,[[15,["t"]],"k"]],{"db":[14,["x"]],"profile":true}]"#,
            r#"[1,[16,[[15,["t"]],"k"]],{"db":"x"}]"#,
            r#"[1,[16,[[15,["t"],{"identifier_format":"uuid"}],"k"]]]"#,
            r#"[1,[16,[[15,["t"],{"read_mode":"outdated","identifier_format":"uuid"}],"k"]]]"#,
            // A read mode the normal path refuses (with its error), or not a string.
            r#"[1,[16,[[15,["t"],{"read_mode":"fast"}],"k"]]]"#,
            r#"[1,[16,[[15,["t"],{"read_mode":"Outdated"}],"k"]]]"#,
            r#"[1,[16,[[15,["t"],{"read_mode":1}],"k"]]]"#,
            r#"[1,[16,[[15,["t"],{"read_mode":"out\u0064ated"}],"k"]]]"#,
            r#"[1,[16,[[15,["t"],{}],"k"]]]"#,
            r#"[1,[16,[[15,["t"]],"k"],{"index":"v"}]]"#,
            r#"[1,[78,[[15,["t"]],"k"]]]"#,
            r#"[1,[16,[[15,[[14,["d"]],[15,["t"]]]],"k"]]]"#,
            // Invalid names: their errors come from the normal path.
            r#"[1,[16,[[15,["a b"]],"k"]]]"#,
            r#"[1,[16,[[15,[[14,[""]],"t"]],"k"]]]"#,
            // Keys that are not plain strings or exact integers.
            r#"[1,[16,[[15,["t"]],"a\"b"]]]"#,
            r#"[1,[16,[[15,["t"]],1.5]]]"#,
            r#"[1,[16,[[15,["t"]],1e3]]]"#,
            r#"[1,[16,[[15,["t"]],-0]]]"#,
            r#"[1,[16,[[15,["t"]],01]]]"#,
            r#"[1,[16,[[15,["t"]],1234567890123456]]]"#,
            r#"[1,[16,[[15,["t"]],null]]]"#,
            r#"[1,[16,[[15,["t"]],[2,[1]]]]]"#,
            r#"[1,[16,[[15,["t"]],{"a":1}]]]"#,
            // Whitespace (drivers send none).
            r#" [1,[16,[[15,["t"]],"k"]],{}]"#,
            r#"[1, [16,[[15,["t"]],"k"]],{}]"#,
            r#"[1,[16,[[15,["t"]],"k"]],{ }]"#,
            "[1,[16,[[15,[\"t\"]],\"k\"]],{}]\n",
            // Malformed or trailing bytes.
            r#"[1,[16,[[15,["t"]],"k"]],{}] x"#,
            r#"[1,[16,[[15,["t"]],"k"]],{}"#,
            r#"[1,[16,[[15,["t"]],"k"]],]"#,
            r#"[10,[16,[[15,["t"]],"k"]]]"#,
            r#"[1,[160,[[15,["t"]],"k"]]]"#,
        ] {
            assert_eq!(get(s), None, "{s}");
        }
        assert_eq!(recognise(b"[1,[16,[[15,[\"t\"]],\"\xff\"]]]"), None);
    }

    #[test]
    fn only_long_strings_are_refused_keys() {
        let long = |n: usize| format!(r#"[1,[16,[[15,["t"]],"{}"]]]"#, "é".repeat(n / 2));
        for n in [0, 2, 126, 128, 200] {
            let s = long(n);
            let q = get(&s).unwrap();
            let refused = datum::keys::encode_primary(&q.key()).is_err();
            assert_eq!(q.key_refused(), refused, "{n} bytes");
        }
        for k in ["0", "-1", "999999999999999", "-999999999999999"] {
            let s = format!(r#"[1,[16,[[15,["t"]],{k}]]]"#);
            let q = get(&s).unwrap();
            assert!(!q.key_refused());
            assert!(datum::keys::encode_primary(&q.key()).is_ok(), "{k}");
        }
    }

    #[test]
    fn recognised_queries_parse_to_the_same_query() {
        for s in [
            r#"[1,[16,[[15,["t"]],"k"]],{}]"#,
            r#"[1,[16,[[15,[[14,["d"]],"t"]],123456789012345]],{"db":[14,["x"]]}]"#,
            r#"[1,[16,[[15,["t"],{"read_mode":"outdated"}],"k"]]]"#,
        ] {
            let q = proto::query::parse_query(s.as_bytes()).unwrap();
            assert_eq!(q.kind, proto::ql2::QueryType::START);
            let t = reql::compile_term(&q.term.unwrap()).unwrap();
            let p = get(s).unwrap();
            assert_eq!(t.args[1].datum, p.key());
            let mode = t.args[0]
                .optargs
                .iter()
                .find(|(k, _)| k.as_str() == "read_mode");
            let mode = mode.and_then(|(_, v)| v.datum.as_str().and_then(reql::ReadMode::parse));
            assert_eq!(mode.unwrap_or_default(), p.read_mode, "{s}");
        }
    }
}
