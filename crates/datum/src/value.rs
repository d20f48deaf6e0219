//! The `Datum` enum and its cheap accessors.
//!
//! Strings, arrays and objects are reference-counted so that cloning a Datum (which the
//! evaluator does constantly) is O(1). Mutation goes through `Arc::make_mut`.
//! An object decoded from stored canonical JSON builds its map only when first looked
//! at (see `Object`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::array::Array;
use crate::fast::IdMember;

/// A shared, immutable string.
pub type Str = Arc<str>;

/// The map inside an object Datum; keys are sorted.
///
/// It dereferences to its `BTreeMap`, so it reads and writes like one. It may also
/// carry the compact JSON text it was decoded from (`raw_json`): a stored document
/// that is returned unchanged is then written out by copying those bytes instead of
/// re-encoding it. Invariant: `raw`, when present, is exactly what `write_json` would
/// print for the map — the decoder attaches it only to text it verified to be in that
/// canonical form, and every mutable access (`DerefMut`, `get_mut`, …) builds the map
/// and then drops it.
///
/// The map itself may be lazy: `from_json_owned` keeps text that
/// `fast::validate_canonical` accepted undecoded, `from_stored` keeps stored documents
/// undecoded and unvalidated (see there), and the first access to the map decodes it
/// (scans and point reads that return documents unchanged never do). Unbuilt map ⇒
/// `raw` present; `raw_json` and the JSON writer do not build it. The text is shared
/// (`Bytes`), possibly with the storage engine's own buffers.
#[derive(Clone)]
pub struct Object {
    map: OnceLock<BTreeMap<Str, Datum>>,
    raw: Option<Bytes>,
    /// For text read by `JsonReader::plain_object` (no array or pseudo-type inside):
    /// how many levels of objects it nests, itself included; 0 when not known.
    levels: u32,
    /// For such text: where its member `id` is (noted by the same validating pass), so
    /// that an insert reads its primary key without scanning the text again.
    id: IdMember,
}

impl Default for Object {
    fn default() -> Object {
        Object::from(BTreeMap::new())
    }
}

impl Object {
    /// An empty object.
    pub fn new() -> Object {
        Object::default()
    }

    /// An object whose map is decoded from `raw` on first access. Only for text that
    /// `fast::validate_canonical` accepted, or that Ponder itself stored (`from_stored`).
    pub(crate) fn lazy(raw: Bytes) -> Object {
        Object {
            map: OnceLock::new(),
            raw: Some(raw),
            levels: 0,
            id: IdMember::Unknown,
        }
    }

    /// A lazy object from text that `fast::plain_object_end` accepted, nesting `levels`
    /// levels of objects.
    pub(crate) fn plain(raw: Bytes, levels: u32, id: IdMember) -> Object {
        Object {
            map: OnceLock::new(),
            raw: Some(raw),
            levels,
            id,
        }
    }

    /// The map, without the raw text.
    pub fn into_map(mut self) -> BTreeMap<Str, Datum> {
        match self.map.take() {
            Some(map) => map,
            None => build(self.raw.as_deref()),
        }
    }

    /// The values of a built map, moved out (for `array::drop_deep`); an unbuilt map
    /// holds no values.
    pub(crate) fn take_values(&mut self) -> impl Iterator<Item = Datum> {
        self.map.take().into_iter().flat_map(BTreeMap::into_values)
    }

    /// The text of an object whose map is not built yet (see `nesting`).
    pub(crate) fn unbuilt_text(&self) -> Option<&[u8]> {
        match self.map.get() {
            None => self.raw.as_deref(),
            Some(_) => None,
        }
    }

    /// The canonical compact JSON of this object, when it is known without encoding.
    pub fn raw_json(&self) -> Option<&[u8]> {
        self.raw.as_deref()
    }

    /// The same object without its built map: one that shares this object's text and
    /// decodes it again when first looked at (`None` without text). For a cache that
    /// keeps many documents: the text alone is about a third of text plus map.
    pub fn text_only(&self) -> Option<Object> {
        self.raw.clone().map(Object::lazy)
    }

    /// For an object still in the text `JsonReader::plain_object` read (map not built,
    /// so the text is the value): how many levels of objects it nests, itself included,
    /// knowing that no array and no pseudo-type is inside. `None` for any other object.
    /// Lets a writer check such a document (`check_storable`) without building its map.
    pub fn plain_text_levels(&self) -> Option<usize> {
        self.unbuilt_text()?;
        (self.levels > 0).then_some(self.levels as usize)
    }

