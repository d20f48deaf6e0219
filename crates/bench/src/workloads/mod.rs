//! The workloads: what one operation is, how it is checked, and the
//! closed-loop runner that measures it at a given concurrency.
//!
//! A run opens `C` connections, starts `C × in_flight` workers together, and
//! each worker issues one operation at a time until the deadline (a closed
//! loop: concurrency is exactly `C × in_flight`). Every successful operation's
//! latency goes into the worker's HdrHistogram; the histograms are merged at
//! the end. Each result is checked (a point get must return the document
//! with the requested id, an insert must report `inserted: 1`); a wrong
//! result, an error response, a timeout or a dropped connection counts as
//! an error and not as an operation.

pub mod setup;

use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{term, ConnectOptions, Connection, Response, ResponseType};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Map, Value};

use crate::data::{random_existing_key, DocGen, InsertKeys};
use crate::stats::{new_histogram, ops_per_sec, record, LatencySummary, RunResult};

/// Database the benchmark uses.
pub const DB: &str = "bench";
/// Table the benchmark uses (YCSB's name).
pub const TABLE: &str = "usertable";
/// Distinct error messages kept per run.
const MAX_ERROR_SAMPLES: usize = 5;

/// Errors that stop the benchmark (as opposed to failed operations, which
/// are counted).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Talking to the server failed.
    #[error(transparent)]
    Client(#[from] client::Error),
    /// Preparing the table or loading it failed.
    #[error("setup failed: {0}")]
    Setup(String),
}

/// Where the server is.
#[derive(Debug, Clone)]
pub struct Target {
    /// Host name or address.
    pub host: String,
    /// Driver port.
    pub port: u16,
    /// User name.
    pub user: String,
    /// Password.
    pub password: String,
}

impl Target {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Opens one authenticated connection.
    pub async fn connect(&self) -> Result<Connection, client::Error> {
        Connection::connect_with(&ConnectOptions {
            host: self.host.clone(),
            port: self.port,
            user: self.user.clone(),
            password: self.password.clone(),
            ..ConnectOptions::default()
        })
        .await
    }
}

/// The operation a run repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// `table.get(key)` of a uniformly random loaded key.
    Get,
    /// `table.insert(doc)` of a new document, default (hard) durability.
    InsertHard,
    /// `table.insert(doc, durability="soft")` of a new document.
    InsertSoft,
}

impl Workload {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Get => "get",
            Workload::InsertHard => "insert-hard",
            Workload::InsertSoft => "insert-soft",
        }
    }

    /// Whether the workload reads the loaded documents.
    pub fn needs_loaded_docs(self) -> bool {
        matches!(self, Workload::Get)
    }
}

/// Parameters of one measured run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The operation.
    pub workload: Workload,
    /// Loaded documents (keys `0..docs` exist).
    pub docs: u64,
    /// Payload bytes of inserted documents.
    pub doc_bytes: usize,
    /// How long workers keep starting operations.
    pub duration: Duration,
    /// Bound on one operation; a slower one counts as an error.
    pub op_timeout: Duration,
    /// Queries in flight per connection.
    pub in_flight: usize,
    /// Distinguishes this invocation's inserted keys from earlier ones.
    pub run_tag: String,
    /// Index of this run within the invocation (keeps inserted keys of
    /// successive runs apart).
    pub run_index: usize,
}

/// What a check of one result expects.
enum Expect {
    /// A document whose `id` is this key.
    Doc(String),
    /// `inserted: 1`.
    Inserted,
}

/// Builds operations for one worker.
struct OpGen {
    workload: Workload,
    docs: u64,
    rng: StdRng,
    keys: InsertKeys,
    gen: DocGen,
    table: Value,
    insert_optargs: Map<String, Value>,
}

impl OpGen {
    fn new(cfg: &RunConfig, worker: usize) -> Self {
        let mut insert_optargs = Map::new();
        if cfg.workload == Workload::InsertSoft {
            insert_optargs.insert("durability".into(), json!("soft"));
        }
        Self {
            workload: cfg.workload,
            docs: cfg.docs,
            rng: StdRng::from_entropy(),
            keys: InsertKeys::new(&cfg.run_tag, cfg.run_index, worker),
            gen: DocGen::new(cfg.doc_bytes),
            table: term::table(DB, TABLE),
            insert_optargs,
        }
    }

