//! Target `eval`: random well-typed ReQL queries (`gen`) evaluated in process on one
//! table held by one shard and on the same table cut into `SHARDS` shards.
//!
//! The world: one `cluster::Cluster` on the in-memory engine (`storage::Memory`), built
//! once per process, with databases `dba` (table `t`, 1 shard) and `dbb` (table `t`,
//! `SHARDS` shards), each holding the same `DOCS` documents (numeric and string
//! primary keys, a few documents lacking a field) and a secondary index `g`. Queries are
//! read-only, so every run sees the same data.
//!
//! Checked: evaluation never panics; it ends within `LIMIT` or stops when its
//! interruption flag (`QueryCtx::cancel`, what STOP sets) is raised then; and both
//! layouts give the same result or the same error (class and message, the database
//! name aside). Queries with documented nondeterminism (`r.random`, `r.uuid`,
//! `r.now`, `r.js`, `r.http`) are never generated.

mod gen;

pub use gen::query;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cluster::Cluster;
use datum::Datum;
use reql::value::Grouped;
use reql::{Env, QueryCtx, Val};
use serde_json::{json, Value};

/// Shards of the table in `dbb`.
pub const SHARDS: u32 = 4;
/// Documents in each table.
pub const DOCS: usize = 40;
/// How long one evaluation may run before its interruption flag is raised.
pub const LIMIT: Duration = Duration::from_secs(1);
/// The largest array a query may build (small: results are compared as text).
const ARRAY_LIMIT: usize = 5_000;

/// Runs one input.
pub fn check(data: &[u8]) {
    let Some(term) = gen::query(data) else {
        return;
    };
    compare(&term);
}

/// Evaluates `term` on both layouts and asserts they agree.
pub fn compare(term: &Value) {
    let one = run("dba", term);
    let many = run("dbb", term);
    if let (Some(a), Some(b)) = (one, many) {
        let b = b.replace("dbb", "dba");
        assert_eq!(a, b, "1 shard and {SHARDS} shards differ on {term}");
    }
}

/// The outcome of `term` evaluated with default database `db`, printed; `None` when
/// it was interrupted for running past `LIMIT`.
pub fn run(db: &str, term: &Value) -> Option<String> {
    let w = world();
    let t = match reql::compile_term(term) {
        Ok(t) => t,
        Err(e) => return Some(format!("compile {:?}: {}", e.kind, e.message)),
    };
    let mut ctx = QueryCtx::new(w.cluster.clone(), db.to_string(), 0.0);
    ctx.array_limit = ARRAY_LIMIT;
    let cancel = ctx.cancel.clone();
    let ctx = Arc::new(ctx);
    let started = Instant::now();
    watchdog().arm(&cancel);
    let out = reql::eval(&ctx, &Env::default(), &t).and_then(|v| materialize(&ctx, v));
    watchdog().disarm();
    let elapsed = started.elapsed();
    if cancel.load(Ordering::Relaxed) {
        // Interrupted: it must have stopped promptly after the flag was raised.
        assert!(
            elapsed < LIMIT * 5,
            "ignored its interruption flag for {elapsed:?}: {term}"
        );
        return None;
    }
    Some(match out {
        Ok(d) => d.to_json_string(),
        Err(e) => format!("error {:?}: {}", e.kind, e.message),
    })
}

/// A value as the client would receive it (sequences drained, groups listed).
fn materialize(ctx: &Arc<QueryCtx>, v: Val) -> reql::Result<Datum> {
    Ok(match v {
        Val::Grouped(Grouped::Data(g)) => Datum::array(
            g.iter()
                .map(|(k, v)| Datum::array(vec![k.clone(), v.clone()]))
                .collect(),
        ),
        Val::Grouped(Grouped::Stream(s)) => {
            let mut out = Vec::new();
            for kv in s.stream {
                let (k, v) = kv?;
                out.push(Datum::array(vec![k, v]));
                if out.len() > ARRAY_LIMIT {
                    return Err(reql::value::array_limit_error(ARRAY_LIMIT));
                }
            }
            Datum::array(out)
        }
        Val::Db(name) => Datum::str(&format!("db {name}")),
        Val::Func(_) => Datum::str("function"),
        Val::Table(_) | Val::Seq(_) => {
            Datum::array(reql::eval::to_seq(v)?.collect(ctx.array_limit)?)
        }
        other => reql::eval::to_datum(ctx, other)?,
    })
}

/// The two tables, built once.
struct World {
    cluster: Arc<Cluster>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(build_world)
}

fn build_world() -> World {
    let engine = Arc::new(storage::Memory::new());
    let cluster = match Cluster::open(engine, "fuzz") {
        Ok(c) => c,
        Err(e) => panic!("cannot open the in-memory cluster: {e}"),
    };
    let w = World { cluster };
    let docs: Vec<Value> = (0..DOCS).map(doc).collect();
    for (db, shards) in [("dba", 1), ("dbb", SHARDS)] {
        let table = json!([15, [[14, [db]], "t"]]);
        setup(&w, json!([57, [db]]));
        setup(&w, json!([60, [[14, [db]], "t"]]));
        setup(&w, json!([56, [table, [2, docs]]]));
        if shards > 1 {
            setup(&w, json!([176, [table], {"shards": shards, "replicas": 1}]));
        }
        setup(&w, json!([75, [table, "g"]]));
        setup(&w, json!([140, [table]]));
    }
    w
}

/// Document `i`: ids are numbers, the last few strings; every ninth lacks `n`.
fn doc(i: usize) -> Value {
    let id = if i + 4 >= DOCS {
        json!(format!("k{i}"))
    } else {
        json!(i)
    };
    let s = ["x", "y", "zz", "", "Ab"][i % 5];
    let mut d = json!({"id": id, "s": s, "a": [2, [i % 3, i % 4]], "g": i % 4});
    if !i.is_multiple_of(9) {
        let n = (i * 7 % 11) as f64 - 3.0 + if i.is_multiple_of(5) { 0.5 } else { 0.0 };
        d["n"] = json!(n);
    }
    d
}

fn setup(w: &World, term: Value) {
    let t = match reql::compile_term(&term) {
        Ok(t) => t,
        Err(e) => panic!("setup {term}: {}", e.message),
    };
    let ctx = Arc::new(QueryCtx::new(w.cluster.clone(), "test".into(), 0.0));
    if let Err(e) = reql::eval(&ctx, &Env::default(), &t).and_then(|v| materialize(&ctx, v)) {
        panic!("setup {term}: {}", e.message)
    }
}

/// One thread that raises the flag of the evaluation running past its deadline.
struct Watchdog {
    slot: Mutex<Option<(Instant, Arc<AtomicBool>)>>,
}

impl Watchdog {
    fn arm(&self, flag: &Arc<AtomicBool>) {
        *self.lock() = Some((Instant::now() + LIMIT, flag.clone()));
    }

    fn disarm(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Instant, Arc<AtomicBool>)>> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn watchdog() -> &'static Watchdog {
    static DOG: OnceLock<&'static Watchdog> = OnceLock::new();
    DOG.get_or_init(|| {
        let dog: &'static Watchdog = Box::leak(Box::new(Watchdog {
            slot: Mutex::new(None),
        }));
        let spawned = std::thread::Builder::new()
            .name("eval-watchdog".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(20));
                if let Some((deadline, flag)) = dog.lock().as_ref() {
                    if Instant::now() >= *deadline {
                        flag.store(true, Ordering::Relaxed);
                    }
                }
            });
        if let Err(e) = spawned {
            panic!("cannot start the watchdog: {e}");
        }
        dog
    })
}
