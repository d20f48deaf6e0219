//! Compiling a `START` query straight from the frame's bytes, without the
//! `serde_json::Value` tree (`compile_query`'s fast path).
//!
//! Invariant: it answers only when the answer is certainly the one the reference path
//! (`proto::query::parse_query`, then `compile_term` on the term and on each global
//! optarg) gives, and that answer is a success; on anything else (invalid or unusual
//! JSON, any compile error, duplicate keys, other query types) it answers `None` and
//! the caller takes the reference path, which produces the error with its exact text,
//! class and backtrace. It reads with `datum::JsonReader`, which gives up wherever
//! serde might decide differently; nesting is bounded by `MAX_QUERY_DEPTH` counted
//! over the whole payload, as the reference path's byte scan counts it.
//!
//! Why: parsing a bulk insert into a `Value`, compiling every field of every document
//! into its own term and folding them back was most of the server's work per inserted
//! document. Here a literal stays a `Datum` (no term, no path) until a term that is not
//! folded keeps it, and paths are built only for the terms that are kept. A literal
//! object read outside another object keeps its text when that text is canonical and
//! holds no term array or pseudo-type (`JsonReader::canonical_since`, noted while it is
//! read): storing an inserted document then copies the text instead of encoding it.
//! Such an object with no array at all inside is not even decoded
//! (`JsonReader::plain_object`): its map is built only if something reads it.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use datum::{Datum, JsonReader, Object, Str};
use proto::ql2::{QueryType, TermType};
use proto::query::MAX_QUERY_DEPTH;

use super::{check_order_marks, check_ptype, finish_term, make_obj, Term};
use crate::error::{Frame, Path};

/// A compiled `[START, term, optargs?]`: the term and the global optargs in key order,
/// each with the text of its value (for `noreply`/`profile`).
pub(crate) struct Start<'a> {
    pub term: Arc<Term>,
    pub optargs: Vec<(String, Arc<Term>, &'a [u8])>,
}

/// Compiles `payload` if it is a `START` query that the reference path would accept and
/// compile without error; `None` otherwise (see the module note).
pub(crate) fn compile_start(payload: &[u8]) -> Option<Start<'_>> {
    let mut c = Direct {
        r: JsonReader::new(payload, MAX_QUERY_DEPTH),
        arrays: 0,
        ptypes: 0,
    };
    c.r.open(b'[')?;
    if c.r.small_integer()? != QueryType::START.as_i64() {
        return None;
    }
    c.r.expect(b',')?;
    let root = At::root();
    let term = c.node(&root, true)?.into_term(Path::root);
    let mut optargs = Vec::new();
    if c.r.eat(b',') {
        if c.r.peek()? != b'{' {
            return None;
        }
        c.members(|c, k| {
            c.r.peek()?;
            let from = c.r.offset();
            let t = c.node(&At::root(), true)?.into_term(Path::root);
            let text = payload.get(from..c.r.offset())?;
            optargs.push((k.to_string(), t, text));
            Some(())
        })?;
    }
    c.r.close(b']')?;
    if !c.r.at_end() {
        return None;
    }
    optargs.sort_by(|a, b| a.0.cmp(&b.0));
    if optargs.windows(2).any(|w| w[0].0 == w[1].0) {
        return None;
    }
    Some(Start { term, optargs })
}

/// A compiled child before anyone needs its path: a literal stays a Datum.
enum Node {
    Lit(Datum),
    Term(Arc<Term>),
}

impl Node {
    fn lit(&self) -> Option<&Datum> {
        match self {
            Node::Lit(d) => Some(d),
            Node::Term(t) if t.tt == TermType::DATUM => Some(&t.datum),
            Node::Term(_) => None,
        }
    }

    fn into_datum(self) -> Datum {
        match self {
            Node::Lit(d) => d,
            Node::Term(t) => t.datum.clone(),
        }
    }

    /// The term, a literal charged to the path `path` makes.
    fn into_term(self, path: impl FnOnce() -> Path) -> Arc<Term> {
        match self {
            Node::Lit(d) => Term::datum_at(d, path()),
            Node::Term(t) => t,
        }
    }
}

