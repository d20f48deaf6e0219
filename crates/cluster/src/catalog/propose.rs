//! How a node's replicated catalog changes: [`CatalogProposer`], the seam
//! `CatalogGuard::apply` hands a command to, and [`RaftProposer`], which proposes it to
//! the catalog's Raft group through its leader (`crate::replica::GroupRoute`) and returns
//! once this node has applied the entry, so the change and its side effects (`follow`)
//! are visible here when the query that asked for it gets its answer.
//!
//! Invariants: called without the catalog lock (the group's apply takes it); blocks the
//! calling thread — an evaluation thread, an index build's thread, or tokio's blocking
//! pool, never an async worker — for at most the route's deadline plus the wait for the
//! local apply; an outcome that may or may not have been committed is reported as
//! RethinkDB's indeterminate error, never retried.

use replication::{Command, Transport};
use reql::error::ErrorKind;
use reql::ReqlError;

use super::wire::{decode_reply, encode_command};
use super::{CatalogCommand, Outcome};
use crate::replica::{wait_for, GroupRoute, Reach, RouteError};

/// Proposes a replicated catalog's commands (set on the catalog with
/// `Cluster::set_catalog_proposer`).
pub trait CatalogProposer: Send + Sync + 'static {
    /// Has `cmd` committed and applied on this node; its outcome, or the error the
    /// group's apply (RethinkDB's, as a single server gives it) or the routing gave.
    fn propose(&self, cmd: &CatalogCommand) -> reql::Result<Outcome>;
}

/// Proposes to the catalog's Raft group over the cluster transport.
pub struct RaftProposer<T: Transport> {
    route: std::sync::Arc<GroupRoute<T>>,
    runtime: tokio::runtime::Handle,
}

impl<T: Transport> RaftProposer<T> {
    /// Proposes through `route` (the catalog group's), running on `runtime`.
    pub fn new(route: std::sync::Arc<GroupRoute<T>>, runtime: tokio::runtime::Handle) -> Self {
        Self { route, runtime }
    }
}

impl<T: Transport> CatalogProposer for RaftProposer<T> {
    fn propose(&self, cmd: &CatalogCommand) -> reql::Result<Outcome> {
        let command = Command(encode_command(cmd));
        let route = self.route.clone();
        let answer = wait_for(&self.runtime, async move {
            let (reply, index) = route.propose(command).await?;
            route.caught_up(index).await?;
            Ok::<_, RouteError>(reply)
        });
        let reply = match answer {
            Some(Ok(reply)) => reply,
            Some(Err(e)) => return Err(catalog_error(&e)),
            // The runtime is shutting down: the proposal may have been sent.
            None => {
                return Err(catalog_error(&RouteError::CommitUnknown(
                    "the server is stopping".into(),
                )))
            }
        };
        decode_reply(&reply.0)
    }
}

/// A routing failure of a catalog change, as the client sees it.
fn catalog_error(e: &RouteError) -> ReqlError {
    let (kind, message) = if e.indeterminate() {
        (
            ErrorKind::OpIndeterminate,
            format!(
                "The catalog change may or may not have been made: {e}. Check the \
                 configuration before trying again."
            ),
        )
    } else {
        (
            ErrorKind::OpFailed,
            format!("The catalog change was not made: {e}."),
        )
    };
    ReqlError::new(kind, message).nondeterministic()
}

/// The route of the catalog's group `group`, whose member here is `raft`: register it
/// with the node's router (so the other members' proposals forwarded here are served)
/// and hand it to [`RaftProposer::new`].
pub fn catalog_route<T: Transport>(
    group: replication::GroupId,
    raft: replication::Raft,
    transport: std::sync::Arc<T>,
    policy: crate::replica::RoutePolicy,
    client: replication::ClientPolicy,
) -> GroupRoute<T> {
    let service = replication::ClientService {
        // Reads of the catalog are not routed: every node reads its own catalog.
        reader: std::sync::Arc::new(crate::replica::NoReads(
            "the catalog is read on each server, not through its group",
        )),
        policy: client,
    };
    GroupRoute::new(
        group,
        // The catalog's leadership is never handed over (only shards' are), so a
        // proposer of its own, whose fence is never raised, serves it.
        Reach::Member(replication::Proposer::new(raft)),
        service,
        transport,
        policy,
        "catalog".into(),
    )
}
