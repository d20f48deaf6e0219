//! Catalog and table-access terms: `db`, `table`, `db_create`/`db_drop`/`db_list`,
//! `table_create`/`table_drop`/`table_list`, `config`, `sync`, `get` (`get_all` and `between` are in `index`).

use datum::Datum;

use crate::access::{Durability, TableOptions};
use crate::error::{logic, Result, WithFrame};
use crate::eval::{describe, Ev};
use crate::value::{SingleSel, Val};

/// RethinkDB's rule for database and table names.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

fn check_name(kind: &str, name: &str) -> Result<()> {
    if valid_name(name) {
        Ok(())
    } else {
        Err(logic(format!(
            "{kind} name `{name}` invalid (Use A-Z, a-z, 0-9, _ and - only)."
        )))
    }
}

/// DB.
pub fn db(ev: &Ev) -> Result<Val> {
    let name = ev.string(0)?;
    check_name("Database", &name).at(0)?;
    Ok(Val::Db(name))
}

/// The database of a term whose optional first argument is a DB (else the default).
fn db_and_rest(ev: &Ev) -> Result<(String, usize)> {
    if ev.nargs() >= 1 {
        if let Some(t) = ev.term.args.first() {
            if t.tt == proto::ql2::TermType::DB {
                if let Val::Db(d) = ev.arg(0)? {
                    // RethinkDB's `db` term checks that the database exists.
                    ev.ctx.access.check_db(&d).at(0)?;
                    return Ok((d, 1));
                }
            }
        }
    }
    Ok((ev.ctx.db.clone(), 0))
}

/// Argument `i` as a database that exists (RethinkDB's `db` term checks that, so a
/// missing database is charged to it).
fn expect_db(ev: &Ev, i: usize) -> Result<String> {
    match ev.arg(i)? {
        Val::Db(d) => {
            ev.ctx.access.check_db(&d).at(i)?;
            Ok(d)
        }
        other => Err(logic(format!(
            "Expected type DATABASE but found {}:\n{}",
            other.kind_name(),
            describe(&other)
        )))
        .at(i),
    }
}

/// TABLE: `r.table(name)` or `db.table(name)`.
pub fn table(ev: &Ev) -> Result<Val> {
    let (db, name) = if ev.nargs() == 2 {
        (expect_db(ev, 0)?, ev.string(1)?)
    } else {
        (ev.ctx.db.clone(), ev.string(0)?)
    };
    let i = ev.nargs() - 1;
    check_name("Table", &name).at(i)?;
    if ev.term.optarg("use_outdated").is_some() {
        return Err(logic(
            "The `use_outdated` optarg is no longer supported.  Use the `read_mode` optarg instead.",
        ));
    }
    let mut read_mode = crate::access::ReadMode::Single;
    if let Some(mode) = ev.opt_datum("read_mode")? {
        crate::eval::expect_str(&mode).at_opt("read_mode")?;
        match mode.as_str().and_then(crate::access::ReadMode::parse) {
            Some(m) => read_mode = m,
            None => {
                return Err(logic(format!(
                    "Read mode `{}` unrecognized (options are \"majority\", \"single\", and \"outdated\").",
                    mode.as_str().unwrap_or(&mode.to_json_string())
                )))
                .at_opt("read_mode")
            }
        }
    }
    let t = match ev.opt_datum("identifier_format")? {
        None if read_mode != crate::access::ReadMode::Single => {
            ev.ctx.access.table_read_mode(&db, &name, read_mode)?
        }
        None => ev.ctx.access.table(&db, &name)?,
        Some(f) => match f.as_str() {
            Some("name") => ev.ctx.access.table(&db, &name)?,
            Some("uuid") => ev.ctx.access.table_with_ids(&db, &name)?,
            _ => {
                return Err(logic(format!(
                    "Identifier format `{}` unrecognized (options are \"name\" and \"uuid\").",
                    f.as_str()
                        .map_or_else(|| f.to_json_string(), str::to_string)
                )))
            }
        },
    };
    Ok(Val::Table(ev.ctx.interruptible(t)))
}

