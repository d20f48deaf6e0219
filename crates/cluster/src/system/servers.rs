//! The servers of the cluster as the system tables show them: `server_config`,
//! `server_status` (their issues: `issues`), and writes to `server_config` (renames and retags, of this server or of a connected peer).
//!
//! Who the peers are is not this crate's business: the server binary's membership layer
//! implements [`Membership`] and registers it with [`crate::Cluster::set_membership`].
//! Without one (a server embedded as a library, tests), the tables show this server
//! alone and `server_config` cannot be written.
//!
//! Invariants: this server's own row is built from its live state (never from a copy
//! that a peer reported); rows are listed for connected servers only, as in RethinkDB.

use std::collections::BTreeMap;
use std::sync::Arc;

use datum::{Datum, Object, Str};
use serde::{Deserialize, Serialize};

use super::SystemTable;
use crate::Cluster;

/// One server as every server of the cluster reports it (exchanged between peers).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerRecord {
    /// Persistent server id (a UUID).
    pub id: String,
    /// Server name (unique in a healthy cluster).
    pub name: String,
    /// Server tags.
    pub tags: Vec<String>,
    /// Cache size in MB.
    pub cache_size_mb: f64,
    /// Whether the cache size was chosen by `auto`.
    pub cache_size_auto: bool,
    /// Where other servers reach it: `(host, port)`.
    pub canonical_addresses: Vec<(String, u16)>,
    /// Cluster port.
    pub cluster_port: u16,
    /// Driver port.
    pub reql_port: u16,
    /// HTTP admin port.
    pub http_port: u16,
    /// Host name.
    pub hostname: String,
    /// Command line.
    pub argv: Vec<String>,
    /// Process id.
    pub pid: u32,
    /// Version string (`process.version`).
    pub version: String,
    /// Seconds since the epoch when it started.
    pub time_started: f64,
    /// Seconds since the epoch when the reporting server connected to it (its own
    /// start for itself).
    pub time_connected: f64,
    /// Its view of the others: name → connected.
    pub connected_to: BTreeMap<String, bool>,
    /// Whether its catalog is replicated (a member, or a would-be member, of the
    /// cluster's catalog group): what a single server waits for before it converts.
    #[serde(default)]
    pub replicated: bool,
}

/// The membership layer, as the system tables need it.
pub trait Membership: Send + Sync {
    /// The connected peers (not this server), as they last described themselves.
    fn peers(&self) -> Vec<ServerRecord>;
    /// This server's view of the servers it knows: name → connected.
    fn connected_to(&self) -> BTreeMap<String, bool>;
    /// Sets the name and tags of server `id` (this one or a connected peer): the server
    /// applies and persists them. The error is RethinkDB's message.
    fn configure(&self, id: &str, name: &str, tags: &[String]) -> Result<(), String>;
    /// `cluster_config`'s heartbeat was written here (to be spread to the peers).
    fn heartbeat_written(&self, secs: f64);
    /// Every server it has heard from, connected or not: id → name (for naming a
    /// disconnected replica in `table_status`).
    fn names(&self) -> BTreeMap<String, String>;
    /// Each connected peer's query counters (`rethinkdb.stats`), asked of all at once:
    /// none of a peer that does not answer in time. Called on an evaluation thread.
    fn peer_stats(&self) -> Vec<super::ServerStats>;
}

/// The version string `server_status` shows.
pub fn version_string() -> String {
    format!("rethinkdb 2.4.4 (Ponder {})", env!("CARGO_PKG_VERSION"))
}

fn obj(pairs: Vec<(&str, Datum)>) -> Datum {
    let m: Object = pairs.into_iter().map(|(k, v)| (Str::from(k), v)).collect();
    Datum::object(m)
}

fn time(secs: f64) -> Datum {
    datum::ptype::make_time(secs, "+00:00")
}

fn strs(v: &[String]) -> Datum {
    Datum::array(v.iter().map(|s| Datum::str(s)).collect())
}

impl Cluster {
    /// Registers the membership layer (the system tables list its peers from now on).
    pub fn set_membership(&self, m: Arc<dyn Membership>) {
        *self.admin.membership.write() = Some(m);
    }

    pub(super) fn membership(&self) -> Option<Arc<dyn Membership>> {
        self.admin.membership.read().clone()
    }