    /// This object with the members of `patch` put in, when every one of them is a
    /// plain value (null, a boolean, a number or a string), so that merging them in is
    /// replacing or adding them: computed on this object's text, without decoding it
    /// (`fast::with_members`), and kept as text. `None` when that does not apply (no
    /// text, a value that merges deeper, a pseudo-type on either side): merge the maps.
    pub fn with_plain_members(&self, patch: &Object) -> Option<Datum> {
        let old = self.raw.as_deref()?;
        let mut members = Vec::with_capacity(patch.len());
        for (k, v) in patch.iter() {
            if &**k == REQL_TYPE
                || !matches!(
                    v,
                    Datum::Null | Datum::Bool(_) | Datum::Number(_) | Datum::String(_)
                )
            {
                return None;
            }
            let (mut key, mut value) = (Vec::with_capacity(k.len() + 2), Vec::new());
            crate::json::write_string(k, &mut key);
            crate::json::write_json(v, &mut value, false);
            members.push((&**k, key, value));
        }
        let text = crate::fast::with_members(old, &members)?;
        // Checked again, so that only text `parse` agrees with is kept undecoded.
        match crate::fast::plain_object_end(&text, 0, crate::MAX_NESTING as u32) {
            Some((end, levels, id)) if end == text.len() => Some(Datum::Object(Arc::new(
                Object::plain(Bytes::from(text), levels, id),
            ))),
            _ => crate::json::from_json_owned(text).ok(),
        }
    }

    /// Whether the map has been built (a lazy object's is not until first looked at).
    pub fn is_built(&self) -> bool {
        self.map.get().is_some()
    }

    /// Attaches the canonical JSON text (the caller guarantees the invariant).
    pub(crate) fn set_raw(&mut self, raw: Bytes) {
        // Built first, so that an unbuilt map only ever comes from validated text.
        self.map_ref();
        self.raw = Some(raw);
        self.id = IdMember::Unknown;
    }

    /// One member's value, read from the text without building the map when the map
    /// is not built yet (a query that reads a field or two of each document).
    pub fn field(&self, key: &str) -> Option<Datum> {
        match (self.map.get(), &self.raw) {
            (None, Some(raw)) if key == "id" => match self.id {
                IdMember::Unknown => crate::fast::member(raw, key),
                IdMember::Absent => None,
                IdMember::At(at) => crate::fast::value_at(raw, at as usize),
            },
            (None, Some(raw)) => crate::fast::member(raw, key),
            _ => self.map_ref().get(key).cloned(),
        }
    }

    /// How many times byte `b` occurs in the string member `key`, counted in the
    /// object's text without decoding the string (a scan's `count(split(...))`). `None`
    /// when it cannot be answered that way: no text, no such member, not a string, or a
    /// byte that could be part of an escape (see `fast::count_in_member_string`).
    pub fn count_byte_in_str_member(&self, key: &str, b: u8) -> Option<usize> {
        crate::fast::count_in_member_string(self.raw.as_deref()?, key, b)
    }

    /// Whether the object has member `key`, without building an unbuilt map.
    pub fn has(&self, key: &str) -> bool {
        match (self.map.get(), &self.raw) {
            (None, Some(raw)) => crate::fast::find_member(raw, key).is_some(),
            _ => self.map_ref().contains_key(key),
        }
    }

    fn map_ref(&self) -> &BTreeMap<Str, Datum> {
        self.map.get_or_init(|| build(self.raw.as_deref()))
    }

    /// The map for writing: built, and the raw text dropped (it may no longer match).
    fn map_mut(&mut self) -> &mut BTreeMap<Str, Datum> {
        self.map_ref();
        self.raw = None;
        self.map
            .get_mut()
            .expect("Object::map_mut: the map was built just above")
    }
}

/// Decodes a lazy object's map from its text: validated text (`from_json_owned`) always
/// decodes, and so does stored text, which Ponder printed itself and the storage engine
/// checksums. Text that fails anyway can only come from a bug or from corruption that
/// slipped past the checksums; the query reading it then fails (the evaluator contains
/// the panic as an internal error) rather than reading a wrong document.
fn build(raw: Option<&[u8]>) -> BTreeMap<Str, Datum> {
    let raw = raw.expect(
        "lazy Object without raw text: only Object::lazy leaves the map unbuilt, and it sets raw",
    );
    if let Some(map) = crate::fast::parse_canonical_object(raw) {
        return map;
    }
    match crate::json::from_json_slice(raw) {
        Ok(Datum::Object(o)) => Arc::unwrap_or_clone(o).into_map(),
        _ => panic!("a stored document is not a JSON object: the data is corrupt"),
    }
}

