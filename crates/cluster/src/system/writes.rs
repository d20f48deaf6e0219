//! Writes to system tables: validation with RethinkDB's messages, then the change
//! applied to the catalog, the users or the job registry.

use datum::Datum;
use reql::Durability;

use super::alter::TableAlter;
use super::{Kind, SystemTable, SYSTEM_DB};
use crate::auth::{Perm, Scope};
use crate::catalog::TableEntry;
use crate::placement::ShardPlacement;

type R = Result<(), String>;

/// Applies an insert or replacement of the row under `key`.
pub(super) fn put(t: &SystemTable, key: &Datum, old: Option<&Datum>, new: &Datum) -> R {
    match t.kind {
        Kind::TableConfig => match old {
            Some(old) => table_config_update(t, old, new),
            None => table_config_insert(t, key, new),
        },
        Kind::DbConfig => db_config_put(t, key, old, new),
        Kind::Users => match key.as_str() {
            Some(name) => t.cluster.users.write_row(name, Some(new)),
            None => Err(format!(
                "Expected a username as the primary key, got {}",
                key.to_pretty_string()
            )),
        },
        Kind::Permissions => permissions_put(t, key, new),
        Kind::DebugScratch => {
            t.cluster
                .admin
                .scratch
                .lock()
                .insert(key.clone(), new.clone());
            Ok(())
        }
        Kind::ClusterConfig => cluster_config_put(t, old, new),
        Kind::ServerConfig => super::servers::config_put(t, old, new),
        other => Err(read_only(other)),
    }
}

/// Applies a deletion of the (existing) row under `key`.
pub(super) fn delete(t: &SystemTable, key: &Datum, old: Option<&Datum>) -> R {
    use reql::TableAccess;
    let c = &t.cluster;
    match t.kind {
        Kind::TableConfig => {
            let e = key
                .as_str()
                .and_then(|id| c.table_by_id(id))
                .ok_or("The table does not exist.")?;
            require_config(t, Some(&e))?;
            c.table_drop(&e.db, &e.name)
                .map(|_| ())
                .map_err(|e| e.message)
        }
        Kind::DbConfig => {
            let name = old
                .and_then(|o| o.get("name"))
                .and_then(Datum::as_str)
                .ok_or("The database does not exist.")?
                .to_string();
            require_config(t, None)?;
            c.db_drop(&name).map(|_| ()).map_err(|e| e.message)
        }
        Kind::Users => match key.as_str() {
            Some(name) => c.users.write_row(name, None),
            None => Err("Expected a username as the primary key.".into()),
        },
        Kind::Permissions => {
            let (user, scope) = parse_permission_key(t, key)?;
            c.users
                .set_scope(&user, &scope, |p| {
                    *p = Default::default();
                    Ok(())
                })
                .map(|_| ())
        }
        Kind::Jobs => {
            let id = key
                .as_array()
                .and_then(|a| a.get(1))
                .and_then(Datum::as_str)
                .unwrap_or_default();
            // Only one's own queries (admin: any), as RethinkDB.
            let viewer = t.user.as_str();
            c.admin
                .jobs
                .cancel_if(id, |owner| viewer == crate::auth::ADMIN || owner == viewer);
            Ok(())
        }
        Kind::DebugScratch => {
            c.admin.scratch.lock().remove(key);
            Ok(())
        }
        other => Err(read_only(other)),
    }
}

fn read_only(k: Kind) -> String {
    match k {
        Kind::Logs => "It's illegal to write to the `rethinkdb.logs` system table.".into(),
        _ => format!(
            "It's illegal to write to the `rethinkdb.{}` table.",
            k.name()
        ),
    }
}

/// Fails unless the user may change this table's (or, with `None`, any) configuration.
fn require_config(t: &SystemTable, e: Option<&TableEntry>) -> R {
    let c = &t.cluster;
    let (db, table) = match e {
        Some(e) => (c.db_id_of(&e.db), Some(e.id.clone())),
        None => (None, None),
    };
    if c.users.allowed(
        &t.user,
        Perm::Config,
        db.as_deref(),
        table.as_deref(),
        false,
    ) {
        Ok(())
    } else {
        Err(format!(
            "User `{}` does not have the required `config` permission.",
            t.user
        ))
    }
}

fn field<'a>(new: &'a Datum, k: &str) -> Result<&'a Datum, String> {
    new.get(k)
        .ok_or_else(|| format!("Expected a field named `{k}`."))
}

fn no_extra(new: &Datum, allowed: &[&str]) -> R {
    let extra: Vec<&str> = new
        .as_object()
        .map(|o| {
            o.keys()
                .map(|k| &**k)
                .filter(|k| !allowed.contains(k))
                .collect()
        })
        .unwrap_or_default();
    if extra.is_empty() {
        Ok(())
    } else {
        Err(format!("Unexpected key(s) `{}`.", extra.join("`, `")))
    }
}

