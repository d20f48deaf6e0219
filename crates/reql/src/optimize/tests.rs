//! Unit tests of the planning core: predicate forms, interval algebra, index shapes and
//! the indexability rule.

use super::*;
use crate::term::compile_term;

fn c(s: &str) -> std::sync::Arc<Term> {
    compile_term(&serde_json::from_str(s).unwrap()).unwrap()
}

fn n(x: f64) -> Datum {
    Datum::Number(x)
}

fn fact(name: &str, field: &str, multi: bool) -> IndexFact {
    IndexFact {
        name: name.into(),
        shape: Shape::Field(field.into()),
        multi,
        entries: None,
        unkeyed: None,
    }
}

/// An analysis that is not exact (as `implied` gives).
fn loose(implied: Implied) -> Analysis {
    Analysis {
        implied,
        exact: false,
    }
}

fn indexable(i: &Interval, multi: bool) -> bool {
    served(i, multi, None)
}

#[test]
fn object_row_and_lambda_forms_imply_the_same() {
    // filter({'age': 30}), filter(r.row('age') == 30), filter(lambda x: x['age'].eq(30))
    let forms = [
        r#"{"age":30}"#,
        r#"[69,[[2,[1]],[17,[[170,[[13,[]],"age"]],30]]]]"#,
        r#"[69,[[2,[7]],[17,[[31,[[10,[7]],"age"]],30]]]]"#,
        r#"[69,[[2,[7]],[17,[30,[31,[[10,[7]],"age"]]]]]]"#,
    ];
    for f in forms {
        let imp = implied(&c(f)).unwrap();
        assert_eq!(imp.get("age"), Some(&vec![Interval::point(n(30.0))]), "{f}");
    }
}

#[test]
fn ranges_and_or_and_default() {
    // 30 <= age < 40
    let imp = implied(&c(
        r#"[69,[[2,[1]],[67,[[22,[[170,[[13,[]],"age"]],30]],[19,[[170,[[13,[]],"age"]],40]]]]]]"#,
    ))
    .unwrap();
    let want = Interval {
        lo: Bound::Included(n(30.0)),
        hi: Bound::Excluded(n(40.0)),
    };
    assert_eq!(imp.get("age"), Some(&vec![want.clone()]));
    assert!(indexable(&want, false));
    // age == 1 or age == 2
    let imp = implied(&c(
        r#"[69,[[2,[1]],[66,[[17,[[170,[[13,[]],"age"]],1]],[17,[[170,[[13,[]],"age"]],2]]]]]]"#,
    ))
    .unwrap();
    assert_eq!(imp.get("age").map(Vec::len), Some(2));
    // age == 1 or name == "a": nothing about either
    let imp = implied(&c(
        r#"[69,[[2,[1]],[66,[[17,[[170,[[13,[]],"age"]],1]],[17,[[170,[[13,[]],"name"]],"a"]]]]]]"#,
    ))
    .unwrap();
    assert!(imp.is_empty());
    // age.default(30) == 30 keeps documents lacking age: nothing implied
    let imp = implied(&c(
        r#"[69,[[2,[1]],[17,[[92,[[170,[[13,[]],"age"]],30]],30]]]]"#,
    ))
    .unwrap();
    assert!(imp.is_empty());
    // age.default(0) == 30: a missing age never matches
    let imp = implied(&c(
        r#"[69,[[2,[1]],[17,[[92,[[170,[[13,[]],"age"]],0]],30]]]]"#,
    ))
    .unwrap();
    assert_eq!(imp.get("age"), Some(&vec![Interval::point(n(30.0))]));
    // not(age == 30): nothing
    let imp = implied(&c(
        r#"[69,[[2,[1]],[23,[[17,[[170,[[13,[]],"age"]],30]]]]]]"#,
    ))
    .unwrap();
    assert!(imp.is_empty());
}

