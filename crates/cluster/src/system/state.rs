//! What the system tables report that the catalog does not hold: this server's
//! identity and ports, query and document counters, running jobs and recent log lines.
//!
//! Counters are relaxed atomics (one `fetch_add` per query or document), so keeping
//! them costs nothing measurable; rates are computed when `rethinkdb.stats` is read,
//! from the change since the previous sample at least one second old.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use datum::Datum;
use parking_lot::Mutex;

/// Lines kept for `rethinkdb.logs`.
const LOG_LINES: usize = 1000;

/// This server's identity and listening ports, as `server_status` shows them.
#[derive(Debug, Clone, Default)]
pub struct ServerInfo {
    /// Driver port.
    pub reql_port: u16,
    /// HTTP admin port.
    pub http_port: u16,
    /// Cluster port.
    pub cluster_port: u16,
    /// Host name.
    pub hostname: String,
    /// The process's command line.
    pub argv: Vec<String>,
    /// Cache size in MB.
    pub cache_size_mb: f64,
    /// Whether the size was chosen automatically (`--cache-size auto`).
    pub cache_size_auto: bool,
    /// Where other servers reach this one (`--canonical-address`), `(host, port)`;
    /// empty: `127.0.0.1` and the cluster port.
    pub canonical_addresses: Vec<(String, u16)>,
}

/// Document counters of one table.
#[derive(Default)]
pub struct TableCounters {
    /// Documents read.
    pub read: AtomicU64,
    /// Documents written.
    pub written: AtomicU64,
    /// Changefeed pollers running for the table here (`crate::groups`, feeds).
    pub feed_pollers: AtomicU64,
}

/// Upper bounds (seconds) of the query latency histogram's buckets, as Prometheus'
/// `le` labels; a last bucket (`+Inf`) takes the rest.
pub const LATENCY_BOUNDS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Query latencies: a count per bucket of `LATENCY_BOUNDS` (plus `+Inf`), and the sum.
#[derive(Default)]
pub struct Latency {
    buckets: [AtomicU64; LATENCY_BOUNDS.len() + 1],
    sum_micros: AtomicU64,
}

impl Latency {
    /// Records one query that took `secs` seconds.
    pub fn observe(&self, secs: f64) {
        let i = LATENCY_BOUNDS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(LATENCY_BOUNDS.len());
        if let Some(b) = self.buckets.get(i) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        let micros = (secs.max(0.0) * 1e6) as u64;
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Cumulative counts per bucket (the last is `+Inf`, the total) and the sum in
    /// seconds, as a Prometheus histogram reports them.
    pub fn snapshot(&self) -> (Vec<u64>, f64) {
        let mut total = 0;
        let cumulative = self
            .buckets
            .iter()
            .map(|b| {
                total += b.load(Ordering::Relaxed);
                total
            })
            .collect();
        (
            cumulative,
            self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
        )
    }
}

/// Query and document counters.
#[derive(Default)]
pub struct Counters {
    /// Queries started.
    pub queries: AtomicU64,
    /// Open client connections.
    pub connections: AtomicU64,
    /// Connections with a query running.
    pub active: AtomicU64,
    /// Open cursors (changefeeds included).
    pub cursors: AtomicU64,
    /// Open changefeed cursors.
    pub feeds: AtomicU64,
    /// Query latencies (driver and HTTP queries, from START to the first answer).
    pub latency: Latency,
    tables: Mutex<HashMap<String, Arc<TableCounters>>>,
    samples: Mutex<HashMap<String, (Instant, u64, f64)>>,
}

impl Counters {
    /// The counters of the table with `id` (created on first use).
    pub fn table(&self, id: &str) -> Arc<TableCounters> {
        self.tables
            .lock()
            .entry(id.to_string())
            .or_default()
            .clone()
    }

    /// `(read, written)` totals of one table.
    pub fn table_totals(&self, id: &str) -> (u64, u64) {
        match self.tables.lock().get(id) {
            Some(c) => (
                c.read.load(Ordering::Relaxed),
                c.written.load(Ordering::Relaxed),
            ),
            None => (0, 0),
        }
    }

