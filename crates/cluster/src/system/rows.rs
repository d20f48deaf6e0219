//! The rows of each system table, in RethinkDB 2.4's shapes.

use datum::{Datum, Object, Str};

use super::{system_id, Kind, SystemTable, SYSTEM_DB};
use crate::auth::{Perms, Scope, ADMIN};
use crate::catalog::TableEntry;
use crate::Cluster;

fn time(secs: f64) -> Datum {
    datum::ptype::make_time(secs, "+00:00")
}

pub(super) fn obj(pairs: Vec<(&str, Datum)>) -> Datum {
    let m: Object = pairs.into_iter().map(|(k, v)| (Str::from(k), v)).collect();
    Datum::object(m)
}

/// Every row of `t` (unsorted).
pub(super) fn rows(t: &SystemTable) -> reql::Result<Vec<Datum>> {
    let c = &t.cluster;
    Ok(match t.kind {
        Kind::TableConfig => c
            .tables_snapshot()
            .iter()
            .map(|e| table_config_row(c, e, t.uuids))
            .collect(),
        Kind::TableStatus => table_status_rows(c, &c.tables_snapshot(), t.uuids),
        Kind::DbConfig => c
            .dbs_snapshot()
            .into_iter()
            .map(|(name, id)| crate::catalog::db_record(&name, &id))
            .collect(),
        Kind::ServerConfig => super::servers::config_rows(c),
        Kind::ServerStatus => super::servers::status_rows(c),
        Kind::ClusterConfig => vec![obj(vec![
            ("id", Datum::str("heartbeat")),
            (
                "heartbeat_timeout_secs",
                Datum::Number(*c.admin.heartbeat.lock()),
            ),
        ])],
        Kind::CurrentIssues => super::issues::issue_rows(c),
        Kind::Jobs => jobs_rows(c, t.uuids, &t.user),
        Kind::Stats => super::stats::stats_rows(c, t.uuids),
        Kind::Logs => logs_rows(c, t.uuids),
        Kind::Users => c.users.rows(),
        Kind::Permissions => permissions_rows(c, t.uuids),
        Kind::DebugScratch => c.admin.scratch.lock().values().cloned().collect(),
    })
}

fn server(c: &Cluster, uuids: bool) -> Datum {
    if uuids {
        Datum::str(&c.admin.server_id)
    } else {
        Datum::str(&c.server_name())
    }
}

pub(super) fn db_ident(c: &Cluster, e: &TableEntry, uuids: bool) -> Datum {
    if uuids {
        Datum::from(c.db_id_of(&e.db).unwrap_or_default())
    } else {
        Datum::str(&e.db)
    }
}

/// A `table_config` row (also what `table.config()` returns).
pub(crate) fn table_config_row(c: &Cluster, e: &TableEntry, uuids: bool) -> Datum {
    let mut row = c.config_of(e);
    if let Datum::Object(m) = &mut row {
        let names = e.indexes.keys().map(|n| Datum::str(n)).collect();
        std::sync::Arc::make_mut(m).insert(Str::from("indexes"), Datum::array(names));
        std::sync::Arc::make_mut(m).insert(Str::from("write_hook"), crate::catalog::hook_field(e));
    }
    if uuids {
        if let Datum::Object(m) = &mut row {
            let m = std::sync::Arc::make_mut(m);
            m.insert(Str::from("db"), db_ident(c, e, true));
            m.insert(Str::from("shards"), shards_config(c, e, true));
        }
    }
    row
}

