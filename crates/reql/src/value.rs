//! Evaluation values: datums, lazy sequences, selections, databases and functions.
//!
//! A `Sequence` is a lazy stream of datums; `is_array` marks one derived from a datum
//! array, which is collected back into an array when a value is needed (RethinkDB keeps
//! array transformations arrays). `table` marks a selection whose items are documents of
//! that table, so writes (`update`, `delete`) can follow reads.

use std::sync::Arc;

use datum::Datum;

use crate::access::Table;
use crate::error::{logic, Result};
use crate::term::Term;

/// A lazy stream of datums.
pub type DatumStream = Box<dyn Iterator<Item = Result<Datum>> + Send>;

/// A lazy sequence.
pub struct Sequence {
    /// The items.
    pub stream: DatumStream,
    /// Derived from a datum array: collect back to an array.
    pub is_array: bool,
    /// A selection over this table.
    pub table: Option<Arc<dyn Table>>,
    /// Known to be endless (`r.range()`).
    pub infinite: bool,
}

impl Sequence {
    /// A sequence over items.
    pub fn from_vec(items: Vec<Datum>) -> Sequence {
        Sequence::from_array(Arc::new(items.into()))
    }

    /// A sequence over the items of an array datum.
    pub fn from_array(items: Arc<datum::Array>) -> Sequence {
        let mut i = 0;
        Sequence {
            stream: Box::new(std::iter::from_fn(move || {
                let d = items.get(i).cloned();
                i += 1;
                d.map(Ok)
            })),
            is_array: true,
            table: None,
            infinite: false,
        }
    }

    /// A plain (non-array, non-selection) stream.
    pub fn stream(stream: DatumStream) -> Sequence {
        Sequence {
            stream,
            is_array: false,
            table: None,
            infinite: false,
        }
    }

    /// Same flags, new items.
    pub fn with_stream(self, stream: DatumStream) -> Sequence {
        Sequence { stream, ..self }
    }

    /// Collects every item, enforcing the array size limit.
    pub fn collect(self, limit: usize) -> Result<Vec<Datum>> {
        if self.infinite {
            return Err(logic("Cannot use an infinite stream with an aggregation function (`reduce`, `count`, etc.) or coerce it to an array."));
        }
        let mut out = Vec::new();
        for d in self.stream {
            out.push(d?);
            if out.len() > limit {
                return Err(array_limit_error(limit));
            }
        }
        Ok(out)
    }
}

/// One datum per group, in ReQL order of the group keys (RethinkDB's `grouped_data_t`).
pub type GroupedData = std::collections::BTreeMap<Datum, Datum>;

/// A lazy stream of `(group, item)` pairs: what `group` makes (GROUPED_STREAM).
pub struct GroupedStream {
    /// The tagged items; an item of several groups (`multi`) appears once per group.
    pub stream: Box<dyn Iterator<Item = Result<(Datum, Datum)>> + Send>,
    /// Known to be endless (grouping `r.range()`).
    pub infinite: bool,
}

/// Grouped values. Terms after `group` apply to each group (`terms::group`); reductions
/// turn the lazy stream into data.
pub enum Grouped {
    /// GROUPED_STREAM: not reduced yet.
    Stream(GroupedStream),
    /// GROUPED_DATA: one datum per group.
    Data(Arc<GroupedData>),
}

/// RethinkDB's error for an array longer than the `array_limit`.
pub fn array_limit_error(limit: usize) -> crate::error::ReqlError {
    crate::error::resource(format!(
        "Array over size limit `{limit}`.  To raise the number of allowed elements, modify the `array_limit` option to `.run` (not available in the Data Explorer), or use an index."
    ))
}

/// A single document selected by primary key (`get`).
#[derive(Clone)]
pub struct SingleSel {
    /// Its table.
    pub table: Arc<dyn Table>,
    /// The primary key asked for.
    pub key: Datum,
    /// The document, or null when missing.
    pub doc: Datum,
}

/// A function value: parameters, body and captured environment.
#[derive(Clone)]
pub struct Func {
    /// Variable ids of the parameters.
    pub params: Arc<Vec<i64>>,
    /// The body term (for a function made by `r.js`, the `JAVASCRIPT` term itself,
    /// which `eval::call_vals` hands to `terms::js::call`).
    pub body: Arc<Term>,
    /// Variables captured where the function was created.
    pub env: Env,
    /// Whether the body reads `r.row` (`Term::uses_implicit_var`), decided once when
    /// the function is made: a one-argument call binds it only then.
    pub implicit: bool,
    /// The body compiled for one-argument calls, when it is in `compiled`'s subset.
    pub compiled: Option<Arc<crate::compiled::Body>>,
}

