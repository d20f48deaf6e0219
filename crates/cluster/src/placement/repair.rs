//! Emergency repair of a replicated table's placement (`reconfigure(emergency_repair=
//! "unsafe_rollback" | "unsafe_rollback_or_erase")`, RethinkDB's
//! `calculate_emergency_repair`). Pure: the table's placement and which servers are
//! available in; the repaired placement or RethinkDB's refusal out.
//!
//! A shard needs repair when at most half of its voting replicas are on available
//! servers (its group cannot commit). Rolled back, it keeps the replicas on available
//! servers only (non-voting ones vote when no voter is left); its primary and seed is
//! the kept voter whose replica applied the most of the old group's log (each is asked;
//! among equals, or when none answered, the old primary if it is kept, else the first
//! kept voter). A shard with no available replica is erased (only with
//! `unsafe_rollback_or_erase`): one replica on the server the caller chooses, empty.
//!
//! Invariants: a repaired shard's group is a new group: every kept replica gets a fresh
//! incarnation (so a fresh Raft node id), the lineage's epoch grows by one, its seed is
//! the node id of the member that starts the group alone (and copies its server's old
//! copy's documents), and every member of the old group (and of earlier epochs) is
//! abandoned. A shard that keeps its quorum is returned as it was.

use super::{Lineage, ShardPlacement};

/// RethinkDB's text when no shard needs repairing.
pub const NOT_NEEDED: &str = "This table doesn't need to be repaired.";

/// RethinkDB's text when the only shards to repair have no available replica and the
/// mode is `unsafe_rollback`.
pub const NO_REPLICAS: &str = "One or more shards of this table have no available \
replicas. Since there are no available copies of the data that was stored in those \
shards, those shards cannot be repaired. If you run the command again with \
`emergency_repair` set to `unsafe_rollback_or_erase`, those shards will be reset to an \
empty, but writeable state; but if the missing replicas later reconnect, the original \
data that was stored on them will be lost permanently.";

/// What one shard needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Its voters on available servers are a quorum.
    Nothing,
    /// It lost its quorum but some replica is available.
    Rollback,
    /// No replica of it is available.
    Erase,
}

/// Why a repair was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every shard has its quorum.
    NotNeeded,
    /// Only shards without any available replica need repair, and erasing them was not
    /// allowed.
    NoReplicas,
}

impl Refused {
    /// RethinkDB's message.
    pub fn message(self) -> &'static str {
        match self {
            Refused::NotNeeded => NOT_NEEDED,
            Refused::NoReplicas => NO_REPLICAS,
        }
    }
}

/// What shard `place` needs, `available` telling which servers are reachable.
pub fn need(place: &ShardPlacement, available: &dyn Fn(&str) -> bool) -> Need {
    let up = place.voting.iter().filter(|s| available(s)).count();
    if up * 2 > place.voting.len() {
        Need::Nothing
    } else if place.all().any(|s| available(s)) {
        Need::Rollback
    } else {
        Need::Erase
    }
}

/// [`repair_ranked`] knowing nothing of how far each replica applied its log.
pub fn repair(
    old: &[ShardPlacement],
    available: &dyn Fn(&str) -> bool,
    erase: bool,
    erase_on: &mut dyn FnMut(usize) -> Option<String>,
    fresh: &mut dyn FnMut() -> u64,
) -> Result<Vec<ShardPlacement>, Refused> {
    repair_ranked(old, available, &|_, _| None, erase, erase_on, fresh)
}

/// The repaired placement of a table placed as `old`. `applied(shard, server)` says how
/// far that server's replica of the shard applied its log, where it answered; `erase`
/// allows erasing shards with no available replica; `erase_on` names the server an
/// erased shard is recreated on (none: it is left as it is); `fresh` draws a new
/// incarnation (never 0).
pub fn repair_ranked(
    old: &[ShardPlacement],
    available: &dyn Fn(&str) -> bool,
    applied: &dyn Fn(usize, &str) -> Option<u64>,
    erase: bool,
    erase_on: &mut dyn FnMut(usize) -> Option<String>,
    fresh: &mut dyn FnMut() -> u64,
) -> Result<Vec<ShardPlacement>, Refused> {
    let (mut rolled_back, mut erasable) = (false, false);
    let mut out = Vec::with_capacity(old.len());
    for (i, place) in old.iter().enumerate() {
        let shard = match need(place, available) {
            Need::Nothing => place.clone(),
            Need::Rollback => {
                rolled_back = true;
                let keep = |v: &[String]| -> Vec<String> {
                    v.iter().filter(|s| available(s)).cloned().collect()
                };
                let (mut voting, mut nonvoting) = (keep(&place.voting), keep(&place.nonvoting));
                if voting.is_empty() {
                    voting = std::mem::take(&mut nonvoting);
                }
                // The replica that applied the most (one that did not answer counts
                // least); among equals the old primary, then the first.
                let rank = |s: &String| (applied(i, s), *s == place.primary);
                let primary = (voting.iter().enumerate())
                    .max_by(|(ia, a), (ib, b)| rank(a).cmp(&rank(b)).then(ib.cmp(ia)))
                    .map(|(_, s)| s.clone())
                    .unwrap_or_default();
                renewed(place, primary, voting, nonvoting, fresh)
            }
            Need::Erase => {
                erasable = true;
                match erase_on(i).filter(|_| erase) {
                    Some(server) => renewed(place, server.clone(), vec![server], vec![], fresh),
                    None => place.clone(),
                }
            }
        };
        out.push(shard);
    }
    // RethinkDB's rule: refused only when nothing could be rolled back and nothing
    // may be erased.
    let erased = erasable && erase;
    if !rolled_back && !erased {
        return Err(if erasable {
            Refused::NoReplicas
        } else {
            Refused::NotNeeded
        });
    }
    Ok(out)
}

