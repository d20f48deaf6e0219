//! `table_status` of a replicated table, from what this server's Raft members of the
//! table's shard groups know now: each shard's leader is its primary; a replica is
//! `disconnected` when its server is not connected, `waiting_for_primary` while the
//! group has no leader, `backfilling` while the leader sees it lagging (only the leader
//! knows each follower's progress), `ready` otherwise, and every replica is
//! `transitioning` while this server's member of the group has not started. Where this
//! server does not lead a shard (a follower, or no replica here), the leader's view is
//! asked of it (`ClientRequest::Progress`, at most a second); without an answer the
//! shard is shown from what this server knows (its member's leader, else the
//! placement) and the servers' connectivity.
//!
//! The readiness flags follow RethinkDB's implications: writes ⇒ reads ⇒ outdated
//! reads; every shard must have a connected primary for reads and writes, and at least
//! one connected replica for outdated reads.

use std::collections::{BTreeMap, HashMap};

use datum::Datum;
use replication::{NodeId, Raft};

use crate::catalog::TableEntry;
use crate::groups::Local;
use crate::placement::ShardPlacement;
use crate::Cluster;

/// How far behind the leader's log a follower may be and still be `ready`.
const READY_LAG: u64 = 100;

/// What a shard's member here knows.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Known {
    /// The leader, if there is one.
    pub(crate) leader: Option<NodeId>,
    /// The leader's view of each member's replicated index (on the leader only).
    pub(crate) matched: Option<BTreeMap<NodeId, Option<u64>>>,
    /// The leader's last log index (on the leader only).
    pub(crate) last: Option<u64>,
    /// The voters of the leader's membership (on the leader only).
    pub(crate) voters: Option<std::collections::BTreeSet<NodeId>>,
}

impl From<replication::Progress> for Known {
    fn from(p: replication::Progress) -> Self {
        Known {
            leader: Some(p.leader),
            matched: Some(p.matched.into_iter().collect()),
            last: p.last,
            voters: Some(p.voters.into_iter().collect()),
        }
    }
}

impl Known {
    fn of(raft: &Raft) -> Self {
        let leader = raft.metrics().borrow().current_leader;
        let p = replication::Progress::of(raft);
        let leading = leader == Some(p.leader);
        Known {
            leader,
            matched: leading.then(|| p.matched.into_iter().collect()),
            last: p.last.filter(|_| leading),
            voters: leading.then(|| p.voters.into_iter().collect()),
        }
    }
}