    /// The names of every server this one knows (connected or not, itself included):
    /// id → name.
    pub(crate) fn server_names(&self) -> std::collections::HashMap<String, String> {
        let mut names: std::collections::HashMap<String, String> = self
            .membership()
            .map(|m| m.names().into_iter().collect())
            .unwrap_or_default();
        names.extend(self.server_records().into_iter().map(|r| (r.id, r.name)));
        names
    }

    /// This server's name.
    pub fn server_name(&self) -> String {
        self.admin.identity.read().0.clone()
    }

    /// This server's tags.
    pub fn server_tags(&self) -> Vec<String> {
        self.admin.identity.read().1.clone()
    }

    /// Sets this server's name and tags (the caller persists them).
    pub fn set_server_identity(&self, name: &str, tags: &[String]) {
        *self.admin.identity.write() = (name.to_string(), tags.to_vec());
    }

    /// `cluster_config`'s `heartbeat_timeout_secs`.
    pub fn heartbeat_secs(&self) -> f64 {
        *self.admin.heartbeat.lock()
    }

    /// Sets `heartbeat_timeout_secs` (a value a peer spread; not spread again).
    pub fn set_heartbeat_secs(&self, secs: f64) {
        *self.admin.heartbeat.lock() = secs;
    }

    /// This server as its peers and system tables see it.
    pub fn local_record(&self) -> ServerRecord {
        let info = self.admin.info.lock().clone();
        let (name, mut tags) = self.admin.identity.read().clone();
        // A set in RethinkDB: shown sorted, once each.
        tags.sort();
        tags.dedup();
        ServerRecord {
            id: self.admin.server_id.clone(),
            name,
            tags,
            cache_size_mb: info.cache_size_mb,
            cache_size_auto: info.cache_size_auto,
            canonical_addresses: if info.canonical_addresses.is_empty() {
                vec![("127.0.0.1".into(), info.cluster_port)]
            } else {
                info.canonical_addresses.clone()
            },
            cluster_port: info.cluster_port,
            reql_port: info.reql_port,
            http_port: info.http_port,
            hostname: info.hostname.clone(),
            argv: info.argv.clone(),
            pid: std::process::id(),
            version: version_string(),
            time_started: self.admin.started,
            time_connected: self.admin.started,
            connected_to: self
                .membership()
                .map(|m| m.connected_to())
                .unwrap_or_default(),
            replicated: self.is_replicated(),
        }
    }

    /// Every connected server, this one first.
    pub fn server_records(&self) -> Vec<ServerRecord> {
        let mut all = vec![self.local_record()];
        if let Some(m) = self.membership() {
            all.extend(m.peers());
        }
        all
    }
}

/// `server_config` rows.
pub(super) fn config_rows(c: &Cluster) -> Vec<Datum> {
    c.server_records().iter().map(config_row).collect()
}

fn config_row(s: &ServerRecord) -> Datum {
    obj(vec![
        (
            "cache_size_mb",
            if s.cache_size_auto || s.cache_size_mb <= 0.0 {
                Datum::str("auto")
            } else {
                Datum::Number(s.cache_size_mb)
            },
        ),
        ("id", Datum::str(&s.id)),
        ("name", Datum::str(&s.name)),
        ("tags", strs(&s.tags)),
    ])
}

/// `server_status` rows.
pub(super) fn status_rows(c: &Cluster) -> Vec<Datum> {
    c.server_records().iter().map(status_row).collect()
}

fn status_row(s: &ServerRecord) -> Datum {
    let port = |p: u16| Datum::Number(f64::from(p));
    let connected: Object = s
        .connected_to
        .iter()
        .map(|(name, up)| (Str::from(name.as_str()), Datum::Bool(*up)))
        .collect();
    obj(vec![
        ("id", Datum::str(&s.id)),
        ("name", Datum::str(&s.name)),
        (
            "network",
            obj(vec![
                (
                    "canonical_addresses",
                    Datum::array(
                        s.canonical_addresses
                            .iter()
                            .map(|(h, p)| obj(vec![("host", Datum::str(h)), ("port", port(*p))]))
                            .collect(),
                    ),
                ),
                ("cluster_port", port(s.cluster_port)),
                ("connected_to", Datum::object(connected)),
                ("hostname", Datum::str(&s.hostname)),
                ("http_admin_port", port(s.http_port)),
                ("reql_port", port(s.reql_port)),
                ("time_connected", time(s.time_connected)),
            ]),
        ),
        (
            "process",
            obj(vec![
                ("argv", strs(&s.argv)),
                ("cache_size_mb", Datum::Number(s.cache_size_mb)),
                ("pid", Datum::Number(f64::from(s.pid))),
                ("time_started", time(s.time_started)),
                ("version", Datum::str(&s.version)),
            ]),
        ),
    ])
}

