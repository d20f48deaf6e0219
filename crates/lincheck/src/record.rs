//! The history recorder: appends events as JSON lines, stamping each with monotonic
//! nanoseconds since the recorder was made.
//!
//! Invariant: the time is read and the line written under one lock, so the file's line
//! order is its time order, and an event recorded after another returned has a later
//! (or equal) time — which is what makes real-time order in the file trustworthy.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use crate::history::{Event, EventType};

/// Counts of what was recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Invocations.
    pub invoke: u64,
    /// `ok` completions.
    pub ok: u64,
    /// `fail` completions.
    pub fail: u64,
    /// `info` completions.
    pub info: u64,
}

struct Inner {
    out: Box<dyn Write + Send>,
    counts: Counts,
    /// The first write error; later events are dropped and `finish` reports it.
    error: Option<io::Error>,
}

/// A thread-safe JSON-lines event writer.
pub struct Recorder {
    origin: Instant,
    inner: Mutex<Inner>,
}

impl Recorder {
    /// Records into `out`.
    pub fn new(out: impl Write + Send + 'static) -> Self {
        Self {
            origin: Instant::now(),
            inner: Mutex::new(Inner {
                out: Box::new(out),
                counts: Counts::default(),
                error: None,
            }),
        }
    }

    /// Records into a new file at `path` (replacing any).
    pub fn create(path: &Path) -> io::Result<Self> {
        Ok(Self::new(BufWriter::new(std::fs::File::create(path)?)))
    }

    /// Stamps `ev` with the current time, writes it, and returns the time.
    pub fn record(&self, mut ev: Event) -> u64 {
        let Ok(mut inner) = self.inner.lock() else {
            return 0;
        };
        ev.time_ns = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        match ev.kind {
            EventType::Invoke => inner.counts.invoke += 1,
            EventType::Ok => inner.counts.ok += 1,
            EventType::Fail => inner.counts.fail += 1,
            EventType::Info => inner.counts.info += 1,
        }
        if inner.error.is_none() {
            let line = serde_json::to_string(&ev).map_err(io::Error::other);
            if let Err(e) = line.and_then(|l| writeln!(inner.out, "{l}")) {
                inner.error = Some(e);
            }
        }
        ev.time_ns
    }

    /// Flushes the output; reports the first write error, if any.
    pub fn finish(&self) -> io::Result<Counts> {
        let mut inner = self
            .inner
            .lock()
            .map_err(|_| io::Error::other("recorder lock poisoned"))?;
        if let Some(e) = inner.error.take() {
            return Err(e);
        }
        inner.out.flush()?;
        Ok(inner.counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{read_jsonl, Func};
    use serde_json::{json, Value};

    #[test]
    fn records_in_time_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let rec = Recorder::create(&path).unwrap();
        let ev = |kind, value: Value| Event {
            process: 1,
            kind,
            f: Func::Write,
            key: json!("k"),
            value,
            applied: None,
            time_ns: 0,
            final_read: false,
            error: None,
        };
        let a = rec.record(ev(EventType::Invoke, json!(1)));
        let b = rec.record(ev(EventType::Ok, json!(1)));
        assert!(b >= a);
        let counts = rec.finish().unwrap();
        assert_eq!((counts.invoke, counts.ok), (1, 1));
        let events =
            read_jsonl(std::io::BufReader::new(std::fs::File::open(&path).unwrap())).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].time_ns, b);
    }
}
