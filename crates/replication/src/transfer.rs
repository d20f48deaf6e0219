//! Leader transfer: [`Proposer::transfer_leader`] moves a group's leadership from this
//! node (its leader) to a chosen voter, or fails within a timeout leaving this node in
//! charge. openraft 0.9 has no leader transfer; this is the Raft thesis' §3.10 procedure
//! (fence, catch up, TimeoutNow) built on what openraft 0.9.25 offers.
//!
//! The obstacle: a voter refuses a vote request while its *leader lease* lasts
//! (`Engine::handle_vote_req`: its vote is committed and was refreshed less than
//! `election_timeout_max` ago — every AppendEntries, heartbeats included, refreshes it),
//! and a leader never campaigns itself (`ExternalCommand::Elect` is ignored by a leader).
//! The same lease check runs on the leader, whose vote was last refreshed when it was
//! elected (nothing refreshes a leader's own vote), so once it has led for longer than
//! `election_timeout_max` it grants a vote for a higher term from a candidate whose log
//! is as long as its own — and steps down.
//!
//! The procedure:
//! 1. Checks: this node leads, `target` is another voter of a uniform (not joint)
//!    membership ([`TransferError::TargetIsLearner`], [`TransferError::NotAMember`]).
//! 2. Fence: new proposals (the client writes `crate::serve_client` serves included) get
//!    [`crate::ProposeError::Transferring`]; proposals already in flight are awaited, so
//!    the leader's log stops growing.
//! 3. Catch up, within one lease (`election_timeout_max`): read the leader's
//!    committed log id from its core (the metrics may lag behind a write just
//!    acknowledged), then wait until the leader's replication metrics show `target` has
//!    matched it and the leader's last log id.
//! 4. Votes. *Direct* (three voters or fewer: `target` and the leader are a majority):
//!    wait until the leader's own lease has run out (only if it was elected less than
//!    `election_timeout_max` ago); heartbeats continue, so the other followers stay put.
//!    *Quiet* (more voters): stop the leader's heartbeats and wait one lease plus one
//!    heartbeat interval, so every follower's lease lapses; a follower would start its
//!    own election only after lease + its election timeout (at least
//!    `election_timeout_min`), which leaves `target` that long to win.
//! 5. Hand off (on the direct path within one lease): send `target`
//!    [`RaftRequest::TimeoutNow`] (the leader's vote and last log id); it checks it still follows that leader and holds that log, then calls
//!    `trigger().elect()`: a campaign at term + 1 that the leader and (quiet path) the
//!    followers grant.
//! 6. Wait until the leader's metrics show `target` leading a higher term. Heartbeats
//!    resume when the quiet window closes (lease + `election_timeout_min`/2 after they
//!    stopped; this assumes `heartbeat_interval` plus a round trip is shorter than
//!    `election_timeout_min`/2) and on every exit; the fence is lowered on every exit.
//!
//! Why it is safe: nothing here bypasses Raft's rules. `target` wins only by a quorum of
//! votes granted for a new term under openraft's rules, so election safety is openraft's
//! (one leader per leader id; openraft 0.9's leader ids are (term, node id));
//! a voter grants only a candidate whose log is at least as long as its own, so the new
//! leader holds every committed entry (leader completeness): no acknowledged write is
//! lost. The lease is an availability device, not a safety one; letting it lapse (or the
//! leader's own lapse) only allows an election Raft allows anyway. TimeoutNow carries the
//! leader's vote: a delayed one from an earlier term is refused and cannot start a
//! stray election. If the leader crashes mid-transfer, its fence and paused heartbeats
//! die with it (both are in memory): the group elects a leader as after any crash, and
//! `target`, fully caught up, is a likely winner. If `target` is down or partitioned,
//! TimeoutNow never arrives and the transfer times out: heartbeats resume within the
//! quiet window (lease + `election_timeout_min`/2 after they stopped, before any
//! follower's election timer can fire), so the leader stays in charge and serves writes
//! again. If `target` is cut off right after starting its election, the leader may
//! already have granted its vote and stepped down; the group then elects whoever can
//! win, as after a leader crash (an error is returned, no write is lost).
//!
//! Only proposals through the [`Proposer`] (and its clones) are fenced: a membership
//! change started during a transfer is not refused, it only makes the catch-up wait for
//! its entries (a joint membership at the start is refused).
//!
//! What it costs: writes are fenced from the call until the new leader is known. On the
//! direct path that is the catch-up plus one TimeoutNow and one vote round trip (plus up
//! to `election_timeout_max` if the leader was elected just before); on the quiet path
//! about `election_timeout_max` + `heartbeat_interval` more.

