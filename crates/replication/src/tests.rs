//! Unit tests of the log store and the state machine adaptor: openraft's own storage
//! conformance suite on both engines, restarts on fjall, and chunked snapshots.

use std::collections::BTreeMap;
use std::sync::Arc;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{CommittedLeaderId, EntryPayload, RaftLogReader, RaftSnapshotBuilder};
use storage::{Engine, Fjall, Memory, WriteBatch};

use crate::kv::{read_map, KvCommand, KvMachine};
use crate::*;

struct MemBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore<KvMachine>> for MemBuilder {
    async fn build(
        &self,
    ) -> Result<((), LogStore, StateMachineStore<KvMachine>), RaftStorageError> {
        let engine: Arc<dyn Engine> = Arc::new(Memory::new());
        Ok(((), open_log(&engine), open_sm(&engine)))
    }
}

struct FjallBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore<KvMachine>, tempfile::TempDir>
    for FjallBuilder
{
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachineStore<KvMachine>), RaftStorageError> {
        let dir = tempfile::tempdir().unwrap();
        let engine: Arc<dyn Engine> = Arc::new(Fjall::open(dir.path(), 8 << 20).unwrap());
        Ok((dir, open_log(&engine), open_sm(&engine)))
    }
}

const PREFIX: &str = "raft.g1";

fn open_log(engine: &Arc<dyn Engine>) -> LogStore {
    LogStore::open(engine.clone(), PREFIX, Durability::Inline).unwrap()
}

fn open_sm(engine: &Arc<dyn Engine>) -> StateMachineStore<KvMachine> {
    StateMachineStore::open(
        engine.clone(),
        PREFIX,
        KvMachine::default(),
        Durability::Inline,
    )
    .unwrap()
}

#[test]
fn openraft_storage_suite_on_memory() {
    Suite::test_all(MemBuilder).unwrap();
}

#[test]
fn openraft_storage_suite_on_fjall() {
    Suite::test_all(FjallBuilder).unwrap();
}

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn put(term: u64, index: u64, key: &str, value: &str) -> Entry {
    let cmd = KvCommand::Put {
        key: key.into(),
        value: value.into(),
    };
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(Command(cmd.encode().unwrap())),
    }
}

async fn append(log: &mut LogStore, entries: Vec<Entry>) {
    log.blocking_append(entries).await.unwrap();
}

fn indexes(entries: &[Entry]) -> Vec<u64> {
    entries.iter().map(|e| e.log_id.index).collect()
}

#[tokio::test]
async fn the_log_survives_a_restart_on_fjall() {
    let dir = tempfile::tempdir().unwrap();
    {
        let engine: Arc<dyn Engine> = Arc::new(Fjall::open(dir.path(), 8 << 20).unwrap());
        // fsyncs on the blocking pool, as a server runs it.
        let mut log = LogStore::open(engine.clone(), PREFIX, Durability::Blocking).unwrap();
        append(&mut log, (1..=10).map(|i| put(1, i, "k", "v")).collect()).await;
        log.save_vote(&Vote::new(3, 2)).await.unwrap();
        log.save_committed(Some(log_id(1, 6))).await.unwrap();
        log.truncate(log_id(1, 9)).await.unwrap();
        log.purge(log_id(1, 3)).await.unwrap();
        // Flushed by the next append's fsync.
        append(&mut log, vec![put(2, 9, "k", "w")]).await;
    }
    let engine: Arc<dyn Engine> = Arc::new(Fjall::open(dir.path(), 8 << 20).unwrap());
    let mut log = open_log(&engine);
    assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new(3, 2)));
    assert_eq!(log.read_committed().await.unwrap(), Some(log_id(1, 6)));
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 3)));
    assert_eq!(state.last_log_id, Some(log_id(2, 9)));
    let entries = log.try_get_log_entries(0..100).await.unwrap();
    assert_eq!(indexes(&entries), (4..=9).collect::<Vec<_>>());
    assert_eq!(entries.last().unwrap().log_id, log_id(2, 9));
}

