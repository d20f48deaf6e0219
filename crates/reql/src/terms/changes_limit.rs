//! Top-n changefeeds: `order_by(index=…).limit(n).changes()` and `min`/`max(index=…)
//! .changes()` (the ORDER_BY_LIMIT_FEED note), with `include_offsets`.
//!
//! The feed keeps the current top n of its index range (`active`, in feed order). It
//! subscribes to the table's raw changes and uses them only as triggers: a change that
//! can touch the top n (its document is in the set, or its new value sorts into it) makes
//! the reader read the top n again from the index and diff it against `active`. The
//! differences are paired as RethinkDB's `limit_manager_t::commit` pairs them (a changed
//! document first, then a removed document with an added one, then the rest), and the
//! offsets are computed by applying the pairs one by one to a working list, so a client
//! that removes at `old_offset` and inserts at `new_offset` keeps an exact copy.
//!
//! Because the top n is always re-read from the table, the feed converges on the table's
//! state whatever the timing of the triggers (a write between the subscription and the
//! initial read, or changes dropped by a queue overflow). Departure: several writes that
//! arrive together are reported as their combined effect (as RethinkDB does while it
//! squashes), never as intermediate states.

use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use changefeed::{Notify, Options, Probe, Request, Subscription, Target};
use datum::Datum;

use crate::access::Table;
use crate::error::{op_failed, Result};
use crate::slice::TableSlice;
use crate::terms::index::IndexFunction;
use crate::value::{DatumStream, Sequence};

/// What a top-n feed watches.
pub struct LimitSpec {
    /// The table (not a slice).
    pub table: Arc<dyn Table>,
    /// The secondary index; `None` is the primary key.
    pub index: Option<String>,
    /// Lower bound of the index value.
    pub lower: Bound<Datum>,
    /// Upper bound of the index value.
    pub upper: Bound<Datum>,
    /// Descending order.
    pub desc: bool,
    /// The size of the set.
    pub n: usize,
}

/// The delivery options of a top-n feed.
#[derive(Clone, Copy)]
pub struct LimitOpts {
    /// `include_initial`.
    pub include_initial: bool,
    /// `include_states`.
    pub include_states: bool,
    /// `include_types`.
    pub include_types: bool,
    /// `include_offsets`.
    pub include_offsets: bool,
    /// `changefeed_queue_size` of the trigger subscription.
    pub queue_size: usize,
}

struct Item {
    /// `[index value, primary key]`: the order of the index.
    key: Datum,
    pk: Datum,
    doc: Datum,
}

struct LimitFeed {
    spec: LimitSpec,
    opts: LimitOpts,
    func: Option<IndexFunction>,
    multi: bool,
    sub: Subscription,
    active: Vec<Item>,
    pending: VecDeque<Datum>,
    ended: bool,
}

fn in_bounds(v: &Datum, lower: &Bound<Datum>, upper: &Bound<Datum>) -> bool {
    let lo = match lower {
        Bound::Unbounded => true,
        Bound::Included(b) => datum::cmp(v, b) != Ordering::Less,
        Bound::Excluded(b) => datum::cmp(v, b) == Ordering::Greater,
    };
    let hi = match upper {
        Bound::Unbounded => true,
        Bound::Included(b) => datum::cmp(v, b) != Ordering::Greater,
        Bound::Excluded(b) => datum::cmp(v, b) == Ordering::Less,
    };
    lo && hi
}

