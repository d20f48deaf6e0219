//! Reads of a replicated shard: the query a non-leader sends to the leader, the
//! leader's [`ShardReader`] that answers it, and [`RangeReader`], a range read fetched
//! in bounded batches.
//!
//! A shard retired by a resharding (`store::Shard::retired`: its documents were copied
//! into the new shards and the table is about to switch to them) answers no routed read
//! but its resharding's own (`ReadQuery::Final`) and feeds': a server that has not yet
//! switched must not serve a `majority` read from the frozen copy once a write was
//! acknowledged through the new shards. The retirement is an entry of the shard's log,
//! committed before the switch, so a linearizable read that starts after such a write
//! finds it applied. The caller answers RethinkDB's "primary replica ... not available"
//! (the table is being resharded), as for a write to a frozen shard.
//!
//! Invariants: an answer holds at most one batch (`limit` documents), so a forwarded
//! range read never sits whole in memory or in one frame; a batch resumes strictly after
//! the primary key of the previous batch's last document, so a range read sees every
//! document once even when batches come from different snapshots (like a local scan
//! across writes, it is not one snapshot).

use std::ops::Bound;
use std::sync::Arc;

use datum::Datum;
use replication::codec::{decode_message, encode_message};
use replication::{ReadService, Transport};
use serde::{Deserialize, Serialize};
use store::Shard;

use super::indexes::{IndexAnswer, IndexMissing, IndexQuery, ShardIndexes};
use super::tap::{FeedAnswer, FeedQuery, Taps};
use super::{ReadMode, ReplicatedShard, RouteError};

/// A key bound, its datum as JSON text; a datum holding `r.minval`/`r.maxval` (which
/// JSON cannot carry: they would arrive as `null`) travels as its range-bound key
/// encoding (`datum::keys::encode_bound`) instead.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum KeyBound {
    Unbounded,
    Included(String),
    Excluded(String),
    IncludedKey(Vec<u8>),
    ExcludedKey(Vec<u8>),
}

impl KeyBound {
    pub(crate) fn of(b: &Bound<Datum>) -> KeyBound {
        match b {
            Bound::Unbounded => KeyBound::Unbounded,
            Bound::Included(d) => match sentinel_key(d) {
                Some(k) => KeyBound::IncludedKey(k),
                None => KeyBound::Included(d.to_json_string()),
            },
            Bound::Excluded(d) => match sentinel_key(d) {
                Some(k) => KeyBound::ExcludedKey(k),
                None => KeyBound::Excluded(d.to_json_string()),
            },
        }
    }

    pub(crate) fn datum(self) -> Result<Bound<Datum>, String> {
        Ok(match self {
            KeyBound::Unbounded => Bound::Unbounded,
            KeyBound::Included(t) => Bound::Included(parse(t)?),
            KeyBound::Excluded(t) => Bound::Excluded(parse(t)?),
            KeyBound::IncludedKey(k) => Bound::Included(decode_key(&k)?),
            KeyBound::ExcludedKey(k) => Bound::Excluded(decode_key(&k)?),
        })
    }
}

/// The key encoding of a bound holding `r.minval` or `r.maxval` anywhere (a compound
/// index's `[1, r.minval]`), else `None`: JSON text keeps everything else exactly.
fn sentinel_key(d: &Datum) -> Option<Vec<u8>> {
    fn has_sentinel(d: &Datum) -> bool {
        match d {
            Datum::MinVal | Datum::MaxVal => true,
            Datum::Array(items) => items.iter().any(has_sentinel),
            _ => false,
        }
    }
    if !has_sentinel(d) {
        return None;
    }
    datum::keys::encode_bound(d).ok()
}

fn decode_key(k: &[u8]) -> Result<Datum, String> {
    datum::keys::decode(k).ok_or_else(|| "malformed key bound".to_owned())
}

fn parse(text: String) -> Result<Datum, String> {
    datum::from_json_owned(text.into_bytes()).map_err(|e| format!("malformed datum: {}", e.0))
}