#[tokio::test]
async fn purge_and_truncate_work_in_bounded_batches() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut log = open_log(&engine);
    append(&mut log, (1..=3000).map(|i| put(1, i, "k", "v")).collect()).await;
    log.truncate(log_id(1, 2500)).await.unwrap();
    log.purge(log_id(1, 2200)).await.unwrap();
    let entries = log.try_get_log_entries(..).await.unwrap();
    assert_eq!(indexes(&entries), (2201..=2499).collect::<Vec<_>>());
    // Purging past the end (after a snapshot install) leaves an empty log there.
    log.purge(log_id(1, 4000)).await.unwrap();
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 4000)));
    assert_eq!(state.last_log_id, Some(log_id(1, 4000)));
    assert!(log.try_get_log_entries(..).await.unwrap().is_empty());
}

fn map_of(engine: &dyn Engine) -> BTreeMap<String, String> {
    let spaces = state_spaces(engine, PREFIX, &[KvMachine::KIND.to_owned()]).unwrap();
    read_map(engine, &spaces[0]).unwrap()
}

#[tokio::test]
async fn apply_is_atomic_with_the_applied_position_and_replies_decode_errors() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut sm = open_sm(&engine);
    let replies = sm
        .apply(vec![
            put(1, 1, "a", "1"),
            put(1, 2, "a", "2"),
            Entry {
                log_id: log_id(1, 3),
                payload: EntryPayload::Normal(Command(b"garbage".to_vec())),
            },
        ])
        .await
        .unwrap();
    assert_eq!(replies[0], Reply(Vec::new()));
    assert_eq!(replies[1], Reply(b"1".to_vec()));
    assert_eq!(replies[2], Reply(crate::kv::BAD_COMMAND.to_vec()));
    assert_eq!(
        applied_log_id(&*engine, PREFIX).unwrap(),
        Some(log_id(1, 3))
    );
    assert_eq!(map_of(&*engine).get("a").map(String::as_str), Some("2"));
}

