//! [`KvSim`]: the simulation of the test double [`KvMachine`] (unique keys put one
//! after the other; every acknowledged put must be on every replica), used by this
//! crate's `tests/sim` and by `cluster`'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use storage::Engine;

use super::Replicated;
use crate::kv::{read_map, KvCommand, KvMachine};
use crate::{state_spaces, NodeId, StateMachine};

/// Unique keys put one after the other.
pub struct KvSim;

/// What the client knows of its writes.
#[derive(Default)]
pub struct Written {
    /// Writes drawn so far (the next key's number).
    drawn: u32,
    acked: Vec<(String, String)>,
}

impl Replicated for KvSim {
    type Machine = KvMachine;
    type Model = Written;
    type Write = (String, String);
    type State = BTreeMap<String, String>;

    fn open(
        &self,
        _id: NodeId,
        _engine: Arc<dyn Engine>,
        _prefix: &str,
    ) -> Result<KvMachine, Box<dyn std::error::Error>> {
        Ok(KvMachine::default())
    }

    fn next_write(&self, model: &Written, _rng: &mut StdRng) -> (String, String) {
        let i = model.drawn;
        (format!("k{i:05}"), format!("v{i}"))
    }

    fn command(&self, (key, value): &(String, String)) -> Vec<u8> {
        let put = KvCommand::Put {
            key: key.clone(),
            value: value.clone(),
        };
        put.encode().expect("a put encodes")
    }

    fn acknowledged(
        &self,
        model: &mut Written,
        write: (String, String),
        reply: &[u8],
    ) -> Result<(), String> {
        model.drawn += 1;
        // A fresh key had no old value.
        if !reply.is_empty() {
            return Err(format!("put of {write:?} answered {reply:?}"));
        }
        model.acked.push(write);
        Ok(())
    }

    fn unknown(&self, model: &mut Written, _write: (String, String)) {
        model.drawn += 1;
    }

    fn acked(&self, model: &Written) -> usize {
        model.acked.len()
    }

    fn state(
        &self,
        _id: NodeId,
        engine: &dyn Engine,
        prefix: &str,
    ) -> Result<BTreeMap<String, String>, String> {
        let kinds = KvMachine::default().space_kinds();
        let spaces = state_spaces(engine, prefix, &kinds).map_err(|e| e.to_string())?;
        read_map(engine, &spaces[0]).map_err(|e| e.to_string())
    }

    fn check(&self, model: &Written, map: &BTreeMap<String, String>) -> Result<(), String> {
        let missing: Vec<_> = model
            .acked
            .iter()
            .filter(|(k, v)| map.get(k) != Some(v))
            .take(5)
            .collect();
        match missing.is_empty() {
            true => Ok(()),
            false => Err(format!("acknowledged but missing: {missing:?}")),
        }
    }
}
