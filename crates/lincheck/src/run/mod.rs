//! The workload driver behind `ponder-lincheck run`: N clients (each with its own
//! connection, spread over the given addresses) run random reads, writes and cas on K keys
//! of one table until M operations were started or the duration passed, recording every
//! invocation and completion; then, unless turned off, one more process reads every key
//! (the `final` reads of the lost-write check).
//!
//! Invariants: written values are unique integers (one counter for the whole run), so a
//! read names the write it saw; a cas expects a non-null value the client saw last on that
//! key, so a missing document means "not applied"; every query runs under the operation
//! timeout and a connection that timed out or failed is replaced, so a run ends within
//! about `duration + op_timeout` plus the final reads (each key retried a bounded number
//! of times).

pub mod ops;
mod setup;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{ConnectOptions, Connection, Error};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::history::{Event, EventType, Func};
use crate::record::Recorder;

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Servers as `(host, port)`; client `i` uses `addrs[i % len]`.
    pub addrs: Vec<(String, u16)>,
    /// Concurrent clients.
    pub clients: usize,
    /// Keys (`"k0"`, `"k1"`, …).
    pub keys: usize,
    /// Operations to start, at most.
    pub ops: u64,
    /// Time to run, at most.
    pub duration: Duration,
    /// Bound on one query (and on connecting).
    pub op_timeout: Duration,
    /// Database.
    pub db: String,
    /// Table.
    pub table: String,
    /// Drop and re-create the table first, so every key starts unwritten.
    pub fresh_table: bool,
    /// Replicas of the table created.
    pub replicas: u32,
    /// Shards of the table created.
    pub shards: u32,
    /// Read every key at the end (`final` reads).
    pub final_reads: bool,
    /// User and password.
    pub user: String,
    /// Password.
    pub password: String,
    /// Seed of the clients' random choices.
    pub seed: u64,
}

impl Default for RunOptions {
    /// No address (set `addrs`); 5 clients on 5 keys, 2,000 operations or 30 s, 5 s per
    /// operation, table `test.lincheck` re-created, final reads, `admin` with no password.
    fn default() -> Self {
        Self {
            addrs: Vec::new(),
            clients: 5,
            keys: 5,
            ops: 2000,
            duration: Duration::from_secs(30),
            op_timeout: Duration::from_secs(5),
            db: "test".into(),
            table: "lincheck".into(),
            fresh_table: true,
            replicas: 1,
            shards: 1,
            final_reads: true,
            user: "admin".into(),
            password: String::new(),
            seed: 1,
        }
    }
}

/// Setting the table up failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No address was given.
    #[error("no server address given")]
    NoAddress,
    /// Connecting or creating the table failed.
    #[error("setting up {what}: {source}")]
    Setup {
        /// The step.
        what: &'static str,
        /// The driver's error.
        source: Error,
    },
    /// Writing the history failed.
    #[error("writing the history: {0}")]
    History(std::io::Error),
}

struct Shared {
    opts: RunOptions,
    rec: Arc<Recorder>,
    ops_left: AtomicI64,
    next_value: AtomicU64,
    deadline: Instant,
}

async fn connect(opts: &RunOptions, addr: &(String, u16)) -> Result<Connection, Error> {
    Connection::connect_with(&ConnectOptions {
        host: addr.0.clone(),
        port: addr.1,
        user: opts.user.clone(),
        password: opts.password.clone(),
        connect_timeout: opts.op_timeout,
    })
    .await
}

async fn timed(conn: &Connection, t: Value, limit: Duration) -> Result<Value, Error> {
    tokio::time::timeout(limit, conn.run(t, Value::Null))
        .await
        .unwrap_or(Err(Error::Timeout))
}

fn event(process: u64, kind: EventType, f: Func, key: &Value, value: Value) -> Event {
    Event {
        process,
        kind,
        f,
        key: key.clone(),
        value,
        applied: None,
        time_ns: 0,
        final_read: false,
        error: None,
    }
}

/// One operation to run.
struct Op<'a> {
    process: u64,
    key: &'a Value,
    f: Func,
    /// Write: the value; cas: `[expect, new]`; read: null.
    arg: Value,
    final_read: bool,
}

/// What running an operation left behind.
struct Ran {
    /// It completed `ok`.
    ok: bool,
    /// The connection failed or timed out: replace it.
    replace: bool,
    /// The non-null value the key was seen to have, if it completed `ok`.
    seen: Option<Value>,
}

