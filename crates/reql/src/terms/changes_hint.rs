//! Equality hints for filtered changefeeds: the `(field, value)` that a feed's leading
//! filters demand of every document, so that the shard's hub finds the feed through an
//! index instead of evaluating every filter on every write (`changefeed::EqHint`).

use std::sync::Arc;

use changefeed::EqHint;
use datum::Datum;
use proto::ql2::TermType as T;

use crate::term::Term;

fn scalar(d: &Datum) -> bool {
    matches!(d, Datum::Bool(_) | Datum::Number(_) | Datum::String(_))
}

/// The equality that a feed's leading filters demand of every document, when one of
/// them is `filter(row(f) == v)`, `filter(lambda x: x[f] == v)` or `filter({f: v, ...})`
/// with a bool, number or string `v` (the hub then finds the feed by `(f, v)`). A
/// filter with `default` may keep documents without the field, so it gives none.
pub fn eq_hint(terms: &[Arc<Term>]) -> Option<EqHint> {
    for t in terms {
        if t.tt != T::FILTER {
            return None;
        }
        if !t.optargs.is_empty() {
            continue;
        }
        if let Some(h) = t.args.get(1).and_then(|p| pred_hint(p)) {
            return Some(h);
        }
    }
    None
}

fn pred_hint(p: &Term) -> Option<EqHint> {
    match p.tt {
        T::DATUM => {
            if p.datum.is_ptype() {
                return None;
            }
            let (k, v) = p.datum.as_object()?.iter().find(|(_, v)| scalar(v))?;
            Some(EqHint {
                field: k.to_string(),
                value: v.clone(),
            })
        }
        T::FUNC => {
            let params = p.args.first()?;
            let var = match params.tt {
                T::DATUM => params.datum.as_array()?.first()?.as_f64()?,
                T::MAKE_ARRAY => params.args.first()?.datum.as_f64()?,
                _ => return None,
            };
            let body = p.args.get(1)?;
            if body.tt != T::EQ || body.args.len() != 2 {
                return None;
            }
            let (a, b) = (body.args.first()?, body.args.get(1)?);
            let (field, value) = match (field_of(a, var), field_of(b, var)) {
                (Some(f), None) => (f, b),
                (None, Some(f)) => (f, a),
                _ => return None,
            };
            (value.tt == T::DATUM && scalar(&value.datum)).then(|| EqHint {
                field,
                value: value.datum.clone(),
            })
        }
        _ => None,
    }
}

/// `f` when `t` is `x(f)` / `x[f]` of the function's parameter `var`.
fn field_of(t: &Term, var: f64) -> Option<String> {
    if !matches!(t.tt, T::BRACKET | T::GET_FIELD) || t.args.len() != 2 {
        return None;
    }
    let (obj, name) = (t.args.first()?, t.args.get(1)?);
    let is_param = match obj.tt {
        T::IMPLICIT_VAR => true,
        T::VAR => obj.args.first().and_then(|a| a.datum.as_f64()) == Some(var),
        _ => false,
    };
    if !is_param || name.tt != T::DATUM {
        return None;
    }
    name.datum.as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(j: &str) -> Arc<Term> {
        let v: serde_json::Value = serde_json::from_str(j).unwrap();
        crate::term::compile_term(&v).unwrap()
    }

    #[test]
    fn hints_from_filters() {
        // table.filter(r.row('id') == 7)
        let f = compile(r#"[39,[[15,["t"]],[69,[[2,[1]],[17,[[170,[[13,[]],"id"]],7]]]]]]"#);
        let h = eq_hint(&[f]).unwrap();
        assert_eq!((h.field.as_str(), h.value), ("id", Datum::Number(7.0)));
        // table.filter(lambda x: "a" == x['k'])
        let f = compile(r#"[39,[[15,["t"]],[69,[[2,[3]],[17,["a",[170,[[10,[3]],"k"]]]]]]]]"#);
        assert_eq!(eq_hint(&[f]).unwrap().field, "k");
        // table.filter({'n': {'x': 1}, 'b': true})
        let f = compile(r#"[39,[[15,["t"]],{"n":{"x":1},"b":true}]]"#);
        assert_eq!(eq_hint(&[f]).unwrap().field, "b");
        // A comparison other than eq, or a default, gives no hint.
        let f = compile(r#"[39,[[15,["t"]],[69,[[2,[1]],[19,[[170,[[13,[]],"id"]],7]]]]]]"#);
        assert!(eq_hint(&[f]).is_none());
        let f = compile(r#"[39,[[15,["t"]],{"a":1}],{"default":true}]"#);
        assert!(eq_hint(&[f]).is_none());
    }
}