impl Drop for Object {
    fn drop(&mut self) {
        // Without recursion when the values own containers (see `array.rs`).
        let deep = self
            .map
            .get()
            .is_some_and(|m| m.values().any(crate::array::owns_container));
        if deep {
            crate::array::drop_deep(self.take_values().collect());
        }
    }
}

impl std::ops::Deref for Object {
    type Target = BTreeMap<Str, Datum>;
    fn deref(&self) -> &Self::Target {
        self.map_ref()
    }
}

impl std::ops::DerefMut for Object {
    fn deref_mut(&mut self) -> &mut Self::Target {
        // Any mutable access may change the map: the raw text no longer describes it.
        self.map_mut()
    }
}

impl From<BTreeMap<Str, Datum>> for Object {
    fn from(map: BTreeMap<Str, Datum>) -> Object {
        Object {
            map: OnceLock::from(map),
            raw: None,
            levels: 0,
            id: IdMember::Unknown,
        }
    }
}

impl FromIterator<(Str, Datum)> for Object {
    fn from_iter<I: IntoIterator<Item = (Str, Datum)>>(iter: I) -> Object {
        Object::from(iter.into_iter().collect::<BTreeMap<_, _>>())
    }
}

impl Extend<(Str, Datum)> for Object {
    fn extend<I: IntoIterator<Item = (Str, Datum)>>(&mut self, iter: I) {
        self.map_mut().extend(iter);
    }
}

impl IntoIterator for Object {
    type Item = (Str, Datum);
    type IntoIter = std::collections::btree_map::IntoIter<Str, Datum>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_map().into_iter()
    }
}

impl<'a> IntoIterator for &'a Object {
    type Item = (&'a Str, &'a Datum);
    type IntoIter = std::collections::btree_map::Iter<'a, Str, Datum>;
    fn into_iter(self) -> Self::IntoIter {
        self.map_ref().iter()
    }
}

impl<'a> IntoIterator for &'a mut Object {
    type Item = (&'a Str, &'a mut Datum);
    type IntoIter = std::collections::btree_map::IterMut<'a, Str, Datum>;
    fn into_iter(self) -> Self::IntoIter {
        self.map_mut().iter_mut()
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Object) -> bool {
        // The same canonical text means the same map; different text may still be an
        // equal map (`-0.0` and `0` compare equal), so the maps decide.
        if let (Some(a), Some(b)) = (&self.raw, &other.raw) {
            if a == b {
                return true;
            }
        }
        self.map_ref() == other.map_ref()
    }
}

