//! [`Proposer`]: the way the layer above proposes commands to a group, so that a
//! leader transfer ([`crate::transfer`]) can fence new proposals.
//!
//! A proposal passes the fence and counts itself in flight until `client_write` answers;
//! raising the fence turns new proposals away with [`ProposeError::Transferring`] and
//! lets the transfer wait until those in flight have answered, so that the leader's log
//! stops growing and the target can catch up with all of it.
//!
//! Invariants: at most one transfer holds the fence at a time; the fence is lowered when
//! its guard drops (on every exit of a transfer, including a panic or a cancelled
//! future); no lock is held across an `.await`.

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::types::{Command, Node, NodeId, Raft, Reply};

/// Why a proposal was not applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProposeError {
    /// Leadership is being handed to `target`: retry shortly, at whichever node leads then.
    #[error("leadership is being transferred to node {target}: retry at the new leader")]
    Transferring {
        /// The node leadership is being handed to.
        target: NodeId,
    },
    /// This node does not lead the group; `leader` is the one it knows of.
    #[error("not the leader (the leader is {leader:?})")]
    NotLeader {
        /// The leader this node knows of.
        leader: Option<NodeId>,
    },
    /// openraft refused or failed otherwise (membership change in progress, shut down).
    #[error(transparent)]
    Raft(Box<RaftError<NodeId, ClientWriteError<NodeId, Node>>>),
}

#[derive(Default)]
struct FenceState {
    /// The target of the transfer holding the fence, if one does.
    transfer_to: Option<NodeId>,
    /// Proposals that passed the fence and have not answered yet.
    in_flight: usize,
}

#[derive(Default)]
pub(crate) struct Fence {
    state: Mutex<FenceState>,
    /// Signalled when the last proposal in flight answers.
    drained: Notify,
}

/// Lowers the fence when dropped.
pub(crate) struct Raised<'a>(&'a Fence);

impl Drop for Raised<'_> {
    fn drop(&mut self) {
        self.0.state.lock().transfer_to = None;
    }
}

/// Counts a proposal in flight until dropped.
pub(crate) struct Passing<'a>(&'a Fence);

impl Drop for Passing<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        state.in_flight -= 1;
        if state.in_flight == 0 {
            self.0.drained.notify_waiters();
        }
    }
}

impl Fence {
    pub(crate) fn pass(&self) -> Result<Passing<'_>, ProposeError> {
        let mut state = self.state.lock();
        if let Some(target) = state.transfer_to {
            return Err(ProposeError::Transferring { target });
        }
        state.in_flight += 1;
        Ok(Passing(self))
    }

    /// Raises the fence for a transfer to `target`; `Err` names the target of the
    /// transfer that already holds it.
    pub(crate) fn raise(&self, target: NodeId) -> Result<Raised<'_>, NodeId> {
        let mut state = self.state.lock();
        if let Some(other) = state.transfer_to {
            return Err(other);
        }
        state.transfer_to = Some(target);
        Ok(Raised(self))
    }

    /// Waits until no proposal is in flight; false if `limit` passed first.
    pub(crate) async fn drained(&self, limit: Duration) -> bool {
        let wait = async {
            loop {
                // Registered before the check, so a notification in between is not missed.
                let notified = self.drained.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.state.lock().in_flight == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(limit, wait).await.is_ok()
    }

    pub(crate) fn transferring_to(&self) -> Option<NodeId> {
        self.state.lock().transfer_to
    }
}

/// A group member's handle for proposing commands: [`Raft::client_write`] behind the
/// fence a leader transfer raises. Clones share the fence; make one per group member and
/// send every proposal of that member through it.
#[derive(Clone)]
pub struct Proposer {
    raft: Raft,
    pub(crate) fence: Arc<Fence>,
}

impl Proposer {
    /// The proposer of the group member `raft`.
    pub fn new(raft: Raft) -> Self {
        Self {
            raft,
            fence: Arc::default(),
        }
    }

    /// The Raft node.
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// The node a transfer of this member is handing leadership to, if one is underway.
    pub fn transferring_to(&self) -> Option<NodeId> {
        self.fence.transferring_to()
    }

    /// Proposes `command`; answers the state machine's reply once it is committed and
    /// applied. During a leader transfer it answers [`ProposeError::Transferring`] at once.
    pub async fn propose(&self, command: Command) -> Result<Reply, ProposeError> {
        let _passing = self.fence.pass()?;
        match self.raft.client_write(command).await {
            Ok(r) => Ok(r.data),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                Err(ProposeError::NotLeader {
                    leader: f.leader_id,
                })
            }
            Err(e) => Err(ProposeError::Raft(Box::new(e))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_fence_turns_proposals_away_and_waits_for_those_in_flight() {
        let fence = Fence::default();
        let passing = fence.pass().unwrap();
        let raised = fence.raise(2).unwrap();
        assert!(matches!(
            fence.pass(),
            Err(ProposeError::Transferring { target: 2 })
        ));
        assert_eq!(fence.raise(3).err(), Some(2));
        assert!(!fence.drained(Duration::from_millis(20)).await);
        let (done, _) = tokio::join!(fence.drained(Duration::from_secs(5)), async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            drop(passing);
        });
        assert!(done);
        drop(raised);
        assert_eq!(fence.transferring_to(), None);
        assert!(fence.pass().is_ok());
    }
}
