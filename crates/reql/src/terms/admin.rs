//! Administration terms: `config`, `status`, `grant`, `reconfigure` and `rebalance`.
//!
//! `config()` is a single selection on the `rethinkdb.table_config`/`db_config` row,
//! so `config().update(...)` writes through the system table (RethinkDB's behaviour).
//! `reconfigure` reads its options here (types only) and leaves placing them to the
//! catalog (`TableAccess::reconfigure`, which honours `dry_run`); `rebalance` re-cuts
//! shards; both answer in RethinkDB's shapes and messages.

use datum::Datum;

use crate::access::Replicas;
use crate::error::{logic, Result, WithFrame};
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

/// Reads `replicas` (a number, or an object of server tag → count with a
/// `primary_replica_tag`) and `nonvoting_replica_tags`, checking their types
/// (RethinkDB's `get_replicas_and_primary`); whether they can be placed — zero
/// replicas, tags without servers or replicas — is the catalog's check
/// (`cluster::placement`, RethinkDB's `table_generate_config`). `reconfigure` requires
/// the option; `table_create` (`required` false) defaults it to one replica in the tag
/// `default`.
pub fn replicas_opt(ev: &Ev, required: bool) -> Result<Replicas> {
    let primary = match ev.opt_datum("primary_replica_tag")? {
        None => None,
        Some(Datum::String(s)) => Some(s.to_string()),
        Some(d) => return Err(crate::eval::type_error("STRING", &d)).at_opt("primary_replica_tag"),
    };
    let nonvoting = match ev.opt_datum("nonvoting_replica_tags")? {
        None => None,
        Some(Datum::Array(a)) => {
            let mut tags = std::collections::BTreeSet::new();
            for t in a.iter() {
                match t.as_str() {
                    Some(t) => tags.insert(t.to_string()),
                    None => {
                        return Err(crate::eval::type_error("STRING", t))
                            .at_opt("nonvoting_replica_tags")
                    }
                };
            }
            Some(tags)
        }
        Some(d) => {
            return Err(crate::eval::type_error("ARRAY", &d)).at_opt("nonvoting_replica_tags")
        }
    };
    let mut out = Replicas::count(1);
    let replicas = match ev.opt_datum("replicas")? {
        Some(r) => r,
        None if required => return Err(logic("Missing required argument `replicas`.")),
        // RethinkDB's default, one replica in `default`, still meets the other options.
        None => {
            if let Some(p) = primary {
                out.primary_tag = p;
            }
            out.nonvoting_tags = nonvoting.unwrap_or_default();
            return Ok(out);
        }
    };
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
            out.by_tag.insert("default".into(), count(&replicas, *n)?);
            Ok(out)
        }
        Datum::Object(m) => {
            let Some(primary) = primary else {
                return Err(logic(
                    "`primary_replica_tag` must be specified when `replicas` is an OBJECT.",
                ));
            };
            out.by_tag.clear();
            for (k, v) in m.iter() {
                let n = v
                    .as_f64()
                    .ok_or_else(|| crate::eval::type_error("NUMBER", v))?;
                out.by_tag.insert(k.to_string(), count(v, n)?);
            }
            out.primary_tag = primary;
            out.nonvoting_tags = nonvoting.unwrap_or_default();
            Ok(out)
        }
        other => Err(crate::eval::type_error("NUMBER", other)).at_opt("replicas"),
    }
}

/// A replica count: a non-negative integer.
fn count(d: &Datum, n: f64) -> Result<u32> {
    if n < 0.0 {
        return Err(logic("Can't have a negative number of replicas"));
    }
    if n.fract() != 0.0 {
        return Err(logic(format!(
            "Number not an integer: {}",
            d.to_json_string()
        )));
    }
    if n > f64::from(u32::MAX) {
        return Err(logic(format!("Integer too large: {}", d.to_json_string())));
    }
    Ok(n as u32)
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
            let erase = match rep.as_str() {
                Some("unsafe_rollback") => false,
                Some("unsafe_rollback_or_erase") => true,
                _ => {
                    return Err(logic(
                        "`emergency_repair` should be \"unsafe_rollback\" or \"unsafe_rollback_or_erase\"",
                    ))
                }
            };
            if ev.opt_datum("shards")?.is_some() || ev.opt_datum("replicas")?.is_some() {
                return Err(logic(
                    "In emergency repair mode, you can't specify shards, replicas, etc.",
                ));
            }
            let mut results = Vec::new();
            for (db, name) in &tables {
                results.push(ev.ctx.access.emergency_repair(db, name, erase, dry_run)?);
            }
            return Ok(Val::Datum(reconfigured(&results, dry_run)));
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
                .reconfigure(db, name, shards, &replicas, dry_run)?,
        );
    }
    Ok(Val::Datum(reconfigured(&results, dry_run)))
}

/// `reconfigure`'s answer from each table's result.
fn reconfigured(results: &[Datum], dry_run: bool) -> Datum {
    let mut pairs = vec![
        (
            "reconfigured",
            Datum::from(if dry_run { 0 } else { results.len() }),
        ),
        ("config_changes", concat(results, "config_changes")),
    ];
    if !dry_run {
        pairs.push(("status_changes", concat(results, "status_changes")));
    }
    Datum::from_pairs(pairs)
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