/// Where a term is being read: its parent's place and its own step. The path is made
/// on first use, so a literal that is folded away never allocates one.
struct At<'a> {
    parent: Option<&'a At<'a>>,
    step: Step<'a>,
    path: OnceCell<Path>,
}

enum Step<'a> {
    Root,
    Pos(usize),
    Opt(&'a str),
}

impl<'a> At<'a> {
    fn root() -> At<'static> {
        At {
            parent: None,
            step: Step::Root,
            path: OnceCell::new(),
        }
    }

    fn child(&'a self, step: Step<'a>) -> At<'a> {
        At {
            parent: Some(self),
            step,
            path: OnceCell::new(),
        }
    }

    fn path(&self) -> &Path {
        self.path.get_or_init(|| match (self.parent, &self.step) {
            (Some(p), Step::Pos(i)) => p.path().child(Frame::Pos(*i)),
            (Some(p), Step::Opt(k)) => p.path().child(Frame::Opt((*k).to_string())),
            _ => Path::root(),
        })
    }
}

struct Direct<'a> {
    r: JsonReader<'a>,
    /// Term arrays read so far (their text is not their value's).
    arrays: usize,
    /// Literal objects with `$reql_type$` read so far (`check_ptype` may change them).
    ptypes: usize,
}

impl Direct<'_> {
    /// A term in JSON form: a term array, an object (MAKE_OBJ) or a literal. A literal
    /// object keeps its text if `keep_text` (not for members of another object, whose
    /// text is part of their parent's).
    fn node(&mut self, at: &At, keep_text: bool) -> Option<Node> {
        match self.r.peek()? {
            b'[' => self.array(at),
            b'{' => self.object(at, keep_text),
            _ => Some(Node::Lit(self.r.datum()?)),
        }
    }

    /// `[a, b, ...]`, calling `each` at every element.
    fn list(&mut self, mut each: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.r.open(b'[')?;
        if self.r.peek()? != b']' {
            loop {
                each(self)?;
                if !self.r.eat(b',') {
                    break;
                }
            }
        }
        self.r.close(b']')
    }

    /// `{"k": v, ...}`, calling `each` with every key, before its value.
    fn members(&mut self, mut each: impl FnMut(&mut Self, Str) -> Option<()>) -> Option<()> {
        self.r.open(b'{')?;
        if self.r.peek()? != b'}' {
            loop {
                let k = self.r.string()?;
                self.r.expect(b':')?;
                each(self, k)?;
                if !self.r.eat(b',') {
                    break;
                }
            }
        }
        self.r.close(b'}')
    }

    /// `null` (which the reference path takes as "none given").
    fn null(&mut self) -> Option<()> {
        matches!(self.r.datum()?, Datum::Null).then_some(())
    }

    /// A term array `[type, args?, optargs?]`.
    fn array(&mut self, at: &At) -> Option<Node> {
        self.arrays += 1;
        self.r.open(b'[')?;
        let tt = TermType::from_i64(self.r.small_integer()?)?;
        if tt == TermType::DATUM {
            // `[1]`, `[1, value]` or `[1, value, ignored]`.
            let mut d = Datum::Null;
            if self.r.eat(b',') {
                d = self.r.datum()?;
                if self.r.eat(b',') {
                    self.r.datum()?;
                }
            }
            self.r.close(b']')?;
            return Some(Node::Lit(d));
        }
        let mut args: Vec<Node> = Vec::new();
        let mut optargs: Vec<(Str, Node)> = Vec::new();
        if self.r.eat(b',') {
            match self.r.peek()? {
                b'n' => self.null()?,
                b'[' => self.list(|c| {
                    let child = at.child(Step::Pos(args.len()));
                    let n = c.node(&child, true)?;
                    args.push(n);
                    Some(())
                })?,
                _ => return None,
            }
            if self.r.eat(b',') {
                match self.r.peek()? {
                    b'n' => self.null()?,
                    b'{' => self.members(|c, k| {
                        let n = c.node(&at.child(Step::Opt(&k)), true)?;
                        optargs.push((k, n));
                        Some(())
                    })?,
                    _ => return None,
                }
            }
        }
        self.r.close(b']')?;
        if tt == TermType::MAKE_ARRAY && args.iter().all(|n| n.lit().is_some()) {
            // Folded as the reference path folds it (its optargs, compiled, are dropped).
            let items = args.into_iter().map(Node::into_datum).collect();
            return Some(Node::Lit(Datum::array(items)));
        }
        let path = at.path();
        let args = args
            .into_iter()
            .enumerate()
            .map(|(i, n)| n.into_term(|| path.child(Frame::Pos(i))))
            .collect();
        let optargs = in_key_order(optargs, path)?;
        finish_term(tt, args, optargs, path).ok().map(Node::Term)
    }

    /// An object: a literal when every value is one, else a MAKE_OBJ term.
    fn object(&mut self, at: &At, keep_text: bool) -> Option<Node> {
        // A plain literal (canonical, no term array or pseudo-type inside) is its own
        // text, kept undecoded: what the slower reading below would give, without
        // building a map (a bulk insert's documents).
        if keep_text {
            if let Some(d) = self.r.plain_object() {
                return Some(Node::Lit(d));
            }
        }
        let mark = keep_text.then(|| self.r.mark());
        let (arrays, ptypes) = (self.arrays, self.ptypes);
        let mut fields: Vec<(Str, Node)> = Vec::new();
        self.members(|c, k| {
            let n = c.node(&at.child(Step::Opt(&k)), false)?;
            fields.push((k, n));
            Some(())
        })?;
        // Keys out of order (or repeated) are not canonical, here or in any object
        // around this one.
        let sorted = fields.windows(2).all(|w| w[0].0 < w[1].0);
        if !sorted {
            self.r.not_canonical();
        }
        let text = mark.and_then(|m| self.r.canonical_since(m));
        if fields.iter().all(|(_, n)| n.lit().is_some()) {
            let map = literal_map(fields)?;
            if map.contains_key("$reql_type$") {
                self.ptypes += 1;
            }
            // Canonical text is the value's when no term array or pseudo-type is inside.
            let d = match text {
                Some(t) if self.arrays == arrays && self.ptypes == ptypes => {
                    JsonReader::object_with_text(map, t)
                }
                _ => Datum::object(Object::from(map)),
            };
            return check_ptype(d).ok().map(Node::Lit);
        }
        let path = at.path();
        let fields = in_key_order(fields, path)?;
        check_order_marks(TermType::MAKE_OBJ, &[], &fields).ok()?;
        Some(Node::Term(make_obj(fields, path)))
    }
}

/// Literal members as a map; `None` on a duplicate key.
fn literal_map(fields: Vec<(Str, Node)>) -> Option<BTreeMap<Str, Datum>> {
    if fields.windows(2).all(|w| w[0].0 < w[1].0) {
        // Strictly ascending (documents a program wrote from a sorted map): bulk-built.
        return Some(
            fields
                .into_iter()
                .map(|(k, n)| (k, n.into_datum()))
                .collect(),
        );
    }
    let mut m = BTreeMap::new();
    for (k, n) in fields {
        if m.insert(k, n.into_datum()).is_some() {
            return None;
        }
    }
    Some(m)
}

/// Named children as terms in key order (as a `serde_json::Map` iterates them), each
/// literal charged to its own frame below `path`; `None` on a duplicate key.
fn in_key_order(mut fields: Vec<(Str, Node)>, path: &Path) -> Option<Vec<(String, Arc<Term>)>> {
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    if fields.windows(2).any(|w| w[0].0 == w[1].0) {
        return None;
    }
    Some(
        fields
            .into_iter()
            .map(|(k, n)| {
                let t = n.into_term(|| path.child(Frame::Opt(k.to_string())));
                (k.to_string(), t)
            })
            .collect(),
    )
}
