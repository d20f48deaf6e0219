//! Query classification for scheduling: which queries are cheap enough to evaluate on
//! the connection's own task instead of handing them to an evaluation thread.
//!
//! A query qualifies when every term is a bounded, in-memory operation on datums and at
//! most point reads by primary key (`table.get(k)` and what is computed from its
//! result). Such a query costs a few microseconds, less than the two thread wake-ups a
//! hand-off costs. Anything that scans, writes, calls functions or runs JavaScript does
//! not qualify: writes may wait behind a journal fsync, and scans are unbounded.

use proto::ql2::TermType as T;

use crate::term::Term;

/// True when `t` may be evaluated inline on an async worker.
pub fn runs_inline(t: &Term) -> bool {
    inline_term(t)
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
    };
    own && t.args.iter().all(|a| inline_term(a)) && t.optargs.iter().all(|(_, a)| inline_term(a))
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
        // r.table("t").get(1).update({...})
        assert!(!runs_inline(&c(r#"[53,[[16,[[15,["t"]],1]],{"a":1}]]"#)));
        // r.range(10).count()
        assert!(!runs_inline(&c(r#"[43,[[173,[10]]]]"#)));
    }
}
