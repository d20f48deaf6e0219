//! Hand-written histories: linearizable ones with concurrency and indeterminate
//! operations, and each kind of anomaly the checker must catch.

mod common;

use common::H;
use lincheck::{check_history, Budget, EventType, Report, Verdict};
use serde_json::{json, Value};

fn check(h: &H) -> Report {
    check_history(&h.events(), &Budget::default()).unwrap()
}

fn verdict(h: &H) -> Verdict {
    let r = check(h);
    assert_eq!(r.keys.len(), 1, "one key expected");
    r.keys[0].verdict.clone()
}

fn assert_linearizable(h: &H) {
    let r = check(h);
    assert!(
        r.keys.iter().all(|k| k.verdict == Verdict::Linearizable),
        "{}",
        r.render()
    );
}

fn assert_violation(h: &H) -> String {
    match verdict(h) {
        Verdict::Violation(e) => e.to_string(),
        other => panic!("expected a violation, got {other:?}"),
    }
}

#[test]
fn concurrent_writes_and_reads_are_linearizable() {
    let mut h = H::default();
    h.read(4, "a", 1, 3, Value::Null)
        .write(1, "a", 0, 10, json!(1))
        .write(2, "a", 5, 15, json!(2))
        // Sees 1 after both writes began: w2 then w1.
        .read(3, "a", 12, 20, json!(1))
        .read(1, "a", 21, 30, json!(1))
        .cas(2, "a", (22, 28), json!(1), json!(3), true)
        .read(3, "a", 29, 35, json!(3))
        .cas(4, "a", (31, 40), json!(1), json!(9), false);
    assert_linearizable(&h);
    assert!(!check(&h).has_violation());
    assert_eq!(check(&h).exit_code(), 0);
}

#[test]
fn keys_are_checked_separately() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .write(2, "b", 0, 1, json!(1))
        .read(1, "a", 2, 3, json!(1))
        .read(2, "b", 2, 3, Value::Null);
    let r = check(&h);
    assert_eq!(r.keys.len(), 2);
    assert_eq!(r.keys[0].verdict, Verdict::Linearizable);
    assert!(matches!(r.keys[1].verdict, Verdict::Violation(_)));
    assert_eq!(r.exit_code(), 1);
    assert!(r.render().contains("key \"b\": NOT LINEARIZABLE"));
}

#[test]
fn stale_read_is_caught_and_explained() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .write(1, "a", 2, 3, json!(2))
        .read(2, "a", 4, 5, json!(1));
    let e = assert_violation(&h);
    assert!(e.contains("read → 1"), "{e}");
    assert!(e.contains("value then: 2"), "{e}");
    assert!(e.contains("longest linearizable prefix: 2 of 3"), "{e}");
}

#[test]
fn read_after_overlapping_writes_settle_must_not_flip_back() {
    let mut h = H::default();
    h.write(1, "a", 0, 10, json!(1))
        .write(2, "a", 5, 15, json!(2))
        .read(3, "a", 16, 17, json!(1))
        .read(3, "a", 18, 19, json!(2));
    assert_violation(&h);
}

#[test]
fn lost_write_is_caught_by_both_checks() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .final_read(2, "a", 5, 6, Value::Null);
    assert_violation(&h);
    let r = check(&h);
    assert_eq!(r.lost.findings.len(), 1, "{}", r.render());
    assert!(r.lost.findings[0].message.contains("was lost"));
}

#[test]
fn cas_applied_on_the_wrong_value_is_caught() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .cas(1, "a", (2, 3), json!(1), json!(2), true)
        .cas(2, "a", (4, 5), json!(1), json!(3), true);
    let e = assert_violation(&h);
    assert!(e.contains("is not 1"), "{e}");
}

#[test]
fn cas_refused_on_the_expected_value_is_caught() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .cas(2, "a", (2, 3), json!(1), json!(2), false);
    let e = assert_violation(&h);
    assert!(e.contains("not applied"), "{e}");
}

#[test]
fn read_of_a_value_never_written_is_caught() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .read(2, "a", 0, 5, json!({"never": "written"}));
    assert_violation(&h);
}

