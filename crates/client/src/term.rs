//! Helpers that build ReQL terms in the JSON wire form (`[type, [args], {optargs}]`),
//! with term numbers taken from [`proto::ql2::TermType`].
//!
//! Only what tests and the benchmark need; anything else can be written as
//! raw JSON. Literal arrays must be sent as `MAKE_ARRAY` terms (a bare JSON
//! array would be read as a term): [`datum`] does that wrapping.

use proto::ql2::TermType as T;
use serde_json::{json, Map, Value};

/// Wraps a plain JSON value as a term: every array, at any depth, becomes
/// `[MAKE_ARRAY, [...]]`; objects and scalars are kept as they are.
pub fn datum(v: &Value) -> Value {
    match v {
        Value::Array(a) => json!([
            T::MAKE_ARRAY.as_i64(),
            a.iter().map(datum).collect::<Vec<_>>()
        ]),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), datum(v))).collect()),
        other => other.clone(),
    }
}

/// A term `[type, args]`, or `[type, args, optargs]` when `optargs` is non-empty.
pub fn call(t: T, args: Vec<Value>, optargs: Map<String, Value>) -> Value {
    if optargs.is_empty() {
        json!([t.as_i64(), args])
    } else {
        json!([t.as_i64(), args, optargs])
    }
}

/// `r.db(name)`.
pub fn db(name: &str) -> Value {
    call(T::DB, vec![json!(name)], Map::new())
}

/// `r.db_create(name)`.
pub fn db_create(name: &str) -> Value {
    call(T::DB_CREATE, vec![json!(name)], Map::new())
}

/// `r.db_list()`.
pub fn db_list() -> Value {
    call(T::DB_LIST, vec![], Map::new())
}

/// `r.db(db).table(name)`.
pub fn table(db_name: &str, name: &str) -> Value {
    call(T::TABLE, vec![db(db_name), json!(name)], Map::new())
}

/// `r.db(db).table_create(name)`.
pub fn table_create(db_name: &str, name: &str) -> Value {
    call(T::TABLE_CREATE, vec![db(db_name), json!(name)], Map::new())
}

/// `r.db(db).table_create(name, shards=.., replicas=..)`.
pub fn table_create_with(db_name: &str, name: &str, shards: u32, replicas: u32) -> Value {
    let mut opts = Map::new();
    opts.insert("shards".into(), json!(shards));
    opts.insert("replicas".into(), json!(replicas));
    call(T::TABLE_CREATE, vec![db(db_name), json!(name)], opts)
}

/// `r.db(db).table_drop(name)`.
pub fn table_drop(db_name: &str, name: &str) -> Value {
    call(T::TABLE_DROP, vec![db(db_name), json!(name)], Map::new())
}

/// `r.db(db).table_list()`.
pub fn table_list(db_name: &str) -> Value {
    call(T::TABLE_LIST, vec![db(db_name)], Map::new())
}

/// `table.get(key)` on a table term.
pub fn get(table: Value, key: &Value) -> Value {
    call(T::GET, vec![table, datum(key)], Map::new())
}

/// `table.insert(docs, optargs)`: `docs` is one object or an array of them.
pub fn insert(table: Value, docs: &Value, optargs: Map<String, Value>) -> Value {
    call(T::INSERT, vec![table, datum(docs)], optargs)
}

/// `seq.count()`.
pub fn count(seq: Value) -> Value {
    call(T::COUNT, vec![seq], Map::new())
}

/// `r.db(db).table(name, optargs)` (e.g. `{"read_mode": "outdated"}`).
pub fn table_with(db_name: &str, name: &str, optargs: Map<String, Value>) -> Value {
    call(T::TABLE, vec![db(db_name), json!(name)], optargs)
}

/// `selection.update(patch, optargs)`.
pub fn update(selection: Value, patch: &Value, optargs: Map<String, Value>) -> Value {
    call(T::UPDATE, vec![selection, datum(patch)], optargs)
}

/// `selection.delete(optargs)`.
pub fn delete(selection: Value, optargs: Map<String, Value>) -> Value {
    call(T::DELETE, vec![selection], optargs)
}

/// `VAR(n)`: the function parameter numbered `n`.
pub fn var(n: i64) -> Value {
    call(T::VAR, vec![json!(n)], Map::new())
}

/// A one-parameter function `FUNC([1], body)`; refer to the parameter with `var(1)`.
pub fn func1(body: Value) -> Value {
    call(
        T::FUNC,
        vec![call(T::MAKE_ARRAY, vec![json!(1)], Map::new()), body],
        Map::new(),
    )
}

/// `value.get_field(name)` (`r.row('name')` when `value` is `var(1)`).
pub fn get_field(value: Value, name: &str) -> Value {
    call(T::GET_FIELD, vec![value, json!(name)], Map::new())
}

/// `string.split(separator)`.
pub fn split(string: Value, separator: &str) -> Value {
    call(T::SPLIT, vec![string, json!(separator)], Map::new())
}

/// `seq.map(func)`.
pub fn map(seq: Value, func: Value) -> Value {
    call(T::MAP, vec![seq, func], Map::new())
}

/// `seq.sum()`.
pub fn sum(seq: Value) -> Value {
    call(T::SUM, vec![seq], Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_create_matches_wire_form() {
        assert_eq!(
            table_create("bench", "usertable"),
            json!([60, [[14, ["bench"]], "usertable"]])
        );
    }

    #[test]
    fn arrays_are_wrapped() {
        assert_eq!(
            datum(&json!([1, {"a": [2]}])),
            json!([2, [1, {"a": [2, [2]]}]])
        );
    }

    #[test]
    fn insert_with_optargs() {
        let mut o = Map::new();
        o.insert("durability".into(), json!("soft"));
        assert_eq!(
            insert(table("d", "t"), &json!({"id": 1}), o),
            json!([56, [[15, [[14, ["d"]], "t"]], {"id": 1}], {"durability": "soft"}])
        );
        assert_eq!(
            get(table("d", "t"), &json!("k")),
            json!([16, [[15, [[14, ["d"]], "t"]], "k"]])
        );
    }

    #[test]
    fn map_split_count_sum() {
        let q = sum(map(
            table("b", "t"),
            func1(count(split(get_field(var(1), "field0"), "."))),
        ));
        assert_eq!(
            q,
            json!([
                145,
                [[
                    38,
                    [
                        [15, [[14, ["b"]], "t"]],
                        [
                            69,
                            [[2, [1]], [43, [[149, [[31, [[10, [1]], "field0"]], "."]]]]]
                        ]
                    ]
                ]]
            ])
        );
        let u = update(
            get(table("b", "t"), &json!("k")),
            &json!({"f": 1}),
            Map::new(),
        );
        assert_eq!(u[0], 53);
        assert_eq!(delete(get(table("b", "t"), &json!("k")), Map::new())[0], 54);
    }
}
