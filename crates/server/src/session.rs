//! The query lifecycle of one connection: START, CONTINUE, STOP, NOREPLY_WAIT and
//! SERVER_INFO, with cursors answered in batches.
//!
//! Each query runs as its own task, so a slow query never holds up the others on the
//! connection (answers to different tokens go out in completion order; one token's
//! answers go out in the order its requests came, `tokens.rs`). Evaluation is synchronous
//! and runs on tokio's blocking pool; hard-durability writes are acknowledged only after
//! the group commit covering their ticket has reached the disk.
//!
//! Every query has its own interruption flag (`reql::QueryCtx::cancel`): STOP sets it,
//! closing the connection sets all of them, and deleting the query's `rethinkdb.jobs`
//! row sets it (`job_deleted`). Evaluation stops at its next check
//! (`reql::interrupt`) and `interrupted` answers as RethinkDB does. The query stays in
//! `jobs` while its cursor lives (the cursor holds its `JobGuard`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cluster::system::JobQuery;
use datum::Datum;
use parking_lot::Mutex;
use proto::frame::Frame;
use proto::ql2::{QueryType, ResponseType};
use proto::response::ResponseWriter;
use reql::memory::Budget;
use reql::{CompiledQuery, QueryCtx, ReqlError, Sequence, Val};

use crate::outbox::Outbox;
use crate::principal::Principal;
use crate::state::ServerState;

mod batch;
mod feed;
mod noreply;
mod point;
mod tokens;
use crate::wire::{check_json, error_frame, finish, profile_json};
use tokens::{duplicate_token, Claim, Slot, Tokens};

/// Batch limits from the global optargs (RethinkDB's names and defaults).
#[derive(Clone, Copy)]
struct BatchOpts {
    max_rows: usize,
    max_bytes: usize,
    max_time: Duration,
    first_scaledown: usize,
}

impl Default for BatchOpts {
    fn default() -> Self {
        BatchOpts {
            max_rows: usize::MAX,
            max_bytes: 1 << 20,
            max_time: Duration::from_millis(500),
            first_scaledown: 4,
        }
    }
}

/// An open cursor: the rest of a stream.
struct Cursor {
    seq: Sequence,
    opts: BatchOpts,
    /// Set for a changefeed (`feed.rs`): CONTINUE waits for changes.
    feed: Option<feed::FeedCursor>,
    /// The query's interruption flag (its streams check it).
    cancel: Arc<AtomicBool>,
    /// The query's memory budget, entered while a batch is evaluated.
    memory: Arc<Budget>,
    /// Keeps the query listed in `rethinkdb.jobs` while the cursor lives.
    _job: Option<Box<cluster::system::JobGuard>>,
    /// Keeps the cursor counted in `/metrics` while it lives.
    _open: Box<cluster::system::CursorGuard>,
}

/// Queries a connection may have started and not yet had answered (or written).
const MAX_STARTED: usize = 32;

/// One connection's queries.
pub struct Session {
    state: Arc<ServerState>,
    out: Outbox,
    /// Queries started and not answered yet: a client pipelining STARTs without reading
    /// waits here (and so stops being read) once `MAX_STARTED` are in flight.
    started: Arc<tokio::sync::Semaphore>,
    tokens: Mutex<Tokens>,
    /// The noreply queries running, for NOREPLY_WAIT (`noreply.rs`).
    noreply: Arc<noreply::NoreplyOrder>,
    /// Set when the connection closes (each query also has its own flag, set then too).
    cancel: Arc<AtomicBool>,
    /// The authenticated user and the access enforcing their permissions.
    who: Arc<Principal>,
    /// A changefeed's CONTINUE answers an empty batch once `max_batch_seconds` pass
    /// without changes instead of waiting on (RethinkDB's
    /// `return_empty_normal_batches_t::YES`, which its HTTP connections use).
    empty_feed_batches: bool,
}

enum Outcome {
    /// A single value.
    Atom(Vec<u8>),
    /// A batch of a stream: its items, its cursor, and whether the stream ended.
    Batch(batch::Items, Box<Cursor>, bool),
}