fn typed(mut pairs: Vec<(&'static str, Datum)>, types: bool, t: &str) -> Datum {
    if types {
        pairs.push(("type", Datum::str(t)));
    }
    Datum::from_pairs(pairs)
}

fn offset(o: Option<usize>) -> Datum {
    o.map_or(Datum::Null, |i| Datum::Number(i as f64))
}

impl LimitFeed {
    fn order(&self, a: &Datum, b: &Datum) -> Ordering {
        let o = datum::cmp(a, b);
        if self.spec.desc {
            o.reverse()
        } else {
            o
        }
    }

    fn pk_of(&self, d: &Datum) -> Datum {
        d.get(self.spec.table.primary_key())
            .cloned()
            .unwrap_or(Datum::Null)
    }

    /// The index value of a document (`None` when it has no entry).
    fn value_of(&self, d: &Datum) -> Option<Datum> {
        match &self.func {
            None => d.get(self.spec.table.primary_key()).cloned(),
            Some(f) => f.eval(d).ok(),
        }
    }

    fn item(&self, doc: Datum) -> Item {
        let pk = self.pk_of(&doc);
        let v = self.value_of(&doc).unwrap_or(Datum::Null);
        Item {
            key: Datum::array(vec![v, pk.clone()]),
            pk,
            doc,
        }
    }

    /// The current top n, read from the table.
    fn read(&self) -> Result<Vec<Item>> {
        let slice = TableSlice {
            base: self.spec.table.clone(),
            index: self.spec.index.clone(),
            lower: self.spec.lower.clone(),
            upper: self.spec.upper.clone(),
            between: false,
            order: Some(self.spec.desc),
        };
        let mut out: Vec<Item> = Vec::new();
        let mut docs = slice.stream()?;
        while out.len() < self.spec.n {
            let Some(d) = docs.next() else {
                break;
            };
            let it = self.item(d?);
            // A multi index lists a document once per entry: keep its first.
            if self.multi && out.iter().any(|o| o.pk == it.pk) {
                continue;
            }
            out.push(it);
        }
        Ok(out)
    }

    /// True when the change of `old` to `new` can change the top n.
    fn relevant(&self, old: &Datum, new: &Datum) -> bool {
        if self.multi {
            return true;
        }
        for d in [old, new] {
            if !matches!(d, Datum::Null) {
                let pk = self.pk_of(d);
                if self.active.iter().any(|i| i.pk == pk) {
                    return true;
                }
            }
        }
        if matches!(new, Datum::Null) {
            return false;
        }
        let Some(v) = self.value_of(new) else {
            return false;
        };
        if !in_bounds(&v, &self.spec.lower, &self.spec.upper) {
            return false;
        }
        match self.active.last() {
            Some(last) if self.active.len() >= self.spec.n => {
                let key = Datum::array(vec![v, self.pk_of(new)]);
                self.order(&key, &last.key) != Ordering::Greater
            }
            _ => true,
        }
    }

    /// Reads the top n again and queues the differences as changes.
    fn refresh(&mut self) -> Result<()> {
        let new = self.read()?;
        let old = std::mem::take(&mut self.active);
        let old_by: BTreeMap<&Datum, &Item> = old.iter().map(|i| (&i.pk, i)).collect();
        let new_by: BTreeMap<&Datum, &Item> = new.iter().map(|i| (&i.pk, i)).collect();
        let mut pairs: Vec<(Option<&Item>, Option<&Item>)> = Vec::new();
        for n in &new {
            if let Some(o) = old_by.get(&n.pk) {
                if o.doc != n.doc {
                    pairs.push((Some(o), Some(n)));
                }
            }
        }
        let removed: Vec<&Item> = old.iter().filter(|o| !new_by.contains_key(&o.pk)).collect();
        let added: Vec<&Item> = new.iter().filter(|n| !old_by.contains_key(&n.pk)).collect();
        let mut r = removed.into_iter();
        let mut a = added.into_iter();
        loop {
            match (r.next(), a.next()) {
                (None, None) => break,
                (o, n) => pairs.push((o, n)),
            }
        }
        // Apply the pairs one by one to a copy of the old order to get the offsets.
        let mut working: Vec<(Datum, Datum)> =
            old.iter().map(|i| (i.key.clone(), i.pk.clone())).collect();
        let types = self.opts.include_types;
        for (o, n) in pairs {
            let mut old_off = None;
            if let Some(o) = o {
                if let Some(p) = working.iter().position(|(_, pk)| *pk == o.pk) {
                    working.remove(p);
                    old_off = Some(p);
                }
            }
            let mut new_off = None;
            if let Some(n) = n {
                let p = working.partition_point(|(k, _)| self.order(k, &n.key) == Ordering::Less);
                working.insert(p, (n.key.clone(), n.pk.clone()));
                new_off = Some(p);
            }
            let old_val = o.map_or(Datum::Null, |i| i.doc.clone());
            let new_val = n.map_or(Datum::Null, |i| i.doc.clone());
            let t = match (o, n) {
                (None, _) => "add",
                (_, None) => "remove",
                _ => "change",
            };
            let mut fields = vec![("old_val", old_val), ("new_val", new_val)];
            if self.opts.include_offsets {
                fields.push(("old_offset", offset(old_off)));
                fields.push(("new_offset", offset(new_off)));
            }
            self.pending.push_back(typed(fields, types, t));
        }
        self.active = new;
        Ok(())
    }

    /// Takes every queued trigger; refreshes once if one of them matters.
    fn poll(&mut self) -> Result<()> {
        let mut dirty = false;
        // Bounded, so that one call never runs for long under a write storm.
        for _ in 0..10_000 {
            let Some(d) = self.sub.next_doc() else {
                break;
            };
            let d = d.map_err(|e| op_failed(e.message))?;
            if d.get("error").is_some() {
                // The queue overflowed: changes were lost, so read the set again.
                self.pending.push_back(d);
                dirty = true;
                continue;
            }
            if dirty {
                continue;
            }
            let old = d.get("old_val").cloned().unwrap_or(Datum::Null);
            let new = d.get("new_val").cloned().unwrap_or(Datum::Null);
            dirty = self.relevant(&old, &new);
        }
        if dirty {
            self.refresh()?;
        }
        Ok(())
    }

    fn next(&mut self) -> Option<Result<Datum>> {
        if self.ended {
            return None;
        }
        if let Some(d) = self.pending.pop_front() {
            return Some(Ok(d));
        }
        if let Err(e) = self.poll() {
            self.ended = true;
            return Some(Err(e));
        }
        self.pending.pop_front().map(Ok)
    }
}

/// The index function and multi flag of a secondary index.
fn index_fn(t: &Arc<dyn Table>, name: &str) -> Result<(IndexFunction, bool)> {
    let st = t.index_status()?;
    let Some(s) = st.iter().find(|s| s.name == name) else {
        return Err(crate::access::index_not_found(name, t.db(), t.name()));
    };
    Ok((IndexFunction::compile(&s.spec.function)?, s.spec.multi))
}

/// Opens a top-n feed: its stream and the probe of its queue.
pub fn open(spec: LimitSpec, opts: LimitOpts, waker: Arc<Notify>) -> Result<(Sequence, Probe)> {
    let (func, multi) = match &spec.index {
        None => (None, false),
        Some(name) => {
            let (f, m) = index_fn(&spec.table, name)?;
            (Some(f), m)
        }
    };
    // On the primary key the trigger subscription covers only the range.
    let target = match &spec.index {
        None => Target::Range {
            lower: spec.lower.clone(),
            upper: spec.upper.clone(),
        },
        Some(_) => Target::Range {
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
        },
    };
    let sub = spec.table.subscribe(Request {
        target,
        transform: None,
        hint: None,
        options: Options {
            queue_size: opts.queue_size,
            ..Options::default()
        },
        waker,
    })?;
    let probe = sub.probe();
    let mut feed = LimitFeed {
        spec,
        opts,
        func,
        multi,
        sub,
        active: Vec::new(),
        pending: VecDeque::new(),
        ended: false,
    };
    // Registered first, read second: a write in between is read and also triggers a
    // refresh, which then finds nothing new.
    feed.active = feed.read()?;
    let types = opts.include_types;
    if opts.include_initial {
        if opts.include_states {
            feed.pending.push_back(typed(
                vec![("state", Datum::str("initializing"))],
                types,
                "state",
            ));
        }
        for (i, it) in feed.active.iter().enumerate() {
            let mut fields = vec![("new_val", it.doc.clone())];
            if opts.include_offsets {
                fields.push(("new_offset", Datum::Number(i as f64)));
            }
            feed.pending.push_back(typed(fields, types, "initial"));
        }
    }
    if opts.include_states {
        feed.pending
            .push_back(typed(vec![("state", Datum::str("ready"))], types, "state"));
    }
    let stream: DatumStream = Box::new(std::iter::from_fn(move || feed.next()));
    Ok((
        Sequence {
            stream,
            is_array: false,
            table: None,
            infinite: true,
        },
        probe,
    ))
}