/// A table config's `shards`: each shard's primary, voting and non-voting replicas, by
/// server name (or id with `uuids`); a table without a recorded placement is this
/// server's alone. A server not connected now is shown by the name it last had (by its
/// id if it never described itself).
pub(crate) fn shards_config(c: &Cluster, e: &TableEntry, uuids: bool) -> Datum {
    let placement = if e.placement.is_empty() {
        c.local_placement(e.shards)
    } else {
        e.placement.clone()
    };
    let names: std::collections::HashMap<String, String> = if uuids {
        Default::default()
    } else {
        c.server_names()
    };
    let show = |id: &String| Datum::str(names.get(id).unwrap_or(id));
    let list = |ids: &[String]| Datum::array(ids.iter().map(show).collect());
    Datum::array(
        placement
            .iter()
            .map(|p| {
                obj(vec![
                    ("nonvoting_replicas", list(&p.nonvoting)),
                    ("primary_replica", show(&p.primary)),
                    ("replicas", list(&p.all().cloned().collect::<Vec<_>>())),
                ])
            })
            .collect(),
    )
}

/// A `table_status` row (also what `table.status()` returns).
pub(crate) fn table_status_row(c: &Cluster, e: &TableEntry, uuids: bool) -> Datum {
    let mut rows = table_status_rows(c, std::slice::from_ref(e), uuids);
    rows.pop().unwrap_or(Datum::Null)
}

/// The `table_status` rows of `tables`, in order: those of replicated tables from one
/// round of questions to their shards' leaders (`super::status::rows`).
fn table_status_rows(c: &Cluster, tables: &[TableEntry], uuids: bool) -> Vec<Datum> {
    let mut out: Vec<Option<Datum>> = vec![None; tables.len()];
    let mut placed = Vec::new();
    let mut at = Vec::new();
    for (i, e) in tables.iter().enumerate() {
        match c.group_members(&e.id).filter(|_| !e.placement.is_empty()) {
            Some(members) => {
                at.push(i);
                placed.push((e, members, db_ident(c, e, uuids)));
            }
            None => out[i] = Some(local_status_row(c, e, uuids)),
        }
    }
    for (i, row) in at.into_iter().zip(super::status::rows(c, placed, uuids)) {
        out[i] = Some(row);
    }
    out.into_iter().map(|r| r.unwrap_or(Datum::Null)).collect()
}

/// The `table_status` row of a table this server holds alone (not replicated).
fn local_status_row(c: &Cluster, e: &TableEntry, uuids: bool) -> Datum {
    let srv = server(c, uuids);
    let shard = obj(vec![
        ("primary_replicas", Datum::array(vec![srv.clone()])),
        (
            "replicas",
            Datum::array(vec![obj(vec![
                ("server", srv.clone()),
                ("state", Datum::str("ready")),
            ])]),
        ),
    ]);
    obj(vec![
        ("db", db_ident(c, e, uuids)),
        ("id", Datum::str(&e.id)),
        ("name", Datum::str(&e.name)),
        ("raft_leader", srv),
        (
            "shards",
            Datum::array(vec![shard; e.shards.max(1) as usize]),
        ),
        (
            "status",
            obj(vec![
                ("all_replicas_ready", Datum::Bool(true)),
                ("ready_for_outdated_reads", Datum::Bool(true)),
                ("ready_for_reads", Datum::Bool(true)),
                ("ready_for_writes", Datum::Bool(true)),
            ]),
        ),
    ])
}

/// The running queries; a user other than `admin` sees only their own, as in RethinkDB
/// (the query text may hold secrets, such as a new password).
fn jobs_rows(c: &Cluster, uuids: bool, viewer: &str) -> Vec<Datum> {
    c.admin
        .jobs
        .list()
        .into_iter()
        .filter(|(_, _, user, _, _)| viewer == crate::auth::ADMIN || user == viewer)
        .map(|(id, secs, user, client, query)| {
            let (addr, port) = match client.rsplit_once(':') {
                Some((a, p)) => (a.to_string(), p.parse::<f64>().unwrap_or(0.0)),
                None => (client.clone(), 0.0),
            };
            obj(vec![
                ("duration_sec", Datum::Number(secs)),
                (
                    "id",
                    Datum::array(vec![Datum::str("query"), Datum::from(id)]),
                ),
                (
                    "info",
                    obj(vec![
                        ("client_address", Datum::from(addr)),
                        ("client_port", Datum::Number(port)),
                        ("query", Datum::from(query)),
                        ("user", Datum::from(user)),
                    ]),
                ),
                ("servers", Datum::array(vec![server(c, uuids)])),
                ("type", Datum::str("query")),
            ])
        })
        .collect()
}

