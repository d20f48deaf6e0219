//! Who a connection is: the user authenticated by the handshake, the client's address
//! and the `TableAccess` (from `cluster::Cluster::access_for`) that enforces that
//! user's permissions on every query of the connection.

use std::sync::Arc;

use cluster::Cluster;

/// The authenticated user of one connection.
pub struct Principal {
    /// The user name.
    pub user: Arc<str>,
    /// The client's address (`host:port`).
    pub peer: Arc<str>,
    /// Catalog and tables, as this user may use them.
    pub access: Arc<dyn reql::TableAccess>,
}

impl Principal {
    /// The principal of `user` connected from `peer`.
    pub fn new(cluster: &Arc<Cluster>, user: &str, peer: String) -> Principal {
        Principal {
            user: user.into(),
            peer: peer.into(),
            access: cluster.access_for(user),
        }
    }
}
