//! One batch of a stream's results and the limits that end it, shared by query and feed
//! cursors. Items are written straight into one JSON buffer (comma-separated), so a
//! batch of a thousand documents costs no per-row allocation; limits follow RethinkDB's
//! `max_batch_rows`, `max_batch_bytes` and `max_batch_seconds`, the first batch scaled
//! down by `first_batch_scaledown_factor`.

use std::time::{Duration, Instant};

use datum::Datum;
use proto::response::ResponseWriter;
use reql::ReqlError;

use super::BatchOpts;
use crate::wire::check_json;

/// The JSON of a batch's items.
#[derive(Default)]
pub(super) struct Items {
    json: Vec<u8>,
    count: usize,
}

impl Items {
    /// Appends one result (refusing `r.minval`/`r.maxval`, which have no JSON form).
    pub(super) fn push(&mut self, d: &Datum) -> Result<(), ReqlError> {
        check_json(d)?;
        if self.count > 0 {
            self.json.push(b',');
        }
        d.write_json(&mut self.json);
        self.count += 1;
        Ok(())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Adds the items to a response.
    pub(super) fn write_to(&self, w: &mut ResponseWriter) {
        w.push_raw_list(&self.json, self.count);
    }
}

/// When the batch being filled must end.
pub(super) struct Limits {
    max_rows: usize,
    max_bytes: usize,
    deadline: Instant,
}

impl Limits {
    pub(super) fn new(opts: &BatchOpts, first: bool) -> Limits {
        let scale = if first {
            opts.first_scaledown.max(1)
        } else {
            1
        };
        let time: Duration = opts.max_time / scale as u32;
        Limits {
            max_rows: opts.max_rows,
            max_bytes: (opts.max_bytes / scale).max(1),
            deadline: Instant::now() + time,
        }
    }

    pub(super) fn reached(&self, items: &Items) -> bool {
        items.count >= self.max_rows
            || items.json.len() >= self.max_bytes
            || Instant::now() >= self.deadline
    }
}