impl Session {
    /// Whether `term` is evaluated on this connection's task. Never when the catalog is
    /// replicated: a table's reads may then wait for a Raft round trip, which must not
    /// block an async worker (it could stall the runtime that carries the round trip).
    fn inline(&self, term: &reql::Term) -> bool {
        reql::plan::runs_inline(term) && !self.state.cluster.is_replicated()
    }

    /// A session writing its responses to `out`.
    pub fn new(state: Arc<ServerState>, out: Outbox, who: Principal) -> Arc<Session> {
        Self::with_mode(state, out, who, false)
    }

    /// A session of an `/ajax/reql` connection: as `new`, but a changefeed's
    /// CONTINUE is answered with an empty batch after `max_batch_seconds` without
    /// changes, so an HTTP request never waits for long.
    pub fn new_http(state: Arc<ServerState>, out: Outbox, who: Principal) -> Arc<Session> {
        Self::with_mode(state, out, who, true)
    }

    fn with_mode(
        state: Arc<ServerState>,
        out: Outbox,
        who: Principal,
        empty_feed_batches: bool,
    ) -> Arc<Session> {
        Arc::new(Session {
            empty_feed_batches,
            who: Arc::new(who),
            state,
            out,
            started: Arc::new(tokio::sync::Semaphore::new(MAX_STARTED)),
            tokens: Mutex::new(Tokens::default()),
            noreply: Arc::default(),
            cancel: Arc::new(AtomicBool::new(false)),
        })
    }

    async fn send(&self, frame: Vec<u8>) {
        self.out.send(frame).await;
    }

    /// Handles one query frame (spawning a task for anything that may take time).
    pub async fn handle(self: &Arc<Self>, f: Frame) {
        let token = f.token;
        // A point read is answered from the frame's bytes (`point.rs`).
        if let Some(frame) = self.point_read(token, &f.payload) {
            self.send(frame).await;
            return;
        }
        match reql::compile_query(&f.payload) {
            Ok(q) => self.handle_query(token, q, f.payload).await,
            Err(e) => self.send(parse_error_frame(token, &e)).await,
        }
    }

    /// Handles one parsed query (`payload` is its frame's, which `rethinkdb.jobs` shows):
    /// its answer (or answers) go to the session's outbox.
    pub async fn handle_query(self: &Arc<Self>, token: u64, mut q: CompiledQuery, payload: Bytes) {
        match q.kind {
            QueryType::START => {
                let cancel = Arc::new(AtomicBool::new(false));
                let duplicate = {
                    let mut tokens = self.tokens.lock();
                    let dup = tokens.in_use(token);
                    if !dup {
                        tokens.slots.insert(token, Slot::Running(cancel.clone()));
                    }
                    dup
                };
                if duplicate {
                    self.send(duplicate_token(token)).await;
                    return;
                }
                // Compiled with the parse (`compile_query`), its error kept until here;
                // the term decides where the query runs.
                let term = match q.term.take() {
                    Some(Ok(t)) => t,
                    Some(Err(e)) => {
                        self.tokens.lock().slots.remove(&token);
                        self.send(error_frame(token, &e)).await;
                        return;
                    }
                    None => {
                        self.tokens.lock().slots.remove(&token);
                        let e = ReqlError::new(reql::ErrorKind::Client, "START without a term.");
                        self.send(error_frame(token, &e)).await;
                        return;
                    }
                };
                let noreply = q.noreply;
                if !noreply && self.inline(&term) {
                    // A point read: answer from this task, no hand-off at all. Nothing can
                    // be owed on its token: no frame is read until it is answered.
                    let frame = self.start(token, q, payload, term, false, cancel).await;
                    self.send(frame).await;
                    return;
                }
                let me = self.clone();
                // Bounded per connection: this waits (and stops reading the client)
                // while `MAX_STARTED` queries are running or waiting to be written.
                let Ok(slot) = self.started.clone().acquire_owned().await else {
                    return;
                };
                let ticket = noreply.then(|| self.noreply.begin());
                tokio::spawn(async move {
                    let _slot = slot;
                    let frame = me.start(token, q, payload, term, noreply, cancel).await;
                    if noreply {
                        drop(ticket);
                        me.serve_owed(token).await;
                    } else {
                        me.finish_turn(token, frame).await;
                    }
                });
            }
            // CONTINUE and STOP are decided here, in the order the client sent them
            // (`tokens.rs`); only the work they start runs on other tasks.
            QueryType::CONTINUE => {
                let claim = self.tokens.lock().claim_continue(token);
                self.act(token, claim).await;
            }
            QueryType::STOP => {
                let claim = self.tokens.lock().stop(token);
                self.act(token, claim).await;
            }
            QueryType::NOREPLY_WAIT => {
                if self.tokens.lock().in_use(token) {
                    self.send(duplicate_token(token)).await;
                    return;
                }
                // Every noreply query that arrived before it, not those after.
                let earlier = self.noreply.wait_earlier();
                let me = self.clone();
                tokio::spawn(async move {
                    earlier.await;
                    let w = ResponseWriter::new(ResponseType::WAIT_COMPLETE);
                    me.send(finish(w, token)).await;
                });
            }
            QueryType::SERVER_INFO => {
                let info = serde_json::json!({
                    "id": self.state.server_id,
                    "name": self.state.cluster.server_name(),
                    "proxy": false,
                });
                let w = ResponseWriter::new(ResponseType::SERVER_INFO).item(&info);
                self.send(finish(w, token)).await;
            }
        }
    }

