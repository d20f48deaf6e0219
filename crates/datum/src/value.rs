//! The `Datum` enum and its cheap accessors.
//!
//! Strings, arrays and objects are reference-counted so that cloning a Datum (which the
//! evaluator does constantly) is O(1). Mutation goes through `Arc::make_mut`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A shared, immutable string.
pub type Str = Arc<str>;

/// The map inside an object Datum; keys are sorted.
///
/// It dereferences to its `BTreeMap`, so it reads and writes like one. It may also
/// carry the compact JSON text it was decoded from (`raw_json`): a stored document
/// that is returned unchanged is then written out by copying those bytes instead of
/// re-encoding it. Invariant: `raw`, when present, is exactly what `write_json` would
/// print for `map` — the decoder attaches it only to text it verified to be in that
/// canonical form, and every mutable access (`DerefMut`, `get_mut`, …) drops it first.
#[derive(Clone, Default)]
pub struct Object {
    map: BTreeMap<Str, Datum>,
    raw: Option<Arc<Vec<u8>>>,
}

impl Object {
    /// An empty object.
    pub fn new() -> Object {
        Object::default()
    }

    /// The map, without the raw text.
    pub fn into_map(self) -> BTreeMap<Str, Datum> {
        self.map
    }

    /// The canonical compact JSON of this object, when it is known without encoding.
    pub fn raw_json(&self) -> Option<&[u8]> {
        self.raw.as_deref().map(Vec::as_slice)
    }

    /// Attaches the canonical JSON text (the caller guarantees the invariant).
    pub(crate) fn set_raw(&mut self, raw: Arc<Vec<u8>>) {
        self.raw = Some(raw);
    }
}

impl std::ops::Deref for Object {
    type Target = BTreeMap<Str, Datum>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl std::ops::DerefMut for Object {
    fn deref_mut(&mut self) -> &mut Self::Target {
        // Any mutable access may change the map: the raw text no longer describes it.
        self.raw = None;
        &mut self.map
    }
}

impl From<BTreeMap<Str, Datum>> for Object {
    fn from(map: BTreeMap<Str, Datum>) -> Object {
        Object { map, raw: None }
    }
}

impl FromIterator<(Str, Datum)> for Object {
    fn from_iter<I: IntoIterator<Item = (Str, Datum)>>(iter: I) -> Object {
        Object::from(iter.into_iter().collect::<BTreeMap<_, _>>())
    }
}

impl Extend<(Str, Datum)> for Object {
    fn extend<I: IntoIterator<Item = (Str, Datum)>>(&mut self, iter: I) {
        self.raw = None;
        self.map.extend(iter);
    }
}

impl IntoIterator for Object {
    type Item = (Str, Datum);
    type IntoIter = std::collections::btree_map::IntoIter<Str, Datum>;
    fn into_iter(self) -> Self::IntoIter {
        self.map.into_iter()
    }
}

impl<'a> IntoIterator for &'a Object {
    type Item = (&'a Str, &'a Datum);
    type IntoIter = std::collections::btree_map::Iter<'a, Str, Datum>;
    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

impl<'a> IntoIterator for &'a mut Object {
    type Item = (&'a Str, &'a mut Datum);
    type IntoIter = std::collections::btree_map::IterMut<'a, Str, Datum>;
    fn into_iter(self) -> Self::IntoIter {
        self.raw = None;
        self.map.iter_mut()
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Object) -> bool {
        self.map == other.map
    }
}

impl Eq for Object {}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.map.fmt(f)
    }
}

/// A ReQL value.
#[derive(Clone)]
pub enum Datum {
    /// The lowest value of all (`r.minval`), only valid as a range bound.
    MinVal,
    /// JSON null.
    Null,
    /// JSON boolean.
    Bool(bool),
    /// A finite double.
    Number(f64),
    /// A UTF-8 string.
    String(Str),
    /// An array.
    Array(Arc<Vec<Datum>>),
    /// An object (or a pseudo-type object carrying `$reql_type$`).
    Object(Arc<Object>),
    /// The highest value of all (`r.maxval`), only valid as a range bound.
    MaxVal,
}

/// The key that marks a pseudo-type object.
pub const REQL_TYPE: &str = "$reql_type$";

impl Datum {
    /// A string datum.
    pub fn str(s: &str) -> Datum {
        Datum::String(Arc::from(s))
    }

