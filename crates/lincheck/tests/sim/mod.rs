//! A simulator of concurrent clients against one sequential register per key: every
//! operation takes effect at one instant between its invocation and completion (or, when
//! indeterminate, at some later instant or never), so every history it records is
//! linearizable by construction.

#![allow(dead_code)]

use std::collections::HashMap;

use lincheck::{Event, EventType, Func};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// Shape of a simulated run.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub seed: u64,
    pub clients: usize,
    pub ops_per_client: usize,
    pub keys: usize,
    /// Percent of operations whose completion is lost (`info`).
    pub indeterminate_pct: u32,
}

enum State {
    Idle,
    Invoked { key: String, f: Func, arg: Value },
    Applied { done: Event },
}

struct Zombie {
    key: String,
    f: Func,
    arg: Value,
}

fn ev(p: u64, kind: EventType, f: Func, key: &str, value: Value) -> Event {
    Event {
        process: p,
        kind,
        f,
        key: json!(key),
        value,
        applied: None,
        time_ns: 0,
        final_read: false,
        error: None,
    }
}

/// Applies `f(arg)` to `reg`; returns the completion's value and `applied` field.
fn apply(reg: &mut Value, f: Func, arg: &Value) -> (Value, Option<bool>) {
    match f {
        Func::Read => (reg.clone(), None),
        Func::Write => {
            *reg = arg.clone();
            (arg.clone(), None)
        }
        Func::Cas => {
            let ok = *reg == arg[0];
            if ok {
                *reg = arg[1].clone();
            }
            (arg.clone(), Some(ok))
        }
    }
}

/// Runs the simulation; the last events are one final read per key.
pub fn simulate(s: Shape) -> Vec<Event> {
    let mut rng = StdRng::seed_from_u64(s.seed);
    let mut regs: HashMap<String, Value> = HashMap::new();
    let mut written: Vec<Value> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut states: Vec<State> = (0..s.clients).map(|_| State::Idle).collect();
    let mut left: Vec<usize> = vec![s.ops_per_client; s.clients];
    let mut zombies: Vec<Zombie> = Vec::new();
    let mut next_value = 1u64;
    let mut t = 0u64;
    let mut emit = |events: &mut Vec<Event>, mut e: Event| {
        t += 1;
        e.time_ns = t;
        events.push(e);
    };
    loop {
        let busy: Vec<usize> = (0..s.clients)
            .filter(|&c| left[c] > 0 || !matches!(states[c], State::Idle))
            .collect();
        if busy.is_empty() {
            break;
        }
        // Now and then an indeterminate operation takes effect late.
        if !zombies.is_empty() && rng.gen_ratio(1, 8) {
            let z = zombies.swap_remove(rng.gen_range(0..zombies.len()));
            let reg = regs.entry(z.key).or_insert(Value::Null);
            apply(reg, z.f, &z.arg);
        }
        let c = busy[rng.gen_range(0..busy.len())];
        let p = c as u64;
        states[c] = match std::mem::replace(&mut states[c], State::Idle) {
            State::Idle => {
                left[c] -= 1;
                let key = format!("k{}", rng.gen_range(0..s.keys));
                let (f, arg) = match rng.gen_range(0..10) {
                    0..=3 => (Func::Read, Value::Null),
                    4..=6 => {
                        next_value += 1;
                        (Func::Write, json!(next_value))
                    }
                    _ => {
                        let current = regs.get(&key).cloned().unwrap_or(Value::Null);
                        let expect = match rng.gen_range(0..3) {
                            0 if !written.is_empty() => {
                                written[rng.gen_range(0..written.len())].clone()
                            }
                            1 => Value::Null,
                            _ => current,
                        };
                        next_value += 1;
                        (Func::Cas, json!([expect, next_value]))
                    }
                };
                if f != Func::Read {
                    written.push(if f == Func::Cas {
                        arg[1].clone()
                    } else {
                        arg.clone()
                    });
                }
                emit(&mut events, ev(p, EventType::Invoke, f, &key, arg.clone()));
                State::Invoked { key, f, arg }
            }
            State::Invoked { key, f, arg } => {
                if rng.gen_range(0..100) < s.indeterminate_pct {
                    // Took effect now, will take effect later, or never.
                    match rng.gen_range(0..3) {
                        0 => {
                            let reg = regs.entry(key.clone()).or_insert(Value::Null);
                            apply(reg, f, &arg);
                        }
                        1 => zombies.push(Zombie {
                            key: key.clone(),
                            f,
                            arg: arg.clone(),
                        }),
                        _ => {}
                    }
                    let mut info = ev(p, EventType::Info, f, &key, arg);
                    info.error = Some("simulated".into());
                    emit(&mut events, info);
                    State::Idle
                } else {
                    let reg = regs.entry(key.clone()).or_insert(Value::Null);
                    let (value, applied) = apply(reg, f, &arg);
                    let mut done = ev(p, EventType::Ok, f, &key, value);
                    done.applied = applied;
                    State::Applied { done }
                }
            }
            State::Applied { done } => {
                emit(&mut events, done);
                State::Idle
            }
        };
    }
    let p = s.clients as u64;
    for k in 0..s.keys {
        let key = format!("k{k}");
        let v = regs.get(&key).cloned().unwrap_or(Value::Null);
        let mut i = ev(p, EventType::Invoke, Func::Read, &key, Value::Null);
        i.final_read = true;
        emit(&mut events, i);
        let mut d = ev(p, EventType::Ok, Func::Read, &key, v);
        d.final_read = true;
        emit(&mut events, d);
    }
    events
}
