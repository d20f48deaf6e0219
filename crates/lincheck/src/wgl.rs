//! The Wing–Gong linearizability search with Lowe's memoization, as Porcupine runs it,
//! for the operations of one key against a register with compare-and-set.
//!
//! Invocations and completions are entries of a doubly linked list in time order (at equal
//! times invocations first, so touching operations count as concurrent — the cautious
//! reading). The search walks the list: an invocation whose operation the register
//! accepts in the current state is *linearized* (it and its completion are unlinked, the
//! state advances) unless the pair (set of linearized operations, state) was already
//! explored — that cache is what keeps the search polynomial in the common case; reaching
//! a completion means the operation it completes should have been linearized already, so
//! the last choice is undone. Indeterminate operations complete at "infinity" and need not
//! be linearized: reaching the first of their completions means every determinate
//! operation is placed, so the history is linearizable.
//!
//! Beyond Porcupine, three prunings, each exact (a brute-force comparison on small random
//! histories, `tests/brute.rs`, checks they never change a verdict): a read or a cas that
//! was not applied is taken at once when it fits, without branching (`model::pure`); an
//! indeterminate operation is placed only directly before an operation that needs it
//! (`model::next_state`); and, as each configuration tries determinate operations before
//! indeterminate ones, a configuration is skipped when one with the same determinate
//! operations and state but fewer indeterminate ones placed already failed
//! (`dead::DeadIndex`). Without them a few dozen concurrent clients, or a few dozen
//! indeterminate operations, on one key made the search exponential in practice.
//!
//! Invariants: unlinking and relinking follow a stack discipline (dancing links), so the
//! list is restored exactly on backtrack; the search stops within its [`Budget`] and then
//! answers [`Verdict::Unknown`], never a guess.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::bitset::Bitset;
use crate::dead::DeadIndex;
use crate::explain::{explain, Deepest, Explanation};
use crate::history::{Call, Completion, Operation};
use crate::model::{next_state, pure, Kind};
use crate::value::Interner;

/// Bounds on one key's search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Search steps (list entries visited).
    pub max_steps: u64,
    /// Wall time.
    pub max_time: Duration,
    /// Approximate memory of the memoization cache and the dominance index (per key;
    /// keys are checked on up to one thread per core at once).
    pub max_cache_bytes: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_steps: 50_000_000,
            max_time: Duration::from_secs(60),
            max_cache_bytes: 512 << 20,
        }
    }
}

/// The answer for one key.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Some order of the operations explains every result.
    Linearizable,
    /// No order does.
    Violation(Box<Explanation>),
    /// The budget ran out first.
    Unknown(String),
}

/// One operation in the search.
pub(crate) struct Sop {
    pub(crate) kind: Kind,
    /// Index into the caller's slice.
    pub(crate) src: usize,
    call: usize,
    ret: usize,
    optional: bool,
}

const NIL: usize = usize::MAX;

/// The list of entries; entry `n` (one past the last) is the head sentinel.
struct List {
    /// For each entry: the operation and whether it is the invocation.
    entries: Vec<(usize, bool)>,
    next: Vec<usize>,
    prev: Vec<usize>,
}

impl List {
    fn head(&self) -> usize {
        self.entries.len()
    }
    fn unlink(&mut self, e: usize) {
        let (p, n) = (self.prev[e], self.next[e]);
        self.next[p] = n;
        if n != NIL {
            self.prev[n] = p;
        }
    }
    fn relink(&mut self, e: usize) {
        let (p, n) = (self.prev[e], self.next[e]);
        self.next[p] = e;
        if n != NIL {
            self.prev[n] = e;
        }
    }
}