    /// Carries out a claimed CONTINUE or STOP: a batch to compute runs on its own task
    /// (which then serves what the token owes), an answer is sent now.
    async fn act(self: &Arc<Self>, token: u64, claim: Claim) {
        match claim {
            Claim::Run(cursor) => {
                let me = self.clone();
                tokio::spawn(async move {
                    let frame = me.continue_(token, cursor).await;
                    me.finish_turn(token, frame).await;
                });
            }
            Claim::Answer(frame, cursor) => {
                drop(cursor);
                self.send(frame).await;
            }
            Claim::Queued(cursor) => drop(cursor),
        }
    }

    /// Sends the answer of the query in flight on `token`, then what the token owes.
    async fn finish_turn(self: &Arc<Self>, token: u64, frame: Vec<u8>) {
        self.send(frame).await;
        self.serve_owed(token).await;
    }

    /// Answers, in order, the CONTINUEs and STOPs that arrived on `token` while its query
    /// was in flight; a CONTINUE whose cursor is still open computes its batch here.
    async fn serve_owed(self: &Arc<Self>, token: u64) {
        loop {
            let claim = self.tokens.lock().next_owed(token);
            match claim {
                None => return,
                Some(Claim::Run(cursor)) => {
                    let frame = self.continue_(token, cursor).await;
                    self.send(frame).await;
                }
                Some(Claim::Answer(frame, cursor)) => {
                    drop(cursor);
                    self.send(frame).await;
                }
                Some(Claim::Queued(cursor)) => {
                    drop(cursor);
                    return;
                }
            }
        }
    }

    async fn start(
        self: &Arc<Self>,
        token: u64,
        q: CompiledQuery,
        payload: Bytes,
        term: Arc<reql::Term>,
        noreply: bool,
        cancel: Arc<AtomicBool>,
    ) -> Vec<u8> {
        let began = Instant::now();
        let frame = self
            .start_inner(token, q, payload, term, noreply, cancel)
            .await;
        self.state
            .cluster
            .observe_query_latency(began.elapsed().as_secs_f64());
        // A cursor left by `respond` keeps its slot; anything else frees the token.
        let mut tokens = self.tokens.lock();
        if matches!(
            tokens.slots.get(&token),
            Some(Slot::Running(_) | Slot::Stopped)
        ) {
            tokens.slots.remove(&token);
        }
        frame
    }

