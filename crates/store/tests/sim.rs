//! The deterministic simulation (`replication::sim`: turmoil, seeded randomness, an
//! in-memory engine that can lose power) of 3 nodes running three groups, each
//! replicating a table shard ([`ShardMachine`] with a secondary index on field `v`; all
//! on each node's one engine, behind one router and transport), under random faults
//! (partitions, crash and restart, power loss, message loss, held links, leader
//! transfers).
//!
//! Each group's client draws, from the seeded RNG, inserts (`Version::ABSENT`), conditional
//! updates and deletes with the expected version the client last saw, conditional
//! writes with a stale expected version, inserts of existing keys and unconditional
//! puts, proposed with `store::encode_command`; replies decoded with
//! `store::decode_reply` must be what the client's model predicts (`Done` with the
//! predicted old and new document, or `Conflict` with the current document: a stale
//! write changes nothing). A write without an answer leaves its key's content unknown,
//! and the key is not written again. After healing every replica holds identical
//! documents, index entries, counts and index entry counts; every key the model knows
//! holds exactly its acknowledged document; the count is the number of documents and
//! the index entry count the number of documents with `v`.
//!
//! Reproducing: each run prints its seed; `PONDER_SIM_SEED=<seed> cargo test -p store
//! --test sim` runs it alone. The long form, by hand: `PONDER_SIM_SEEDS=50 cargo test
//! -p store --test sim -- --ignored` (random seeds, longer fault phases).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use datum::{Datum, Version};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::Rng;
use replication::sim::{long_seeds, run_seed, seeds_from_env, Plan, Replicated};
use replication::NodeId;
use storage::Engine;
use store::{
    decode_reply, encode_command, track_entries, Applied, CacheBudget, GroupCommit, KeyRange,
    ReplicaIndex, ReplicaOptions, SecondaryIndex, Shard, ShardMachine, StoreChange,
};

mod common;
use common::Field;

/// A node's handles on its replica, for reads.
type Handles = (Arc<Shard>, Arc<SecondaryIndex>);

/// The replicated shards (one per group), and each node's handles on each (by node and
/// group prefix; replaced at every restart).
#[derive(Default)]
struct ShardSim {
    nodes: Mutex<HashMap<(NodeId, String), Handles>>,
    /// One committer per node for the whole run (replicated writes take no ticket, so
    /// its thread never persists: power loss stays under the simulation's control).
    commits: Mutex<HashMap<NodeId, Arc<GroupCommit>>>,
}

impl Drop for ShardSim {
    fn drop(&mut self) {
        for commit in self.commits.lock().values() {
            commit.shutdown();
        }
    }
}

/// What the client knows of a key: its document (`None`: absent), or nothing, once a
/// write to it went unanswered.
#[derive(Debug, Clone)]
enum Known {
    Doc(Option<Datum>),
    Unknown,
}

#[derive(Default)]
struct Model {
    keys: BTreeMap<u32, Known>,
    next_id: u32,
    acked: usize,
}

/// What a write must be answered.
#[derive(Debug)]
enum Expect {
    Done {
        old: Option<Datum>,
        new: Option<Datum>,
    },
    Conflict(Option<Datum>),
}

#[derive(Debug)]
struct Write {
    id: u32,
    expect: Option<Version>,
    change: StoreChange,
    answer: Expect,
}

/// A document of key `id`; one in five has no `v` (no index entry).
fn doc(id: u32, seq: i64) -> Datum {
    let mut pairs = vec![
        ("id", Datum::Number(f64::from(id))),
        ("w", Datum::Number(seq as f64)),
    ];
    if seq % 5 != 0 {
        pairs.push(("v", Datum::Number((seq % 7) as f64)));
    }
    Datum::from_pairs(pairs)
}

/// Everything a replica holds: documents by primary key, index entries (value, primary
/// key, document), the document count and the index's entry count.
#[derive(Debug, PartialEq)]
struct State {
    docs: BTreeMap<String, String>,
    entries: Vec<(Vec<u8>, Vec<u8>, String)>,
    count: u64,
    entry_count: Option<u64>,
}

impl Replicated for ShardSim {
    type Machine = ShardMachine;
    type Model = Model;
    type Write = Write;
    type State = State;

    fn open(
        &self,
        id: NodeId,
        engine: Arc<dyn Engine>,
        prefix: &str,
    ) -> Result<ShardMachine, Box<dyn std::error::Error>> {
        let commit = self
            .commits
            .lock()
            .entry(id)
            .or_insert_with(|| GroupCommit::start(engine.clone()))
            .clone();
        let opts = ReplicaOptions {
            prefix: prefix.into(),
            commit,
            cache: CacheBudget::default(),
            feeds: changefeed::Hub::new(),
            range: KeyRange::all(),
            indexes: vec![ReplicaIndex {
                id: "v".into(),
                func: Arc::new(Field),
                multi: false,
            }],
        };
        let machine = ShardMachine::open(engine, opts)?;
        let shard = machine.shard().clone();
        let index = machine.index("v").ok_or("no index v")?.clone();
        track_entries(std::slice::from_ref(&shard), &index)?;
        self.nodes
            .lock()
            .insert((id, prefix.into()), (shard, index));
        Ok(machine)
    }

