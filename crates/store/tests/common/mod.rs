//! What the replicated-shard tests share: the secondary index they maintain.

use datum::Datum;
use store::{IndexFn, NoKeys, Unkeyed};

/// Indexes field `v` (a document without it has no entry).
pub struct Field;

impl IndexFn for Field {
    fn keys(&self, doc: &Datum) -> Result<Vec<Vec<u8>>, NoKeys> {
        let v = doc.get("v").ok_or(NoKeys::Failed("no field".into()))?;
        datum::keys::encode_secondary(v)
            .map(|k| vec![k])
            .map_err(|_| NoKeys::Unkeyable(Unkeyed::of(v)))
    }
}