    /// An array datum.
    pub fn array(v: Vec<Datum>) -> Datum {
        Datum::Array(Arc::new(v))
    }

    /// An object datum.
    pub fn object(m: Object) -> Datum {
        Datum::Object(Arc::new(m))
    }

    /// An object datum from `(key, value)` pairs.
    pub fn from_pairs<I: IntoIterator<Item = (&'static str, Datum)>>(pairs: I) -> Datum {
        Datum::object(pairs.into_iter().map(|(k, v)| (Str::from(k), v)).collect())
    }

    /// The object's map, if this is an object (pseudo-types included).
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Datum::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The array's items, if this is an array.
    pub fn as_array(&self) -> Option<&[Datum]> {
        match self {
            Datum::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Datum::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number, if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Datum::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// The boolean, if this is a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Datum::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// ReQL truthiness: everything but `false` and `null` is true.
    pub fn truthy(&self) -> bool {
        !matches!(self, Datum::Null | Datum::Bool(false))
    }

    /// A field of an object.
    pub fn get(&self, key: &str) -> Option<&Datum> {
        self.as_object().and_then(|o| o.get(key))
    }

    /// The `$reql_type$` of a pseudo-type object, if any.
    pub fn reql_type(&self) -> Option<&str> {
        self.get(REQL_TYPE).and_then(Datum::as_str)
    }

    /// RethinkDB's type name as `type_of` prints it (`NUMBER`, `PTYPE<TIME>`, …).
    pub fn type_name(&self) -> String {
        match self {
            Datum::MinVal => "MINVAL".into(),
            Datum::MaxVal => "MAXVAL".into(),
            Datum::Null => "NULL".into(),
            Datum::Bool(_) => "BOOL".into(),
            Datum::Number(_) => "NUMBER".into(),
            Datum::String(_) => "STRING".into(),
            Datum::Array(_) => "ARRAY".into(),
            Datum::Object(_) => match self.reql_type() {
                Some(t) => format!("PTYPE<{t}>"),
                None => "OBJECT".into(),
            },
        }
    }

    /// The name used in "Expected type X but found Y" errors (pseudo-types by their
    /// `$reql_type$`, plain types by their base name).
    pub fn error_type_name(&self) -> String {
        self.type_name()
    }

    /// True for a pseudo-type object.
    pub fn is_ptype(&self) -> bool {
        self.reql_type().is_some()
    }

    /// Compact JSON text, as RethinkDB prints values inside error messages.
    pub fn to_json_string(&self) -> String {
        let mut out = Vec::new();
        crate::json::write_json(self, &mut out, false);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Pretty JSON text with RethinkDB's layout (used in error messages that quote a
    /// value: 4-space indentation, `"key":\tvalue`).
    pub fn to_pretty_string(&self) -> String {
        let mut out = String::new();
        crate::json::write_pretty(self, &mut out, 0);
        out
    }
}

impl PartialEq for Datum {
    fn eq(&self, other: &Self) -> bool {
        crate::order::cmp(self, other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Datum {}

impl PartialOrd for Datum {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Datum {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        crate::order::cmp(self, other)
    }
}

impl fmt::Debug for Datum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Datum::MinVal => f.write_str("r.minval"),
            Datum::MaxVal => f.write_str("r.maxval"),
            _ => f.write_str(&self.to_json_string()),
        }
    }
}

impl From<bool> for Datum {
    fn from(b: bool) -> Self {
        Datum::Bool(b)
    }
}

impl From<f64> for Datum {
    fn from(n: f64) -> Self {
        Datum::Number(n)
    }
}

impl From<i64> for Datum {
    fn from(n: i64) -> Self {
        Datum::Number(n as f64)
    }
}

impl From<usize> for Datum {
    fn from(n: usize) -> Self {
        Datum::Number(n as f64)
    }
}

impl From<&str> for Datum {
    fn from(s: &str) -> Self {
        Datum::str(s)
    }
}

impl From<String> for Datum {
    fn from(s: String) -> Self {
        Datum::String(Arc::from(s))
    }
}

impl From<Vec<Datum>> for Datum {
    fn from(v: Vec<Datum>) -> Self {
        Datum::array(v)
    }
}

impl From<Object> for Datum {
    fn from(o: Object) -> Self {
        Datum::object(o)
    }
}