    /// How many changefeed pollers run for the table with `id` here.
    pub fn feed_pollers(&self, id: &str) -> u64 {
        self.tables
            .lock()
            .get(id)
            .map_or(0, |c| c.feed_pollers.load(Ordering::Relaxed))
    }

    /// `(read, written)` totals over all tables.
    pub fn totals(&self) -> (u64, u64) {
        self.tables.lock().values().fold((0, 0), |(r, w), c| {
            (
                r + c.read.load(Ordering::Relaxed),
                w + c.written.load(Ordering::Relaxed),
            )
        })
    }

    /// The rate of a growing total named `key`: the change per second since the last
    /// sample at least one second old (the previous rate in between).
    pub fn rate(&self, key: &str, total: u64) -> f64 {
        let now = Instant::now();
        let mut s = self.samples.lock();
        match s.get(key).copied() {
            None => {
                s.insert(key.to_string(), (now, total, 0.0));
                0.0
            }
            Some((at, old, last)) => {
                let dt = now.duration_since(at).as_secs_f64();
                if dt < 1.0 {
                    return last;
                }
                let r = total.saturating_sub(old) as f64 / dt;
                s.insert(key.to_string(), (now, total, r));
                r
            }
        }
    }
}

/// Keeps a cursor counted in `Counters::cursors` (and `feeds`) while it lives.
pub struct CursorGuard {
    cluster: std::sync::Weak<crate::Cluster>,
    feed: bool,
}

impl Drop for CursorGuard {
    fn drop(&mut self) {
        if let Some(c) = self.cluster.upgrade() {
            let dec = |a: &AtomicU64| {
                let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    Some(n.saturating_sub(1))
                });
            };
            dec(&c.admin.counters.cursors);
            if self.feed {
                dec(&c.admin.counters.feeds);
            }
        }
    }
}

/// Documents read and written in one table, for `/metrics`.
#[derive(Debug, Clone)]
pub struct TableMetrics {
    /// The database's name.
    pub db: String,
    /// The table's name.
    pub table: String,
    /// Documents read.
    pub read: u64,
    /// Documents written.
    pub written: u64,
}

/// The counters `/metrics` reports (the same ones `rethinkdb.stats` reads).
#[derive(Debug, Clone)]
pub struct Metrics {
    /// Queries started.
    pub queries: u64,
    /// Open client connections (driver and `/ajax/reql`).
    pub connections: u64,
    /// Queries running or holding a cursor (`rethinkdb.jobs`).
    pub jobs: u64,
    /// Open cursors, changefeeds included.
    pub cursors: u64,
    /// Open changefeeds.
    pub feeds: u64,
    /// Per table.
    pub tables: Vec<TableMetrics>,
    /// Cumulative latency counts per bucket of `LATENCY_BOUNDS`, then `+Inf`.
    pub latency_buckets: Vec<u64>,
    /// Sum of the latencies, in seconds.
    pub latency_sum: f64,
}

/// A running query as `rethinkdb.jobs` lists it.
pub struct Job {
    /// The user running it.
    pub user: Arc<str>,
    /// The client's address.
    pub client: Arc<str>,
    /// The query, printed (abbreviated) when `rethinkdb.jobs` is read.
    pub query: JobQuery,
    /// When it started.
    pub started: Instant,
    /// Set to interrupt it (by STOP, a closed connection or deleting its row); an
    /// interrupted job is no longer listed.
    pub cancel: Arc<AtomicBool>,
    /// Called (outside the registry's lock) after deleting its row set `cancel`, so the
    /// query's owner can end it even while nothing evaluates (an idle cursor, a
    /// changefeed waiting for changes).
    pub on_cancel: Arc<dyn Fn() + Send + Sync>,
}

/// A job's query as received. Registering a query prints nothing: the text
/// `rethinkdb.jobs` shows is made from this when the table is read.
#[derive(Clone, Default)]
pub enum JobQuery {
    /// No term.
    #[default]
    None,
    /// The query's term.
    Term(Arc<serde_json::Value>),
    /// A query frame's payload, `[type, term, optargs]`, whose term is shown (a point
    /// read answered without parsing it into a tree keeps only its bytes).
    Payload(bytes::Bytes),
    /// The text already printed (`JobGuard::settle`).
    Text(Arc<str>),
}