/// A read of one shard.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum ReadQuery {
    /// The document under a primary key.
    Get(String),
    /// At most `limit` documents between two bounds, in key order.
    Range {
        lower: KeyBound,
        upper: KeyBound,
        reverse: bool,
        limit: u32,
    },
    /// How many documents lie between two bounds (the shard's exact count when both
    /// are unbounded).
    Count { lower: KeyBound, upper: KeyBound },
    /// A read of a secondary index (`super::indexes`).
    Index(IndexQuery),
    /// A changefeed session's request (`super::tap`).
    Feed(FeedQuery),
    /// A resharding's read of an old shard (`super::ReadMode::Final`): answered after
    /// the shard's retirement too. Last: older queries keep their encoding.
    Final(Box<ReadQuery>),
}

impl ReadQuery {
    pub(crate) fn get(key: &Datum) -> ReadQuery {
        ReadQuery::Get(key.to_json_string())
    }

    pub(crate) fn encode(&self) -> Result<Vec<u8>, RouteError> {
        encode_message(self).map_err(|e| RouteError::ReadFailed(e.to_string()))
    }
}

/// The answer to a [`ReadQuery`]: documents as JSON text.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ReadAnswer {
    Doc(Option<String>),
    Docs(Vec<String>),
    Count(u64),
    Index(IndexAnswer),
    Feed(FeedAnswer),
    /// The shard was retired by the resharding towards this generation: its documents
    /// are the new shards' now, so it answers no read of the table (module note).
    Retired(u64),
}

impl ReadAnswer {
    pub(crate) fn decode(bytes: &[u8]) -> Result<ReadAnswer, RouteError> {
        decode_message(bytes).map_err(|e| RouteError::ReadFailed(e.to_string()))
    }
}

/// Decodes documents of an answer.
pub(crate) fn docs(texts: Vec<String>) -> Result<Vec<Datum>, RouteError> {
    texts
        .into_iter()
        .map(|t| parse(t).map_err(RouteError::ReadFailed))
        .collect()
}

/// A reader for a group whose reads are not served here (a server holding no replica of
/// a shard; the catalog, which every server reads locally): it refuses, saying why.
pub(crate) struct NoReads(pub(crate) &'static str);

impl ReadService for NoReads {
    fn read(&self, _query: &[u8]) -> Result<Vec<u8>, String> {
        Err(self.0.into())
    }
}

/// Answers [`ReadQuery`]s on this server's replica of a shard (the leader's, when it
/// serves a forwarded read).
pub struct ShardReader {
    shard: Arc<Shard>,
    /// The replica's secondary indexes, when it has any.
    indexes: Option<Arc<ShardIndexes>>,
    /// The documents' primary key field (for feed sessions).
    pub(crate) primary_key: String,
    /// Changefeed sessions of servers holding no replica (`super::tap`).
    taps: Taps,
}

impl ShardReader {
    /// The reader of `shard`.
    pub fn new(shard: Arc<Shard>) -> Self {
        Self {
            shard,
            indexes: None,
            primary_key: "id".into(),
            taps: Taps::default(),
        }
    }

    /// The reader of a replica with secondary indexes.
    pub fn indexed(indexes: Arc<ShardIndexes>) -> Self {
        Self {
            shard: indexes.shard().clone(),
            indexes: Some(indexes),
            primary_key: "id".into(),
            taps: Taps::default(),
        }
    }

    /// The answer to a query routed to this replica (as the leader, or an `outdated`
    /// read here): a retired shard answers only its resharding's and feeds' queries.
    pub(crate) fn serve(&self, query: ReadQuery) -> Result<ReadAnswer, String> {
        match query {
            ReadQuery::Final(query) => self.answer(*query),
            ReadQuery::Feed(_) => self.answer(query),
            _ => match self.shard.retired() {
                0 => self.answer(query),
                generation => Ok(ReadAnswer::Retired(generation)),
            },
        }
    }

    /// The answer to `query` from this replica as it is, retired or not (what an
    /// `outdated` read may see).
    pub(crate) fn answer(&self, query: ReadQuery) -> Result<ReadAnswer, String> {
        match query {
            ReadQuery::Get(key) => {
                let doc = self.shard.get(&parse(key)?).map_err(|e| e.to_string())?;
                Ok(ReadAnswer::Doc(doc.map(|d| d.to_json_string())))
            }
            ReadQuery::Range {
                lower,
                upper,
                reverse,
                limit,
            } => {
                let docs = self
                    .shard
                    .scan(lower.datum()?, upper.datum()?, reverse)
                    .map_err(|e| e.to_string())?;
                let docs = docs
                    .take(limit as usize)
                    .map(|d| d.map(|d| d.to_json_string()).map_err(|e| e.to_string()))
                    .collect::<Result<_, _>>()?;
                Ok(ReadAnswer::Docs(docs))
            }
            ReadQuery::Count {
                lower: KeyBound::Unbounded,
                upper: KeyBound::Unbounded,
            } => Ok(ReadAnswer::Count(self.shard.count())),
            ReadQuery::Count { lower, upper } => self
                .shard
                .count_range(&lower.datum()?, &upper.datum()?)
                .map(ReadAnswer::Count)
                .map_err(|e| e.to_string()),
            ReadQuery::Index(q) => match &self.indexes {
                Some(ix) => ix.answer(q).map(ReadAnswer::Index),
                None => Ok(ReadAnswer::Index(IndexAnswer::Missing(
                    IndexMissing::NotFound,
                ))),
            },
            ReadQuery::Feed(q) => self
                .taps
                .answer(&self.shard, &self.primary_key, q)
                .map(ReadAnswer::Feed),
            ReadQuery::Final(query) => self.answer(*query),
        }
    }
}

impl ReadService for ShardReader {
    fn read(&self, query: &[u8]) -> Result<Vec<u8>, String> {
        let query: ReadQuery = decode_message(query).map_err(|e| e.to_string())?;
        let answer = self.serve(query)?;
        encode_message(&answer).map_err(|e| e.to_string())
    }

    fn ready(&self, query: &[u8]) -> Option<replication::ReadyWait> {
        let Ok(ReadQuery::Feed(q)) = decode_message::<ReadQuery>(query) else {
            return None;
        };
        let (notify, wait) = self.taps.wait(&self.shard, &self.primary_key, &q)?;
        Some(Box::pin(async move {
            let _ = tokio::time::timeout(wait, notify.notified()).await;
        }))
    }
}

/// A range read of a replicated shard, fetched in batches of at most `batch`
/// documents (each batch routed by the read mode on its own).
pub struct RangeReader<'a, T: Transport> {
    pub(crate) shard: &'a ReplicatedShard<T>,
    pub(crate) mode: ReadMode,
    pub(crate) lower: Bound<Datum>,
    pub(crate) upper: Bound<Datum>,
    pub(crate) reverse: bool,
    pub(crate) batch: u32,
    pub(crate) done: bool,
}

