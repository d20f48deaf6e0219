//! The search against brute force on small random histories — linearizable or not, with
//! indeterminate operations: every order of every admissible subset of operations is
//! tried, and the verdicts must agree. This is what checks that the search's pruning
//! (pure operations without branching, indeterminate operations only where needed, the
//! dominance index) never changes an answer.

use lincheck::{check_key, Budget, Call, Completion, Operation, Verdict};
use proptest::prelude::*;
use serde_json::{json, Value};

fn fits(state: &Value, op: &Operation) -> Option<Value> {
    match (&op.call, &op.completion) {
        (Call::Read, Completion::Read(v)) => (state == v).then(|| state.clone()),
        (Call::Write(v), _) => Some(v.clone()),
        (Call::Cas { expect, new }, Completion::Cas(false)) => {
            let _ = new;
            (state != expect).then(|| state.clone())
        }
        (Call::Cas { expect, new }, _) => (state == expect).then(|| new.clone()),
        _ => None,
    }
}

/// Whether some order of `chosen` (indices into `ops`) respects real time and the register.
fn some_order(ops: &[Operation], chosen: &[usize], placed: &mut Vec<usize>, state: &Value) -> bool {
    if placed.len() == chosen.len() {
        return true;
    }
    for &i in chosen {
        if placed.contains(&i) {
            continue;
        }
        // Every unplaced chosen op that completed before `i` was invoked must come first.
        let blocked = chosen.iter().any(|&j| {
            j != i
                && !placed.contains(&j)
                && ops[j].complete_ns.is_some_and(|c| c < ops[i].invoke_ns)
        });
        if blocked {
            continue;
        }
        if let Some(next) = fits(state, &ops[i]) {
            placed.push(i);
            if some_order(ops, chosen, placed, &next) {
                return true;
            }
            placed.pop();
        }
    }
    false
}

fn brute(ops: &[Operation]) -> bool {
    let (mut required, mut optional) = (Vec::new(), Vec::new());
    for (i, op) in ops.iter().enumerate() {
        match (&op.call, &op.completion) {
            (_, Completion::Failed) | (Call::Read, Completion::Indeterminate) => {}
            (_, Completion::Indeterminate) => optional.push(i),
            _ => required.push(i),
        }
    }
    (0..1u32 << optional.len()).any(|mask| {
        let mut chosen = required.clone();
        chosen.extend(
            optional
                .iter()
                .enumerate()
                .filter(|(b, _)| mask & (1 << b) != 0)
                .map(|(_, &i)| i),
        );
        some_order(ops, &chosen, &mut Vec::new(), &Value::Null)
    })
}

fn op() -> impl Strategy<Value = (u8, u8, u8, u8, u8, u64, u64)> {
    // (kind, a, b, outcome, final, start, length)
    (0u8..3, 0u8..3, 0u8..3, 0u8..7, 0u8..2, 0u64..20, 1u64..8)
}

fn build(raw: &[(u8, u8, u8, u8, u8, u64, u64)]) -> Vec<Operation> {
    let val = |x: u8| if x == 0 { Value::Null } else { json!(x) };
    raw.iter()
        .enumerate()
        .map(|(id, &(kind, a, b, outcome, _, start, len))| {
            let call = match kind {
                0 => Call::Read,
                1 => Call::Write(json!(a + 1)),
                _ => Call::Cas {
                    expect: val(a),
                    new: json!(b + 1),
                },
            };
            let completion = match (kind, outcome) {
                (_, 5 | 6) => Completion::Indeterminate,
                (_, 4) => Completion::Failed,
                (0, _) => Completion::Read(val(b)),
                (1, _) => Completion::Written,
                (_, o) => Completion::Cas(o % 2 == 0),
            };
            let complete_ns =
                (completion != Completion::Indeterminate).then_some(start * 2 + len * 2);
            Operation {
                id,
                process: id as u64,
                key: json!("k"),
                call,
                completion,
                invoke_ns: start * 2,
                complete_ns,
                final_read: false,
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn search_agrees_with_brute_force(raw in prop::collection::vec(op(), 1..10)) {
        let ops = build(&raw);
        let expected = brute(&ops);
        let got = check_key(&ops, &Budget::default());
        match got {
            Verdict::Linearizable => prop_assert!(expected, "search says linearizable: {ops:#?}"),
            Verdict::Violation(_) => prop_assert!(!expected, "search says violation: {ops:#?}"),
            Verdict::Unknown(w) => prop_assert!(false, "unknown on a tiny history: {w}"),
        }
    }
}