    async fn start_inner(
        self: &Arc<Self>,
        token: u64,
        q: CompiledQuery,
        payload: Bytes,
        term: Arc<reql::Term>,
        noreply: bool,
        cancel: Arc<AtomicBool>,
    ) -> Vec<u8> {
        let began = Instant::now();
        let profile = q.profile;
        let state = self.state.clone();
        let pool = self.state.pool.clone();
        let who = self.who.clone();
        let memory = Budget::new(self.state.query_memory, cancel.clone());
        let plans: Arc<reql::terms::optimized::PlanLog> = Arc::default();
        let job = JobHooks {
            cancel: cancel.clone(),
            memory: memory.clone(),
            session: Arc::downgrade(self),
            token,
            plans: plans.clone(),
        };
        let run = if self.inline(&term) {
            // Contained like the pool's jobs: a panic fails this query, not the
            // connection's task.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_start(&state, &who, q, payload, term, job)
            }))
            .ok()
        } else {
            // A hard write's answer is handed back after its fsync, so that this task
            // is woken once (`Pool::run_then`); `wait_durable` below still decides.
            let cluster = state.cluster.clone();
            pool.run_then(
                move || run_start(&state, &who, q, payload, term, job),
                move |r| {
                    let t = *r.as_ref().ok()?.1.as_ref()?;
                    Some(Box::new(move |deliver| cluster.when_durable(t, deliver)))
                },
            )
            .await
        };
        let (outcome, ticket) = match run {
            Some(Ok(x)) => x,
            Some(Err(e)) => {
                return self
                    .interrupted(token, &cancel, &memory)
                    .unwrap_or_else(|| error_frame(token, &e))
            }
            // An evaluation stopped by its flag unwinds (`datum::work`); anything else
            // that unwound is a bug, contained to this query.
            None => {
                return self
                    .interrupted(token, &cancel, &memory)
                    .unwrap_or_else(|| {
                        error_frame(
                            token,
                            &reql::error::internal("The query failed unexpectedly."),
                        )
                    })
            }
        };
        if let Some(t) = ticket {
            if let Err(e) = self.state.cluster.wait_durable(t).await {
                return error_frame(token, &e);
            }
        }
        let prof = profile
            .then(|| profile_json(began.elapsed().as_secs_f64() * 1000.0, &plans.snapshot()));
        // A noreply stream is never continued: drop its cursor.
        let outcome = match outcome {
            Outcome::Batch(items, c, _) if noreply => Outcome::Batch(items, c, true),
            other => other,
        };
        self.respond(token, outcome, prof)
    }

    fn respond(&self, token: u64, outcome: Outcome, profile: Option<Vec<u8>>) -> Vec<u8> {
        let mut w = match outcome {
            Outcome::Atom(json) => {
                let mut w = ResponseWriter::new(ResponseType::SUCCESS_ATOM);
                w.push_raw(&json);
                w
            }
            Outcome::Batch(items, cursor, done) => {
                let t = if done {
                    ResponseType::SUCCESS_SEQUENCE
                } else {
                    ResponseType::SUCCESS_PARTIAL
                };
                let mut w = ResponseWriter::new(t);
                // RethinkDB notes a feed's kind on each of its batches, the last too.
                if let Some(f) = cursor.feed.as_ref() {
                    w = w.notes(&f.info.notes());
                }
                items.write_to(&mut w);
                let ended = {
                    let mut tokens = self.tokens.lock();
                    if matches!(tokens.slots.get(&token), Some(Slot::Stopped)) {
                        // STOP came while this batch was computed: the stream ends here.
                        tokens.slots.remove(&token);
                        w = ResponseWriter::new(ResponseType::SUCCESS_SEQUENCE);
                        items.write_to(&mut w);
                        Some(cursor)
                    } else if done {
                        tokens.slots.remove(&token);
                        Some(cursor)
                    } else {
                        tokens.slots.insert(token, Slot::Idle(*cursor));
                        None
                    }
                };
                // Dropped outside the lock (its job guard takes the jobs registry's).
                drop(ended);
                w
            }
        };
        if let Some(p) = profile {
            w.set_profile_raw(&p);
        }
        finish(w, token)
    }

    /// The next batch of `cursor`, claimed for `token` (its slot is `Busy`).
    async fn continue_(self: &Arc<Self>, token: u64, mut cursor: Cursor) -> Vec<u8> {
        if cursor.feed.is_some() {
            return self.continue_feed(token, cursor).await;
        }
        let cancel = cursor.cancel.clone();
        let memory = cursor.memory.clone();
        let run = self
            .state
            .pool
            .run(move || {
                let r = next_batch(&mut cursor, false);
                (r, cursor)
            })
            .await;
        match run {
            Some((Ok((items, done)), cursor)) => {
                self.respond(token, Outcome::Batch(items, Box::new(cursor), done), None)
            }
            Some((Err(e), _)) => {
                let frame = self
                    .interrupted(token, &cancel, &memory)
                    .unwrap_or_else(|| error_frame(token, &e));
                self.tokens.lock().slots.remove(&token);
                frame
            }
            None => {
                let frame = self
                    .interrupted(token, &cancel, &memory)
                    .unwrap_or_else(|| {
                        error_frame(
                            token,
                            &reql::error::internal("The query failed unexpectedly."),
                        )
                    });
                self.tokens.lock().slots.remove(&token);
                frame
            }
        }
    }

    /// The answer to a query whose evaluation failed because `cancel` was set, as
    /// RethinkDB gives it: an empty SUCCESS_SEQUENCE after STOP (nobody reads it after
    /// a disconnect), its error after the query's `jobs` row was deleted. None if the
    /// query was not interrupted.
    fn interrupted(&self, token: u64, cancel: &AtomicBool, memory: &Budget) -> Option<Vec<u8>> {
        if !cancel.load(Ordering::SeqCst) {
            return None;
        }
        if memory.exceeded() {
            return Some(error_frame(token, &memory.error()));
        }
        let stopped = self.cancel.load(Ordering::SeqCst)
            || matches!(self.tokens.lock().slots.get(&token), Some(Slot::Stopped));
        Some(if stopped {
            finish(ResponseWriter::new(ResponseType::SUCCESS_SEQUENCE), token)
        } else {
            error_frame(token, &terminated_by_jobs())
        })
    }

    /// A `jobs` row of this session's query on `token` was deleted (its flag `cancel`
    /// is set already): an idle cursor is dropped, a waiting changefeed woken; a running
    /// evaluation sees the flag itself.
    fn job_deleted(&self, token: u64, cancel: &Arc<AtomicBool>) {
        let dropped = {
            let mut tokens = self.tokens.lock();
            match tokens.slots.get(&token) {
                Some(Slot::Idle(c)) if Arc::ptr_eq(&c.cancel, cancel) => {
                    tokens.slots.insert(token, Slot::Killed)
                }
                Some(Slot::Waiting(waker)) => {
                    waker.notify_one();
                    None
                }
                _ => None,
            }
        };
        // Dropped outside the lock (the cursor's job guard takes the jobs registry's).
        drop(dropped);
    }

    /// Drops every cursor and interrupts every running query (the connection closed).
    pub fn close(&self) {
        self.cancel.store(true, Ordering::SeqCst);
        let slots = {
            let mut tokens = self.tokens.lock();
            for slot in tokens.slots.values() {
                match slot {
                    Slot::Running(cancel) | Slot::Busy(cancel) => {
                        cancel.store(true, Ordering::SeqCst)
                    }
                    // Waiting feeds wake up, see their slot gone and drop their
                    // subscriptions.
                    Slot::Waiting(waker) => waker.notify_one(),
                    Slot::Idle(_) | Slot::Stopped | Slot::Killed => {}
                }
            }
            tokens.clear()
        };
        drop(slots);
    }
}

