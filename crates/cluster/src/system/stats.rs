//! `rethinkdb.stats` over the cluster: each connected server's query counters
//! ([`ServerStats`]: this server's own, the peers' asked through the membership layer,
//! `Membership::peer_stats`), one `server` row per server and one `table_server` row
//! per server and table, and the `cluster` and `table` rows summing them, as RethinkDB
//! shows them. A peer that does not answer in time has no rows (its counters are its
//! own: no other server can stand in for it).

use datum::Datum;
use serde::{Deserialize, Serialize};

use super::rows::{db_ident, obj};
use crate::catalog::TableEntry;
use crate::Cluster;

/// One server's query counters, as `rethinkdb.stats` shows them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Open client connections.
    pub connections: u64,
    /// Queries running or holding a cursor.
    pub active: u64,
    /// Queries started, and per second lately.
    pub queries: (u64, f64),
    /// Documents read, and per second lately.
    pub read: (u64, f64),
    /// Documents written, and per second lately.
    pub written: (u64, f64),
    /// Per table (by id).
    pub tables: Vec<TableStats>,
}

/// One server's counters of one table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableStats {
    /// The table's id.
    pub id: String,
    /// Documents read, and per second lately.
    pub read: (u64, f64),
    /// Documents written, and per second lately.
    pub written: (u64, f64),
    /// Changefeed pollers of remote shards running on the server.
    pub feed_pollers: u64,
}

impl Cluster {
    /// This server's counters (rates since the previous sample at least a second old).
    pub fn local_stats(&self) -> ServerStats {
        let k = &self.admin.counters;
        let queries = k.queries.load(std::sync::atomic::Ordering::Relaxed);
        let (read, written) = k.totals();
        let tables = (self.tables_snapshot().iter())
            .map(|e| {
                let (r, w) = k.table_totals(&e.id);
                TableStats {
                    id: e.id.clone(),
                    read: (r, k.rate(&format!("r/{}", e.id), r)),
                    written: (w, k.rate(&format!("w/{}", e.id), w)),
                    feed_pollers: k.feed_pollers(&e.id),
                }
            })
            .collect();
        ServerStats {
            id: self.admin.server_id.clone(),
            name: self.server_name(),
            connections: k.connections.load(std::sync::atomic::Ordering::Relaxed),
            active: self.admin.jobs.count() as u64,
            queries: (queries, k.rate("queries", queries)),
            read: (read, k.rate("read", read)),
            written: (written, k.rate("written", written)),
            tables,
        }
    }
}

fn num(x: u64) -> Datum {
    Datum::Number(x as f64)
}

fn rate(x: f64) -> Datum {
    Datum::Number(x)
}

/// The rows of `rethinkdb.stats`: this server's, then every peer that answered.
pub(super) fn stats_rows(c: &Cluster, uuids: bool) -> Vec<Datum> {
    let mut all = vec![c.local_stats()];
    if let Some(m) = c.membership() {
        all.extend(m.peer_stats());
    }
    rows_of(c, &c.tables_snapshot(), &all, uuids)
}

/// The rows of `servers`' counters over the tables `tables`.
fn rows_of(c: &Cluster, tables: &[TableEntry], servers: &[ServerStats], uuids: bool) -> Vec<Datum> {
    let ident = |s: &ServerStats| Datum::str(if uuids { &s.id } else { &s.name });
    let sum = |f: &dyn Fn(&ServerStats) -> f64| servers.iter().map(f).sum::<f64>();
    let mut out = vec![obj(vec![
        ("id", Datum::array(vec![Datum::str("cluster")])),
        (
            "query_engine",
            obj(vec![
                ("client_connections", rate(sum(&|s| s.connections as f64))),
                ("clients_active", rate(sum(&|s| s.active as f64))),
                ("queries_per_sec", rate(sum(&|s| s.queries.1))),
                ("read_docs_per_sec", rate(sum(&|s| s.read.1))),
                ("written_docs_per_sec", rate(sum(&|s| s.written.1))),
            ]),
        ),
    ])];
    for s in servers {
        out.push(obj(vec![
            (
                "id",
                Datum::array(vec![Datum::str("server"), Datum::str(&s.id)]),
            ),
            (
                "query_engine",
                obj(vec![
                    ("client_connections", num(s.connections)),
                    ("clients_active", num(s.active)),
                    ("queries_per_sec", rate(s.queries.1)),
                    ("queries_total", num(s.queries.0)),
                    ("read_docs_per_sec", rate(s.read.1)),
                    ("read_docs_total", num(s.read.0)),
                    ("written_docs_per_sec", rate(s.written.1)),
                    ("written_docs_total", num(s.written.0)),
                ]),
            ),
            ("server", ident(s)),
        ]));
    }
    for e in tables {
        let tid = Datum::str(&e.id);
        let table = if uuids {
            tid.clone()
        } else {
            Datum::str(&e.name)
        };
        let of = |s: &ServerStats| s.tables.iter().find(|t| t.id == e.id).cloned();
        let parts: Vec<(&ServerStats, TableStats)> = (servers.iter())
            .map(|s| (s, of(s).unwrap_or_default()))
            .collect();
        let (r, w) = parts
            .iter()
            .fold((0.0, 0.0), |(r, w), (_, t)| (r + t.read.1, w + t.written.1));
        out.push(obj(vec![
            ("db", db_ident(c, e, uuids)),
            ("id", Datum::array(vec![Datum::str("table"), tid.clone()])),
            (
                "query_engine",
                obj(vec![
                    ("read_docs_per_sec", rate(r)),
                    ("written_docs_per_sec", rate(w)),
                ]),
            ),
            ("table", table.clone()),
        ]));
        for (s, t) in parts {
            out.push(table_server_row(
                c,
                e,
                s,
                &t,
                ident(s),
                table.clone(),
                uuids,
            ));
        }
    }
    out
}