/// DB_CREATE.
pub fn db_create(ev: &Ev) -> Result<Val> {
    let name = ev.string(0)?;
    check_name("Database", &name).at(0)?;
    ev.ctx.access.db_create(&name).map(Val::Datum)
}

/// DB_DROP.
pub fn db_drop(ev: &Ev) -> Result<Val> {
    let name = ev.string(0)?;
    check_name("Database", &name).at(0)?;
    ev.ctx.access.db_drop(&name).map(Val::Datum)
}

/// DB_LIST.
pub fn db_list(ev: &Ev) -> Result<Val> {
    let names = ev.ctx.access.db_list()?;
    Ok(Val::Datum(Datum::array(
        names.into_iter().map(Datum::from).collect(),
    )))
}

/// TABLE_CREATE.
pub fn table_create(ev: &Ev) -> Result<Val> {
    let (db, first) = if ev.nargs() == 2 {
        (expect_db(ev, 0)?, 1)
    } else {
        db_and_rest(ev)?
    };
    let name = ev.string(first)?;
    check_name("Table", &name).at(first)?;
    let primary_key = match ev.opt_datum("primary_key")? {
        None => "id".to_string(),
        Some(Datum::String(s)) => s.to_string(),
        Some(d) => return Err(crate::eval::type_error("STRING", &d)).at_opt("primary_key"),
    };
    let durability = match ev.opt_datum("durability")? {
        None => Durability::Hard,
        Some(d) => parse_durability(&d)?,
    };
    let count = |name: &str| -> Result<u32> {
        match ev.opt_datum(name)? {
            None => Ok(1),
            Some(Datum::Number(n)) if n >= 1.0 && n.fract() == 0.0 && n <= 64.0 => Ok(n as u32),
            Some(Datum::Number(n)) if name == "shards" => Err(logic(format!(
                "Every table must have at least one shard and at most 64 (got {}).",
                Datum::Number(n).to_json_string()
            ))),
            Some(d) => Err(crate::eval::type_error("NUMBER", &d)).at_opt(name),
        }
    };
    let opts = TableOptions {
        primary_key,
        durability,
        shards: count("shards")?,
        // Read as `reconfigure` reads it; the catalog's placement then checks it, as
        // RethinkDB's `table_generate_config` does.
        replicas: crate::terms::admin::replicas_opt(ev, false)?,
    };
    let created = ev.ctx.access.table_create(&db, &name, opts)?;
    // As RethinkDB's `table_create`, wait for the new table to be ready (its replicas
    // elected and serving), at most `CREATE_WAIT`; a timeout, or a table dropped
    // meanwhile, still answers that it was created.
    let tables = [(db, name)];
    let _ = wait_until_ready(ev, &tables, "all_replicas_ready", Some(CREATE_WAIT));
    Ok(Val::Datum(created))
}

/// How long `table_create` waits for the new table to be ready (RethinkDB's 10 s).
const CREATE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Parses a `durability` option value with RethinkDB's error.
pub fn parse_durability(d: &Datum) -> Result<Durability> {
    match d.as_str().and_then(Durability::parse) {
        Some(x) => Ok(x),
        None => Err(logic(format!(
            "Durability option `{}` unrecognized (options are \"hard\" and \"soft\").",
            d.as_str()
                .map_or_else(|| d.to_json_string(), str::to_string)
        ))),
    }
}

/// TABLE_DROP.
pub fn table_drop(ev: &Ev) -> Result<Val> {
    let (db, name) = if ev.nargs() == 2 {
        (expect_db(ev, 0)?, ev.string(1)?)
    } else {
        (ev.ctx.db.clone(), ev.string(0)?)
    };
    check_name("Table", &name)?;
    ev.ctx.access.table_drop(&db, &name).map(Val::Datum)
}

/// TABLE_LIST.
pub fn table_list(ev: &Ev) -> Result<Val> {
    let db = if ev.nargs() == 1 {
        expect_db(ev, 0)?
    } else {
        ev.ctx.db.clone()
    };
    ev.ctx.access.check_db(&db)?;
    let names = ev.ctx.access.table_list(&db)?;
    Ok(Val::Datum(Datum::array(
        names.into_iter().map(Datum::from).collect(),
    )))
}