fn name_of(d: &Datum, what: &str) -> Result<String, String> {
    match d.as_str() {
        Some(s) if reql::terms::db::valid_name(s) => Ok(s.to_string()),
        Some(s) => Err(format!(
            "{what} `{s}` invalid (Use A-Z, a-z, 0-9, _ and - only)."
        )),
        None => Err(format!("Expected a {what}; got {}.", d.to_pretty_string())),
    }
}

/// Resolves the `db` field (a name, or an id with `identifier_format: "uuid"`).
fn db_of(t: &SystemTable, d: &Datum) -> Result<String, String> {
    let c = &t.cluster;
    if t.uuids {
        let id = d
            .as_str()
            .ok_or_else(|| format!("Expected a UUID; got {}", d.to_pretty_string()))?;
        c.db_name_of(id)
            .ok_or_else(|| format!("There is no database with UUID `{id}`."))
    } else {
        let n = name_of(d, "database name")?;
        if c.db_id_of(&n).is_none() || n == SYSTEM_DB {
            return Err(format!("Database `{n}` does not exist."));
        }
        Ok(n)
    }
}

fn durability_of(d: &Datum) -> Result<Durability, String> {
    d.as_str().and_then(Durability::parse).ok_or_else(|| {
        format!(
            "In `durability`: Expected \"soft\" or \"hard\", got: {}",
            d.to_pretty_string()
        )
    })
}

/// The number of shards and replicas a `shards` value describes, and (a replicated
/// catalog's table) the placement it names: each shard's primary, voting and
/// non-voting replicas by server id, checked as RethinkDB checks them.
fn shards_of(t: &SystemTable, d: &Datum) -> Result<(u32, u32, Vec<ShardPlacement>), String> {
    let items = d.as_array().ok_or_else(|| {
        format!(
            "In `shards`: Expected an array, got {}",
            d.to_pretty_string()
        )
    })?;
    if items.is_empty() {
        return Err("In `shards`: You must specify at least one shard.".into());
    }
    // Any connected server, by name or id, when the catalog is replicated; otherwise
    // tables are this server's alone.
    let servers = if t.cluster.is_replicated() {
        t.cluster.server_records()
    } else {
        vec![t.cluster.local_record()]
    };
    let id_of = |n: &Datum| -> Result<(String, String), String> {
        let n = n.as_str().unwrap_or_default();
        servers
            .iter()
            .find(|r| r.name == n || r.id == n)
            .map(|r| (r.id.clone(), r.name.clone()))
            .ok_or_else(|| format!("In `shards`: Server `{n}` does not exist or is not connected."))
    };
    let list = |s: &Datum, field: &str| -> Result<Vec<(String, String)>, String> {
        let mut out: Vec<(String, String)> = Vec::new();
        for r in s.get(field).and_then(Datum::as_array).unwrap_or_default() {
            let server = id_of(r)?;
            if !out.contains(&server) {
                out.push(server);
            }
        }
        Ok(out)
    };
    let mut replicas = 1;
    let mut placement = Vec::with_capacity(items.len());
    for s in items {
        if s.get("replicas").and_then(Datum::as_array).is_none() {
            return Err("In `shards`: Expected a field named `replicas`.".to_string());
        }
        let all = list(s, "replicas")?;
        if all.is_empty() {
            return Err("You must specify at least one replica for each shard.".into());
        }
        let nonvoting = list(s, "nonvoting_replicas")?;
        if nonvoting.iter().any(|n| !all.contains(n)) {
            return Err(
                "In `shards`: Every server listed in the `nonvoting_replicas` field \
                        must also appear in `replicas`."
                    .into(),
            );
        }
        // Left out (a new table's row may omit it): the first voting replica.
        let primary = match s.get("primary_replica") {
            Some(p) => id_of(p)?,
            None => match all.iter().find(|r| !nonvoting.contains(r)) {
                Some(r) => r.clone(),
                None => all[0].clone(),
            },
        };
        if !all.contains(&primary) {
            return Err(format!(
                "In `shards`: The server listed in the `primary_replica` field (`{}`) must \
                 also appear in `replicas`.",
                primary.1
            ));
        }
        if nonvoting.contains(&primary) {
            return Err(format!(
                "In `shards`: The primary replica (`{}`) must not be a nonvoting replica.",
                primary.1
            ));
        }
        replicas = all.len() as u32;
        let ids = |v: &[(String, String)]| v.iter().map(|(id, _)| id.clone()).collect();
        let voting: Vec<(String, String)> = all
            .iter()
            .filter(|r| !nonvoting.contains(r))
            .cloned()
            .collect();
        placement.push(ShardPlacement {
            primary: primary.0,
            voting: ids(&voting),
            nonvoting: ids(&nonvoting),
            incarnations: Default::default(),
            lineage: Default::default(),
        });
    }
    Ok((items.len() as u32, replicas, placement))
}