    fn next_write(&self, model: &Model, rng: &mut StdRng) -> Write {
        let known: Vec<(u32, Option<Datum>)> = model
            .keys
            .iter()
            .filter_map(|(id, k)| match k {
                Known::Doc(d) => Some((*id, d.clone())),
                Known::Unknown => None,
            })
            .collect();
        let seq = rng.gen_range(1..1_000_000i64);
        let r = rng.gen_range(0..100);
        if known.is_empty() || r < 35 {
            let id = model.next_id;
            let new = doc(id, seq);
            return Write {
                id,
                expect: Some(Version::ABSENT),
                change: StoreChange::Put(new.clone()),
                answer: Expect::Done {
                    old: None,
                    new: Some(new),
                },
            };
        }
        let (id, cur) = known[rng.gen_range(0..known.len())].clone();
        let seen = Some(Version::of(cur.as_ref()));
        let new = doc(id, seq);
        let put = |expect| Write {
            id,
            expect,
            change: StoreChange::Put(new.clone()),
            answer: Expect::Done {
                old: cur.clone(),
                new: Some(new.clone()),
            },
        };
        let conflict = |expect, change| Write {
            id,
            expect,
            change,
            answer: Expect::Conflict(cur.clone()),
        };
        match r {
            // An update from the version the client saw.
            35..=59 => put(seen),
            // From a version the key never held: a stale read.
            60..=74 => conflict(
                Some(Version::of(Some(&doc(id, -1)))),
                StoreChange::Put(new.clone()),
            ),
            // An insert of a key that exists conflicts; of a deleted one, inserts.
            75..=84 if cur.is_some() => {
                conflict(Some(Version::ABSENT), StoreChange::Put(new.clone()))
            }
            75..=84 => put(Some(Version::ABSENT)),
            85..=94 => Write {
                id,
                expect: seen,
                change: StoreChange::Delete,
                answer: Expect::Done {
                    old: cur.clone(),
                    new: None,
                },
            },
            _ => put(None),
        }
    }

    fn command(&self, w: &Write) -> Vec<u8> {
        encode_command(&Datum::Number(f64::from(w.id)), w.expect, &w.change)
            .expect("a write of a numeric key encodes")
    }

    fn acknowledged(&self, model: &mut Model, w: Write, reply: &[u8]) -> Result<(), String> {
        model.next_id = model.next_id.max(w.id + 1);
        model.acked += 1;
        let reply = decode_reply(reply);
        match (&w.answer, &reply) {
            (Expect::Done { old, new }, Ok(Applied::Done((o, n, _)))) if o == old && n == new => {
                model.keys.insert(w.id, Known::Doc(new.clone()));
                Ok(())
            }
            (Expect::Conflict(cur), Ok(Applied::Conflict(c))) if c == cur => Ok(()),
            _ => Err(format!("{w:?} was answered {reply:?}")),
        }
    }

    fn unknown(&self, model: &mut Model, w: Write) {
        model.next_id = model.next_id.max(w.id + 1);
        model.keys.insert(w.id, Known::Unknown);
    }

    fn acked(&self, model: &Model) -> usize {
        model.acked
    }

    fn state(&self, id: NodeId, _engine: &dyn Engine, prefix: &str) -> Result<State, String> {
        let (shard, index) = self
            .nodes
            .lock()
            .get(&(id, prefix.to_string()))
            .cloned()
            .ok_or("not opened")?;
        let mut docs = BTreeMap::new();
        let scan = shard
            .scan(Bound::Unbounded, Bound::Unbounded, false)
            .map_err(|e| e.to_string())?;
        for d in scan {
            let d = d.map_err(|e| e.to_string())?;
            let pk = d.get("id").map(Datum::to_json_string).unwrap_or_default();
            docs.insert(pk, d.to_json_string());
        }
        let mut entries = Vec::new();
        let pairs = shard
            .index_pairs(&index, &Bound::Unbounded, &Bound::Unbounded, false)
            .map_err(|e| e.to_string())?;
        for p in pairs {
            let (e, d) = p.map_err(|e| e.to_string())?;
            entries.push((e.value().to_vec(), e.pk().to_vec(), d.to_json_string()));
        }
        Ok(State {
            docs,
            entries,
            count: shard.count(),
            entry_count: index.entry_count(),
        })
    }

    fn check(&self, model: &Model, s: &State) -> Result<(), String> {
        for (id, known) in &model.keys {
            let Known::Doc(d) = known else { continue };
            let held = s.docs.get(&Datum::Number(f64::from(*id)).to_json_string());
            if held != d.as_ref().map(Datum::to_json_string).as_ref() {
                return Err(format!("key {id}: acknowledged {d:?}, holds {held:?}"));
            }
        }
        let with_v = s.docs.values().filter(|d| d.contains("\"v\":")).count();
        let entries = s.entries.len();
        if s.count != s.docs.len() as u64 || s.entry_count != Some(entries as u64) {
            return Err(format!(
                "count {} of {} documents, entry count {:?} of {entries} entries",
                s.count,
                s.docs.len(),
                s.entry_count
            ));
        }
        if entries != with_v
            || s.entries
                .iter()
                .any(|e| !s.docs.values().any(|d| *d == e.2))
        {
            return Err(format!(
                "{entries} index entries for {with_v} documents with v, or an entry's \
                 document is not stored"
            ));
        }
        Ok(())
    }
}

#[test]
fn a_replicated_shard_survives_random_faults() {
    let plan = Plan {
        groups: 3,
        ..Plan::single(Duration::from_secs(8))
    };
    for seed in seeds_from_env(&[1, 2, 3]) {
        run_seed("shard", Arc::new(ShardSim::default()), seed, &plan);
    }
}

#[test]
#[ignore = "long form, by hand: PONDER_SIM_SEEDS=<count> (random seeds)"]
fn a_replicated_shard_survives_random_faults_long() {
    let plan = Plan {
        groups: 3,
        ..Plan::single(Duration::from_secs(30))
    };
    for seed in long_seeds() {
        run_seed("shard", Arc::new(ShardSim::default()), seed, &plan);
    }
}
