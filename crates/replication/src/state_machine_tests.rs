//! Tests of what `ApplyCtx` and `StateMachineStore` promise a machine: an entry
//! committed inside `apply` (`ApplyCtx::commit`) is visible with its log position before
//! `apply` returns and takes no further writes, and `attach` runs while the previous
//! spaces still exist.

use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, EntryPayload, RaftSnapshotBuilder};
use parking_lot::Mutex;
use storage::{Engine, Memory, StorageError};

use super::*;
use crate::*;

const PREFIX: &str = "raft.g2";

/// Puts the command's bytes under themselves and commits early; records what it saw.
struct Early {
    engine: Arc<dyn Engine>,
    spaces: Vec<String>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl StateMachine for Early {
    fn space_kinds(&self) -> Vec<String> {
        vec!["kv".into()]
    }

    fn apply(&mut self, ctx: &mut ApplyCtx<'_>, command: &[u8]) -> Result<Vec<u8>, StorageError> {
        ctx.put("kv", command, command)?;
        ctx.commit()?;
        let mut seen = self.seen.lock();
        // Committed: the write and the position are in the engine already.
        let visible = ctx.get("kv", command)?.is_some();
        let position = applied_log_id(&*self.engine, PREFIX)
            .map_err(|e| StorageError::Engine(e.to_string()))?;
        seen.push(format!(
            "visible={visible} at={:?}",
            position.map(|p| p.index)
        ));
        let refused = ctx.put("kv", b"late", b"x").is_err() && ctx.commit().is_err();
        seen.push(format!("refused={refused}"));
        Ok(b"done".to_vec())
    }

    fn attach(&mut self, spaces: &[String]) -> Result<(), StorageError> {
        let names = self.engine.space_names()?;
        let kept = self.spaces.iter().all(|s| names.contains(s));
        self.seen.lock().push(format!("attach old_kept={kept}"));
        self.spaces = spaces.to_vec();
        Ok(())
    }
}

fn machine(engine: &Arc<dyn Engine>, seen: &Arc<Mutex<Vec<String>>>) -> StateMachineStore<Early> {
    let early = Early {
        engine: engine.clone(),
        spaces: Vec::new(),
        seen: seen.clone(),
    };
    StateMachineStore::open(engine.clone(), PREFIX, early, Durability::Inline).unwrap()
}

fn entry(index: u64, command: &[u8]) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(Command(command.to_vec())),
    }
}

#[tokio::test]
async fn an_entry_committed_inside_apply_is_visible_with_its_position_and_closed() {
    let engine: Arc<dyn Engine> = Arc::new(Memory::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut sm = machine(&engine, &seen);
    let replies = sm
        .apply(vec![entry(1, b"a"), entry(2, b"b")])
        .await
        .unwrap();
    assert_eq!(
        replies,
        vec![Reply(b"done".to_vec()), Reply(b"done".to_vec())]
    );
    assert_eq!(
        seen.lock()[1..],
        [
            "visible=true at=Some(1)",
            "refused=true",
            "visible=true at=Some(2)",
            "refused=true"
        ]
    );
    let space = &sm.spaces()[0];
    assert!(engine.get(space, b"late").unwrap().is_none());
}

#[tokio::test]
async fn attach_after_an_install_runs_before_the_old_spaces_are_dropped() {
    let (leader, follower): (Arc<dyn Engine>, Arc<dyn Engine>) =
        (Arc::new(Memory::new()), Arc::new(Memory::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut lsm = machine(&leader, &seen);
    lsm.apply(vec![entry(1, b"a")]).await.unwrap();
    let snapshot = lsm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let mut fsm = machine(&follower, &seen);
    let old = fsm.spaces().to_vec();
    seen.lock().clear();
    fsm.install_snapshot(&snapshot.meta, snapshot.snapshot)
        .await
        .unwrap();
    assert_eq!(*seen.lock(), ["attach old_kept=true"]);
    assert!(!follower.space_names().unwrap().contains(&old[0]));
    assert!(follower.get(&fsm.spaces()[0], b"a").unwrap().is_some());
}
