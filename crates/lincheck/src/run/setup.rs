//! Setting up the table before a run: the database and table are created (the table
//! dropped first when `fresh_table`, so every key starts unwritten), then `table.wait()`
//! must succeed on every address, so no client starts before its server sees the table.

use std::time::Duration;

use client::Error;
use serde_json::json;

use super::{connect, timed, RunError, RunOptions};

/// Creates the database and table (dropping the table first when `fresh_table`).
pub(super) async fn setup(opts: &RunOptions) -> Result<(), RunError> {
    let addr = opts.addrs.first().ok_or(RunError::NoAddress)?;
    let conn = connect(opts, addr)
        .await
        .map_err(|source| RunError::Setup {
            what: "the connection",
            source,
        })?;
    let limit = opts.op_timeout.max(Duration::from_secs(30));
    let dbs = timed(&conn, client::term::db_list(), limit)
        .await
        .map_err(|source| RunError::Setup {
            what: "db_list",
            source,
        })?;
    if !dbs.as_array().is_some_and(|a| a.contains(&json!(opts.db))) {
        timed(&conn, client::term::db_create(&opts.db), limit)
            .await
            .map_err(|source| RunError::Setup {
                what: "db_create",
                source,
            })?;
    }
    let tables = timed(&conn, client::term::table_list(&opts.db), limit)
        .await
        .map_err(|source| RunError::Setup {
            what: "table_list",
            source,
        })?;
    let exists = tables
        .as_array()
        .is_some_and(|a| a.contains(&json!(opts.table)));
    if exists && opts.fresh_table {
        timed(
            &conn,
            client::term::table_drop(&opts.db, &opts.table),
            limit,
        )
        .await
        .map_err(|source| RunError::Setup {
            what: "table_drop",
            source,
        })?;
    }
    if !exists || opts.fresh_table {
        timed(
            &conn,
            client::term::table_create_with(&opts.db, &opts.table, opts.shards, opts.replicas),
            limit,
        )
        .await
        .map_err(|source| RunError::Setup {
            what: "table_create",
            source,
        })?;
    }
    for addr in &opts.addrs {
        wait_ready(opts, addr).await?;
    }
    Ok(())
}

/// Waits until `table.wait()` succeeds on `addr` (the table may reach other servers of a
/// cluster later), retrying for about 30 seconds.
async fn wait_ready(opts: &RunOptions, addr: &(String, u16)) -> Result<(), RunError> {
    const ATTEMPTS: usize = 60;
    let wait = client::term::call(
        proto::ql2::TermType::WAIT,
        vec![client::term::table(&opts.db, &opts.table)],
        serde_json::Map::new(),
    );
    let mut last = Error::Timeout;
    for _ in 0..ATTEMPTS {
        let attempt = async {
            let conn = connect(opts, addr).await?;
            timed(&conn, wait.clone(), opts.op_timeout).await
        };
        match attempt.await {
            Ok(_) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(RunError::Setup {
        what: "waiting for the table",
        source: last,
    })
}