use std::time::Duration;

use openraft::ServerState;
use tokio::time::Instant;

use crate::fence::Proposer;
use crate::network::{RaftRequest, RaftResponse, Transport};
use crate::types::{GroupId, LogId, Node, NodeId, Raft, Vote};

/// A transfer that succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transferred {
    /// From the call until this node saw `target` lead.
    pub elapsed: Duration,
    /// The term `target` leads.
    pub term: u64,
    /// Whether the quiet path (heartbeats paused) was taken.
    pub quiet: bool,
}

/// The step a transfer was at when it gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Waiting for proposals in flight to answer.
    Drain,
    /// Waiting for `target` to match the leader's log.
    CatchUp,
    /// Waiting for leases to lapse.
    Lease,
    /// Sending TimeoutNow.
    HandOff,
    /// Waiting for `target` to win its election.
    Election,
}

/// Why a transfer did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransferError {
    /// Only the leader can hand leadership over.
    #[error("this node does not lead the group (the leader is {leader:?})")]
    NotLeader {
        /// The leader this node knows of.
        leader: Option<NodeId>,
    },
    /// The target is this node, which already leads.
    #[error("node {0} already leads the group")]
    TargetIsSelf(NodeId),
    /// The target replicates the group but does not vote, so it cannot lead.
    #[error("node {0} is a learner of the group, not a voter: it cannot lead")]
    TargetIsLearner(NodeId),
    /// The target is not a member of the group.
    #[error("node {0} is not a member of the group")]
    NotAMember(NodeId),
    /// A membership change is in progress (joint configuration).
    #[error("a membership change is in progress; transfer after it completes")]
    MembershipChanging,
    /// Another transfer holds the fence.
    #[error("a transfer to node {0} is already underway")]
    AlreadyTransferring(NodeId),
    /// This node lost the leadership of its term during the transfer, other than by the
    /// target winning the election the transfer started (a crash, a partition, another
    /// node's election).
    #[error("this node lost leadership during the transfer to node {target} (the leader now: {leader:?})")]
    LeadershipLost {
        /// The intended target.
        target: NodeId,
        /// Who leads now, as far as this node knows.
        leader: Option<NodeId>,
    },
    /// The timeout passed; if it passed before the hand-off this node still leads.
    #[error("transfer to node {target} timed out at {stage:?} after {waited:?}{}",
        last_error.as_ref().map(|e| format!(" (last error: {e})")).unwrap_or_default())]
    TimedOut {
        /// The intended target.
        target: NodeId,
        /// Where it gave up.
        stage: Stage,
        /// How long it tried.
        waited: Duration,
        /// The last refusal or transport error of the hand-off, if any.
        last_error: Option<String>,
    },
    /// The Raft node has stopped.
    #[error("the Raft node stopped: {0}")]
    Stopped(String),
}

/// Resumes the leader's heartbeats when dropped.
struct HeartbeatsPaused(Raft);

impl Drop for HeartbeatsPaused {
    fn drop(&mut self) {
        self.0.runtime_config().heartbeat(true);
    }
}