    fn next(&mut self) -> (Value, Expect) {
        match self.workload {
            Workload::Get => {
                let (_, k) = random_existing_key(&mut self.rng, self.docs);
                let q = term::get(self.table.clone(), &Value::String(k.clone()));
                (q, Expect::Doc(k))
            }
            Workload::InsertHard | Workload::InsertSoft => {
                let k = self.keys.next_key();
                let doc = self.gen.doc(&mut self.rng, k);
                let q = term::insert(self.table.clone(), &doc, self.insert_optargs.clone());
                (q, Expect::Inserted)
            }
        }
    }
}

/// Checks one response against what the operation expects.
fn check(r: &Response, expect: &Expect) -> Result<(), String> {
    if let Some(e) = r.error() {
        return Err(e.to_string());
    }
    if r.kind != ResponseType::SUCCESS_ATOM {
        return Err(format!("expected an atom, got {}", r.kind));
    }
    let v = r.items.first().unwrap_or(&Value::Null);
    match expect {
        Expect::Doc(k) => match v.get("id").and_then(Value::as_str) {
            Some(id) if id == k => Ok(()),
            _ => Err(format!("get({k}) returned {v}")),
        },
        Expect::Inserted => setup::check_insert_result(v, 1),
    }
}

/// The first 200 bytes of `s` on one line (error samples can carry whole
/// documents).
fn truncate(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.len() <= 200 {
        s
    } else {
        let mut end = 200;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    }
}

/// One worker's tallies.
struct Tally {
    hist: Histogram<u64>,
    ops: u64,
    errors: u64,
    samples: Vec<String>,
}

impl Tally {
    fn error(&mut self, msg: String) {
        self.errors += 1;
        let msg = truncate(&msg);
        if self.samples.len() < MAX_ERROR_SAMPLES && !self.samples.contains(&msg) {
            self.samples.push(msg);
        }
    }
}

async fn worker(
    conn: Connection,
    mut ops: OpGen,
    start: Instant,
    deadline: Instant,
    op_timeout: Duration,
) -> (Tally, Instant) {
    let mut t = Tally {
        hist: new_histogram(),
        ops: 0,
        errors: 0,
        samples: Vec::new(),
    };
    tokio::time::sleep_until(start.into()).await;
    while Instant::now() < deadline {
        let (q, expect) = ops.next();
        let t0 = Instant::now();
        match tokio::time::timeout(op_timeout, conn.query(q, Value::Null)).await {
            Ok(Ok(r)) => {
                let lat = t0.elapsed();
                match check(&r, &expect) {
                    Ok(()) => {
                        record(&mut t.hist, lat);
                        t.ops += 1;
                    }
                    Err(e) => t.error(e),
                }
            }
            Ok(Err(e)) => {
                let closed = conn.is_closed();
                t.error(e.to_string());
                if closed {
                    // Nothing more can be done on this connection.
                    break;
                }
            }
            Err(_) => t.error(format!("timed out after {op_timeout:?}")),
        }
    }
    (t, Instant::now())
}