impl JobQuery {
    /// The text `rethinkdb.jobs` shows: the term's JSON, abbreviated.
    pub fn text(&self) -> String {
        match self {
            JobQuery::None => String::new(),
            JobQuery::Text(t) => t.to_string(),
            JobQuery::Term(t) => abbreviated(t),
            JobQuery::Payload(p) => match serde_json::from_slice::<serde_json::Value>(p) {
                Ok(serde_json::Value::Array(items)) => {
                    items.get(1).map(abbreviated).unwrap_or_default()
                }
                _ => String::new(),
            },
        }
    }
}

/// Running jobs, by id.
#[derive(Default)]
pub struct Jobs {
    /// By id, a UUID as a number: registering prints nothing, and the numbers' order is
    /// that of the printed ids.
    jobs: Mutex<BTreeMap<u128, Job>>,
}

/// Removes its job from the registry when dropped.
pub struct JobGuard {
    id: u128,
    jobs: std::sync::Weak<crate::Cluster>,
}

/// A job id as `rethinkdb.jobs` shows it.
fn job_id_text(id: u128) -> String {
    uuid::Uuid::from_u128(id).hyphenated().to_string()
}

/// The job id `text` names: only the exact form `job_id_text` prints.
fn job_id(text: &str) -> Option<u128> {
    let id = uuid::Uuid::try_parse(text).ok()?.as_u128();
    (job_id_text(id) == text).then_some(id)
}

impl JobGuard {
    /// Prints the job's query now, for a job that stays listed (its cursor lives on):
    /// it then keeps the text, not the whole term.
    pub fn settle(&self) {
        let Some(c) = self.jobs.upgrade() else { return };
        let held = c
            .admin
            .jobs
            .jobs
            .lock()
            .get(&self.id)
            .map(|j| j.query.clone());
        let Some(q @ (JobQuery::Term(_) | JobQuery::Payload(_))) = held else {
            return;
        };
        // Printed outside the registry's lock.
        let text = JobQuery::Text(q.text().into());
        let mut jobs = c.admin.jobs.jobs.lock();
        if let Some(j) = jobs.get_mut(&self.id) {
            j.query = text;
        }
    }
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        if let Some(c) = self.jobs.upgrade() {
            c.admin.jobs.jobs.lock().remove(&self.id);
        }
    }
}

impl Jobs {
    /// Every job not interrupted, as `(id, duration_sec, user, client, query)`.
    pub fn list(&self) -> Vec<(String, f64, String, String, String)> {
        let listed: Vec<_> = self
            .jobs
            .lock()
            .iter()
            .filter(|(_, j)| !j.cancel.load(Ordering::Relaxed))
            .map(|(id, j)| {
                (
                    *id,
                    j.started.elapsed().as_secs_f64(),
                    j.user.clone(),
                    j.client.clone(),
                    j.query.clone(),
                )
            })
            .collect();
        // Printed outside the registry's lock, which every query start takes.
        listed
            .into_iter()
            .map(|(id, secs, user, client, q)| {
                (
                    job_id_text(id),
                    secs,
                    user.to_string(),
                    client.to_string(),
                    q.text(),
                )
            })
            .collect()
    }

    /// How many jobs are listed (not interrupted).
    pub fn count(&self) -> usize {
        (self.jobs.lock().values())
            .filter(|j| !j.cancel.load(Ordering::Relaxed))
            .count()
    }

    /// Interrupts the job with `id`; false when there is none.
    pub fn cancel(&self, id: &str) -> bool {
        self.cancel_if(id, |_| true)
    }

    /// Cancels job `id` if `may(its user)` allows it (a user may end only their own
    /// queries; `admin` any). Returns whether a job was cancelled.
    pub fn cancel_if(&self, id: &str, may: impl Fn(&str) -> bool) -> bool {
        let Some(id) = job_id(id) else {
            return false;
        };
        let on_cancel = match self.jobs.lock().get(&id) {
            Some(j) if !may(&j.user) => return false,
            Some(j) => {
                j.cancel.store(true, Ordering::SeqCst);
                j.on_cancel.clone()
            }
            None => return false,
        };
        // Outside the lock: the owner may drop the query, whose guard takes it.
        on_cancel();
        true
    }
}