fn logs_rows(c: &Cluster, uuids: bool) -> Vec<Datum> {
    c.admin
        .log_lines()
        .into_iter()
        .map(|l| {
            obj(vec![
                (
                    "id",
                    Datum::array(vec![
                        Datum::from(format!("{:.6}", l.time)),
                        Datum::from(format!("{}", l.seq)),
                    ]),
                ),
                ("level", Datum::from(l.level)),
                ("message", Datum::from(l.message)),
                ("server", server(c, uuids)),
                ("timestamp", time(l.time)),
                ("uptime", Datum::Number(l.uptime)),
            ])
        })
        .collect()
}

fn permissions_rows(c: &Cluster, uuids: bool) -> Vec<Datum> {
    let dbs = c.dbs_snapshot();
    let tables = c.tables_snapshot();
    let db_name = |id: &str| -> Option<String> {
        if id == system_id(SYSTEM_DB) {
            return Some(SYSTEM_DB.to_string());
        }
        dbs.iter().find(|(_, i)| i == id).map(|(n, _)| n.clone())
    };
    let mut out = Vec::new();
    // RethinkDB 2.4 shows `admin` with every global permission and every permission on
    // the `rethinkdb` database (fixed rows, whatever is stored), and each row names its
    // user in `user`.
    let mut scopes: Vec<(String, Scope, Datum)> = vec![
        (ADMIN.to_string(), Scope::Global, Perms::ALL.to_datum()),
        (
            ADMIN.to_string(),
            Scope::Db(system_id(SYSTEM_DB)),
            Perms {
                connect: None,
                ..Perms::ALL
            }
            .to_datum(),
        ),
    ];
    scopes.extend(
        c.users
            .all_scopes()
            .into_iter()
            .filter(|(user, _, _)| user != ADMIN)
            .map(|(user, scope, perms)| (user, scope, perms.to_datum())),
    );
    for (user, scope, p) in scopes {
        let u = Datum::from(user.clone());
        let named = Datum::from(user.clone());
        match scope {
            Scope::Global => out.push(obj(vec![
                ("id", Datum::array(vec![u])),
                ("permissions", p),
                ("user", named),
            ])),
            Scope::Db(id) => {
                let name = db_name(&id);
                let shown = match (uuids, name) {
                    (true, _) => Datum::from(id.clone()),
                    (false, Some(n)) => Datum::from(n),
                    (false, None) => Datum::str("__deleted_database__"),
                };
                out.push(obj(vec![
                    ("database", shown),
                    ("id", Datum::array(vec![u, Datum::from(id)])),
                    ("permissions", p),
                    ("user", named),
                ]));
            }
            Scope::Table(id) => {
                let (db_id, db, name) = if let Some(e) = tables.iter().find(|e| e.id == id) {
                    let Some(db_id) = c.db_id_of(&e.db) else {
                        continue;
                    };
                    (db_id, e.db.clone(), e.name.clone())
                } else if let Some(k) = super::TABLES
                    .iter()
                    .find(|k| system_id(&format!("{SYSTEM_DB}.{k}")) == id)
                {
                    (system_id(SYSTEM_DB), SYSTEM_DB.to_string(), k.to_string())
                } else {
                    continue;
                };
                let (dshown, tshown) = if uuids {
                    (Datum::from(db_id.clone()), Datum::from(id.clone()))
                } else {
                    (Datum::from(db), Datum::from(name))
                };
                out.push(obj(vec![
                    ("database", dshown),
                    (
                        "id",
                        Datum::array(vec![u, Datum::from(db_id), Datum::from(id)]),
                    ),
                    ("permissions", p),
                    ("table", tshown),
                    ("user", named),
                ]));
            }
        }
    }
    out
}