/// Deterministic per-operation hash words (splitmix64).
fn zobrist(i: usize) -> u64 {
    let mut z = (i as u64)
        .wrapping_add(1)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Checks the operations of one key. Failed operations and reads without a result are
/// ignored (they did not happen, or tell nothing); indeterminate writes and cas may be
/// placed anywhere after their invocation, or nowhere.
pub fn check_key(ops: &[Operation], budget: &Budget) -> Verdict {
    let mut values = Interner::default();
    let mut sops: Vec<Sop> = Vec::new();
    for (src, op) in ops.iter().enumerate() {
        let indeterminate = op.completion == Completion::Indeterminate;
        let kind = match (&op.call, &op.completion) {
            (_, Completion::Failed) | (Call::Read, Completion::Indeterminate) => continue,
            (Call::Read, Completion::Read(v)) => Kind::Read(values.intern(v)),
            (Call::Write(v), Completion::Written | Completion::Indeterminate) => {
                Kind::Write(values.intern(v))
            }
            (Call::Cas { expect, new }, c) => Kind::Cas {
                expect: values.intern(expect),
                new: values.intern(new),
                applied: match c {
                    Completion::Cas(a) => Some(*a),
                    _ => None,
                },
            },
            // A completion of the wrong shape cannot come out of `history::pair`.
            _ => continue,
        };
        sops.push(Sop {
            kind,
            src,
            call: 0,
            ret: 0,
            optional: indeterminate,
        });
    }
    let (sops, list) = sops_with_entries(sops, ops);
    search(&sops, list, ops, &values, budget)
}

/// Builds the time-ordered list, filling in each operation's entries.
fn sops_with_entries(mut sops: Vec<Sop>, ops: &[Operation]) -> (Vec<Sop>, List) {
    // (time, 0 for invocation / 1 for completion, op): invocations first at equal times.
    let mut order: Vec<(u64, u8, usize)> = Vec::with_capacity(sops.len() * 2);
    for (i, s) in sops.iter().enumerate() {
        let op = &ops[s.src];
        order.push((op.invoke_ns, 0, i));
        order.push((op.complete_ns.unwrap_or(u64::MAX), 1, i));
    }
    order.sort_unstable();
    let n = order.len();
    let mut entries = Vec::with_capacity(n);
    for (e, &(_, is_ret, i)) in order.iter().enumerate() {
        if is_ret == 0 {
            sops[i].call = e;
        } else {
            sops[i].ret = e;
        }
        entries.push((i, is_ret == 0));
    }
    let next = (0..=n)
        .map(|e| {
            if e == n {
                if n == 0 {
                    NIL
                } else {
                    0
                }
            } else if e + 1 < n {
                e + 1
            } else {
                NIL
            }
        })
        .collect();
    let prev = (0..=n)
        .map(|e| {
            if e == 0 {
                n
            } else if e == n {
                NIL
            } else {
                e - 1
            }
        })
        .collect();
    (
        sops,
        List {
            entries,
            next,
            prev,
        },
    )
}

fn search(
    sops: &[Sop],
    mut list: List,
    ops: &[Operation],
    values: &Interner,
    budget: &Budget,
) -> Verdict {
    let required = sops.iter().filter(|s| !s.optional).count();
    let words = sops.len().div_ceil(64).max(1);
    let mut linearized = Bitset::new(sops.len());
    let mut hash = 0u64;
    // The hash of the determinate operations placed, for the dominance index.
    let mut det_hash = 0u64;
    let mut optional = Bitset::new(sops.len());
    for (i, s) in sops.iter().enumerate() {
        if s.optional {
            optional.set(i);
        }
    }
    let mut dead = DeadIndex::new(optional);
    // Keyed by (hash of the set, state, 1 + state before the last operation if that one is
    // indeterminate, else 0): what the search may do next depends on all three.
    let mut cache: HashMap<(u64, u32, u64), Vec<Bitset>> = HashMap::new();
    let mut cache_bytes = 0usize;
    // (invocation entry, state before, taken without branching, `after_optional` before)
    let mut calls: Vec<(usize, u32, bool, bool)> = Vec::new();
    let mut after_optional = false;
    let mut state = 0u32;
    let mut deepest: Option<Deepest> = None;
    let started = Instant::now();
    let mut steps = 0u64;
    let mut next_clock = 0u64;
    let head = list.head();
    let mut entry = list.next[head];
    let mut prescan = true;
    // Each configuration is scanned twice up to its first pending completion: determinate
    // operations first, then indeterminate ones, so the configurations with fewer of
    // those placed are explored — and found dead — first, and the dominance index prunes
    // the others.
    let mut opt_pass = false;
    loop {
        if entry == NIL {
            return Verdict::Linearizable;
        }
        steps += 1;
        if steps > budget.max_steps {
            return Verdict::Unknown(format!("gave up after {} search steps", budget.max_steps));
        }
        if steps >= next_clock {
            // The clock is read every few thousand steps (the pre-scan counts several).
            next_clock = steps + 4096;
            if started.elapsed() > budget.max_time {
                return Verdict::Unknown(format!("gave up after {:?}", budget.max_time));
            }
        }
        // The state before the last operation, when that one is indeterminate.
        let guard = if after_optional {
            calls.last().map(|c| c.1)
        } else {
            None
        };
        if prescan {
            // Take a pure operation that fits before any real choice (see `pure`).
            prescan = false;
            let mut e = list.next[head];
            while e != NIL && list.entries[e].1 {
                steps += 1;
                let kind = sops[list.entries[e].0].kind;
                if pure(kind) && next_state(state, guard, kind).is_some() {
                    entry = e;
                    break;
                }
                e = list.next[e];
            }
        }
        let (op, is_call) = list.entries[entry];
        if is_call && sops[op].optional != opt_pass {
            entry = list.next[entry];
            continue;
        }
        if is_call {
            let Some(next) = next_state(state, guard, sops[op].kind) else {
                entry = list.next[entry];
                continue;
            };
            let forced = pure(sops[op].kind);
            linearized.set(op);
            let h = hash ^ zobrist(op);
            let next_optional = sops[op].optional;
            let guard_key = if next_optional {
                u64::from(state) + 1
            } else {
                0
            };
            let dh = if next_optional {
                det_hash
            } else {
                det_hash ^ zobrist(op)
            };
            let bucket = cache.entry((h, next, guard_key)).or_default();
            if !bucket.contains(&linearized) && !dead.dominates(dh, next, &linearized) {
                bucket.push(linearized.clone());
                cache_bytes += words * 8 + 48;
                if cache_bytes > budget.max_cache_bytes {
                    return Verdict::Unknown(format!(
                        "gave up when the search cache passed {} bytes",
                        budget.max_cache_bytes
                    ));
                }
                hash = h;
                det_hash = dh;
                calls.push((entry, state, forced, after_optional));
                after_optional = next_optional;
                state = next;
                list.unlink(entry);
                list.unlink(sops[op].ret);
                entry = list.next[head];
                prescan = true;
                opt_pass = false;
                continue;
            }
            linearized.clear(op);
            if !forced {
                entry = list.next[entry];
                continue;
            }
            // A pure operation that fits could have come first from here, and that was
            // explored without success: this configuration is a dead end too.
        } else {
            if sops[op].optional {
                // Every determinate completion precedes this one, so all are placed.
                return Verdict::Linearizable;
            }
            if !opt_pass {
                opt_pass = true;
                entry = list.next[head];
                continue;
            }
            if deepest.as_ref().is_none_or(|d| calls.len() > d.order.len()) {
                let mut candidates = Vec::new();
                let mut e = list.next[head];
                while e != NIL && e != entry {
                    if list.entries[e].1 && !sops[list.entries[e].0].optional {
                        candidates.push(list.entries[e].0);
                    }
                    e = list.next[e];
                }
                deepest = Some(Deepest {
                    order: calls.iter().map(|&(c, ..)| list.entries[c].0).collect(),
                    state,
                    stuck: op,
                    candidates,
                });
            }
        }
        // Backtrack: undo pure steps (taking one was no choice, so their configuration
        // is dead as well), then the last real choice, and try what comes after it.
        loop {
            let Some((call, prev_state, forced, prev_after)) = calls.pop() else {
                let d = deepest.unwrap_or(Deepest {
                    order: Vec::new(),
                    state: 0,
                    stuck: op,
                    candidates: Vec::new(),
                });
                return Verdict::Violation(Box::new(explain(&d, sops, ops, values, required)));
            };
            let back = list.entries[call].0;
            if !sops[back].optional {
                // The configuration being left failed, and no restriction applied to it.
                cache_bytes += dead.insert(det_hash, state, &linearized);
                det_hash ^= zobrist(back);
            }
            list.relink(sops[back].ret);
            list.relink(call);
            linearized.clear(back);
            hash ^= zobrist(back);
            state = prev_state;
            after_optional = prev_after;
            if !forced {
                entry = list.next[call];
                opt_pass = sops[back].optional;
                break;
            }
        }
    }
}