/// One log line.
#[derive(Clone)]
pub struct LogLine {
    /// Seconds since the epoch.
    pub time: f64,
    /// Seconds since the server started.
    pub uptime: f64,
    /// `info`, `notice`, `warn` or `error`.
    pub level: String,
    /// The message.
    pub message: String,
    /// Sequence number (part of the row id).
    pub seq: u64,
}

/// The server-wide administrative state.
pub struct AdminState {
    /// This server's id.
    pub server_id: String,
    /// Seconds since the epoch at start.
    pub started: f64,
    started_at: Instant,
    /// Ports and process facts, set by the server binary.
    pub info: Mutex<ServerInfo>,
    /// Counters.
    pub counters: Counters,
    /// Running jobs.
    pub jobs: Jobs,
    logs: Mutex<VecDeque<LogLine>>,
    log_seq: AtomicU64,
    /// `rethinkdb._debug_scratch`.
    pub(crate) scratch: Mutex<BTreeMap<Datum, Datum>>,
    /// `cluster_config`'s `heartbeat_timeout_secs`.
    pub(crate) heartbeat: Mutex<f64>,
    /// This server's name and tags (changed by a rename through `server_config`).
    pub(crate) identity: parking_lot::RwLock<(String, Vec<String>)>,
    /// The membership layer, when the server runs one (`system::servers`).
    pub(crate) membership: parking_lot::RwLock<Option<Arc<dyn super::Membership>>>,
    /// Serialises writes to system tables (read-check-apply of one row).
    pub(crate) writes: Mutex<()>,
    /// Changefeeds on the system tables.
    pub(crate) feeds: super::SystemFeeds,
}

/// Seconds since the epoch.
pub fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl AdminState {
    /// Fresh state with a new server id.
    pub fn new() -> AdminState {
        AdminState {
            server_id: uuid::Uuid::new_v4().to_string(),
            started: now_secs(),
            started_at: Instant::now(),
            info: Mutex::new(ServerInfo::default()),
            counters: Counters::default(),
            jobs: Jobs::default(),
            logs: Mutex::new(VecDeque::new()),
            log_seq: AtomicU64::new(0),
            scratch: Mutex::new(BTreeMap::new()),
            heartbeat: Mutex::new(10.0),
            identity: parking_lot::RwLock::new(("ponder".into(), vec!["default".into()])),
            membership: parking_lot::RwLock::new(None),
            writes: Mutex::new(()),
            feeds: super::SystemFeeds::default(),
        }
    }

    /// Appends a log line (the oldest is dropped past 1000).
    pub fn log(&self, level: &str, message: &str) {
        let line = LogLine {
            time: now_secs(),
            uptime: self.started_at.elapsed().as_secs_f64(),
            level: level.to_string(),
            message: message.to_string(),
            seq: self.log_seq.fetch_add(1, Ordering::Relaxed),
        };
        let mut l = self.logs.lock();
        if l.len() >= LOG_LINES {
            l.pop_front();
        }
        l.push_back(line);
    }

    /// The kept log lines, oldest first.
    pub fn log_lines(&self) -> Vec<LogLine> {
        self.logs.lock().iter().cloned().collect()
    }
}

impl Default for AdminState {
    fn default() -> Self {
        AdminState::new()
    }
}

/// Characters of a query's JSON that `rethinkdb.jobs` shows.
const JOB_QUERY_CHARS: usize = 200;

/// `term`'s JSON cut after `JOB_QUERY_CHARS` characters (then an ellipsis), printed only
/// that far: listing a 1 MB insert costs no more than listing a point read.
fn abbreviated(term: &serde_json::Value) -> String {
    /// Takes bytes until it has room for no more, then refuses (ending the print).
    struct Cut(Vec<u8>);
    impl std::io::Write for Cut {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            // Enough bytes for JOB_QUERY_CHARS characters and one more to tell a cut.
            let room = (JOB_QUERY_CHARS + 1) * 4 - self.0.len();
            if room == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            let n = b.len().min(room);
            self.0.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut cut = Cut(Vec::new());
    let _ = serde_json::to_writer(&mut cut, term);
    // The print may stop inside a character: keep the whole ones.
    let text = match std::str::from_utf8(&cut.0) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&cut.0[..e.valid_up_to()]).unwrap_or_default(),
    };
    let mut q: String = text.chars().take(JOB_QUERY_CHARS).collect();
    if q.len() < text.len() {
        q.push('…');
    }
    q
}

