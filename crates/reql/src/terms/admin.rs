//! Administration terms: `config`, `status`, `grant`, `reconfigure` and `rebalance`.
//!
//! `config()` is a single selection on the `rethinkdb.table_config`/`db_config` row,
//! so `config().update(...)` writes through the system table (RethinkDB's behaviour).
//! On one server `reconfigure` records the shard and replica counts (honouring
//! `dry_run`) and `rebalance` has nothing to move; both answer in RethinkDB's shapes
//! and validate their options with RethinkDB's messages.

use datum::Datum;

use crate::error::{logic, op_failed, Result, WithFrame};
use crate::eval::{describe, Ev};
use crate::value::{SingleSel, Val};

fn expected_table(v: &Val) -> crate::error::ReqlError {
    logic(format!(
        "Expected type TABLE but found {}:\n{}",
        v.kind_name(),
        describe(v)
    ))
}

/// CONFIG of a table or database: a writable single selection.
pub fn config(ev: &Ev) -> Result<Val> {
    let (table, key) = match ev.arg(0)? {
        Val::Table(t) => ev.ctx.access.table_config_row(t.db(), t.name())?,
        Val::Db(d) => ev.ctx.access.db_config_row(&d)?,
        other => return Err(expected_table(&other)),
    };
    let doc = table.get(&key)?.unwrap_or(Datum::Null);
    Ok(Val::Single(SingleSel { table, key, doc }))
}

/// STATUS of a table.
pub fn status(ev: &Ev) -> Result<Val> {
    match ev.arg(0)? {
        Val::Table(t) => ev.ctx.access.table_status(t.db(), t.name()).map(Val::Datum),
        other => Err(expected_table(&other)),
    }
}

/// GRANT at the global (`r.grant`), database or table scope.
pub fn grant(ev: &Ev) -> Result<Val> {
    let (db, table, first) = if ev.nargs() == 3 {
        match ev.arg(0)? {
            Val::Db(d) => (Some(d), None, 1),
            Val::Table(t) => (Some(t.db().to_string()), Some(t.name().to_string()), 1),
            other => return Err(expected_table(&other)).at(0),
        }
    } else {
        (None, None, 0)
    };
    let user = ev.string(first)?;
    let perms = ev.datum(first + 1)?;
    ev.ctx
        .access
        .grant(db.as_deref(), table.as_deref(), &user, &perms)
        .map(Val::Datum)
}

/// The tables a `reconfigure`/`rebalance` applies to: one table, or every table of a
/// database.
fn targets(ev: &Ev, term: &str) -> Result<(Vec<(String, String)>, bool)> {
    if ev.nargs() == 0 {
        return Err(not_on_table_or_db(term));
    }
    match ev.arg(0)? {
        Val::Table(t) => Ok((vec![(t.db().to_string(), t.name().to_string())], false)),
        Val::Db(d) => {
            let names = ev.ctx.access.table_list(&d)?;
            Ok((names.into_iter().map(|n| (d.clone(), n)).collect(), true))
        }
        _ => Err(not_on_table_or_db(term)),
    }
}

/// RethinkDB's error for `wait`, `reconfigure` and `rebalance` without a table or
/// database to work on.
pub fn not_on_table_or_db(term: &str) -> crate::error::ReqlError {
    logic(format!(
        "`{term}` can only be called on a table or database."
    ))
}

fn concat(results: &[Datum], field: &str) -> Datum {
    let mut all = Vec::new();
    for r in results {
        if let Some(a) = r.get(field).and_then(Datum::as_array) {
            all.extend(a.iter().cloned());
        }
    }
    Datum::array(all)
}

