//! Query classification for scheduling: which queries are cheap enough to evaluate on
//! the connection's own task instead of handing them to an evaluation thread.
//!
//! A query qualifies when every term is a bounded, in-memory operation on datums and at
//! most point reads by primary key (`table.get(k)` and what is computed from its
//! result). Such a query costs a few microseconds, less than the two thread wake-ups a
//! hand-off costs. Anything that scans, calls functions or runs JavaScript does not
//! qualify: scans are unbounded.
//!
//! A single-document write qualifies too (`get(k).update(v)`, `get(k).replace(v)`,
//! `get(k).delete()`, `table.insert(object)`) when its value is computed from datums
//! and, for update/replace, a function of the document made of the same bounded terms:
//! no table read, no `r.js`, no `r.http`, no `r.args`. Its cost is one document's
//! read-modify-write (plus the table's write hook and changefeed filters, which are
//! deterministic and bounded per document); waiting for a hard write's fsync is async
//! (the server waits for the group commit's ticket without holding a worker). The
//! engine's write itself may stall (a fjall write stall, like the point read's seek):
//! that is the trade-off point reads already make.

use std::sync::Arc;

use proto::ql2::TermType as T;

use crate::term::Term;

/// True when `t` may be evaluated inline on an async worker.
pub fn runs_inline(t: &Term) -> bool {
    inline_write(t) || inline_term(t)
}

/// True when `t` is a single-document write `runs_inline` accepts (the server holds its
/// answer for the write's durability without blocking).
pub fn inline_write(t: &Term) -> bool {
    let datum_optargs = t.optargs.iter().all(|(_, a)| a.tt == T::DATUM);
    let point = |a: Option<&Arc<Term>>| a.is_some_and(|a| a.tt == T::GET && inline_term(a));
    match t.tt {
        T::UPDATE | T::REPLACE => {
            t.args.len() == 2 && point(t.args.first()) && datum_optargs && value_term(&t.args[1])
        }
        T::DELETE => t.args.len() == 1 && point(t.args.first()) && datum_optargs,
        // One object, not an array (a bulk insert has its own parallel path).
        T::INSERT => {
            t.args.len() == 2
                && is_table(&t.args[0])
                && datum_optargs
                && match t.args[1].tt {
                    T::MAKE_OBJ => value_term(&t.args[1]),
                    T::DATUM => matches!(t.args[1].datum, datum::Datum::Object(_)),
                    _ => false,
                }
        }
        _ => false,
    }
}

/// A write's new value: bounded terms on datums, the function's variables and functions
/// of them, never a table.
fn value_term(t: &Term) -> bool {
    let own = match t.tt {
        T::GET | T::GET_ALL => false,
        T::FUNC | T::VAR | T::IMPLICIT_VAR | T::LITERAL => true,
        _ => inline_term_own(t.tt),
    };
    own && t.args.iter().all(|a| value_term(a)) && t.optargs.iter().all(|(_, a)| value_term(a))
}

fn inline_term(t: &Term) -> bool {
    let own = match t.tt {
        // A table only as the direct subject of a point read.
        T::GET => {
            return t.args.first().is_some_and(|a| is_table(a))
                && t.args.iter().skip(1).all(|a| inline_term(a))
                && t.optargs.is_empty()
        }
        // An index lookup of a few keys: a handful of seeks, and the first batch is
        // bounded by the batch limits like any other.
        T::GET_ALL => {
            return t.args.first().is_some_and(|a| is_table(a))
                && (2..=1 + INLINE_GET_ALL_KEYS).contains(&t.args.len())
                && t.args.iter().skip(1).all(|a| inline_term(a))
                && t.optargs
                    .iter()
                    .all(|(k, a)| k == "index" && a.tt == T::DATUM)
        }
        tt => inline_term_own(tt),
    };
    own && t.args.iter().all(|a| inline_term(a)) && t.optargs.iter().all(|(_, a)| inline_term(a))
}

/// Whether a term of type `tt` is itself bounded work on datums (its arguments aside).
fn inline_term_own(tt: T) -> bool {
    match tt {
        T::DATUM
        | T::MAKE_ARRAY
        | T::MAKE_OBJ
        | T::GET_FIELD
        | T::BRACKET
        | T::PLUCK
        | T::WITHOUT
        | T::HAS_FIELDS
        | T::KEYS
        | T::VALUES
        | T::EQ
        | T::NE
        | T::LT
        | T::LE
        | T::GT
        | T::GE
        | T::ADD
        | T::SUB
        | T::MUL
        | T::DIV
        | T::MOD
        | T::AND
        | T::OR
        | T::NOT
        | T::DEFAULT
        | T::TYPE_OF
        | T::NOW
        | T::BRANCH
        | T::FLOOR
        | T::CEIL
        | T::ROUND
        | T::UPCASE
        | T::DOWNCASE => true,
        _ => false,
    }
}

/// The most keys a `get_all` run inline may look up.
const INLINE_GET_ALL_KEYS: usize = 16;