impl Proposer {
    /// Hands this group's leadership to voter `target` (see the module note), giving up
    /// after `timeout`. `transport` and `group` are those of the group's [`crate::Network`].
    /// Proposals through this proposer (and its clones) are refused while it runs.
    ///
    /// `timeout` should leave room for the target's catch-up plus, with more than three
    /// voters or a leader elected less than `election_timeout_max` ago, one
    /// `election_timeout_max` + `heartbeat_interval`. The quiet path (more than three
    /// voters) assumes `heartbeat_interval` is under half `election_timeout_min`.
    pub async fn transfer_leader<T: Transport>(
        &self,
        transport: &T,
        group: GroupId,
        target: NodeId,
        timeout: Duration,
    ) -> Result<Transferred, TransferError> {
        let raft = self.raft();
        let started = Instant::now();
        let deadline = started + timeout;
        let m = raft.metrics().borrow().clone();
        if m.state != ServerState::Leader {
            return Err(TransferError::NotLeader {
                leader: m.current_leader,
            });
        }
        if target == m.id {
            return Err(TransferError::TargetIsSelf(target));
        }
        let membership = m.membership_config.membership();
        if membership.get_joint_config().len() > 1 {
            return Err(TransferError::MembershipChanging);
        }
        let Some(node) = membership.get_node(&target).cloned() else {
            return Err(TransferError::NotAMember(target));
        };
        let voters = membership.voter_ids().count();
        if !membership.voter_ids().any(|v| v == target) {
            return Err(TransferError::TargetIsLearner(target));
        }
        let term = m.current_term;
        let timed_out = |stage, last_error| TransferError::TimedOut {
            target,
            stage,
            waited: started.elapsed(),
            last_error,
        };
        let config = raft.config();
        let lease = Duration::from_millis(config.election_timeout_max);
        // Fenced, the catch-up gets one lease (a reachable target needs far less), and so
        // does the direct path's hand-off below: a target that cannot be reached (cut
        // off, or still counted connected just after it went) holds writes up for about
        // that long, not the whole timeout (5 s for the hand-back).
        let fenced_until = deadline.min(Instant::now() + lease);
        let _fence = self
            .fence
            .raise(target)
            .map_err(TransferError::AlreadyTransferring)?;

        if !self.fence.drained(left(fenced_until)).await {
            return Err(timed_out(Stage::Drain, None));
        }
        // Read from the core, not the metrics (which may lag): every acknowledged
        // proposal's entry is at or below it.
        let committed = raft
            .with_raft_state(|s| s.committed)
            .await
            .map_err(|e| TransferError::Stopped(e.to_string()))?;
        let last = caught_up(raft, target, &m.vote, committed, fenced_until)
            .await?
            .ok_or_else(|| timed_out(Stage::CatchUp, None))?;

        let heartbeat = Duration::from_millis(config.heartbeat_interval);
        // Direct when this node's grant and the target's own make a majority.
        let quiet = voters > 3;
        let mut paused = None;
        let hand_off_by = if quiet {
            raft.runtime_config().heartbeat(false);
            paused = Some(HeartbeatsPaused(raft.clone()));
            let stopped = Instant::now();
            tokio::time::sleep_until((stopped + lease + heartbeat).min(deadline)).await;
            // Past this, a follower's own election timer may fire: heartbeats must resume.
            deadline.min(stopped + lease + Duration::from_millis(config.election_timeout_min / 2))
        } else {
            let refreshed = raft
                .with_raft_state(|s| s.vote_last_modified())
                .await
                .map_err(|e| TransferError::Stopped(e.to_string()))?;
            if let Some(at) = refreshed {
                let lapsed: Instant = at + lease + Duration::from_millis(1);
                tokio::time::sleep_until(lapsed.min(deadline)).await;
            }
            deadline.min(Instant::now() + lease)
        };
        if Instant::now() >= deadline {
            return Err(timed_out(Stage::Lease, None));
        }

        hand_off(
            raft,
            transport,
            group,
            target,
            &node,
            &m.vote,
            last,
            heartbeat,
            hand_off_by,
        )
        .await
        .map_err(|e| timed_out(Stage::HandOff, Some(e)))?;

        // Quiet path: heartbeats stay paused while the election runs (a heartbeat would
        // renew the followers' leases under the target's vote requests), until the quiet
        // window closes.
        let mut metrics = raft.metrics();
        loop {
            let m = metrics.borrow_and_update().clone();
            if let Some(leader) = m.current_leader.filter(|_| m.current_term > term) {
                if leader != target {
                    return Err(TransferError::LeadershipLost {
                        target,
                        leader: Some(leader),
                    });
                }
                return Ok(Transferred {
                    elapsed: started.elapsed(),
                    term: m.current_term,
                    quiet,
                });
            }
            let until = if paused.is_some() {
                hand_off_by
            } else {
                deadline
            };
            match tokio::time::timeout(left(until), metrics.changed()).await {
                Err(_) if paused.is_some() => paused = None,
                Err(_) => return Err(timed_out(Stage::Election, None)),
                Ok(Err(e)) => return Err(TransferError::Stopped(e.to_string())),
                Ok(Ok(())) => {}
            }
        }
    }
}