#[test]
fn outside_the_language_is_left_alone() {
    // nested field, r.js-free but a function call, variadic eq, object body
    for f in [
        r#"[69,[[2,[1]],[17,[[170,[[170,[[13,[]],"a"]],"b"]],1]]]]"#,
        r#"[69,[[2,[1]],[17,[[170,[[13,[]],"a"]],1,1]]]]"#,
        r#"[69,[[2,[1]],[93,[[170,[[13,[]],"tags"]],1]]]]"#,
        r#"[69,[[2,[1]],{"a":1}]]"#,
    ] {
        assert!(implied(&c(f)).is_none(), "{f}");
    }
}

#[test]
fn one_sided_ranges_are_served_only_where_every_value_is_indexable() {
    let gt = |d: Datum| Interval {
        lo: Bound::Excluded(d),
        hi: Bound::Unbounded,
    };
    let lt = |d: Datum| Interval {
        lo: Bound::Unbounded,
        hi: Bound::Excluded(d),
    };
    // numbers > 30 include objects, which have no entry; strings > "m" are the tail
    assert!(!indexable(&gt(n(30.0)), false));
    assert!(indexable(&gt(Datum::str("m")), false));
    // anything below includes null
    assert!(!indexable(&lt(n(30.0)), false));
    // null and objects are never in an index; arrays are not in a multi index
    assert!(!indexable(&Interval::point(Datum::Null), false));
    let arr = Datum::array(vec![n(1.0)]);
    assert!(indexable(&Interval::point(arr.clone()), false));
    assert!(!indexable(&Interval::point(arr), true));
    // the primary key takes any interval
    let imp = Implied::from([("id".to_string(), vec![lt(n(30.0))])]);
    let cands = candidates(&loose(imp), "id", &[]);
    assert_eq!(cands.first().map(|c| &c.source), Some(&Source::Primary));
}

#[test]
fn index_shapes() {
    let simple = serde_json::json!([69, [[2, [1]], [31, [[10, [1]], "age"]]]]);
    assert_eq!(index_shape(&simple), Some(Shape::Field("age".into())));
    let compound = serde_json::json!([
        69,
        [
            [2, [1]],
            [2, [[31, [[10, [1]], "a"]], [31, [[10, [1]], "b"]]]]
        ]
    ]);
    assert_eq!(
        index_shape(&compound),
        Some(Shape::Compound(vec!["a".into(), "b".into()]))
    );
    let computed = serde_json::json!([69, [[2, [1]], [24, [[31, [[10, [1]], "a"]], 1]]]]);
    assert_eq!(index_shape(&computed), None);
    let other_var = serde_json::json!([69, [[2, [1]], [31, [[10, [2]], "a"]]]]);
    assert_eq!(index_shape(&other_var), None);
}

#[test]
fn compound_indexes_need_every_field() {
    let ix = IndexFact {
        name: "ab".into(),
        shape: Shape::Compound(vec!["a".into(), "b".into()]),
        multi: false,
        entries: None,
        unkeyed: None,
    };
    let only_a = Implied::from([("a".to_string(), vec![Interval::point(n(1.0))])]);
    assert!(candidates(&loose(only_a), "id", std::slice::from_ref(&ix)).is_empty());
    let both = Implied::from([
        ("a".to_string(), vec![Interval::point(n(1.0))]),
        ("b".to_string(), vec![Interval::point(Datum::str("x"))]),
    ]);
    let c = candidates(&loose(both.clone()), "id", std::slice::from_ref(&ix));
    let want = Interval::point(Datum::array(vec![n(1.0), Datum::str("x")]));
    assert_eq!(c.first().map(|c| c.ranges.clone()), Some(vec![want]));
    // A one-sided range of the last field spans objects: served only when the
    // statistics say no compound value holds one.
    let ranged = Implied::from([
        ("a".to_string(), vec![Interval::point(n(1.0))]),
        ("b".to_string(), vec![Interval::of(T::GT, n(5.0)).unwrap()]),
    ]);
    assert!(candidates(&loose(ranged.clone()), "id", std::slice::from_ref(&ix)).is_empty());
    let mut known = ix.clone();
    known.unkeyed = Some(Unkeyed::default());
    let c = candidates(&loose(ranged.clone()), "id", std::slice::from_ref(&known));
    let lo = Bound::Excluded(Datum::array(vec![n(1.0), n(5.0)]));
    let hi = Bound::Included(Datum::array(vec![n(1.0), Datum::MaxVal]));
    assert_eq!(
        c.first().map(|c| c.ranges.clone()),
        Some(vec![Interval { lo, hi }])
    );
    known.unkeyed = Some(Unkeyed {
        array: 1,
        ..Unkeyed::default()
    });
    assert!(candidates(&loose(ranged), "id", &[known]).is_empty());
}

