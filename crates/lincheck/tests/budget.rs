//! The budget: a history whose search is exponential (many overlapping writes, then a
//! read of a value none of them wrote) must come back "unknown", quickly, whichever
//! bound runs out — and a generous budget must still find the violation in a small one.

mod common;

use std::time::{Duration, Instant};

use common::H;
use lincheck::{check_history, Budget, Verdict};
use serde_json::json;

/// `n` writes all overlapping on `[0, 1000]`, then reads: the first sees write 0, the
/// second sees a value nobody wrote. Every order of the writes ending in write 0 must be
/// tried before the second read is found impossible.
fn pathological(n: u64) -> H {
    let mut h = H::default();
    for i in 0..n {
        h.write(i, "a", i, 1000 + i, json!(i));
    }
    h.read(n, "a", 2000, 2001, json!(0))
        .read(n, "a", 2002, 2003, json!("nobody wrote this"));
    h
}

fn verdict(h: &H, budget: Budget) -> (Verdict, Duration) {
    let started = Instant::now();
    let r = check_history(&h.events(), &budget).unwrap();
    (r.keys[0].verdict.clone(), started.elapsed())
}

#[test]
fn step_budget_gives_unknown() {
    let budget = Budget {
        max_steps: 200_000,
        ..Budget::default()
    };
    let (v, took) = verdict(&pathological(40), budget);
    assert!(
        matches!(&v, Verdict::Unknown(why) if why.contains("steps")),
        "{v:?}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn time_budget_gives_unknown() {
    let budget = Budget {
        max_steps: u64::MAX,
        max_time: Duration::from_millis(300),
        ..Budget::default()
    };
    let (v, took) = verdict(&pathological(40), budget);
    assert!(
        matches!(&v, Verdict::Unknown(why) if why.contains("gave up after")),
        "{v:?}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn cache_budget_gives_unknown() {
    let budget = Budget {
        max_steps: u64::MAX,
        max_time: Duration::from_secs(60),
        max_cache_bytes: 1 << 20,
    };
    let (v, took) = verdict(&pathological(40), budget);
    assert!(
        matches!(&v, Verdict::Unknown(why) if why.contains("cache")),
        "{v:?}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn small_instance_is_decided() {
    let (v, _) = verdict(&pathological(8), Budget::default());
    assert!(matches!(v, Verdict::Violation(_)), "{v:?}");
}