#[tokio::test]
async fn snapshots_stream_in_chunks_and_install_into_a_new_generation() {
    let leader: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut sm = open_sm(&leader);
    let n = 500;
    sm.apply(
        (1..=n)
            .map(|i| put(1, i, &format!("key{i:04}"), &"x".repeat(100)))
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    let snapshot = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(snapshot.meta.last_log_id, Some(log_id(1, n)));
    let SnapshotData::View(view) = *snapshot.snapshot else {
        panic!("a built snapshot is a view");
    };

    let follower: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut fsm = open_sm(&follower);
    fsm.apply(vec![put(1, 1, "stale", "gone")]).await.unwrap();
    let old_spaces = fsm.spaces().to_vec();
    let mut staged = fsm.begin_receiving_snapshot().await.unwrap();
    let mut reader = view.chunks(4096);
    let mut chunks = 0;
    while let Some(chunk) = reader.next_chunk().unwrap() {
        assert!(
            chunk.records.len() < 45,
            "a chunk stays near its byte bound"
        );
        // Through the wire encoding, as a peer receives it.
        let bytes = codec::encode_message(&chunk).unwrap();
        let chunk: Chunk = codec::decode_message(&bytes).unwrap();
        match &mut *staged {
            SnapshotData::Staged(s) => s.write_chunk(&chunk).unwrap(),
            SnapshotData::View(_) => panic!("a reception is staged"),
        }
        chunks += 1;
    }
    assert!(chunks > 10, "{chunks} chunks");
    // Nothing is visible before the install.
    assert_eq!(map_of(&*follower).len(), 1);
    fsm.install_snapshot(&snapshot.meta, staged).await.unwrap();
    assert_eq!(map_of(&*follower), map_of(&*leader));
    assert_eq!(
        applied_log_id(&*follower, PREFIX).unwrap(),
        Some(log_id(1, n))
    );
    assert_ne!(fsm.spaces(), &old_spaces[..]);
    assert!(!follower.space_names().unwrap().contains(&old_spaces[0]));
}

#[tokio::test]
async fn an_abandoned_reception_leaves_no_space_behind() {
    let dir = tempfile::tempdir().unwrap();
    let engine: Arc<dyn Engine> = Arc::new(Fjall::open(dir.path(), 8 << 20).unwrap());
    let mut sm = open_sm(&engine);
    sm.apply(vec![put(1, 1, "a", "1")]).await.unwrap();
    let staged = sm.begin_receiving_snapshot().await.unwrap();
    let names = engine.space_names().unwrap().len();
    drop(staged);
    assert_eq!(engine.space_names().unwrap().len(), names - 1);
    // A crash in mid-reception (the drop never ran) is cleaned up at the next open.
    let staged = sm.begin_receiving_snapshot().await.unwrap();
    std::mem::forget(staged);
    drop(sm);
    let sm = open_sm(&engine);
    assert_eq!(engine.space_names().unwrap().len(), names - 1);
    assert_eq!(map_of(&*engine).get("a").map(String::as_str), Some("1"));
    drop(sm);
}

/// The figures behind the wire and record format choice (docs/decisions.md). By hand:
/// `cargo test --release -p replication measure_codecs -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, by hand"]
fn measure_codecs() {
    use openraft::raft::AppendEntriesRequest;
    use std::time::Instant;
    // 64 entries of 1 KiB commands: a busy shard's append batch.
    let entries: Vec<Entry> = (1..=64)
        .map(|i| Entry {
            log_id: log_id(3, i),
            payload: EntryPayload::Normal(Command((0..1024).map(|b| (b * 7 + i) as u8).collect())),
        })
        .collect();
    let rpc = AppendEntriesRequest::<TypeConfig> {
        vote: Vote::new_committed(3, 1),
        prev_log_id: Some(log_id(3, 0)),
        entries,
        leader_commit: Some(log_id(3, 0)),
    };
    let rounds = 300;
    let t = Instant::now();
    let mut pc = Vec::new();
    for _ in 0..rounds {
        pc = codec::encode_message(&rpc).unwrap();
        let back: AppendEntriesRequest<TypeConfig> = codec::decode_message(&pc).unwrap();
        assert_eq!(back.entries.len(), 64);
    }
    let postcard = t.elapsed() / rounds;
    let t = Instant::now();
    let mut js = Vec::new();
    for _ in 0..rounds {
        js = serde_json::to_vec(&rpc).unwrap();
        let back: AppendEntriesRequest<TypeConfig> = serde_json::from_slice(&js).unwrap();
        assert_eq!(back.entries.len(), 64);
    }
    let json = t.elapsed() / rounds;
    eprintln!(
        "64 x 1 KiB entries: postcard {} bytes, {:?} per encode+decode; serde_json {} bytes, {:?}",
        pc.len(),
        postcard,
        js.len(),
        json
    );
}

#[tokio::test]
async fn replication_reads_a_run_from_its_first_index_and_never_past_a_hole() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let mut log = open_log(&engine);
    append(&mut log, (1..=10).map(|i| put(1, i, "k", "v")).collect()).await;
    assert_eq!(
        indexes(&log.limited_get_log_entries(3, 8).await.unwrap()),
        [3, 4, 5, 6, 7]
    );
    // The front purged while a leader reads (found by the cluster simulation): nothing,
    // not the entries after the purged ones (which would follow the wrong prev_log_id).
    log.purge(log_id(1, 5)).await.unwrap();
    assert!(log.limited_get_log_entries(3, 11).await.unwrap().is_empty());
    assert_eq!(
        indexes(&log.limited_get_log_entries(6, 11).await.unwrap()),
        [6, 7, 8, 9, 10]
    );
    // A missing entry ends the run.
    let mut hole = WriteBatch::new();
    hole.delete(&format!("{PREFIX}.log"), 8u64.to_be_bytes().to_vec());
    engine.apply(hole).unwrap();
    assert_eq!(
        indexes(&log.limited_get_log_entries(6, 11).await.unwrap()),
        [6, 7]
    );
    // openraft's own reads still take whatever is stored in a range.
    assert_eq!(
        indexes(&log.try_get_log_entries(0..100).await.unwrap()),
        [6, 7, 9, 10]
    );
}