#[test]
fn exact_predicates() {
    let exact = |s: &str| analyze(&c(s)).unwrap().exact;
    // 30 <= age < 40, age == 1 or age == 2, age > 30, {'age': 30}
    assert!(exact(
        r#"[69,[[2,[1]],[67,[[22,[[170,[[13,[]],"age"]],30]],[19,[[170,[[13,[]],"age"]],40]]]]]]"#
    ));
    assert!(exact(
        r#"[69,[[2,[1]],[66,[[17,[[170,[[13,[]],"age"]],1]],[17,[[170,[[13,[]],"age"]],2]]]]]]"#
    ));
    assert!(exact(r#"[69,[[2,[7]],[21,[[31,[[10,[7]],"age"]],30]]]]"#));
    assert!(exact(r#"{"age":30,"name":"a"}"#));
    // or over two fields, a default, ne, not, a bare field, an object pattern
    for s in [
        r#"[69,[[2,[1]],[66,[[17,[[170,[[13,[]],"age"]],1]],[17,[[170,[[13,[]],"name"]],"a"]]]]]]"#,
        r#"[69,[[2,[1]],[17,[[92,[[170,[[13,[]],"age"]],0]],30]]]]"#,
        r#"[69,[[2,[1]],[18,[[170,[[13,[]],"age"]],30]]]]"#,
        r#"[69,[[2,[1]],[23,[[17,[[170,[[13,[]],"age"]],30]]]]]]"#,
        r#"[69,[[2,[1]],[170,[[13,[]],"age"]]]]"#,
        r#"{"age":{"x":1}}"#,
    ] {
        assert!(!exact(s), "{s}");
    }
}

#[test]
fn exact_only_on_an_index_of_exactly_the_fields() {
    let a = analyze(&c(r#"{"age":30}"#)).unwrap();
    let ixs = [fact("age", "age", false), fact("tags", "age", true)];
    let cands = candidates(&a, "id", &ixs);
    let exact: Vec<bool> = cands.iter().map(|c| c.exact).collect();
    // A multi index may hold a document twice: never counted from keys.
    assert_eq!(exact, vec![true, false]);
    let two = analyze(&c(r#"{"age":30,"name":"a"}"#)).unwrap();
    assert!(candidates(&two, "id", &ixs).iter().all(|c| !c.exact));
}

#[test]
fn normalize_merges_and_drops() {
    let i = |a: f64, b: f64| Interval {
        lo: Bound::Included(n(a)),
        hi: Bound::Excluded(n(b)),
    };
    let s = normalize(vec![i(5.0, 7.0), i(1.0, 3.0), i(2.0, 4.0), i(9.0, 9.0)]);
    assert_eq!(s, vec![i(1.0, 4.0), i(5.0, 7.0)]);
    let pick = candidates(
        &loose(Implied::from([("v".to_string(), s)])),
        "id",
        &[fact("v", "v", false), fact("w", "w", false)],
    );
    assert_eq!(pick.len(), 1);
}

#[test]
fn order_needs_an_entry_for_every_document() {
    let mut ix = fact("age", "age", false);
    ix.entries = Some(10);
    assert!(order_index("age", 10, std::slice::from_ref(&ix)).is_some());
    assert!(order_index("age", 11, std::slice::from_ref(&ix)).is_none());
    ix.multi = true;
    assert!(order_index("age", 10, &[ix]).is_none());
}
