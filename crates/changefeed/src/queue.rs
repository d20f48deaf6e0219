//! The per-subscription queue of changes waiting for the reader, plain or squashing.
//!
//! A squashing queue keeps one change per document (keyed by the encoded primary key)
//! at the position of its first change: a later change replaces the new value and keeps
//! the old one, and a change that cancels out (insert then delete, or back to the old
//! value) disappears, as RethinkDB's `squashing_queue_t` does.

use std::collections::{BTreeMap, HashMap, VecDeque};

use datum::Datum;

/// One change as a subscription sees it (after its transform): `None` is absent.
#[derive(Debug, Clone)]
pub struct Change {
    /// The value before the write.
    pub old: Option<Datum>,
    /// The value after the write.
    pub new: Option<Datum>,
}

fn present(d: &Option<Datum>) -> bool {
    !matches!(d, None | Some(Datum::Null))
}

/// Changes waiting for the reader.
pub(crate) enum ChangeQueue {
    /// Every change, in order.
    Plain(VecDeque<Change>),
    /// At most one change per document, in order of each document's first change.
    Squash {
        order: BTreeMap<u64, (Vec<u8>, Change)>,
        by_key: HashMap<Vec<u8>, u64>,
        next: u64,
    },
}

impl ChangeQueue {
    /// An empty queue.
    pub(crate) fn new(squash: bool) -> ChangeQueue {
        if squash {
            ChangeQueue::Squash {
                order: BTreeMap::new(),
                by_key: HashMap::new(),
                next: 0,
            }
        } else {
            ChangeQueue::Plain(VecDeque::new())
        }
    }

    /// Queues a change of the document under the encoded key `key`.
    pub(crate) fn push(&mut self, key: &[u8], c: Change) {
        match self {
            ChangeQueue::Plain(q) => q.push_back(c),
            ChangeQueue::Squash {
                order,
                by_key,
                next,
            } => {
                if let Some(seq) = by_key.get(key).copied() {
                    let cancel = match order.get_mut(&seq) {
                        Some((_, e)) => {
                            e.new = c.new;
                            (!present(&e.old) && !present(&e.new))
                                || (e.old.is_some() && e.old == e.new)
                        }
                        None => false,
                    };
                    if cancel {
                        order.remove(&seq);
                        by_key.remove(key);
                    }
                } else {
                    *next += 1;
                    order.insert(*next, (key.to_vec(), c));
                    by_key.insert(key.to_vec(), *next);
                }
            }
        }
    }

    /// The oldest change.
    pub(crate) fn pop(&mut self) -> Option<Change> {
        match self {
            ChangeQueue::Plain(q) => q.pop_front(),
            ChangeQueue::Squash { order, by_key, .. } => {
                let (_, (key, c)) = order.pop_first()?;
                by_key.remove(&key);
                Some(c)
            }
        }
    }

    /// The number of queued changes.
    pub(crate) fn len(&self) -> usize {
        match self {
            ChangeQueue::Plain(q) => q.len(),
            ChangeQueue::Squash { order, .. } => order.len(),
        }
    }

    /// Drops every queued change (and the memory they held).
    pub(crate) fn clear(&mut self) {
        match self {
            ChangeQueue::Plain(q) => *q = VecDeque::new(),
            ChangeQueue::Squash { order, by_key, .. } => {
                *order = BTreeMap::new();
                *by_key = HashMap::new();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(x: f64) -> Option<Datum> {
        Some(Datum::Number(x))
    }

    fn ch(old: Option<Datum>, new: Option<Datum>) -> Change {
        Change { old, new }
    }

    #[test]
    fn plain_keeps_every_change_in_order() {
        let mut q = ChangeQueue::new(false);
        q.push(b"a", ch(None, n(1.0)));
        q.push(b"a", ch(n(1.0), n(2.0)));
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop().unwrap().new, n(1.0));
        assert_eq!(q.pop().unwrap().new, n(2.0));
        assert!(q.pop().is_none());
    }

    #[test]
    fn squash_merges_per_document_and_keeps_first_position() {
        let mut q = ChangeQueue::new(true);
        q.push(b"a", ch(None, n(1.0)));
        q.push(b"b", ch(None, n(5.0)));
        q.push(b"a", ch(n(1.0), n(2.0)));
        assert_eq!(q.len(), 2);
        let first = q.pop().unwrap();
        assert!(first.old.is_none());
        assert_eq!(first.new, n(2.0));
        assert_eq!(q.pop().unwrap().new, n(5.0));
    }

    #[test]
    fn squash_drops_changes_that_cancel_out() {
        let mut q = ChangeQueue::new(true);
        q.push(b"a", ch(None, n(1.0)));
        q.push(b"a", ch(n(1.0), None));
        assert_eq!(q.len(), 0);
        q.push(b"b", ch(n(1.0), n(2.0)));
        q.push(b"b", ch(n(2.0), n(1.0)));
        assert_eq!(q.len(), 0);
        q.push(b"b", ch(n(1.0), n(3.0)));
        assert_eq!(q.len(), 1);
        q.clear();
        assert!(q.pop().is_none());
    }
}