/// The frame answering a query that could not be parsed (RethinkDB's CLIENT_ERROR).
pub fn parse_error_frame(token: u64, e: &proto::query::QueryParseError) -> Vec<u8> {
    let mut body = e.response_json();
    let mut frame = Vec::with_capacity(12 + body.len());
    frame.extend_from_slice(&token.to_le_bytes());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.append(&mut body);
    frame
}

/// RethinkDB's error for a query whose `rethinkdb.jobs` row was deleted.
fn terminated_by_jobs() -> ReqlError {
    ReqlError::new(
        reql::ErrorKind::OpIndeterminate,
        "Query terminated by the `rethinkdb.jobs` table.",
    )
}

/// What `run_start` needs to register the query in `rethinkdb.jobs`: its interruption
/// flag, and where to report a deleted row.
struct JobHooks {
    cancel: Arc<AtomicBool>,
    memory: Arc<Budget>,
    session: Weak<Session>,
    token: u64,
    /// Where the query records its plan, for the profile.
    plans: Arc<reql::terms::optimized::PlanLog>,
}

/// Evaluates a compiled START query; returns its first answer and the ticket that
/// must be durable before answering.
/// The global optargs RethinkDB accepts (`rdb_protocol/optargs.cc`); others are refused.
const GLOBAL_OPTARGS: &[&str] = &[
    "_EVAL_FLAGS_",
    "_NO_RECURSE_",
    "_SHORTCUT_",
    "array_limit",
    "attempts",
    "auth",
    "base",
    "binary_format",
    "changefeed_queue_size",
    "conflict",
    "data",
    "db",
    "default",
    "default_timezone",
    "dry_run",
    "durability",
    "emergency_repair",
    "emit",
    "fill",
    "final_emit",
    "first_batch_scaledown_factor",
    "float",
    "geo",
    "geo_system",
    "group_format",
    "header",
    "identifier_format",
    "include_initial",
    "include_offsets",
    "include_states",
    "include_types",
    "index",
    "interleave",
    "ordered",
    "optimizer",
    "left_bound",
    "max_batch_bytes",
    "max_batch_rows",
    "max_batch_seconds",
    "max_dist",
    "max_results",
    "method",
    "min_batch_rows",
    "multi",
    "non_atomic",
    "nonvoting_replica_tags",
    "noreply",
    "num_vertices",
    "overwrite",
    "page",
    "page_limit",
    "params",
    "primary_key",
    "primary_replica_tag",
    "profile",
    "read_mode",
    "redirects",
    "replicas",
    "result_format",
    "return_changes",
    "return_vals",
    "right_bound",
    "shards",
    "squash",
    "time_format",
    "timeout",
    "unit",
    "use_outdated",
    "verify",
    "wait_for",
];