/// Validates `replicas` (a number, or an object of server tag → count with a
/// `primary_replica_tag`) and returns the total (RethinkDB's `get_replicas_and_primary`
/// and the checks of `table_generate_config` that need no server; placing the replicas
/// on servers is the catalog's check). `reconfigure` requires the option; `table_create`
/// (`required` false) defaults it to one replica in the tag `default`.
pub fn replicas_opt(ev: &Ev, required: bool) -> Result<u32> {
    let replicas = match ev.opt_datum("replicas")? {
        Some(r) => r,
        None if required => return Err(logic("Missing required argument `replicas`.")),
        // Without `replicas`, a `primary_replica_tag` still has to name a tag that has
        // replicas (RethinkDB's default is one replica in `default`).
        None if ev.term.optarg("primary_replica_tag").is_some() => {
            Datum::from_pairs([("default", Datum::Number(1.0))])
        }
        None => return Ok(1),
    };
    let primary = ev.opt_datum("primary_replica_tag")?;
    let nonvoting = ev.opt_datum("nonvoting_replica_tags")?;
    match &replicas {
        Datum::Number(n) => {
            if primary.is_some() {
                return Err(logic(
                    "`replicas` must be an OBJECT if `primary_replica_tag` is specified.",
                ));
            }
            if nonvoting.is_some() {
                return Err(logic(
                    "`replicas` must be an OBJECT if `nonvoting_replica_tags` is specified.",
                ));
            }
            if *n < 0.0 {
                return Err(logic("Can't have a negative number of replicas"));
            }
            if n.fract() != 0.0 {
                return Err(logic(format!(
                    "Number not an integer: {}",
                    replicas.to_json_string()
                )));
            }
            if *n == 0.0 {
                return Err(op_failed("You must set `replicas` to at least one. `replicas` includes the primary replica; if there are zero replicas, there is nowhere to put the data."));
            }
            Ok(*n as u32)
        }
        Datum::Object(m) => {
            let Some(primary) = primary else {
                return Err(logic(
                    "`primary_replica_tag` must be specified when `replicas` is an OBJECT.",
                ));
            };
            let mut total = 0.0;
            for v in m.values() {
                let n = v
                    .as_f64()
                    .ok_or_else(|| crate::eval::type_error("NUMBER", v))?;
                if n < 0.0 {
                    return Err(logic("Can't have a negative number of replicas"));
                }
                total += n;
            }
            let tag = primary.as_str().unwrap_or_default();
            if !m.contains_key(tag) {
                return Err(op_failed(format!("Can't use server tag `{tag}` for primary replicas because you specified no replicas in server tag `{tag}`.")));
            }
            if let Some(tags) = nonvoting.as_ref().and_then(Datum::as_array) {
                for t in tags.iter() {
                    let t = t.as_str().unwrap_or_default();
                    if !m.contains_key(t) {
                        return Err(op_failed(format!("You specified that the replicas in server tag `{t}` should be non-voting, but you didn't specify a number of replicas in server tag `{t}`.")));
                    }
                }
            }
            if total == 0.0 {
                return Err(op_failed("You must set `replicas` to at least one. `replicas` includes the primary replica; if there are zero replicas, there is nowhere to put the data."));
            }
            for (k, v) in m.iter() {
                let n = v.as_f64().unwrap_or(0.0);
                if &**k != "default" && n > 0.0 {
                    return Err(op_failed(format!("Can't put {} replicas on servers with the tag `{k}` because there are only 0 servers with the tag `{k}`. It's impossible to have more replicas of the data than there are servers.", Datum::Number(n).to_json_string())));
                }
            }
            Ok(total as u32)
        }
        other => Err(crate::eval::type_error("NUMBER", other)).at_opt("replicas"),
    }
}

/// RECONFIGURE of a table or of every table in a database.
pub fn reconfigure(ev: &Ev) -> Result<Val> {
    let (tables, whole_db) = targets(ev, "reconfigure")?;
    let dry_run = match ev.opt_datum("dry_run")? {
        None => false,
        Some(Datum::Bool(b)) => b,
        Some(d) => return Err(crate::eval::type_error("BOOL", &d)).at_opt("dry_run"),
    };
    if let Some(rep) = ev.opt_datum("emergency_repair")? {
        if !matches!(rep, Datum::Null) {
            if whole_db {
                return Err(logic("Can't emergency repair an entire database at once; instead you should run `reconfigure()` on each table individually."));
            }
            match rep.as_str() {
                Some("unsafe_rollback" | "unsafe_rollback_or_erase") => {}
                _ => {
                    return Err(logic(
                        "`emergency_repair` should be \"unsafe_rollback\" or \"unsafe_rollback_or_erase\"",
                    ))
                }
            }
            if ev.opt_datum("shards")?.is_some() || ev.opt_datum("replicas")?.is_some() {
                return Err(logic(
                    "In emergency repair mode, you can't specify shards, replicas, etc.",
                ));
            }
            return Err(op_failed("This table doesn't need to be repaired."));
        }
    }
    let shards = match ev.opt_datum("shards")? {
        None => return Err(logic("Missing required argument `shards`.")),
        Some(Datum::Number(n)) if n < 1.0 => {
            return Err(logic("Every table must have at least one shard."))
        }
        Some(Datum::Number(n)) if n > 64.0 => return Err(logic("Maximum number of shards is 64.")),
        Some(Datum::Number(n)) if n.fract() == 0.0 => n as u32,
        Some(d) => return Err(crate::eval::type_error("NUMBER", &d)).at_opt("shards"),
    };
    let replicas = replicas_opt(ev, true)?;
    let mut results = Vec::new();
    for (db, name) in &tables {
        results.push(
            ev.ctx
                .access
                .reconfigure(db, name, shards, replicas, dry_run)?,
        );
    }
    let mut pairs = vec![
        (
            "reconfigured",
            Datum::from(if dry_run { 0 } else { results.len() }),
        ),
        ("config_changes", concat(&results, "config_changes")),
    ];
    if !dry_run {
        pairs.push(("status_changes", concat(&results, "status_changes")));
    }
    Ok(Val::Datum(Datum::from_pairs(pairs)))
}

/// REBALANCE: each table's shards cut anew at the quantiles of its data.
pub fn rebalance(ev: &Ev) -> Result<Val> {
    let (tables, _) = targets(ev, "rebalance")?;
    let mut changes = Vec::new();
    for (db, name) in &tables {
        changes.push(ev.ctx.access.rebalance(db, name)?);
    }
    Ok(Val::Datum(Datum::from_pairs([
        ("rebalanced", Datum::from(tables.len())),
        ("status_changes", Datum::array(changes)),
    ])))
}