impl crate::Cluster {
    /// Registers a query for `rethinkdb.jobs`; it is listed until the guard drops (the
    /// query's owner keeps the guard for as long as its cursor lives) or `cancel` is
    /// set. Deleting its row sets `cancel`, then calls `on_cancel`.
    pub fn register_job(
        &self,
        user: &Arc<str>,
        client: &Arc<str>,
        query: JobQuery,
        cancel: Arc<AtomicBool>,
        on_cancel: Arc<dyn Fn() + Send + Sync>,
    ) -> JobGuard {
        let id = uuid::Uuid::new_v4().as_u128();
        self.admin.jobs.jobs.lock().insert(
            id,
            Job {
                user: user.clone(),
                client: client.clone(),
                query,
                started: Instant::now(),
                cancel,
                on_cancel,
            },
        );
        self.count_query();
        JobGuard {
            id,
            jobs: self.me.clone(),
        }
    }

    /// Counts a query for `stats` without listing it in `rethinkdb.jobs`: a query that
    /// is answered by the time it could be listed (a point read, counted after its read)
    /// has nothing there to show or to interrupt.
    pub fn count_query(&self) {
        self.admin.counters.queries.fetch_add(1, Ordering::Relaxed);
    }

    /// Records this server's ports and process facts for `server_status`.
    pub fn set_server_info(&self, info: ServerInfo) {
        *self.admin.info.lock() = info;
    }

    /// Appends a line to `rethinkdb.logs`.
    pub fn log(&self, level: &str, message: &str) {
        self.admin.log(level, message);
    }

