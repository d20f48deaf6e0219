//! Builders for hand-written histories: each call adds one operation's invocation and
//! completion; `events()` returns them in time order.

#![allow(dead_code)]

use lincheck::{Event, EventType, Func};
use serde_json::{json, Value};

/// A history under construction.
#[derive(Default)]
pub struct H {
    events: Vec<Event>,
}

fn ev(p: u64, kind: EventType, f: Func, key: &str, value: Value, t: u64) -> Event {
    Event {
        process: p,
        kind,
        f,
        key: json!(key),
        value,
        applied: None,
        time_ns: t,
        final_read: false,
        error: None,
    }
}

impl H {
    fn push(&mut self, invoke: Event, done: Option<Event>) -> &mut Self {
        self.events.push(invoke);
        self.events.extend(done);
        self
    }

    /// A read on `[t0, t1]` that returned `v`.
    pub fn read(&mut self, p: u64, key: &str, t0: u64, t1: u64, v: Value) -> &mut Self {
        let done = ev(p, EventType::Ok, Func::Read, key, v, t1);
        self.push(
            ev(p, EventType::Invoke, Func::Read, key, Value::Null, t0),
            Some(done),
        )
    }

    /// A final read (after the faults).
    pub fn final_read(&mut self, p: u64, key: &str, t0: u64, t1: u64, v: Value) -> &mut Self {
        let mut i = ev(p, EventType::Invoke, Func::Read, key, Value::Null, t0);
        i.final_read = true;
        let mut d = ev(p, EventType::Ok, Func::Read, key, v, t1);
        d.final_read = true;
        self.push(i, Some(d))
    }

    /// A write of `v` on `[t0, t1]` completing as `kind` (`info` keeps no time).
    pub fn write_as(
        &mut self,
        kind: EventType,
        p: u64,
        key: &str,
        t0: u64,
        t1: u64,
        v: Value,
    ) -> &mut Self {
        let done = ev(p, kind, Func::Write, key, v.clone(), t1);
        self.push(
            ev(p, EventType::Invoke, Func::Write, key, v, t0),
            Some(done),
        )
    }

    /// An acknowledged write.
    pub fn write(&mut self, p: u64, key: &str, t0: u64, t1: u64, v: Value) -> &mut Self {
        self.write_as(EventType::Ok, p, key, t0, t1, v)
    }

    /// A write whose outcome is unknown (never completed).
    pub fn write_unknown(&mut self, p: u64, key: &str, t0: u64, v: Value) -> &mut Self {
        self.push(ev(p, EventType::Invoke, Func::Write, key, v, t0), None)
    }

    /// A cas on `[t0, t1]` that completed `ok`, applied or not.
    pub fn cas(
        &mut self,
        p: u64,
        key: &str,
        (t0, t1): (u64, u64),
        e: Value,
        n: Value,
        applied: bool,
    ) -> &mut Self {
        let mut done = ev(
            p,
            EventType::Ok,
            Func::Cas,
            key,
            json!([e.clone(), n.clone()]),
            t1,
        );
        done.applied = Some(applied);
        self.push(
            ev(p, EventType::Invoke, Func::Cas, key, json!([e, n]), t0),
            Some(done),
        )
    }

    /// A cas answered `info` at `t1` (indeterminate).
    pub fn cas_info(
        &mut self,
        p: u64,
        key: &str,
        t0: u64,
        t1: u64,
        e: Value,
        n: Value,
    ) -> &mut Self {
        let done = ev(
            p,
            EventType::Info,
            Func::Cas,
            key,
            json!([e.clone(), n.clone()]),
            t1,
        );
        self.push(
            ev(p, EventType::Invoke, Func::Cas, key, json!([e, n]), t0),
            Some(done),
        )
    }

    /// The events in time order.
    pub fn events(&self) -> Vec<Event> {
        let mut e = self.events.clone();
        e.sort_by_key(|e| e.time_ns);
        e
    }
}
