//! Property tests: simulated concurrent clients on a sequential register always give
//! linearizable histories with no lost write; changing one read to a value nobody wrote
//! must be caught on that key. Plus a large single-key history, checked quickly.

mod sim;

use std::time::{Duration, Instant};

use lincheck::{check_history, Budget, EventType, Func, Verdict};
use proptest::prelude::*;
use serde_json::json;
use sim::{simulate, Shape};

fn shape() -> impl Strategy<Value = Shape> {
    (any::<u64>(), 1usize..9, 1usize..40, 1usize..4, 0u32..25).prop_map(
        |(seed, clients, ops_per_client, keys, indeterminate_pct)| Shape {
            seed,
            clients,
            ops_per_client,
            keys,
            indeterminate_pct,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn simulated_histories_are_linearizable(s in shape()) {
        let events = simulate(s);
        let r = check_history(&events, &Budget::default()).unwrap();
        prop_assert!(
            r.keys.iter().all(|k| k.verdict == Verdict::Linearizable),
            "{}", r.render()
        );
        prop_assert!(r.lost.findings.is_empty(), "{}", r.render());
        prop_assert_eq!(r.exit_code(), 0);
    }

    #[test]
    fn an_impossible_read_is_caught(s in shape(), pick in any::<prop::sample::Index>()) {
        let mut events = simulate(s);
        let reads: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == EventType::Ok && e.f == Func::Read)
            .map(|(i, _)| i)
            .collect();
        // Every run ends with a final read per key, so there is always one.
        let i = reads[pick.index(reads.len())];
        events[i].value = json!("never written");
        let key = events[i].key.clone();
        let r = check_history(&events, &Budget::default()).unwrap();
        let k = r.keys.iter().find(|k| k.key == key).unwrap();
        prop_assert!(matches!(k.verdict, Verdict::Violation(_)), "{}", r.render());
        prop_assert!(r.has_violation());
    }
}

#[test]
fn thousands_of_operations_on_one_key_check_quickly() {
    let events = simulate(Shape {
        seed: 7,
        clients: 8,
        ops_per_client: 600,
        keys: 1,
        indeterminate_pct: 1,
    });
    let started = Instant::now();
    let r = check_history(&events, &Budget::default()).unwrap();
    let took = started.elapsed();
    assert_eq!(r.keys.len(), 1);
    assert!(r.keys[0].operations >= 4800);
    assert_eq!(r.keys[0].verdict, Verdict::Linearizable, "{}", r.render());
    assert!(took < Duration::from_secs(20), "took {took:?}");
}
