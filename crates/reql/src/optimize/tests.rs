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
    }
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
    let cands = candidates(&imp, "id", &[]);
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
    };
    let only_a = Implied::from([("a".to_string(), vec![Interval::point(n(1.0))])]);
    assert!(candidates(&only_a, "id", std::slice::from_ref(&ix)).is_empty());
    let both = Implied::from([
        ("a".to_string(), vec![Interval::point(n(1.0))]),
        ("b".to_string(), vec![Interval::point(Datum::str("x"))]),
    ]);
    let c = candidates(&both, "id", &[ix]);
    let want = Interval::point(Datum::array(vec![n(1.0), Datum::str("x")]));
    assert_eq!(c.first().map(|c| c.ranges.clone()), Some(vec![want]));
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
        &Implied::from([("v".to_string(), s)]),
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
