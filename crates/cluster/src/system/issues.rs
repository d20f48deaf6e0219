//! The server issues of `rethinkdb.current_issues`, as RethinkDB 2.4 reports them:
//! `server_name_collision` (two connected servers with one name; RethinkDB does not
//! rename either) and `non_transitive_error` (a connected server that does not see every
//! other connected server). A disconnected server is no issue in RethinkDB 2.4: it
//! leaves `server_config`/`server_status` and shows `false` in `connected_to`.
//!
//! Replicated tables that are not fully ready add `table_availability` rows
//! (`super::status`).
//!
//! Both are computed from the `ServerRecord`s every server exchanges, so every server
//! reports the same issues once the records have spread (a change shows on the others
//! within a heartbeat round).

use std::collections::{BTreeMap, BTreeSet};

use datum::{Datum, Object, Str};

use super::ServerRecord;
use crate::Cluster;

fn obj(pairs: Vec<(&str, Datum)>) -> Datum {
    let m: Object = pairs.into_iter().map(|(k, v)| (Str::from(k), v)).collect();
    Datum::object(m)
}

fn strs(v: &[String]) -> Datum {
    Datum::array(v.iter().map(|s| Datum::str(s)).collect())
}

/// Names held by more than one server: name → ids (sorted), as RethinkDB's
/// `server_name_collision` issue reports them.
pub fn name_collisions(servers: &[ServerRecord]) -> BTreeMap<String, Vec<String>> {
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in servers {
        by_name
            .entry(s.name.clone())
            .or_default()
            .push(s.id.clone());
    }
    by_name.retain(|_, ids| {
        ids.sort();
        ids.dedup();
        ids.len() > 1
    });
    by_name
}

/// `current_issues` rows about servers: one `server_name_collision` per shared name, and
/// one `non_transitive_error` while some connected servers cannot see each other.
pub(super) fn issue_rows(c: &Cluster) -> Vec<Datum> {
    let servers = c.server_records();
    let mut rows = collision_rows(&servers);
    rows.extend(non_transitive_row(&servers));
    rows.extend(super::status::availability_rows(c));
    rows
}

fn collision_rows(servers: &[ServerRecord]) -> Vec<Datum> {
    // RethinkDB derives the issue's id from the name; a v5 UUID does the same.
    const BASE: uuid::Uuid = uuid::uuid!("a8bf71c6-a178-43ea-b25d-73a13619c8f0");
    name_collisions(servers)
        .into_iter()
        .map(|(name, ids)| {
            let id = uuid::Uuid::new_v5(&BASE, name.as_bytes()).to_string();
            obj(vec![
                ("critical", Datum::Bool(true)),
                (
                    "description",
                    Datum::from(format!(
                        "The following servers are all named '{name}': {}.",
                        ids.join(", ")
                    )),
                ),
                ("id", Datum::from(id)),
                (
                    "info",
                    obj(vec![("ids", strs(&ids)), ("name", Datum::str(&name))]),
                ),
                ("type", Datum::str("server_name_collision")),
            ])
        })
        .collect()
}

/// The connected servers that do not see every other connected server, or that some
/// connected server does not see (names, sorted); empty when connectivity is transitive.
pub fn not_fully_connected(servers: &[ServerRecord]) -> Vec<String> {
    let names: BTreeSet<&str> = servers.iter().map(|s| s.name.as_str()).collect();
    let mut partial = BTreeSet::new();
    for s in servers {
        for other in names.iter().filter(|n| **n != s.name) {
            if s.connected_to.get(*other) != Some(&true) {
                partial.insert(s.name.clone());
                partial.insert(other.to_string());
            }
        }
    }
    partial.into_iter().collect()
}

fn non_transitive_row(servers: &[ServerRecord]) -> Option<Datum> {
    const BASE: uuid::Uuid = uuid::uuid!("ab2a4f6d-c623-4c11-9982-8e5cc653737d");
    const MESSAGE: &str = "Server connectivity is non-transitive.";
    let partial = not_fully_connected(servers);
    if partial.is_empty() {
        return None;
    }
    Some(obj(vec![
        ("critical", Datum::Bool(false)),
        (
            "description",
            Datum::str(
                "There are currently servers that cannot see every server in the cluster. \
                 This may cause table availability issues.",
            ),
        ),
        (
            "id",
            Datum::from(uuid::Uuid::new_v5(&BASE, MESSAGE.as_bytes()).to_string()),
        ),
        (
            "info",
            obj(vec![
                ("message", Datum::str(MESSAGE)),
                ("servers", strs(&partial)),
            ]),
        ),
        ("type", Datum::str("non_transitive_error")),
    ]))
}

#[cfg(test)]
mod tests {
    use super::super::servers::tests::rec;
    use super::*;

    fn sees(mut s: ServerRecord, others: &[(&str, bool)]) -> ServerRecord {
        for (n, up) in others {
            s.connected_to.insert(n.to_string(), *up);
        }
        s
    }

    #[test]
    fn shared_names_are_collisions_and_unique_ones_are_not() {
        let servers = [rec("b", "x"), rec("a", "x"), rec("c", "y")];
        let found = name_collisions(&servers);
        assert_eq!(found.len(), 1);
        assert_eq!(found["x"], vec!["a".to_string(), "b".to_string()]);
        assert!(name_collisions(&[rec("a", "x"), rec("b", "y")]).is_empty());
        // One server reported twice (by two peers) is not a collision.
        assert!(name_collisions(&[rec("a", "x"), rec("a", "x")]).is_empty());
    }

    #[test]
    fn connectivity_is_transitive_when_everyone_sees_everyone() {
        let full = [
            sees(rec("a", "A"), &[("B", true), ("C", true)]),
            sees(rec("b", "B"), &[("A", true), ("C", true)]),
            sees(rec("c", "C"), &[("A", true), ("B", true)]),
        ];
        assert!(not_fully_connected(&full).is_empty());
        assert!(non_transitive_row(&full).is_none());
        // A dead server (not connected, so no record) is no issue.
        let after_loss = [
            sees(rec("a", "A"), &[("B", true), ("C", false)]),
            sees(rec("b", "B"), &[("A", true), ("C", false)]),
        ];
        assert!(not_fully_connected(&after_loss).is_empty());
    }

    #[test]
    fn a_pair_that_cannot_see_each_other_is_reported() {
        let split = [
            sees(rec("a", "A"), &[("B", true), ("C", true)]),
            sees(rec("b", "B"), &[("A", true), ("C", false)]),
            sees(rec("c", "C"), &[("A", true)]),
        ];
        assert_eq!(not_fully_connected(&split), vec!["B", "C"]);
        let row = non_transitive_row(&split).unwrap();
        assert_eq!(row.get("type"), Some(&Datum::str("non_transitive_error")));
        assert_eq!(row.get("critical"), Some(&Datum::Bool(false)));
        let info = row.get("info").unwrap();
        assert_eq!(info.get("servers"), Some(&strs(&["B".into(), "C".into()])));
    }
}