/// A write to `server_config`: a rename or retag of an existing (connected) server.
pub(super) fn config_put(t: &SystemTable, old: Option<&Datum>, new: &Datum) -> Result<(), String> {
    let c = &t.cluster;
    let Some(old) = old else {
        return Err(
            "It's illegal to insert new rows into the `rethinkdb.server_config` table.".into(),
        );
    };
    let Some(m) = c.membership() else {
        return Err("It's illegal to write to the `rethinkdb.server_config` table.".into());
    };
    let wrong = |e: String| {
        format!(
            "The row you're trying to put into `rethinkdb.server_config` has the wrong format. {e}"
        )
    };
    let id = old.get("id").and_then(Datum::as_str).unwrap_or_default();
    let name = match new.get("name") {
        Some(d) => {
            server_name_of(d, "server name").map_err(|e| wrong(format!("In `name`: {e}")))?
        }
        None => return Err(wrong("Expected a field named `name`.".into())),
    };
    let tags = match new.get("tags").and_then(Datum::as_array) {
        Some(a) => {
            let mut tags = Vec::new();
            for d in a.iter() {
                let tag = server_name_of(d, "server tag")
                    .map_err(|e| wrong(format!("In `tags`: {e}")))?;
                if !tags.contains(&tag) {
                    tags.push(tag);
                }
            }
            tags
        }
        None => {
            return Err(wrong(match new.get("tags") {
                None => "Expected a field named `tags`.".into(),
                Some(d) => format!(
                    "In `tags`: Expected an array, got {}.",
                    d.to_pretty_string()
                ),
            }))
        }
    };
    if new.get("cache_size_mb") != old.get("cache_size_mb") {
        // Departure: the cache is sized at start-up (`--cache-size`).
        return Err("Changing `cache_size_mb` of a running server is not supported; restart it with `--cache-size`.".into());
    }
    if let Some(extra) = new.as_object().and_then(|o| {
        o.keys()
            .find(|k| !["id", "name", "tags", "cache_size_mb"].contains(&&***k))
            .map(|k| k.to_string())
    }) {
        return Err(wrong(format!("Unexpected key(s) `{extra}`.")));
    }
    let old_name = old.get("name").and_then(Datum::as_str).unwrap_or_default();
    if name != old_name {
        if let Some(other) = c
            .server_records()
            .iter()
            .find(|s| s.name == name && s.id != id)
        {
            return Err(format!(
                "Cannot rename server `{old_name}` to `{name}` because server `{}` already exists.",
                other.name
            ));
        }
    }
    m.configure(id, &name, &tags)
}

fn server_name_of(d: &Datum, what: &str) -> Result<String, String> {
    match d.as_str() {
        Some(s) if reql::terms::db::valid_name(s) => Ok(s.to_string()),
        Some(s) => Err(format!(
            "{what} `{s}` invalid (Use A-Z, a-z, 0-9, _ and - only)."
        )),
        None => Err(format!("Expected a {what}; got {}.", d.to_pretty_string())),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A record with only an id and a name (the tests of this module and `issues`).
    pub(crate) fn rec(id: &str, name: &str) -> ServerRecord {
        ServerRecord {
            id: id.into(),
            name: name.into(),
            ..ServerRecord::default()
        }
    }

    #[test]
    fn rows_show_rethinkdbs_fields() {
        let mut s = rec("id1", "one");
        s.tags = vec!["default".into()];
        s.connected_to.insert("two".into(), false);
        s.canonical_addresses = vec![("127.0.0.1".into(), 29015)];
        let row = status_row(&s);
        let net = row.get("network").unwrap();
        assert_eq!(
            net.get("connected_to").unwrap().get("two"),
            Some(&Datum::Bool(false))
        );
        assert_eq!(net.get("cluster_port"), Some(&Datum::Number(0.0)));
        let conf = config_row(&s);
        assert_eq!(conf.get("cache_size_mb"), Some(&Datum::str("auto")));
        assert_eq!(conf.get("tags"), Some(&strs(&["default".to_string()])));
    }
}