/// One shard's status: its primary (server id) and each replica's (server id, state).
/// `known`: what this server's member knows (None: no replica here); `starting`: this
/// server's replica has not started its group yet (every replica is `transitioning`).
pub(crate) fn shard(
    place: &ShardPlacement,
    known: Option<&Known>,
    starting: bool,
    connected: &dyn Fn(&str) -> bool,
) -> (Option<String>, Vec<(String, &'static str)>) {
    let node = |id: &str| place.member(id);
    if starting {
        let states = place
            .all()
            .map(|id| {
                (
                    id.clone(),
                    if connected(id) {
                        "transitioning"
                    } else {
                        "disconnected"
                    },
                )
            })
            .collect();
        return (None, states);
    }
    let primary = match known {
        Some(k) => k.leader.and_then(|l| {
            // A copy on its way out may still lead: named by its server.
            let same = |id: &&String| {
                replication::node_id(id).is_ok_and(|n| replication::same_server(n, l))
            };
            place
                .all()
                .find(|id| node(id) == Some(l))
                .or_else(|| place.all().find(same))
                .cloned()
        }),
        // Not a member here: the configured primary, if it can be reached.
        None => Some(place.primary.clone()).filter(|p| connected(p)),
    };
    let states = place
        .all()
        .map(|id| {
            let state = if !connected(id) {
                "disconnected"
            } else if primary.is_none() {
                "waiting_for_primary"
            } else if changing_role(place, known, id) {
                // Not yet in its configured role for the leader (a voter still a
                // learner: the shard would not survive losing another voter yet),
                // whatever its lag.
                "transitioning"
            } else {
                match known.and_then(|k| Some((k.matched.as_ref()?, k.last?))) {
                    Some((matched, last)) => match node(id).and_then(|n| matched.get(&n)) {
                        Some(Some(at)) if last.saturating_sub(*at) <= READY_LAG => "ready",
                        // The leader itself is not in its replication map.
                        None if primary.as_deref() == Some(id.as_str()) => "ready",
                        _ => "backfilling",
                    },
                    None => "ready",
                }
            };
            (id.clone(), state)
        })
        .collect();
    (primary.filter(|p| connected(p)), states)
}

/// Whether replica `id` does not have its configured role in the leader's membership
/// yet: a configured voter still a learner (being added), or a configured non-voter
/// still voting (being demoted).
fn changing_role(place: &ShardPlacement, known: Option<&Known>, id: &str) -> bool {
    let (Some(voters), Some(node)) = (known.and_then(|k| k.voters.as_ref()), place.member(id))
    else {
        return false;
    };
    place.voting.iter().any(|v| v == id) != voters.contains(&node)
}

/// A placed table's shards as this server knows them: each one's `Known` (from its
/// member here, or its leader's view) and whether its member here is still starting.
type Shards = Vec<(Option<Known>, bool)>;

/// The `table_status` rows of placed tables, each with its shards' groups on this
/// server (`members`; `db` its `db` field): the leaders of every table's shards that
/// this server does not lead are asked at once (`Cluster::leader_views`).
pub(crate) fn rows(
    c: &Cluster,
    tables: Vec<(&TableEntry, Vec<Local>, Datum)>,
    uuids: bool,
) -> Vec<Datum> {
    let mut known: Vec<Shards> = tables
        .iter()
        .map(|(e, members, _)| {
            (0..e.placement.len())
                .map(|i| match members.get(i) {
                    Some(Local::Member(raft)) => (Some(Known::of(raft)), false),
                    Some(Local::Starting) => (None, true),
                    Some(Local::Client) | None => (None, false),
                })
                .collect()
        })
        .collect();
    // Only a shard's leader knows how far each replica is: where this server is not
    // it (a follower, or no replica here), the leader is asked.
    let asks: Vec<(&str, Vec<usize>)> = (tables.iter().zip(&known))
        .map(|((e, _, _), shards)| {
            let ask = (shards.iter().enumerate())
                .filter(|(_, (k, starting))| {
                    !starting && k.as_ref().is_none_or(|k| k.matched.is_none())
                })
                .map(|(i, _)| i)
                .collect();
            (e.id.as_str(), ask)
        })
        .collect();
    if asks.iter().any(|(_, ask)| !ask.is_empty()) {
        for ((_, ask), (views, shards)) in asks
            .iter()
            .zip(c.leader_views(&asks).into_iter().zip(&mut known))
        {
            for (&i, view) in ask.iter().zip(views) {
                if let Some(p) = view {
                    shards[i].0 = Some(Known::from(p));
                }
            }
        }
    }
    let connected: std::collections::HashSet<String> =
        c.server_records().into_iter().map(|r| r.id).collect();
    let names: HashMap<String, String> = c.server_names();
    (tables.into_iter().zip(known))
        .map(|((e, _, db), shards)| row(e, shards, &connected, &names, uuids, db))
        .collect()
}

/// The `table_status` row of placed table `e` whose shards are known as `known`.
fn row(
    e: &TableEntry,
    known: Shards,
    connected: &std::collections::HashSet<String>,
    names: &HashMap<String, String>,
    uuids: bool,
    db: Datum,
) -> Datum {
    let connected = |id: &str| connected.contains(id);
    let show = |id: &String| {
        if uuids {
            Datum::str(id)
        } else {
            Datum::str(names.get(id).unwrap_or(id))
        }
    };
    let mut shards = Vec::new();
    let (mut writes, mut outdated, mut all_ready) = (true, true, true);
    let mut raft_leader = Datum::Null;
    for (place, (known, starting)) in e.placement.iter().zip(known) {
        let i = shards.len();
        let (primary, states) = shard(place, known.as_ref(), starting, &connected);
        writes &= primary.is_some();
        outdated &= states.iter().any(|(_, s)| *s != "disconnected");
        all_ready &= states.iter().all(|(_, s)| *s == "ready");
        if i == 0 {
            raft_leader = primary.as_ref().map_or(Datum::Null, show);
        }
        let replicas = states
            .iter()
            .map(|(id, s)| super::rows::obj(vec![("server", show(id)), ("state", Datum::str(s))]))
            .collect();
        shards.push(super::rows::obj(vec![
            (
                "primary_replicas",
                Datum::array(primary.iter().map(show).collect()),
            ),
            ("replicas", Datum::array(replicas)),
        ]));
    }
    // While it is resharded the table is read from its old shards and refuses writes
    // (`crate::reshard`); `wait` waits for the new shards, or for the old ones to be
    // unfrozen when the resharding was abandoned.
    let reads = writes;
    let writes = writes && e.resharding.is_none() && !e.abandoned.unfreezing;
    super::rows::obj(vec![
        ("db", db),
        ("id", Datum::str(&e.id)),
        ("name", Datum::str(&e.name)),
        ("raft_leader", raft_leader),
        ("shards", Datum::array(shards)),
        (
            "status",
            super::rows::obj(vec![
                ("all_replicas_ready", Datum::Bool(writes && all_ready)),
                ("ready_for_outdated_reads", Datum::Bool(outdated)),
                ("ready_for_reads", Datum::Bool(reads)),
                ("ready_for_writes", Datum::Bool(writes)),
            ]),
        ),
    ])
}

/// `current_issues` rows of type `table_availability`: one per replicated table not
/// `all_replicas_ready`, as RethinkDB 2.4 words them (critical when not writable).
pub(crate) fn availability_rows(c: &Cluster) -> Vec<Datum> {
    // RethinkDB hashes the table id into this base; a v5 UUID does the same.
    const BASE: uuid::Uuid = uuid::uuid!("4ae8c575-b103-3335-a79a-121089e34339");
    let tables: Vec<TableEntry> = c
        .catalog
        .read_state()
        .tables
        .values()
        .filter(|e| !e.placement.is_empty())
        .cloned()
        .collect();
    let placed: Vec<_> = (tables.iter())
        .filter_map(|e| Some((e, c.group_members(&e.id)?, Datum::str(&e.db))))
        .collect();
    let entries: Vec<&TableEntry> = placed.iter().map(|(e, _, _)| *e).collect();
    let mut rows = Vec::new();
    for (e, status) in entries.into_iter().zip(self::rows(c, placed, false)) {
        let flag = |name: &str| {
            status
                .get("status")
                .and_then(|s| s.get(name))
                .and_then(Datum::as_bool)
                .unwrap_or(false)
        };
        let blurb = if flag("all_replicas_ready") {
            continue;
        } else if flag("ready_for_writes") {
            "available for all operations, but some replicas are not ready"
        } else if flag("ready_for_reads") {
            "available for outdated and up-to-date reads, but not writes"
        } else if flag("ready_for_outdated_reads") {
            "available for outdated reads, but not up-to-date reads or writes"
        } else {
            "not available for any operations"
        };
        let mut text = format!("Table `{}.{}` is {blurb}.", e.db, e.name);
        let not_ready = not_ready_servers(&status);
        if !not_ready.is_empty() {
            text.push_str("\nThe servers that are not ready are:");
            for (server, primary) in &not_ready {
                let role = if *primary { "primary" } else { "secondary" };
                text.push_str(&format!("\n {server} ({role} replica)"));
            }
        }
        let mut info = match status.as_object() {
            Some(m) => m.clone(),
            None => continue,
        };
        info.remove("id");
        info.remove("name");
        info.insert(datum::Str::from("table"), Datum::str(&e.name));
        rows.push(super::rows::obj(vec![
            ("critical", Datum::Bool(!flag("ready_for_writes"))),
            ("description", Datum::str(&text)),
            (
                "id",
                Datum::str(&uuid::Uuid::new_v5(&BASE, e.id.as_bytes()).to_string()),
            ),
            ("info", Datum::object(info)),
            ("type", Datum::str("table_availability")),
        ]));
    }
    rows
}

/// The servers with a replica that is not `ready` in a status row, by name, each with
/// whether it is a primary of some shard (RethinkDB lists each once, its most important
/// role).
fn not_ready_servers(status: &Datum) -> BTreeMap<String, bool> {
    let mut out: BTreeMap<String, bool> = BTreeMap::new();
    let shards = status.get("shards").and_then(Datum::as_array);
    for shard in shards.into_iter().flatten() {
        let primaries: Vec<&str> = shard
            .get("primary_replicas")
            .and_then(Datum::as_array)
            .into_iter()
            .flatten()
            .filter_map(Datum::as_str)
            .collect();
        let replicas = shard.get("replicas").and_then(Datum::as_array);
        for r in replicas.into_iter().flatten() {
            let (Some(server), Some(state)) = (
                r.get("server").and_then(Datum::as_str),
                r.get("state").and_then(Datum::as_str),
            ) else {
                continue;
            };
            if state != "ready" {
                *out.entry(server.to_string()).or_default() |= primaries.contains(&server);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "a0000000-0000-4000-8000-000000000000";
    const B: &str = "b0000000-0000-4000-8000-000000000000";
    const C: &str = "c0000000-0000-4000-8000-000000000000";

    fn place() -> ShardPlacement {
        ShardPlacement {
            primary: A.into(),
            voting: vec![A.into(), B.into(), C.into()],
            nonvoting: vec![],
            incarnations: Default::default(),
            lineage: Default::default(),
        }
    }

    /// A, B and C with these states.
    fn of(states: [&'static str; 3]) -> Vec<(String, &'static str)> {
        [A, B, C]
            .iter()
            .map(|s| s.to_string())
            .zip(states)
            .collect()
    }

    fn n(id: &str) -> NodeId {
        replication::node_id(id).unwrap()
    }

    #[test]
    fn servers_not_ready_are_listed_once_with_their_most_important_role() {
        let row = datum::from_json_value(&serde_json::json!({"shards": [
            {"primary_replicas": ["b"], "replicas": [
                {"server": "a", "state": "disconnected"},
                {"server": "b", "state": "ready"},
                {"server": "c", "state": "backfilling"}]},
            {"primary_replicas": ["c"], "replicas": [
                {"server": "a", "state": "disconnected"},
                {"server": "c", "state": "waiting_for_primary"}]}
        ]}))
        .unwrap();
        let listed = not_ready_servers(&row);
        assert_eq!(
            listed.into_iter().collect::<Vec<_>>(),
            vec![("a".to_string(), false), ("c".to_string(), true)]
        );
    }

    #[test]
    fn the_leader_is_the_primary_and_sees_who_lags() {
        let all = |_: &str| true;
        let known = Known {
            leader: Some(n(B)),
            matched: Some(BTreeMap::from([(n(A), Some(500)), (n(C), Some(10))])),
            last: Some(500),
            voters: None,
        };
        let (primary, states) = shard(&place(), Some(&known), false, &all);
        assert_eq!(primary.as_deref(), Some(B));
        assert_eq!(states, of(["ready", "ready", "backfilling"]));
    }

    #[test]
    fn a_replica_not_yet_in_its_configured_role_is_transitioning_however_close() {
        let all = |_: &str| true;
        let known = Known {
            leader: Some(n(B)),
            matched: Some(BTreeMap::from([(n(A), Some(500)), (n(C), Some(500))])),
            last: Some(500),
            voters: Some([n(A), n(B)].into_iter().collect()),
        };
        let (primary, states) = shard(&place(), Some(&known), false, &all);
        assert_eq!(primary.as_deref(), Some(B));
        assert_eq!(states, of(["ready", "ready", "transitioning"]));
        // Once its membership change committed, it is ready.
        let known = Known {
            voters: Some([n(A), n(B), n(C)].into_iter().collect()),
            ..known
        };
        let (_, states) = shard(&place(), Some(&known), false, &all);
        assert_eq!(states, of(["ready", "ready", "ready"]));
        // C configured as a non-voter while it still votes: being demoted.
        let mut demoted = place();
        demoted.voting.retain(|v| v != C);
        demoted.nonvoting.push(C.into());
        let (_, states) = shard(&demoted, Some(&known), false, &all);
        assert_eq!(states, of(["ready", "ready", "transitioning"]));
    }

    #[test]
    fn without_a_leader_replicas_wait_and_lost_servers_are_disconnected() {
        let not_a = |id: &str| id != A;
        let follower = Known {
            leader: None,
            ..Known::default()
        };
        let (primary, states) = shard(&place(), Some(&follower), false, &not_a);
        assert_eq!(primary, None);
        assert_eq!(
            states,
            of(["disconnected", "waiting_for_primary", "waiting_for_primary"])
        );
        // A follower knows the leader but not the others' progress.
        let follower = Known {
            leader: Some(n(C)),
            ..Known::default()
        };
        let (primary, states) = shard(&place(), Some(&follower), false, &not_a);
        assert_eq!(primary.as_deref(), Some(C));
        assert_eq!(states[1], (B.to_string(), "ready"));
        // No member here: the configured primary while it is connected.
        assert_eq!(shard(&place(), None, false, &not_a).0, None);
        assert_eq!(
            shard(&place(), None, false, &|_| true).0.as_deref(),
            Some(A)
        );
        // Its member here not started yet: nobody is ready.
        let (primary, states) = shard(&place(), None, true, &not_a);
        assert_eq!(primary, None);
        assert_eq!(states[0].1, "disconnected");
        assert_eq!(states[1].1, "transitioning");
    }
}