const TABLE_KEYS: &[&str] = &[
    "db",
    "durability",
    "id",
    "indexes",
    "name",
    "primary_key",
    "shards",
    "write_acks",
    "write_hook",
];

/// `write_acks`: `true` for `"single"`.
fn write_acks_of(d: &Datum) -> Result<bool, String> {
    match d.as_str().and_then(crate::catalog::parse_write_acks) {
        Some(single) => Ok(single),
        None => Err(format!(
            "In `write_acks`: Expected \"single\" or \"majority\", got: {}",
            d.to_pretty_string()
        )),
    }
}

fn table_config_update(t: &SystemTable, old: &Datum, new: &Datum) -> R {
    let c = &t.cluster;
    let id = old.get("id").and_then(Datum::as_str).unwrap_or_default();
    let e = c.table_by_id(id).ok_or("The table does not exist.")?;
    require_config(t, Some(&e))?;
    let name = name_of(field(new, "name")?, "table name").map_err(|m| format!("In `name`: {m}"))?;
    let db = db_of(t, field(new, "db")?)?;
    field(new, "id")?;
    if field(new, "indexes")? != field(old, "indexes")? {
        return Err(
            "The `indexes` field is read-only and can't be used to create or drop indexes.".into(),
        );
    }
    let pk = field(new, "primary_key")?;
    let (shards, replicas, placement) = shards_of(t, field(new, "shards")?)?;
    // `shards` left as it was: nothing to re-place (a rename of a replicated table must
    // not move its replicas).
    let same_shards = field(new, "shards")? == field(old, "shards")?;
    let single_ack = write_acks_of(field(new, "write_acks")?)?;
    let durability = durability_of(field(new, "durability")?)?;
    // As in RethinkDB: the field may be left as it is, not changed.
    let old_hook = old.get("write_hook").cloned().unwrap_or(Datum::Null);
    if new.get("write_hook").is_some_and(|w| *w != old_hook) {
        return Err("The `write_hook` field is read-only and can't be used to create or drop a write hook function.".into());
    }
    no_extra(new, TABLE_KEYS)?;
    if pk.as_str() != Some(e.primary_key.as_str()) {
        return Err("It's illegal to change a table's primary key".into());
    }
    c.alter_table(
        &e.id,
        TableAlter {
            db: Some(db),
            name: Some(name),
            durability: Some(durability),
            single_ack: Some(single_ack),
            shards: (!same_shards).then_some(shards),
            replicas: (!same_shards).then_some(replicas),
            rebalance: false,
            // The servers named, where the catalog records placements.
            placement: (!same_shards && c.is_replicated()).then_some(placement),
            repair: false,
        },
    )
}

fn table_config_insert(t: &SystemTable, key: &Datum, new: &Datum) -> R {
    let id = key
        .as_str()
        .filter(|s| uuid::Uuid::parse_str(s).is_ok())
        .ok_or_else(|| format!("In `id`: Expected a UUID; got {}", key.to_pretty_string()))?;
    require_config(t, None)?;
    let name = name_of(field(new, "name")?, "table name").map_err(|m| format!("In `name`: {m}"))?;
    let db = db_of(t, field(new, "db")?)?;
    if new
        .get("indexes")
        .and_then(Datum::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        return Err("The `indexes` field is read-only and can't be used to create indexes.".into());
    }
    let primary_key = match new.get("primary_key") {
        None => "id".to_string(),
        Some(d) => d
            .as_str()
            .ok_or_else(|| {
                format!(
                    "In `primary_key`: Expected a string; got {}",
                    d.to_pretty_string()
                )
            })?
            .to_string(),
    };
    let durability = new.get("durability").map(durability_of).transpose()?;
    let (shards, replicas) = match new.get("shards") {
        Some(s) => shards_of(t, s).map(|(n, r, _)| (n, r))?,
        None => (1, 1),
    };
    let single_ack = new
        .get("write_acks")
        .map(write_acks_of)
        .transpose()?
        .unwrap_or(false);
    no_extra(new, TABLE_KEYS)?;
    t.cluster.create_table_with_id(TableEntry {
        id: id.to_string(),
        db,
        name,
        primary_key,
        durability: durability.unwrap_or(Durability::Hard),
        single_ack,
        shards,
        replicas,
        splits: crate::shards::uuid_splits(shards as usize),
        indexes: Default::default(),
        hook: None,
        placement: vec![],
        generation: 0,
        resharding: None,
        abandoned: Default::default(),
    })
}