/// The shard `old` as a new group: `primary` (its seed), `voting` and `nonvoting`, each
/// with a fresh incarnation; every member of `old` and of its earlier groups abandoned.
fn renewed(
    old: &ShardPlacement,
    primary: String,
    voting: Vec<String>,
    nonvoting: Vec<String>,
    fresh: &mut dyn FnMut() -> u64,
) -> ShardPlacement {
    let mut shard = ShardPlacement {
        primary,
        voting,
        nonvoting,
        incarnations: Default::default(),
        lineage: Lineage::default(),
    };
    let servers: Vec<String> = shard.all().cloned().collect();
    for s in servers {
        shard.incarnations.insert(s, fresh().max(1));
    }
    let mut abandoned = old.lineage.abandoned.clone();
    abandoned.extend(old.all().filter_map(|s| old.member(s)));
    abandoned.sort_unstable();
    abandoned.dedup();
    shard.lineage = Lineage {
        epoch: old.lineage.epoch + 1,
        seed: shard.member(&shard.primary),
        abandoned,
    };
    shard
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(voting: &[&str], nonvoting: &[&str]) -> ShardPlacement {
        ShardPlacement {
            primary: voting[0].into(),
            voting: voting.iter().map(|s| s.to_string()).collect(),
            nonvoting: nonvoting.iter().map(|s| s.to_string()).collect(),
            incarnations: Default::default(),
            lineage: Default::default(),
        }
    }

    fn up<'a>(servers: &'a [&'a str]) -> impl Fn(&str) -> bool + 'a {
        move |s| servers.contains(&s)
    }

    fn counter() -> impl FnMut() -> u64 {
        let mut n = 100;
        move || {
            n += 1;
            n
        }
    }

    const A: &str = "00000000-0000-4000-8000-00000000000a";
    const B: &str = "00000000-0000-4000-8000-00000000000b";
    const C: &str = "00000000-0000-4000-8000-00000000000c";
    const D: &str = "00000000-0000-4000-8000-00000000000d";
    const E: &str = "00000000-0000-4000-8000-00000000000e";

    /// The primary the repair of a shard of voters A (primary) to E chooses, with `up`
    /// available and `applied` their answers.
    fn chosen(up_: &[&str], applied: &[(&str, u64)]) -> String {
        let old = shard(&[A, B, C, D, E], &[]);
        let applied = |i: usize, s: &str| {
            assert_eq!(i, 0);
            applied.iter().find(|(x, _)| *x == s).map(|(_, n)| *n)
        };
        let none = &mut |_| None;
        let p = repair_ranked(&[old], &up(up_), &applied, false, none, &mut counter());
        let p = p.unwrap().remove(0);
        assert_eq!(p.lineage.seed, p.member(&p.primary));
        p.primary
    }

    #[test]
    fn the_replica_that_applied_the_most_seeds_the_new_group() {
        assert_eq!(chosen(&[B, C], &[(B, 5), (C, 9)]), C);
        assert_eq!(chosen(&[B, C], &[(B, 9), (C, 5)]), B);
        // One that did not answer counts least.
        assert_eq!(chosen(&[B, C], &[(C, 0)]), C);
        // Among equals, or with no answer, the old primary, else the first voter.
        assert_eq!(chosen(&[A, C], &[(A, 7), (C, 7)]), A);
        assert_eq!(chosen(&[C, A], &[]), A);
        assert_eq!(chosen(&[B, C], &[(B, 7), (C, 7)]), B);
        assert_eq!(chosen(&[B, C], &[]), B);
        // More data wins over the old primary.
        assert_eq!(chosen(&[A, D], &[(A, 3), (D, 4)]), D);
    }

    #[test]
    fn a_shard_needs_repair_once_its_voters_lost_their_quorum() {
        let s = shard(&[A, B, C], &[D]);
        assert_eq!(need(&s, &up(&[A, B])), Need::Nothing);
        assert_eq!(need(&s, &up(&[C])), Need::Rollback);
        assert_eq!(need(&s, &up(&[D])), Need::Rollback);
        assert_eq!(need(&s, &up(&[])), Need::Erase);
        // Two voters: one is not a quorum.
        assert_eq!(need(&shard(&[A, B], &[]), &up(&[A])), Need::Rollback);
    }

    #[test]
    fn rollback_keeps_the_available_replicas_in_a_new_group() {
        let mut old = shard(&[A, B, C], &[]);
        old.incarnations.insert(B.into(), 7);
        let none = &mut |_| None;
        let p = repair(&[old.clone()], &up(&[B]), false, none, &mut counter()).unwrap();
        let s = &p[0];
        assert_eq!(
            (s.primary.as_str(), s.voting.clone()),
            (B, vec![B.to_string()])
        );
        assert_eq!(s.incarnation(B), Some(101));
        assert_eq!(s.lineage.epoch, 1);
        assert_eq!(s.lineage.seed, s.member(B));
        let mut gone: Vec<u64> = [A, B, C].iter().filter_map(|x| old.member(x)).collect();
        gone.sort_unstable();
        gone.dedup();
        assert_eq!(s.lineage.abandoned, gone);
        // Repaired again: the first group's members stay abandoned.
        let again = repair(&p, &up(&[]), true, &mut |_| Some(A.into()), &mut counter()).unwrap();
        let a = &again[0];
        assert_eq!(
            (a.lineage.epoch, a.voting.clone()),
            (2, vec![A.to_string()])
        );
        assert!(gone.iter().all(|g| a.lineage.abandoned.contains(g)));
        assert!(a.lineage.abandoned.contains(&s.member(B).unwrap()));
        assert_eq!(a.lineage.seed, a.member(A));
    }

    #[test]
    fn the_old_primary_seeds_and_non_voters_vote_when_no_voter_is_left() {
        let old = shard(&[A, B, C], &[D]);
        let p = repair(
            std::slice::from_ref(&old),
            &up(&[A, D]),
            false,
            &mut |_| None,
            &mut counter(),
        );
        let s = &p.unwrap()[0];
        assert_eq!(s.primary, A);
        assert_eq!(s.voting, vec![A.to_string()]);
        assert_eq!(s.nonvoting, vec![D.to_string()]);
        let p = repair(&[old], &up(&[D]), false, &mut |_| None, &mut counter());
        let s = &p.unwrap()[0];
        assert_eq!(
            (s.primary.as_str(), s.voting.clone()),
            (D, vec![D.to_string()])
        );
        assert!(s.nonvoting.is_empty());
    }

    #[test]
    fn healthy_shards_are_left_alone_and_refusals_follow_rethinkdb() {
        let healthy = shard(&[A, B, C], &[]);
        let lost = shard(&[C], &[]);
        let avail = up(&[A, B]);
        let r = repair(
            std::slice::from_ref(&healthy),
            &avail,
            true,
            &mut |_| None,
            &mut counter(),
        );
        assert_eq!(r, Err(Refused::NotNeeded));
        // Only an erasable shard, erasing not allowed.
        let two = [healthy.clone(), lost.clone()];
        let r = repair(&two, &avail, false, &mut |_| Some(A.into()), &mut counter());
        assert_eq!(r, Err(Refused::NoReplicas));
        // Allowed: erased onto the chosen server, the healthy shard as it was.
        let p = repair(&two, &avail, true, &mut |_| Some(A.into()), &mut counter()).unwrap();
        assert_eq!(p[0], healthy);
        assert_eq!(p[1].voting, vec![A.to_string()]);
        assert_eq!(p[1].lineage.epoch, 1);
        assert_eq!(p[1].lineage.abandoned, vec![lost.member(C).unwrap()]);
        // A rollback goes on even when another shard could only be erased.
        let mixed = [shard(&[A, C, D], &[]), lost];
        let p = repair(
            &mixed,
            &avail,
            false,
            &mut |_| Some(A.into()),
            &mut counter(),
        )
        .unwrap();
        assert_eq!(p[0].voting, vec![A.to_string()]);
        assert_eq!(p[1], mixed[1]);
        assert_eq!(Refused::NoReplicas.message(), NO_REPLICAS);
    }
}