/// Runs `cfg` with `connections` connections and returns the measurement.
pub async fn run(
    target: &Target,
    cfg: &RunConfig,
    connections: usize,
) -> Result<RunResult, BenchError> {
    let in_flight = cfg.in_flight.max(1);
    // Connect everything first (a few at a time), so setup is not measured.
    let mut conns = Vec::with_capacity(connections);
    let mut pending = tokio::task::JoinSet::new();
    let target = Arc::new(target.clone());
    for _ in 0..connections {
        let t = target.clone();
        pending.spawn(async move { t.connect().await });
        if pending.len() >= 16 {
            if let Some(r) = pending.join_next().await {
                conns.push(join_connect(r)?);
            }
        }
    }
    while let Some(r) = pending.join_next().await {
        conns.push(join_connect(r)?);
    }

    // Start everyone together, a little after spawning.
    let start = Instant::now() + Duration::from_millis(50);
    let deadline = start + cfg.duration;
    let mut tasks = tokio::task::JoinSet::new();
    let mut worker_id = 0;
    for conn in &conns {
        for _ in 0..in_flight {
            let ops = OpGen::new(cfg, worker_id);
            worker_id += 1;
            tasks.spawn(worker(conn.clone(), ops, start, deadline, cfg.op_timeout));
        }
    }
    let mut hist = new_histogram();
    let (mut ops, mut errors) = (0u64, 0u64);
    let mut samples: Vec<String> = Vec::new();
    let mut end = start;
    while let Some(r) = tasks.join_next().await {
        let (t, finished) = r.map_err(|e| BenchError::Setup(format!("worker task failed: {e}")))?;
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = hist.add(&t.hist);
        ops += t.ops;
        errors += t.errors;
        for s in t.samples {
            if samples.len() < MAX_ERROR_SAMPLES && !samples.contains(&s) {
                samples.push(s);
            }
        }
        end = end.max(finished);
    }
    drop(conns);
    let elapsed = end.saturating_duration_since(start);
    Ok(RunResult {
        connections,
        in_flight_per_connection: in_flight,
        ops,
        errors,
        elapsed_secs: elapsed.as_secs_f64(),
        ops_per_sec: ops_per_sec(ops, elapsed),
        latency_us: LatencySummary::from_histogram(&hist),
        error_samples: samples,
    })
}

fn join_connect(
    r: Result<Result<Connection, client::Error>, tokio::task::JoinError>,
) -> Result<Connection, BenchError> {
    r.map_err(|e| BenchError::Setup(format!("connect task failed: {e}")))?
        .map_err(BenchError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(workload: Workload) -> RunConfig {
        RunConfig {
            workload,
            docs: 10,
            doc_bytes: 1000,
            duration: Duration::from_secs(1),
            op_timeout: Duration::from_secs(1),
            in_flight: 1,
            run_tag: "deadbeef".into(),
            run_index: 2,
        }
    }

    fn atom(v: Value) -> Response {
        Response::parse(1, json!({"t": 1, "r": [v]}).to_string().as_bytes()).unwrap()
    }

    #[test]
    fn get_ops_and_checks() {
        let mut g = OpGen::new(&cfg(Workload::Get), 0);
        let (q, expect) = g.next();
        let Expect::Doc(k) = &expect else {
            panic!("a get expects a document")
        };
        assert!(k.starts_with("user"));
        assert_eq!(q, json!([16, [[15, [[14, ["bench"]], "usertable"]], k]]));
        assert!(check(&atom(json!({"id": k, "field0": "x"})), &expect).is_ok());
        assert!(check(&atom(json!({"id": "user9"})), &expect).is_err());
        assert!(check(&atom(Value::Null), &expect).is_err());
        let err = Response::parse(1, br#"{"t":18,"e":4100000,"r":["nope"],"b":[]}"#).unwrap();
        assert!(check(&err, &expect).unwrap_err().contains("nope"));
    }

    #[test]
    fn insert_ops_carry_durability() {
        let mut hard = OpGen::new(&cfg(Workload::InsertHard), 3);
        let (q, expect) = hard.next();
        assert_eq!(q[0], 56);
        assert!(q.get(2).is_none(), "hard durability is the default");
        let doc = &q[1][1];
        assert!(doc["id"]
            .as_str()
            .unwrap()
            .starts_with("insdeadbeefr002w00003s"));
        assert!(serde_json::to_vec(doc).unwrap().len() >= 1000);
        assert!(check(&atom(json!({"inserted": 1, "errors": 0})), &expect).is_ok());
        assert!(check(&atom(json!({"inserted": 0, "errors": 1})), &expect).is_err());

        let mut soft = OpGen::new(&cfg(Workload::InsertSoft), 0);
        let (q, _) = soft.next();
        assert_eq!(q[2], json!({"durability": "soft"}));
        let (q2, _) = soft.next();
        assert_ne!(q[1][1]["id"], q2[1][1]["id"]);
    }

    #[test]
    fn names() {
        assert_eq!(Workload::InsertHard.name(), "insert-hard");
        assert!(Workload::Get.needs_loaded_docs());
        assert!(!Workload::InsertSoft.needs_loaded_docs());
        assert_eq!(truncate(&"x".repeat(300)).chars().count(), 201);
        assert_eq!(truncate("a\n\tb"), "a b");
    }
}