fn db_config_put(t: &SystemTable, key: &Datum, old: Option<&Datum>, new: &Datum) -> R {
    require_config(t, None)?;
    let name =
        name_of(field(new, "name")?, "database name").map_err(|m| format!("In `name`: {m}"))?;
    field(new, "id")?;
    no_extra(new, &["id", "name"])?;
    let id = key
        .as_str()
        .filter(|s| uuid::Uuid::parse_str(s).is_ok())
        .ok_or_else(|| format!("In `id`: Expected a UUID; got {}", key.to_pretty_string()))?;
    match old {
        Some(_) => t.cluster.rename_db(id, &name),
        None => t.cluster.create_db_with_id(&name, id),
    }
}

fn cluster_config_put(t: &SystemTable, old: Option<&Datum>, new: &Datum) -> R {
    if old.is_none() {
        return Err(
            "It's illegal to insert new rows into the `rethinkdb.cluster_config` table.".into(),
        );
    }
    let v = field(new, "heartbeat_timeout_secs")?;
    no_extra(new, &["id", "heartbeat_timeout_secs"])?;
    match v.as_f64() {
        Some(n) if n >= 2.0 => {
            *t.cluster.admin.heartbeat.lock() = n;
            if let Some(m) = t.cluster.admin.membership.read().clone() {
                m.heartbeat_written(n);
            }
            Ok(())
        }
        _ => Err(format!(
            "In `heartbeat_timeout_secs`: Expected a number greater than or equal to 2, got {}",
            v.to_pretty_string()
        )),
    }
}

/// Parses a `permissions` primary key `[user, db id?, table id?]`.
fn parse_permission_key(t: &SystemTable, key: &Datum) -> Result<(String, Scope), String> {
    let c = &t.cluster;
    let items = key
        .as_array()
        .filter(|a| (1..=3).contains(&a.len()))
        .ok_or_else(|| {
            format!(
                "Expected an array of one to three items in the primary key, got {}.",
                key.to_pretty_string()
            )
        })?;
    let mut it = items.iter();
    let user = it
        .next()
        .and_then(Datum::as_str)
        .ok_or_else(|| {
            format!(
                "Expected a string as the username, got {}.",
                items
                    .first()
                    .map(Datum::to_pretty_string)
                    .unwrap_or_default()
            )
        })?
        .to_string();
    let db = match it.next() {
        None => return Ok((user, Scope::Global)),
        Some(d) => {
            let id = d
                .as_str()
                .filter(|s| uuid::Uuid::parse_str(s).is_ok())
                .ok_or_else(|| {
                    format!(
                        "Expected a UUID as the database, got {}.",
                        d.to_pretty_string()
                    )
                })?;
            if c.db_name_of(id).is_none() && id != super::system_id(SYSTEM_DB) {
                return Err(format!("No database with UUID `{id}` exists."));
            }
            id.to_string()
        }
    };
    match it.next() {
        None => Ok((user, Scope::Db(db))),
        Some(d) => {
            let id = d
                .as_str()
                .filter(|s| uuid::Uuid::parse_str(s).is_ok())
                .ok_or_else(|| {
                    format!(
                        "Expected a UUID as the table, got {}.",
                        d.to_pretty_string()
                    )
                })?;
            let ok = c
                .table_by_id(id)
                .is_some_and(|e| c.db_id_of(&e.db).as_deref() == Some(db.as_str()));
            if !ok {
                return Err(format!("No table with UUID `{id}` exists."));
            }
            Ok((user, Scope::Table(id.to_string())))
        }
    }
}

fn permissions_put(t: &SystemTable, key: &Datum, new: &Datum) -> R {
    let (user, scope) = parse_permission_key(t, key)?;
    if user == crate::auth::ADMIN {
        return Err(format!(
            "The permissions of the user `{user}` can't be modified."
        ));
    }
    if !t.cluster.users.exists(&user) {
        return Err(format!("No user named `{user}`."));
    }
    // RethinkDB 2.4's rows carry the user's name; a write may repeat it.
    if let Ok(named) = field(new, "user") {
        match named.as_str() {
            Some(n) if n == user => {}
            Some(_) => return Err("The key `user` does not match the primary key.".into()),
            None => {
                return Err(format!(
                    "Expected type STRING but found {}.",
                    named.type_name()
                ))
            }
        }
    }
    let perms =
        field(new, "permissions").map_err(|_| "Expected a field `permissions`.".to_string())?;
    let mut allowed = vec!["id", "permissions", "user"];
    if !matches!(scope, Scope::Global) {
        allowed.push("database");
    }
    if matches!(scope, Scope::Table(_)) {
        allowed.push("table");
    }
    no_extra(new, &allowed)?;
    let global = matches!(scope, Scope::Global);
    t.cluster
        .users
        .set_scope(&user, &scope, |p| p.merge(perms, global))
        .map(|_| ())
}
