//! The catalog replicated by a 3-node Raft group (in-memory engines, loopback TCP),
//! each node a `Cluster` following it (`Cluster::open_replicated`): `converge`, entries
//! proposed to the leader and a stopped node catching up by snapshot; `access`, changes
//! through `TableAccess` on any node; `placement`, tables placed on the nodes; `tables` and `indexes`, replicated tables
//! and their secondary indexes; `founder`, a single server's tables converted at its
//! first join; `reshard`, resharding a replicated table.

mod access;
mod converge;
mod convert;
mod founder;
mod grow;
mod harness;
mod indexes;
mod placement;
mod reshard;
mod tables;