    /// A client connection opened (`true`) or closed (`false`).
    pub fn note_connection(&self, open: bool) {
        let c = &self.admin.counters.connections;
        if open {
            c.fetch_add(1, Ordering::Relaxed);
        } else {
            let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(1))
            });
        }
    }

    /// Records a query that took `secs` seconds to its first answer.
    pub fn observe_query_latency(&self, secs: f64) {
        self.admin.counters.latency.observe(secs);
    }

    /// Counts an open cursor (`feed` for a changefeed) until the guard drops.
    pub fn open_cursor(&self, feed: bool) -> CursorGuard {
        let k = &self.admin.counters;
        k.cursors.fetch_add(1, Ordering::Relaxed);
        if feed {
            k.feeds.fetch_add(1, Ordering::Relaxed);
        }
        CursorGuard {
            cluster: self.me.clone(),
            feed,
        }
    }

    /// What `/metrics` reports, read at once.
    pub fn metrics(&self) -> Metrics {
        let k = &self.admin.counters;
        let (latency_buckets, latency_sum) = k.latency.snapshot();
        let tables = self
            .tables_snapshot()
            .into_iter()
            .map(|e| {
                let (read, written) = k.table_totals(&e.id);
                TableMetrics {
                    db: e.db.clone(),
                    table: e.name.clone(),
                    read,
                    written,
                }
            })
            .collect();
        Metrics {
            queries: k.queries.load(Ordering::Relaxed),
            connections: k.connections.load(Ordering::Relaxed),
            jobs: self.admin.jobs.count() as u64,
            cursors: k.cursors.load(Ordering::Relaxed),
            feeds: k.feeds.load(Ordering::Relaxed),
            tables,
            latency_buckets,
            latency_sum,
        }
    }

    /// This server's id.
    pub fn server_id(&self) -> &str {
        &self.admin.server_id
    }

    /// The users, credentials and permissions.
    pub fn users(&self) -> &Arc<crate::auth::Users> {
        &self.users
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_printed_up_to_its_cut() {
        let small = serde_json::json!([1, [[15, ["t"]]], {}]);
        assert_eq!(abbreviated(&small), small.to_string());
        for unit in ["x", "é", "😀"] {
            let big = serde_json::json!([56, [[15, ["t"]], unit.repeat(100_000)]]);
            let full = big.to_string();
            let want: String = full.chars().take(JOB_QUERY_CHARS).chain(['…']).collect();
            assert_eq!(abbreviated(&big), want, "{unit}");
        }
        // Exactly as long as the cut: nothing to mark.
        let edge = serde_json::json!("x".repeat(JOB_QUERY_CHARS - 2));
        assert_eq!(abbreviated(&edge).chars().count(), JOB_QUERY_CHARS);
        assert!(!abbreviated(&edge).ends_with('…'));
    }
    #[test]
    fn jobs_are_listed_with_their_text_until_dropped_and_settling_keeps_it() {
        let e: Arc<dyn storage::Engine> = Arc::new(storage::Memory::new());
        let c = crate::Cluster::open(e, "s1").unwrap();
        let term = serde_json::json!([15, ["t"]]);
        let (user, client): (Arc<str>, Arc<str>) = ("admin".into(), "127.0.0.1:9".into());
        let job = c.register_job(
            &user,
            &client,
            JobQuery::Term(Arc::new(term)),
            Arc::new(AtomicBool::new(false)),
            Arc::new(|| {}),
        );
        let listed = c.admin.jobs.list();
        assert_eq!(listed.len(), 1);
        let (id, _, u, cl, q) = &listed[0];
        assert_eq!(
            (u.as_str(), cl.as_str(), q.as_str()),
            ("admin", "127.0.0.1:9", r#"[15,["t"]]"#)
        );
        job.settle();
        let held = c
            .admin
            .jobs
            .jobs
            .lock()
            .values()
            .map(|j| j.query.clone())
            .next();
        assert!(matches!(held, Some(JobQuery::Text(t)) if &*t == r#"[15,["t"]]"#));
        assert!(c.admin.jobs.cancel(id));
        assert_eq!(c.admin.jobs.count(), 0);
        drop(job);
        assert!(c.admin.jobs.jobs.lock().is_empty());
    }

    #[test]
    fn job_ids_are_printed_uuids_and_only_that_form_names_them() {
        let id = uuid::Uuid::new_v4();
        let text = job_id_text(id.as_u128());
        assert_eq!(text, id.to_string());
        assert_eq!(job_id(&text), Some(id.as_u128()));
        assert_eq!(job_id(&text.to_uppercase()), None);
        assert_eq!(job_id(&id.simple().to_string()), None);
        assert_eq!(job_id("nope"), None);
        // Numeric order is the printed ids' order.
        let (a, b) = (0x0fff_u128 << 112, 0xa000_u128 << 112);
        assert!(job_id_text(a) < job_id_text(b));
    }

    #[test]
    fn a_job_shows_the_same_text_from_its_term_or_its_frame() {
        let payload = br#"[1,[16,[[15,[[14,["d"]],"t"]],"k"]],{"db":[14,["x"]]}]"#;
        let term = serde_json::json!([16, [[15, [[14, ["d"]], "t"]], "k"]]);
        let from_frame = JobQuery::Payload(bytes::Bytes::from_static(payload)).text();
        assert_eq!(from_frame, r#"[16,[[15,[[14,["d"]],"t"]],"k"]]"#);
        assert_eq!(JobQuery::Term(Arc::new(term)).text(), from_frame);
        assert_eq!(JobQuery::None.text(), "");
        assert_eq!(
            JobQuery::Text(from_frame.as_str().into()).text(),
            from_frame
        );
        assert_eq!(
            JobQuery::Payload(bytes::Bytes::from_static(b"[4]")).text(),
            ""
        );
    }

    #[test]
    fn latencies_fall_into_cumulative_buckets() {
        let l = Latency::default();
        l.observe(0.0001);
        l.observe(0.003);
        l.observe(60.0);
        let (buckets, sum) = l.snapshot();
        assert_eq!(buckets.len(), LATENCY_BOUNDS.len() + 1);
        assert_eq!(buckets[0], 1, "<= 0.5 ms");
        assert_eq!(buckets[3], 2, "<= 5 ms");
        assert_eq!(buckets[LATENCY_BOUNDS.len() - 1], 2, "<= 10 s");
        assert_eq!(buckets[LATENCY_BOUNDS.len()], 3, "+Inf");
        assert!((sum - 60.0031).abs() < 1e-6);
    }
}