fn is_table(t: &Term) -> bool {
    t.tt == T::TABLE
        && t.optargs.iter().all(|(_, a)| a.tt == T::DATUM)
        && t.args
            .iter()
            .all(|a| a.tt == T::DATUM || (a.tt == T::DB && a.args.iter().all(|x| x.tt == T::DATUM)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::compile_term;

    fn c(s: &str) -> std::sync::Arc<Term> {
        compile_term(&serde_json::from_str(s).unwrap()).unwrap()
    }

    #[test]
    fn point_reads_run_inline() {
        // r.table("t").get(1)
        assert!(runs_inline(&c(r#"[16,[[15,["t"]],1]]"#)));
        // r.db("d").table("t").get("k")("f")
        assert!(runs_inline(&c(
            r#"[31,[[16,[[15,[[14,["d"]],"t"]],"k"]],"f"]]"#
        )));
        // r.expr(1) + 2
        assert!(runs_inline(&c(r#"[24,[1,2]]"#)));
        // r.table("t").get_all(1, 2, index="v") and get_all([1, "a"]) on a compound index
        assert!(runs_inline(&c(r#"[78,[[15,["t"]],1,2],{"index":"v"}]"#)));
        assert!(runs_inline(&c(
            r#"[78,[[15,["t"]],[2,[1,"a"]]],{"index":"c"}]"#
        )));
    }

    #[test]
    fn large_or_computed_get_alls_do_not() {
        let keys: Vec<String> = (0..17).map(|i| i.to_string()).collect();
        let many = format!(r#"[78,[[15,["t"]],{}],{{"index":"v"}}]"#, keys.join(","));
        assert!(!runs_inline(&c(&many)));
        // r.table("t").get_all(r.args(r.table("u")("k")))
        assert!(!runs_inline(&c(
            r#"[78,[[15,["t"]],[154,[[31,[[15,["u"]],"k"]]]]]]"#
        )));
        // an index name computed by a function call is not a datum
        assert!(!runs_inline(&c(
            r#"[78,[[15,["t"]],1],{"index":[31,[{"a":"v"},"a"]]}]"#
        )));
    }

    #[test]
    fn scans_writes_and_functions_do_not() {
        // r.table("t")
        assert!(!runs_inline(&c(r#"[15,["t"]]"#)));
        // r.table("t")("f") scans the table
        assert!(!runs_inline(&c(r#"[31,[[15,["t"]],"f"]]"#)));
        // r.table("t").update({...}) writes every document
        assert!(!runs_inline(&c(r#"[53,[[15,["t"]],{"a":1}]]"#)));
        // r.range(10).count()
        assert!(!runs_inline(&c(r#"[43,[[173,[10]]]]"#)));
    }

    #[test]
    fn single_document_writes_run_inline() {
        // r.table("t").get(1).update({"a": 1}, durability="hard")
        assert!(runs_inline(&c(
            r#"[53,[[16,[[15,["t"]],1]],{"a":1}],{"durability":"hard"}]"#
        )));
        // get(1).update(lambda x: {"n": x("n").add(1)}) and r.row("n") + 1
        assert!(runs_inline(&c(
            r#"[53,[[16,[[15,["t"]],1]],[69,[[2,[1]],{"n":[24,[[170,[[10,[1]],"n"]],1]]}]]]]"#
        )));
        assert!(runs_inline(&c(
            r#"[53,[[16,[[15,["t"]],1]],[69,[[2,[1]],{"n":[24,[[170,[[13,[]],"n"]],1]]}]]]]"#
        )));
        // get(1).replace({"id": 1}), get(1).delete(), insert({"id": 2, "v": [1, 2]})
        assert!(runs_inline(&c(r#"[55,[[16,[[15,["t"]],1]],{"id":1}]]"#)));
        assert!(runs_inline(&c(r#"[54,[[16,[[15,["t"]],1]]]]"#)));
        assert!(runs_inline(&c(
            r#"[56,[[15,["t"]],{"id":2,"v":[2,[1,2]]}]]"#
        )));
    }

    #[test]
    fn writes_that_may_run_long_do_not() {
        // an insert of an array of documents
        assert!(!runs_inline(&c(
            r#"[56,[[15,["t"]],[2,[{"id":1},{"id":2}]]]]"#
        )));
        // an update reading another table: get(1).update({"a": r.table("u").get(2)})
        assert!(!runs_inline(&c(
            r#"[53,[[16,[[15,["t"]],1]],{"a":[16,[[15,["u"]],2]]}]]"#
        )));
        // an update by r.js, a computed conflict function, a delete of a range
        assert!(!runs_inline(&c(
            r#"[53,[[16,[[15,["t"]],1]],[11,["(function(x){return x;})"]]]]"#
        )));
        assert!(!runs_inline(&c(
            r#"[56,[[15,["t"]],{"id":1}],{"conflict":[69,[[2,[1,2,3]],[10,[3]]]]}]"#
        )));
        assert!(!runs_inline(&c(r#"[54,[[182,[[15,["t"]],1,5]]]]"#)));
        // a write nested in another term
        assert!(!runs_inline(&c(
            r#"[170,[[53,[[16,[[15,["t"]],1]],{"a":1}]],"replaced"]]"#
        )));
    }
}