impl<T: Transport> RangeReader<'_, T> {
    /// The next batch (never empty), or `None` once the range is exhausted.
    pub async fn next_batch(&mut self) -> Result<Option<Vec<Datum>>, RouteError> {
        if self.done {
            return Ok(None);
        }
        let query = ReadQuery::Range {
            lower: KeyBound::of(&self.lower),
            upper: KeyBound::of(&self.upper),
            reverse: self.reverse,
            limit: self.batch,
        };
        let docs = self.shard.read_docs(self.mode, query).await?;
        if docs.len() < self.batch as usize {
            self.done = true;
        }
        // The next batch starts strictly after the last document's key.
        match docs.last().and_then(|d| d.get(self.shard.primary_key())) {
            Some(key) if self.reverse => self.upper = Bound::Excluded(key.clone()),
            Some(key) => self.lower = Bound::Excluded(key.clone()),
            None => self.done = true,
        }
        Ok((!docs.is_empty()).then_some(docs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::{GroupCommit, StoreChange};

    fn reader() -> ShardReader {
        let engine: Arc<dyn storage::Engine> = Arc::new(storage::Memory::new());
        let commit = GroupCommit::start(engine.clone());
        let shard = Shard::open(engine, "docs", commit).unwrap();
        for id in 0..10 {
            let doc = datum::from_json_slice(format!("{{\"id\":{id}}}").as_bytes()).unwrap();
            shard
                .write(&Datum::Number(f64::from(id)), StoreChange::Put(doc))
                .unwrap();
        }
        ShardReader::new(Arc::new(shard))
    }

    fn ask(r: &ShardReader, q: &ReadQuery) -> ReadAnswer {
        ReadAnswer::decode(&r.read(&q.encode().unwrap()).unwrap()).unwrap()
    }

    fn ids(a: ReadAnswer) -> Vec<f64> {
        let ReadAnswer::Docs(texts) = a else {
            panic!("not a range answer")
        };
        docs(texts)
            .unwrap()
            .iter()
            .map(|d| d.get("id").and_then(Datum::as_f64).unwrap())
            .collect()
    }

    #[test]
    fn point_and_range_reads_answer_from_the_shard_within_their_limit() {
        let r = reader();
        let got = ask(&r, &ReadQuery::get(&Datum::Number(3.0)));
        assert!(matches!(got, ReadAnswer::Doc(Some(t)) if t == r#"{"id":3}"#));
        let missing = ask(&r, &ReadQuery::get(&Datum::Number(30.0)));
        assert!(matches!(missing, ReadAnswer::Doc(None)));
        let range = |lower, upper, reverse, limit| ReadQuery::Range {
            lower,
            upper,
            reverse,
            limit,
        };
        let first = range(KeyBound::Unbounded, KeyBound::Unbounded, false, 4);
        assert_eq!(ids(ask(&r, &first)), [0.0, 1.0, 2.0, 3.0]);
        let after = range(
            KeyBound::of(&Bound::Excluded(Datum::Number(3.0))),
            KeyBound::of(&Bound::Included(Datum::Number(8.0))),
            false,
            100,
        );
        assert_eq!(ids(ask(&r, &after)), [4.0, 5.0, 6.0, 7.0, 8.0]);
        let back = range(
            KeyBound::Unbounded,
            KeyBound::of(&Bound::Excluded(Datum::Number(5.0))),
            true,
            2,
        );
        assert_eq!(ids(ask(&r, &back)), [4.0, 3.0]);
    }

    #[test]
    fn counts_answer_the_whole_shard_or_a_range() {
        let r = reader();
        let count = |lower, upper| match ask(&r, &ReadQuery::Count { lower, upper }) {
            ReadAnswer::Count(n) => n,
            _ => panic!("not a count"),
        };
        assert_eq!(count(KeyBound::Unbounded, KeyBound::Unbounded), 10);
        let three = KeyBound::Included("3".into());
        let seven = KeyBound::Excluded("7".into());
        assert_eq!(count(three, seven), 4);
        assert_eq!(
            count(KeyBound::Excluded("9".into()), KeyBound::Unbounded),
            0
        );
    }

    #[test]
    fn minval_and_maxval_bounds_survive_the_wire() {
        let arr = Datum::array;
        for d in [
            Datum::MinVal,
            Datum::MaxVal,
            arr(vec![Datum::Number(1.0), Datum::MinVal]),
            arr(vec![Datum::str("a"), arr(vec![Datum::MaxVal])]),
        ] {
            for b in [Bound::Included(d.clone()), Bound::Excluded(d.clone())] {
                let wire = ReadQuery::Count {
                    lower: KeyBound::of(&b),
                    upper: KeyBound::Unbounded,
                };
                let back = match decode_message::<ReadQuery>(&wire.encode().unwrap()).unwrap() {
                    ReadQuery::Count { lower, .. } => lower.datum().unwrap(),
                    _ => panic!("not a count"),
                };
                assert_eq!(format!("{back:?}"), format!("{b:?}"));
            }
        }
        // A count of the shard's keys below r.maxval is all of them, not an error.
        let r = reader();
        let all = ReadQuery::Count {
            lower: KeyBound::of(&Bound::Included(Datum::MinVal)),
            upper: KeyBound::of(&Bound::Included(Datum::MaxVal)),
        };
        assert!(matches!(ask(&r, &all), ReadAnswer::Count(10)));
    }

    #[test]
    fn a_malformed_query_is_an_error_not_a_panic() {
        let r = reader();
        assert!(r.read(b"\xff\xff\xff").is_err());
        let bad = ReadQuery::Get("{not json".into());
        assert!(r.read(&bad.encode().unwrap()).is_err());
    }

    #[test]
    fn read_modes_are_rethinkdbs_names() {
        use super::super::ReadMode;
        assert_eq!(ReadMode::from_name("single"), Some(ReadMode::Single));
        assert_eq!(ReadMode::from_name("majority"), Some(ReadMode::Majority));
        assert_eq!(ReadMode::from_name("outdated"), Some(ReadMode::Outdated));
        assert_eq!(
            ReadMode::from_name("_debug_direct"),
            Some(ReadMode::Outdated)
        );
        assert_eq!(ReadMode::from_name("fast"), None);
    }
}