/// SYNC: waits until every write to the table so far is durable.
pub fn sync(ev: &Ev) -> Result<Val> {
    match ev.arg(0)? {
        Val::Table(t) => {
            ev.ctx.note_write(Some(t.sync_ticket()?), Durability::Hard);
            Ok(Val::Datum(Datum::from_pairs([(
                "synced",
                Datum::Number(1.0),
            )])))
        }
        other => Err(logic(format!(
            "Expected type TABLE but found {}:\n{}",
            other.kind_name(),
            describe(&other)
        )))
        .at(0),
    }
}

/// GET by primary key.
pub fn get(ev: &Ev) -> Result<Val> {
    let t = ev.table(0)?;
    let key = ev.datum(1)?;
    datum::keys::encode_primary(&key)
        .map_err(|e| logic(e.message().to_string()))
        .at(1)?;
    let doc = t.get(&key)?.unwrap_or(Datum::Null);
    Ok(Val::Single(SingleSel { table: t, key, doc }))
}

/// WAIT on a table or database: until every table's `table_status` flag `wait_for`
/// (default `all_replicas_ready`) holds, polled; a single server's tables are always
/// ready, so this answers at once. `timeout` (seconds) ends it with RethinkDB's error.
pub fn wait(ev: &Ev) -> Result<Val> {
    if ev.nargs() == 0 {
        // `r.wait()`: RethinkDB 2.4 wants a table or database.
        return Err(crate::terms::admin::not_on_table_or_db("wait"));
    }
    let mut flag = "all_replicas_ready".to_string();
    if let Some(w) = ev.opt_datum("wait_for")? {
        match w.as_str() {
            Some(
                "ready_for_outdated_reads"
                | "ready_for_reads"
                | "ready_for_writes"
                | "all_replicas_ready",
            ) => flag = w.as_str().unwrap_or_default().to_string(),
            _ => {
                return Err(logic(format!(
                    "Unknown value for `wait_for`: `{}`.",
                    w.as_str()
                        .map_or_else(|| w.to_json_string(), str::to_string)
                )))
            }
        }
    }
    let timeout = match ev.opt_datum("timeout")? {
        None => None,
        Some(d) => match d.as_f64() {
            // A timeout too long for a Duration waits as long as no timeout at all.
            Some(secs) if secs >= 0.0 && secs.is_finite() => {
                std::time::Duration::try_from_secs_f64(secs).ok()
            }
            _ => {
                return Err(logic(format!(
                    "Expected a non-negative number for `timeout` but got `{}`.",
                    d.to_json_string()
                )))
                .at_opt("timeout")
            }
        },
    };
    let tables: Vec<(String, String)> = match ev.arg(0)? {
        Val::Table(t) => vec![(t.db().to_string(), t.name().to_string())],
        Val::Db(d) => ev
            .ctx
            .access
            .table_list(&d)?
            .into_iter()
            .map(|t| (d.clone(), t))
            .collect(),
        other => {
            return Err(logic(format!(
                "Expected type TABLE but found {}:\n{}",
                other.kind_name(),
                describe(&other)
            )))
            .at(0)
        }
    };
    wait_until_ready(ev, &tables, &flag, timeout)?;
    Ok(Val::Datum(Datum::from_pairs([(
        "ready",
        Datum::from(tables.len()),
    )])))
}

/// How often `wait` looks at the tables' status again.
const WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(50);

fn wait_until_ready(
    ev: &Ev,
    tables: &[(String, String)],
    flag: &str,
    timeout: Option<std::time::Duration>,
) -> Result<()> {
    let deadline = timeout.map(|t| std::time::Instant::now() + t);
    loop {
        let mut ready = true;
        for (db, name) in tables {
            ready &= ev.ctx.access.table_ready(db, name, flag)?;
        }
        if ready {
            return Ok(());
        }
        if ev.ctx.cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(crate::error::op_failed(
                "Query interrupted: the client disconnected.",
            ));
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(crate::error::op_failed(
                "Timed out while waiting for tables.",
            ));
        }
        std::thread::sleep(WAIT_POLL);
    }
}