/// What is left of the time until `deadline`.
fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// Waits until `target` has matched `committed` and the leader's last log id as the
/// metrics show it; answers the matched log id, or `None` at the deadline. Fails if this
/// node stops leading in `vote`.
async fn caught_up(
    raft: &Raft,
    target: NodeId,
    vote: &Vote,
    committed: Option<LogId>,
    deadline: Instant,
) -> Result<Option<Option<LogId>>, TransferError> {
    let mut metrics = raft.metrics();
    loop {
        let m = metrics.borrow_and_update().clone();
        if m.state != ServerState::Leader || m.vote != *vote {
            return Err(TransferError::LeadershipLost {
                target,
                leader: m.current_leader,
            });
        }
        let matched = m.replication.as_ref().and_then(|r| r.get(&target).cloned());
        if let Some(matched) = matched {
            if matched >= committed && matched.map(|l| l.index) == m.last_log_index {
                return Ok(Some(matched));
            }
        }
        match tokio::time::timeout(left(deadline), metrics.changed()).await {
            Err(_) => return Ok(None),
            Ok(Err(e)) => return Err(TransferError::Stopped(e.to_string())),
            Ok(Ok(())) => {}
        }
    }
}

/// Sends TimeoutNow to `target` until it answers that it started an election, this node
/// stops leading in `vote` (an earlier TimeoutNow whose answer was lost got through), or
/// `by` passes (`Err`: the last refusal or transport error).
#[allow(clippy::too_many_arguments)]
async fn hand_off<T: Transport>(
    raft: &Raft,
    transport: &T,
    group: GroupId,
    target: NodeId,
    node: &Node,
    vote: &Vote,
    last_log_id: Option<LogId>,
    retry: Duration,
    by: Instant,
) -> Result<(), String> {
    let mut last_error = String::from("no answer");
    while Instant::now() < by {
        let request = RaftRequest::TimeoutNow {
            vote: *vote,
            last_log_id,
        };
        let call = transport.call(target, node, group, request);
        match tokio::time::timeout(left(by), call).await {
            Ok(Ok(RaftResponse::ElectionStarted)) => return Ok(()),
            Ok(Ok(RaftResponse::Refused(why))) => last_error = format!("refused: {why}"),
            Ok(Ok(other)) => last_error = format!("unexpected answer {other:?}"),
            Ok(Err(e)) => last_error = e.to_string(),
            Err(_) => last_error = "no answer in time".into(),
        }
        let m = raft.metrics().borrow().clone();
        if m.state != ServerState::Leader || m.vote != *vote {
            return Ok(());
        }
        tokio::time::sleep(retry.min(left(by))).await;
    }
    Err(last_error)
}

/// The receiving side of [`RaftRequest::TimeoutNow`]: starts an election if this node
/// still follows the leader of `vote`, votes, and holds the leader's `last_log_id`.
pub(crate) async fn timeout_now(
    raft: &Raft,
    vote: Vote,
    last_log_id: Option<LogId>,
) -> RaftResponse {
    let m = raft.metrics().borrow().clone();
    let mine = m.vote.leader_id();
    if mine.node_id == m.id && mine.term > vote.leader_id().term {
        // Already campaigning (or leading) past that term: an earlier TimeoutNow of this
        // transfer got through and only its answer was lost.
        return RaftResponse::ElectionStarted;
    }
    if m.vote.leader_id() != vote.leader_id() || !m.vote.is_committed() {
        return RaftResponse::Refused(format!(
            "node {} does not follow the leader of vote {vote} (its vote is {})",
            m.id, m.vote
        ));
    }
    if !m
        .membership_config
        .membership()
        .voter_ids()
        .any(|v| v == m.id)
    {
        return RaftResponse::Refused(format!("node {} is not a voter", m.id));
    }
    if m.last_log_index < last_log_id.map(|l| l.index) {
        return RaftResponse::Refused(format!(
            "node {} has not caught up: its last log index is {:?}, the leader's {:?}",
            m.id, m.last_log_index, last_log_id
        ));
    }
    match raft.trigger().elect().await {
        Ok(()) => RaftResponse::ElectionStarted,
        Err(e) => RaftResponse::Refused(e.to_string()),
    }
}