#[test]
fn values_compare_canonically() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!({"x": 1, "y": [1.0, 2]})).read(
        2,
        "a",
        2,
        3,
        json!({"y": [1, 2.0], "x": 1.0}),
    );
    assert_linearizable(&h);
}

#[test]
fn indeterminate_write_that_happened() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .write_unknown(2, "a", 2, json!(2))
        .read(1, "a", 5, 6, json!(1))
        .read(1, "a", 10, 11, json!(2))
        .read(3, "a", 12, 13, json!(2));
    assert_linearizable(&h);
}

#[test]
fn indeterminate_write_that_did_not_happen() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .write_as(EventType::Info, 2, "a", 2, 3, json!(2))
        .read(1, "a", 10, 11, json!(1))
        .final_read(3, "a", 20, 21, json!(1));
    assert_linearizable(&h);
    assert!(check(&h).lost.findings.is_empty());
}

#[test]
fn indeterminate_write_takes_effect_at_most_once() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .write_unknown(2, "a", 2, json!(2))
        .read(1, "a", 5, 6, json!(2))
        .read(1, "a", 10, 11, json!(1));
    assert_violation(&h);
}

#[test]
fn indeterminate_cas_may_apply_only_on_its_expected_value() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .cas_info(2, "a", 2, 3, json!(1), json!(2))
        .read(1, "a", 5, 6, json!(2));
    assert_linearizable(&h);
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .cas_info(2, "a", 2, 3, json!(7), json!(2))
        .read(1, "a", 5, 6, json!(2));
    assert_violation(&h);
}

#[test]
fn failed_write_did_not_happen() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .write_as(EventType::Fail, 2, "a", 2, 3, json!(2))
        .read(1, "a", 5, 6, json!(2));
    assert_violation(&h);
}

#[test]
fn lost_write_check_accepts_overwrites_that_may_come_later() {
    // w1 and w2 overlap: either may be last.
    let mut h = H::default();
    h.write(1, "a", 0, 5, json!(1))
        .write(2, "a", 1, 4, json!(2))
        .final_read(3, "a", 10, 11, json!(1));
    let r = check(&h);
    assert!(r.lost.findings.is_empty(), "{}", r.render());
    assert_eq!(r.lost.writes_checked, 2);
    // An indeterminate write after w1 may be what the final read saw.
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .write_unknown(2, "a", 2, json!(2))
        .final_read(3, "a", 10, 11, json!(2));
    assert!(check(&h).lost.findings.is_empty());
}

#[test]
fn lost_write_check_flags_the_last_write_and_values_from_nowhere() {
    let mut h = H::default();
    h.write(1, "a", 0, 1, json!(1))
        .write(1, "a", 2, 3, json!(2))
        .final_read(3, "a", 10, 11, json!(1))
        .write(4, "b", 0, 1, json!(1))
        .final_read(5, "b", 12, 13, json!(5))
        .write(6, "c", 0, 1, json!(1));
    let r = check(&h);
    let msgs: Vec<&str> = r.lost.findings.iter().map(|f| f.message.as_str()).collect();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(msgs
        .iter()
        .any(|m| m.contains("write(2)") && m.contains("was lost")));
    assert!(msgs.iter().any(|m| m.contains("no operation wrote")));
    assert_eq!(r.lost.keys_without_final_read, vec![json!("c")]);
}

#[test]
fn lost_write_check_follows_cas_chains() {
    // Timestamps that contradict real time (the cas completed before w was invoked) but
    // the cas saw w's value, so w was overwritten.
    let mut h = H::default();
    h.cas(2, "a", (0, 1), json!(1), json!(2), true)
        .write(1, "a", 5, 6, json!(1))
        .final_read(3, "a", 10, 11, json!(2));
    let r = check(&h);
    assert!(r.lost.findings.is_empty(), "{}", r.render());
    assert!(r.has_violation(), "the linearizability check still objects");
}

#[test]
fn empty_and_failed_only_histories_are_linearizable() {
    assert!(check(&H::default()).keys.is_empty());
    let mut h = H::default();
    h.write_as(EventType::Fail, 1, "a", 0, 1, json!(1))
        .write_unknown(2, "a", 2, json!(2));
    assert_linearizable(&h);
}