/// A value produced by evaluating a term.
pub enum Val {
    /// A datum.
    Datum(Datum),
    /// A lazy sequence (possibly a selection).
    Seq(Sequence),
    /// A whole table.
    Table(Arc<dyn Table>),
    /// One document of a table.
    Single(SingleSel),
    /// A database.
    Db(String),
    /// A function.
    Func(Func),
    /// Grouped values (`group`).
    Grouped(Grouped),
}

impl Val {
    /// RethinkDB's type name for errors ("Expected type X but found Y").
    pub fn type_name(&self) -> String {
        match self {
            Val::Datum(d) => d.type_name(),
            Val::Seq(s) if s.table.is_some() => "SELECTION<STREAM>".into(),
            Val::Seq(_) => "STREAM".into(),
            Val::Table(t) if t.slice().is_some() => "TABLE_SLICE".into(),
            Val::Table(_) => "TABLE".into(),
            Val::Single(_) => "SELECTION<OBJECT>".into(),
            Val::Db(_) => "DATABASE".into(),
            Val::Func(_) => "FUNCTION".into(),
            Val::Grouped(Grouped::Stream(_)) => "GROUPED_STREAM".into(),
            Val::Grouped(Grouped::Data(_)) => "GROUPED_DATA".into(),
        }
    }

    /// The kind name RethinkDB uses in "Expected type DATUM but found X" errors.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Val::Datum(_) => "DATUM",
            Val::Seq(s) if s.table.is_some() => "SELECTION",
            Val::Seq(_) => "SEQUENCE",
            Val::Table(t) if t.slice().is_some() => "TABLE_SLICE",
            Val::Table(_) => "TABLE",
            Val::Single(_) => "SINGLE_SELECTION",
            Val::Db(_) => "DATABASE",
            Val::Func(_) => "FUNCTION",
            Val::Grouped(Grouped::Stream(_)) => "GROUPED_STREAM",
            Val::Grouped(Grouped::Data(_)) => "GROUPED_DATA",
        }
    }

    /// A cheap copy for variable bindings; sequences are materialized by the caller first.
    pub fn share(&self) -> Option<Val> {
        Some(match self {
            Val::Datum(d) => Val::Datum(d.clone()),
            Val::Table(t) => Val::Table(t.clone()),
            Val::Single(s) => Val::Single(s.clone()),
            Val::Db(d) => Val::Db(d.clone()),
            Val::Func(f) => Val::Func(f.clone()),
            Val::Grouped(Grouped::Data(g)) => Val::Grouped(Grouped::Data(g.clone())),
            Val::Seq(_) | Val::Grouped(Grouped::Stream(_)) => return None,
        })
    }
}

/// Variable bindings, a persistent linked list (binding is O(1), lookup walks).
#[derive(Clone, Default)]
pub struct Env(Option<Arc<EnvNode>>);

struct EnvNode {
    id: i64,
    val: Bound,
    parent: Env,
}

/// A value that can be bound to a variable (everything but a lazy stream, which is
/// collected before binding).
enum Bound {
    Datum(Datum),
    Table(Arc<dyn Table>),
    Single(SingleSel),
    Db(String),
    Func(Func),
    Grouped(Arc<GroupedData>),
}

impl Bound {
    fn of(v: Val) -> Bound {
        match v {
            Val::Datum(d) => Bound::Datum(d),
            Val::Table(t) => Bound::Table(t),
            Val::Single(s) => Bound::Single(s),
            Val::Db(d) => Bound::Db(d),
            Val::Func(f) => Bound::Func(f),
            Val::Grouped(Grouped::Data(g)) => Bound::Grouped(g),
            Val::Seq(_) | Val::Grouped(Grouped::Stream(_)) => Bound::Datum(Datum::Null),
        }
    }

    fn val(&self) -> Val {
        match self {
            Bound::Datum(d) => Val::Datum(d.clone()),
            Bound::Table(t) => Val::Table(t.clone()),
            Bound::Single(s) => Val::Single(s.clone()),
            Bound::Db(d) => Val::Db(d.clone()),
            Bound::Func(f) => Val::Func(f.clone()),
            Bound::Grouped(g) => Val::Grouped(Grouped::Data(g.clone())),
        }
    }
}

/// The variable id under which `r.row` is bound.
pub const IMPLICIT_VAR_ID: i64 = i64::MIN;

impl Env {
    /// This environment plus one binding (`val` must not be a `Seq`).
    pub fn bind(&self, id: i64, val: Val) -> Env {
        Env(Some(Arc::new(EnvNode {
            id,
            val: Bound::of(val),
            parent: self.clone(),
        })))
    }

    /// The value bound to `id`.
    pub fn lookup(&self, id: i64) -> Option<Val> {
        let mut cur = self.0.as_ref();
        while let Some(node) = cur {
            if node.id == id {
                return Some(node.val.val());
            }
            cur = node.parent.0.as_ref();
        }
        None
    }
}