impl Eq for Object {}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.map_ref().fmt(f)
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
    Array(Arc<Array>),
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
        Datum::Array(Arc::new(Array::from(v)))
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

    /// The `$reql_type$` of a pseudo-type object, if any. Plain stored documents answer
    /// without building their maps (the key would sort first in their text).
    pub fn reql_type(&self) -> Option<&str> {
        match self {
            Datum::Object(o) if o.has(REQL_TYPE) => o.get(REQL_TYPE).and_then(Datum::as_str),
            _ => None,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{from_json_owned, from_json_slice};

    fn lazy(text: &str) -> Datum {
        let d = from_json_owned(text.as_bytes().to_vec()).unwrap();
        assert!(built(&d).is_some_and(|b| !b), "{text} should be lazy");
        d
    }

    /// Whether an object's map is built (`None` for other values).
    fn built(d: &Datum) -> Option<bool> {
        d.as_object().map(|o| o.map.get().is_some())
    }

    fn object_mut(d: &mut Datum) -> &mut Object {
        match d {
            Datum::Object(o) => Arc::make_mut(o),
            _ => panic!("not an object"),
        }
    }

    const DOC: &str = r#"{"a":1,"b":[1.5,"x\n"],"c":{"d":null},"e":-0.0}"#;

    #[test]
    fn object_is_send_sync_clone() {
        fn check<T: Send + Sync + Clone + fmt::Debug + Eq>() {}
        check::<Object>();
        check::<Datum>();
        let _ = Object::default();
    }

    #[test]
    fn text_only_shares_the_text_and_reads_the_same() {
        let Datum::Object(o) = lazy(r#"{"a":1,"b":"x"}"#) else {
            panic!("not an object")
        };
        assert_eq!(o.field("a"), Some(Datum::Number(1.0)));
        assert_eq!(o.len(), 2);
        assert!(o.is_built());
        let t = o.text_only().expect("has text");
        assert!(!t.is_built());
        assert_eq!(t.raw_json(), o.raw_json());
        assert_eq!(
            t.raw_json().map(<[u8]>::as_ptr),
            o.raw_json().map(<[u8]>::as_ptr)
        );
        assert_eq!(Datum::Object(Arc::new(t)), Datum::Object(o.clone()));
        assert!(Object::from(BTreeMap::new()).text_only().is_none());
    }

    #[test]
    fn plain_text_levels_bound_nesting_without_building() {
        let plain = |t: &str| crate::JsonReader::new(t.as_bytes(), 8).plain_object();
        let levels = |d: &Datum| d.as_object().unwrap().plain_text_levels();
        for (t, n) in [
            (r#"{"a":1,"b":{"c":"x["}}"#, 2),
            (r#"{"a":"$reql_type$"}"#, 1),
            ("{}", 1),
        ] {
            let mut d = plain(t).unwrap();
            assert_eq!(levels(&d), Some(n), "{t}");
            assert!(!d.as_object().unwrap().is_built(), "{t}");
            // Once the map may change, the count no longer describes it.
            if let Datum::Object(o) = &mut d {
                Arc::make_mut(o).insert(Str::from("z"), Datum::Null);
            }
            assert_eq!(levels(&d), None, "{t}");
        }
        let stored = crate::from_json_owned(b"{\"a\":1}".to_vec()).unwrap();
        assert_eq!(levels(&stored), None);
        let built = Datum::from_pairs([("a", Datum::Number(1.0))]);
        assert_eq!(levels(&built), None);
    }

    /// Writing out, `raw_json`, cloning and comparing equal texts leave the map unbuilt.
    #[test]
    fn lazy_object_passes_through_unbuilt() {
        let d = lazy(DOC);
        let o = d.as_object().unwrap();
        assert_eq!(o.raw_json(), Some(DOC.as_bytes()));
        assert_eq!(d.to_json_bytes(), DOC.as_bytes());
        let mut out = b"[".to_vec();
        d.write_json(&mut out);
        assert_eq!(out, [b"[", DOC.as_bytes()].concat());
        let copy = o.clone();
        assert!(copy.map.get().is_none());
        assert!(*o == copy);
        assert!(*o == *lazy(DOC).as_object().unwrap());
        assert_eq!(built(&d), Some(false));
        // Nested objects are decoded along with their parent and carry no text.
        assert_eq!(d.get("c").and_then(built), Some(true));
        assert_eq!(d.get("c").unwrap().as_object().unwrap().raw_json(), None);
        assert_eq!(built(&d), Some(true));
        assert_eq!(d.as_object().unwrap().raw_json(), Some(DOC.as_bytes()));
    }

    /// `field`, `has` and `reql_type` read the text of an unbuilt map and leave it
    /// unbuilt; on a built map they read the map.
    #[test]
    fn field_reads_leave_the_map_unbuilt() {
        let eager = from_json_slice(DOC.as_bytes()).unwrap();
        let d = lazy(DOC);
        let o = d.as_object().unwrap();
        for k in eager.as_object().unwrap().keys() {
            assert_eq!(o.field(k).as_ref(), eager.get(k), "{k}");
            assert!(o.has(k));
        }
        assert_eq!(o.field("zz"), None);
        assert!(!o.has("zz"));
        assert_eq!(d.reql_type(), None);
        assert!(!d.is_ptype());
        assert_eq!(built(&d), Some(false));
        let time = lazy(r#"{"$reql_type$":"TIME","epoch_time":1,"timezone":"+00:00"}"#);
        assert_eq!(time.reql_type(), Some("TIME"));
        let _ = o.get("a");
        assert_eq!(built(&d), Some(true));
        assert_eq!(o.field("zz"), None);
        assert_eq!(o.field("a").as_ref(), eager.get("a"));
    }

    /// Every read gives what an eager decoding gives.
    #[test]
    fn lazy_object_reads_like_eager() {
        let eager = from_json_slice(DOC.as_bytes()).unwrap();
        let e = eager.as_object().unwrap();
        assert!(*lazy(DOC).as_object().unwrap() == *e);
        assert!(*e == *lazy(DOC).as_object().unwrap());
        assert_eq!(lazy(DOC), eager);
        assert_eq!(crate::cmp(&lazy(DOC), &eager), std::cmp::Ordering::Equal);
        assert_eq!(format!("{:?}", lazy(DOC)), format!("{eager:?}"));
        assert_eq!(
            format!("{:?}", lazy(DOC).as_object().unwrap()),
            format!("{e:?}")
        );
        assert_eq!(lazy(DOC).to_pretty_string(), eager.to_pretty_string());
        assert_eq!(lazy(DOC).get("b"), eager.get("b"));
        assert_eq!(lazy(DOC).as_object().unwrap().len(), 4);
        let keys: Vec<_> = lazy(DOC).as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, e.keys().cloned().collect::<Vec<_>>());
        assert_eq!(lazy(DOC).as_object().unwrap().into_iter().count(), 4);
        let owned = Arc::unwrap_or_clone(match lazy(DOC) {
            Datum::Object(o) => o,
            _ => unreachable!(),
        });
        assert_eq!(owned.clone().into_map(), e.clone().into_map());
        assert_eq!(
            owned.into_iter().collect::<Vec<_>>(),
            e.clone().into_iter().collect::<Vec<_>>()
        );
    }

    /// Different texts can be equal maps: the maps decide.
    #[test]
    fn lazy_equality_compares_maps() {
        let (a, b) = (lazy(r#"{"x":-0.0}"#), lazy(r#"{"x":0}"#));
        assert!(*a.as_object().unwrap() == *b.as_object().unwrap());
        assert_eq!(a, b);
        assert!(
            *lazy(r#"{"x":1}"#).as_object().unwrap() != *lazy(r#"{"x":2}"#).as_object().unwrap()
        );
        assert!(
            *lazy(r#"{"x":1}"#).as_object().unwrap() != *lazy(r#"{"y":1}"#).as_object().unwrap()
        );
        assert!(*lazy("{}").as_object().unwrap() == Object::new());
    }

    /// Every mutable access builds the map and drops the text, on this copy only.
    #[test]
    fn lazy_object_mutation_drops_text() {
        type Edit = fn(&mut Object);
        let edits: [(Edit, &str); 6] = [
            (
                |o| {
                    o.insert(Str::from("z"), Datum::Null);
                },
                r#"{"a":1,"b":[1.5,"x\n"],"c":{"d":null},"e":-0.0,"z":null}"#,
            ),
            (
                |o| {
                    o.remove("b");
                },
                r#"{"a":1,"c":{"d":null},"e":-0.0}"#,
            ),
            (
                |o| {
                    if let Some(v) = o.get_mut("a") {
                        *v = Datum::Number(2.0);
                    }
                },
                r#"{"a":2,"b":[1.5,"x\n"],"c":{"d":null},"e":-0.0}"#,
            ),
            (
                |o| {
                    for (_, v) in o {
                        *v = Datum::Null;
                    }
                },
                r#"{"a":null,"b":null,"c":null,"e":null}"#,
            ),
            (
                |o| o.extend([(Str::from("0"), Datum::Bool(true))]),
                r#"{"0":true,"a":1,"b":[1.5,"x\n"],"c":{"d":null},"e":-0.0}"#,
            ),
            // Even an access that changes nothing.
            (
                |o| {
                    let _ = o.get_mut("nothing");
                },
                DOC,
            ),
        ];
        for (edit, want) in edits {
            let original = lazy(DOC);
            let mut d = original.clone();
            edit(object_mut(&mut d));
            assert_eq!(d.as_object().unwrap().raw_json(), None, "{want}");
            assert_eq!(d.to_json_bytes(), want.as_bytes());
            // The shared original is untouched (and still lazy).
            assert_eq!(built(&original), Some(false));
            assert_eq!(original.to_json_bytes(), DOC.as_bytes());
        }
        // Keeping the text again after a change (what a write does).
        let mut d = lazy(DOC);
        object_mut(&mut d).remove("c");
        let kept = d.to_json_bytes_kept();
        assert_eq!(d.as_object().unwrap().raw_json(), Some(kept.as_slice()));
        assert_eq!(kept, br#"{"a":1,"b":[1.5,"x\n"],"e":-0.0}"#);
    }

    /// Threads that look at a shared lazy object at once all see the one map.
    #[test]
    fn lazy_object_builds_once_across_threads() {
        let d = lazy(DOC);
        let firsts: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| d.get("a").map_or(0, |v| v as *const Datum as usize)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(firsts.iter().all(|&p| p != 0 && p == firsts[0]));
        assert_eq!(d.to_json_bytes(), DOC.as_bytes());
    }

    #[test]
    fn default_object_is_built_and_empty() {
        let o = Object::default();
        assert!(o.map.get().is_some());
        assert_eq!(o.raw_json(), None);
        assert!(o.is_empty());
        assert_eq!(Datum::object(Object::new()).to_json_bytes(), b"{}");
    }
}