/// Runs one operation and records its invocation and completion.
async fn one_op(sh: &Shared, conn: &Connection, op: Op<'_>) -> Ran {
    let o = &sh.opts;
    let Op {
        process,
        key,
        f,
        arg,
        final_read,
    } = op;
    let (t, invoke_value) = match f {
        Func::Read => (ops::read_term(&o.db, &o.table, key), Value::Null),
        Func::Write => (ops::write_term(&o.db, &o.table, key, &arg), arg.clone()),
        Func::Cas => {
            let (e, n) = (arg[0].clone(), arg[1].clone());
            (ops::cas_term(&o.db, &o.table, key, &e, &n), arg.clone())
        }
    };
    let mut ev = event(process, EventType::Invoke, f, key, invoke_value.clone());
    ev.final_read = final_read;
    sh.rec.record(ev.clone());
    let answer = timed(conn, t, o.op_timeout).await;
    let (mut done, mut replace) = (ev, false);
    match answer {
        Ok(a) => {
            done.kind = EventType::Ok;
            let outcome = match f {
                Func::Read => {
                    done.value = ops::read_value(&a);
                    Ok(())
                }
                Func::Write => ops::write_outcome(&a),
                Func::Cas => ops::cas_outcome(&a).map(|applied| done.applied = Some(applied)),
            };
            if let Err(why) = outcome {
                done.kind = EventType::Info;
                done.error = Some(why);
            }
        }
        Err(e) => {
            let (kind, why) = ops::classify(&e);
            done.kind = kind;
            done.error = Some(why);
            replace = !matches!(e, Error::Reql(_));
        }
    }
    let ok = done.kind == EventType::Ok;
    let seen = match f {
        _ if !ok => None,
        Func::Read => Some(done.value.clone()),
        Func::Write => Some(arg),
        Func::Cas if done.applied == Some(true) => Some(arg[1].clone()),
        Func::Cas => None,
    }
    .filter(|v| !v.is_null());
    sh.rec.record(done);
    Ran { ok, replace, seen }
}

/// `conn` while it is open, else a new connection to `addr` (kept in `conn`); `None`
/// when connecting failed.
async fn live(
    conn: &mut Option<Connection>,
    o: &RunOptions,
    addr: &(String, u16),
) -> Option<Connection> {
    if let Some(c) = conn.as_ref().filter(|c| !c.is_closed()) {
        return Some(c.clone());
    }
    let c = connect(o, addr).await.ok()?;
    *conn = Some(c.clone());
    Some(c)
}

async fn client_loop(sh: Arc<Shared>, idx: usize) {
    let o = &sh.opts;
    let addr = &o.addrs[idx % o.addrs.len()];
    let mut rng = StdRng::seed_from_u64(o.seed.wrapping_add(idx as u64));
    let mut conn: Option<Connection> = None;
    let mut seen: HashMap<usize, Value> = HashMap::new();
    while Instant::now() < sh.deadline {
        let Some(c) = live(&mut conn, o, addr).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if sh.ops_left.fetch_sub(1, Ordering::Relaxed) <= 0 {
            break;
        }
        let k = rng.gen_range(0..o.keys.max(1));
        let key = json!(format!("k{k}"));
        let last = seen.get(&k).cloned();
        // 40% reads, 30% writes, 30% cas (a read while the client has seen no value).
        let roll: u8 = rng.gen_range(0..10);
        let (f, arg) = match (roll, last) {
            (4..=6, _) => (
                Func::Write,
                json!(sh.next_value.fetch_add(1, Ordering::Relaxed)),
            ),
            (7.., Some(e)) => (
                Func::Cas,
                json!([e, sh.next_value.fetch_add(1, Ordering::Relaxed)]),
            ),
            _ => (Func::Read, Value::Null),
        };
        let op = Op {
            process: idx as u64,
            key: &key,
            f,
            arg,
            final_read: false,
        };
        let ran = one_op(&sh, &c, op).await;
        if ran.replace {
            conn = None;
        }
        if let Some(v) = ran.seen {
            seen.insert(k, v);
        }
    }
}

/// Reads every key once more (retrying a few times), as process `process`.
async fn final_reads(sh: &Shared, process: u64) {
    const ATTEMPTS: usize = 10;
    let o = &sh.opts;
    let mut conn: Option<Connection> = None;
    for k in 0..o.keys {
        let key = json!(format!("k{k}"));
        for attempt in 0..ATTEMPTS {
            let addr = &o.addrs[(k + attempt) % o.addrs.len()];
            let Some(c) = live(&mut conn, o, addr).await else {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            let op = Op {
                process,
                key: &key,
                f: Func::Read,
                arg: Value::Null,
                final_read: true,
            };
            let ran = one_op(sh, &c, op).await;
            if ran.replace {
                conn = None;
            }
            if ran.ok {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Sets up the table, runs the workload and the final reads, recording into `rec`.
pub async fn run(opts: RunOptions, rec: Arc<Recorder>) -> Result<crate::record::Counts, RunError> {
    if opts.addrs.is_empty() {
        return Err(RunError::NoAddress);
    }
    setup::setup(&opts).await?;
    let sh = Arc::new(Shared {
        ops_left: AtomicI64::new(i64::try_from(opts.ops).unwrap_or(i64::MAX)),
        next_value: AtomicU64::new(1),
        deadline: Instant::now() + opts.duration,
        rec,
        opts,
    });
    let tasks: Vec<_> = (0..sh.opts.clients.max(1))
        .map(|i| tokio::spawn(client_loop(sh.clone(), i)))
        .collect();
    for t in tasks {
        // A client task only ends by returning; a panic would be a bug worth surfacing.
        if let Err(e) = t.await {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
    if sh.opts.final_reads {
        final_reads(&sh, sh.opts.clients.max(1) as u64).await;
    }
    sh.rec.finish().map_err(RunError::History)
}
