//! Query-wide context: the table access, global optargs and the write-durability record.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use datum::Datum;
use parking_lot::Mutex;

use crate::access::{Durability, Table, TableAccess, Ticket};

/// RethinkDB's default `array_limit`.
pub const DEFAULT_ARRAY_LIMIT: usize = 100_000;

/// State shared by every term of one query (and by its lazy streams).
pub struct QueryCtx {
    /// Catalog and tables.
    pub access: Arc<dyn TableAccess>,
    /// The default database (`db` global optarg, else `test`).
    pub db: String,
    /// The largest array a query may build.
    pub array_limit: usize,
    /// The `durability` global optarg.
    pub durability: Option<Durability>,
    /// `r.now()` of this query (fixed for the whole query, as in RethinkDB).
    pub now: f64,
    /// Set to interrupt the query (STOP, a closed connection, a deleted `jobs` row):
    /// table reads, function calls and long loops stop at their next check
    /// (`crate::interrupt`).
    pub cancel: Arc<AtomicBool>,
    /// The highest ticket of a hard-durability write, which the reply must wait for.
    hard_ticket: Mutex<Option<Ticket>>,
    /// The changefeeds this query opened (`terms::changes`).
    pub feeds: crate::terms::changes::FeedCtx,
    /// The query's memory budget, entered by every thread that evaluates part of it
    /// (`crate::memory`); none for evaluations the server does not budget.
    pub memory: Option<Arc<crate::memory::Budget>>,
    /// Whether the query optimizer may answer terms from indexes (`crate::optimize`;
    /// the server's `--no-optimizer` and the `optimizer` global optarg turn it off).
    pub optimizer: bool,
    /// The plan steps that ran, for the profile (`terms::optimized::PlanLog`).
    pub plans: Arc<crate::terms::optimized::PlanLog>,
}

impl QueryCtx {
    /// A context with default options.
    pub fn new(access: Arc<dyn TableAccess>, db: String, now: f64) -> QueryCtx {
        QueryCtx {
            access,
            db,
            array_limit: DEFAULT_ARRAY_LIMIT,
            durability: None,
            now,
            cancel: Arc::new(AtomicBool::new(false)),
            hard_ticket: Mutex::new(None),
            feeds: Default::default(),
            memory: None,
            optimizer: true,
            plans: Default::default(),
        }
    }

    /// Records a write that must be durable before the reply when `d` is hard.
    pub fn note_write(&self, ticket: Option<Ticket>, d: Durability) {
        if let (Some(t), Durability::Hard) = (ticket, d) {
            let mut g = self.hard_ticket.lock();
            *g = Some(g.map_or(t, |old| old.max(t)));
        }
    }

    /// The ticket the reply must wait for, if any.
    pub fn hard_ticket(&self) -> Option<Ticket> {
        *self.hard_ticket.lock()
    }

    /// `table` as this query reads it: its reads stop once the query is interrupted.
    pub fn interruptible(&self, table: Arc<dyn Table>) -> Arc<dyn Table> {
        crate::interrupt::Interruptible::wrap(table, &self.cancel)
    }

    /// A datum for `r.now()`.
    pub fn now_datum(&self) -> Datum {
        datum::ptype::make_time(self.now, "+00:00")
    }
}