fn run_start(
    state: &ServerState,
    who: &Principal,
    q: CompiledQuery,
    payload: Bytes,
    term: Arc<reql::Term>,
    hooks: JobHooks,
) -> Result<(Outcome, Option<u64>), ReqlError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let access = who.access.clone();
    let JobHooks {
        cancel,
        memory,
        session,
        token,
        plans,
    } = hooks;
    let _memory = memory.enter();
    let on_cancel = {
        let cancel = cancel.clone();
        Arc::new(move || {
            if let Some(s) = session.upgrade() {
                s.job_deleted(token, &cancel);
            }
        })
    };
    // Listed from here until the query ends: with its cursor when it has one.
    let mut job = Some(Box::new(state.cluster.register_job(
        &who.user,
        &who.peer,
        // Kept as is: `rethinkdb.jobs` prints its term only when read.
        JobQuery::Payload(payload),
        cancel.clone(),
        on_cancel,
    )));
    let mut ctx = QueryCtx::new(access.clone(), "test".into(), now);
    ctx.memory = Some(memory.clone());
    ctx.cancel = cancel.clone();
    ctx.plans = plans;
    ctx.optimizer = state.optimizer;
    let mut opts = BatchOpts::default();
    for (k, v) in &q.optargs {
        if !GLOBAL_OPTARGS.contains(&k.as_str()) {
            return Err(ReqlError::new(
                reql::ErrorKind::Compile,
                format!("Unrecognized global optional argument `{k}`."),
            ));
        }
        if k == "use_outdated" {
            return Err(reql::error::logic(
                "The `use_outdated` optarg is no longer supported.  Use the `read_mode` optarg instead.",
            ));
        }
        let t = v.clone()?;
        let probe = Arc::new(QueryCtx::new(access.clone(), "test".into(), now));
        let val = reql::eval(&probe, &reql::Env::default(), &t)?;
        let num = |v: &Val| match v {
            Val::Datum(Datum::Number(n)) => Some(*n),
            _ => None,
        };
        match k.as_str() {
            "db" => match val {
                Val::Db(name) => ctx.db = name,
                Val::Datum(Datum::String(s)) => ctx.db = s.to_string(),
                _ => {
                    return Err(reql::error::logic(
                        "Expected type DATABASE for optarg `db`.",
                    ))
                }
            },
            "array_limit" => {
                let n = num(&val).unwrap_or(0.0);
                if n < 1.0 {
                    return Err(reql::error::logic(format!(
                        "Illegal array size limit `{}`.  (Must be >= 1.)",
                        Datum::Number(n).to_json_string()
                    )));
                }
                ctx.array_limit = n as usize;
            }
            "durability" => {
                if let Val::Datum(d) = &val {
                    ctx.durability = Some(reql::terms::db::parse_durability(d)?);
                }
            }
            "max_batch_rows" => {
                opts.max_rows = num(&val).map_or(opts.max_rows, |n| n.max(1.0) as usize)
            }
            "max_batch_bytes" => {
                opts.max_bytes = num(&val).map_or(opts.max_bytes, |n| n.max(1.0) as usize)
            }
            "max_batch_seconds" => {
                opts.max_time = num(&val).map_or(opts.max_time, |n| {
                    Duration::from_secs_f64(n.clamp(0.0, 3600.0))
                })
            }
            "first_batch_scaledown_factor" => {
                opts.first_scaledown =
                    num(&val).map_or(opts.first_scaledown, |n| n.max(1.0) as usize)
            }
            // Ponder's own: `optimizer: false` runs the query without the optimizer.
            "optimizer" => match val {
                Val::Datum(Datum::Bool(b)) => ctx.optimizer = b,
                _ => {
                    return Err(reql::error::logic(
                        "Expected type BOOL for optarg `optimizer`.",
                    ))
                }
            },
            "changefeed_queue_size" => {
                if let Some(n) = num(&val).filter(|n| *n >= 1.0) {
                    ctx.feeds.set_queue_size(n as usize);
                }
            }
            _ => {}
        }
    }
    let ctx = Arc::new(ctx);
    let val = reql::eval(&ctx, &reql::Env::default(), &term)?;
    let outcome = match val {
        Val::Seq(s) if !s.is_array && ctx.feeds.active() => {
            let info = ctx.feeds.take();
            let mut c = Cursor {
                _open: Box::new(state.cluster.open_cursor(info.is_some())),
                seq: s,
                opts,
                feed: info.map(feed::FeedCursor::new),
                cancel,
                memory: memory.clone(),
                _job: settled(job.take()),
            };
            let (items, done) = feed::next_feed_batch(&mut c, true)?;
            Outcome::Batch(items, Box::new(c), done)
        }
        Val::Seq(s) if !s.is_array => {
            let mut c = Cursor {
                _open: Box::new(state.cluster.open_cursor(false)),
                seq: s,
                opts,
                feed: None,
                cancel,
                memory: memory.clone(),
                _job: settled(job.take()),
            };
            let (items, done) = next_batch(&mut c, true)?;
            Outcome::Batch(items, Box::new(c), done)
        }
        Val::Table(t) => {
            let seq = reql::eval::to_seq(Val::Table(t))?;
            let mut c = Cursor {
                _open: Box::new(state.cluster.open_cursor(false)),
                seq,
                opts,
                feed: None,
                cancel,
                memory: memory.clone(),
                _job: settled(job.take()),
            };
            let (items, done) = next_batch(&mut c, true)?;
            Outcome::Batch(items, Box::new(c), done)
        }
        Val::Grouped(g) => {
            let d = reql::terms::group::wire_datum(ctx.array_limit, g)?;
            check_json(&d)?;
            Outcome::Atom(d.to_json_bytes())
        }
        Val::Db(_) | Val::Func(_) => {
            return Err(reql::error::logic(format!(
                "Query result must be of type DATUM, GROUPED_DATA, or STREAM (got {}).",
                val.kind_name()
            )))
        }
        other => {
            let d = reql::eval::to_datum(&ctx, other)?;
            check_json(&d)?;
            Outcome::Atom(d.to_json_bytes())
        }
    };
    Ok((outcome, ctx.hard_ticket()))
}

/// A job handed to a cursor, which may live long: its query is printed now so that the
/// registry does not keep the whole term.
fn settled(job: Option<Box<cluster::system::JobGuard>>) -> Option<Box<cluster::system::JobGuard>> {
    if let Some(j) = &job {
        j.settle();
    }
    job
}

/// Pulls the next batch of a cursor; `done` when the stream is exhausted.
fn next_batch(c: &mut Cursor, first: bool) -> Result<(batch::Items, bool), ReqlError> {
    let memory = c.memory.clone();
    let _memory = memory.enter();
    let limits = batch::Limits::new(&c.opts, first);
    let mut items = batch::Items::default();
    loop {
        match c.seq.stream.next() {
            None => return Ok((items, true)),
            Some(d) => items.push(&d?)?,
        }
        if limits.reached(&items) {
            return Ok((items, false));
        }
    }
}
