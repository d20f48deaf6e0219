//! The greedy choice of `placement` (RethinkDB's `pick_best_pairings` and the costs it
//! ranks by): candidates, their pairings with shards, and the order among them.

use super::{Load, Server, ShardPlacement, PRIMARY_COST};

/// One shard this server could hold and what copying it there costs.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pairing {
    backfill: f64,
    pub(super) shard: usize,
}

/// A server of the tag being placed (RethinkDB's `server_pairings_t`): its cost for
/// this table so far, the shards it could still take, cheapest first, and its load
/// from other tables.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    pub(super) server: usize,
    pub(super) self_cost: u64,
    pub(super) pairings: Vec<Pairing>,
    other_cost: u64,
    /// This table's replicas and primaries on it so far, and the other tables'.
    pub(super) mine: Load,
    others: Load,
}

impl Candidate {
    pub(super) fn new(
        s: &Server,
        server: usize,
        n: usize,
        current: Option<&[ShardPlacement]>,
    ) -> Self {
        let mut pairings: Vec<Pairing> = (0..n)
            .map(|shard| Pairing {
                backfill: current.map_or(0.0, |old| backfill_cost(shard, n, old, &s.id)),
                shard,
            })
            .collect();
        // Stable: equal costs keep shard order, as the multiset keeps insertion order.
        pairings.sort_by(|a, b| a.backfill.total_cmp(&b.backfill));
        Candidate {
            server,
            self_cost: 0,
            pairings,
            other_cost: s.load.cost(),
            mine: Load::default(),
            others: s.load,
        }
    }
}

/// RethinkDB's `estimate_backfill_cost`: new shard `shard` of `n` against the old shards
/// it overlaps (both taken as equal slices of the key space).
fn backfill_cost(shard: usize, n: usize, old: &[ShardPlacement], id: &str) -> f64 {
    let m = old.len();
    let (mut sum, mut count) = (0.0, 0u32);
    for (j, o) in old.iter().enumerate() {
        // [shard/n, (shard+1)/n) and [j/m, (j+1)/m) overlap.
        if j * n < (shard + 1) * m && shard * m < (j + 1) * n {
            count += 1;
            sum += if o.primary == id {
                0.0
            } else if o.voting.iter().any(|v| v == id) {
                1.0
            } else if o.nonvoting.iter().any(|v| v == id) {
                2.0
            } else {
                3.0
            };
        }
    }
    if count == 0 {
        3.0
    } else {
        sum / f64::from(count)
    }
}

/// RethinkDB's `pick_best_pairings`: `per_shard` servers for each of `n` shards, taking
/// again and again the best server's cheapest shard (skipped once that shard is full).
/// Among equal servers the one waiting longest goes first (the multiset's order).
pub(super) fn pick_best(
    n: usize,
    per_shard: usize,
    cands: Vec<Candidate>,
    cost: u64,
    whole_load: bool,
) -> Vec<(usize, usize)> {
    let primaries = cost == PRIMARY_COST;
    let mut queue: Vec<(u64, Candidate)> = cands
        .into_iter()
        .filter(|c| !c.pairings.is_empty())
        .enumerate()
        .map(|(seq, c)| (seq as u64, c))
        .collect();
    let mut next_seq = queue.len() as u64;
    let mut filled = vec![0usize; n];
    let mut picks = Vec::with_capacity(n * per_shard);
    while picks.len() < n * per_shard {
        let Some(best) = (0..queue.len()).min_by(|&a, &b| {
            rank(&queue[a], whole_load, primaries).cmp_to(&rank(&queue[b], whole_load, primaries))
        }) else {
            // Unreachable: a tag has at least as many servers as replicas, so every
            // shard finds its servers before the candidates run out.
            break;
        };
        let (_, mut c) = queue.swap_remove(best);
        let p = c.pairings.remove(0);
        if filled[p.shard] < per_shard {
            filled[p.shard] += 1;
            picks.push((p.shard, c.server));
            c.self_cost += cost;
            c.mine.replicas += 1;
            c.mine.primaries += u32::from(primaries);
        }
        if !c.pairings.is_empty() {
            queue.push((next_seq, c));
            next_seq += 1;
        }
    }
    picks
}

/// A candidate's rank: lower is better.
struct Rank {
    self_cost: u64,
    backfill: f64,
    other_cost: u64,
    seq: u64,
}

fn rank((seq, c): &(u64, Candidate), whole_load: bool, primaries: bool) -> Rank {
    if whole_load {
        // A new table: primaries go where the fewest primaries are, other replicas
        // where the fewest replicas are, counting every table.
        let reps = u64::from(c.mine.replicas + c.others.replicas);
        let prims = u64::from(c.mine.primaries + c.others.primaries);
        let (first, second) = if primaries { (prims, reps) } else { (reps, 0) };
        return Rank {
            self_cost: first,
            backfill: 0.0,
            other_cost: second,
            seq: *seq,
        };
    }
    Rank {
        self_cost: c.self_cost,
        backfill: c.pairings.first().map_or(f64::INFINITY, |p| p.backfill),
        other_cost: c.other_cost,
        seq: *seq,
    }
}

impl Rank {
    fn cmp_to(&self, o: &Rank) -> std::cmp::Ordering {
        self.self_cost
            .cmp(&o.self_cost)
            .then(self.backfill.total_cmp(&o.backfill))
            .then(self.other_cost.cmp(&o.other_cost))
            .then(self.seq.cmp(&o.seq))
    }
}