fn table_server_row(
    c: &Cluster,
    e: &TableEntry,
    s: &ServerStats,
    t: &TableStats,
    server: Datum,
    table: Datum,
    uuids: bool,
) -> Datum {
    let zero = || Datum::Number(0.0);
    let id = vec![
        Datum::str("table_server"),
        Datum::str(&e.id),
        Datum::str(&s.id),
    ];
    obj(vec![
        ("db", db_ident(c, e, uuids)),
        ("id", Datum::array(id)),
        (
            "query_engine",
            obj(vec![
                // Ponder's: changefeed pollers of remote shards running there.
                ("feed_pollers", num(t.feed_pollers)),
                ("read_docs_per_sec", rate(t.read.1)),
                ("read_docs_total", num(t.read.0)),
                ("written_docs_per_sec", rate(t.written.1)),
                ("written_docs_total", num(t.written.0)),
            ]),
        ),
        ("server", server),
        (
            "storage_engine",
            obj(vec![
                ("cache", obj(vec![("in_use_bytes", zero())])),
                (
                    "disk",
                    obj(vec![
                        ("read_bytes_per_sec", zero()),
                        ("read_bytes_total", zero()),
                        (
                            "space_usage",
                            obj(vec![
                                ("data_bytes", zero()),
                                ("garbage_bytes", zero()),
                                ("metadata_bytes", zero()),
                                ("preallocated_bytes", zero()),
                            ]),
                        ),
                        ("written_bytes_per_sec", zero()),
                        ("written_bytes_total", zero()),
                    ]),
                ),
            ]),
        ),
        ("table", table),
    ])
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use reql::Durability;

    use super::*;
    use crate::system::{Membership, ServerRecord};

    /// A membership layer with one peer, whose counters are these.
    struct OnePeer(ServerStats);

    impl Membership for OnePeer {
        fn peers(&self) -> Vec<ServerRecord> {
            Vec::new()
        }
        fn connected_to(&self) -> BTreeMap<String, bool> {
            BTreeMap::new()
        }
        fn configure(&self, _: &str, _: &str, _: &[String]) -> Result<(), String> {
            Err("not in this test".into())
        }
        fn heartbeat_written(&self, _: f64) {}
        fn names(&self) -> BTreeMap<String, String> {
            BTreeMap::new()
        }
        fn peer_stats(&self) -> Vec<ServerStats> {
            vec![self.0.clone()]
        }
    }

    fn field(row: &Datum, path: &[&str]) -> Datum {
        let mut d = row.clone();
        for p in path {
            d = d.get(p).cloned().unwrap_or(Datum::Null);
        }
        d
    }

    #[test]
    fn every_server_has_rows_and_the_cluster_and_table_rows_sum_them() {
        let c = crate::test_cluster::with_table("s1", Durability::Soft, 1);
        let id = c.table_entry("test", "t").unwrap().id;
        let peer = ServerStats {
            id: "p-id".into(),
            name: "p".into(),
            connections: 2,
            active: 1,
            queries: (10, 1.5),
            read: (7, 0.5),
            written: (3, 0.25),
            tables: vec![TableStats {
                id: id.clone(),
                read: (7, 0.5),
                written: (3, 0.25),
                feed_pollers: 1,
            }],
        };
        c.set_membership(Arc::new(OnePeer(peer)));
        let rows = stats_rows(&c, false);
        let local = c.local_stats();
        let row = |key: Vec<&str>| {
            let key = Datum::array(key.into_iter().map(Datum::str).collect());
            let found = rows.iter().find(|r| r.get("id") == Some(&key));
            found.cloned().unwrap()
        };
        let n = |d: Datum| d.as_f64().unwrap();
        let cluster = row(vec!["cluster"]);
        let conns = n(field(&cluster, &["query_engine", "client_connections"]));
        assert_eq!(conns, local.connections as f64 + 2.0);
        let qps = n(field(&cluster, &["query_engine", "queries_per_sec"]));
        assert_eq!(qps, local.queries.1 + 1.5);
        // One server row each, named.
        let mine = row(vec!["server", &local.id]);
        assert_eq!(field(&mine, &["server"]), Datum::str(&local.name));
        let theirs = row(vec!["server", "p-id"]);
        assert_eq!(field(&theirs, &["server"]), Datum::str("p"));
        assert_eq!(n(field(&theirs, &["query_engine", "queries_total"])), 10.0);
        // The table's row sums its servers' rows.
        let table = row(vec!["table", &id]);
        let read = n(field(&table, &["query_engine", "read_docs_per_sec"]));
        assert_eq!(read, local.tables[0].read.1 + 0.5);
        let on_peer = row(vec!["table_server", &id, "p-id"]);
        assert_eq!(field(&on_peer, &["table"]), Datum::str("t"));
        assert_eq!(
            n(field(&on_peer, &["query_engine", "read_docs_total"])),
            7.0
        );
        assert_eq!(n(field(&on_peer, &["query_engine", "feed_pollers"])), 1.0);
        row(vec!["table_server", &id, &local.id]);
        assert_eq!(rows.len(), 1 + 2 + 1 + 2);
        // By id with `identifier_format: "uuid"`.
        let rows = stats_rows(&c, true);
        let theirs = rows
            .iter()
            .find(|r| field(r, &["server"]) == Datum::str("p-id"));
        assert!(theirs.is_some());
    }
}
