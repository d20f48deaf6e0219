//! [`SharedTransport`]: any [`Transport`] behind one concrete type, for the layers that
//! keep a server's transport without being generic over it (the cluster's table groups
//! hold one whatever the server uses: TCP, TLS, a resolving wrapper, a simulated
//! network in tests).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::TransportError;
use crate::network::{RaftRequest, RaftResponse, Transport};
use crate::types::{GroupId, Node, NodeId};

type Call<'a> = Pin<Box<dyn Future<Output = Result<RaftResponse, TransportError>> + Send + 'a>>;

/// [`Transport::call`] made object-safe.
trait DynTransport: Send + Sync + 'static {
    fn call_dyn<'a>(
        &'a self,
        target: NodeId,
        node: &'a Node,
        group: GroupId,
        request: RaftRequest,
    ) -> Call<'a>;
}

impl<T: Transport> DynTransport for T {
    fn call_dyn<'a>(
        &'a self,
        target: NodeId,
        node: &'a Node,
        group: GroupId,
        request: RaftRequest,
    ) -> Call<'a> {
        Box::pin(self.call(target, node, group, request))
    }
}

/// A transport of any type, shared.
#[derive(Clone)]
pub struct SharedTransport(Arc<dyn DynTransport>);

impl SharedTransport {
    /// Shares `transport`.
    pub fn new<T: Transport>(transport: Arc<T>) -> Self {
        SharedTransport(transport)
    }
}

impl Transport for SharedTransport {
    async fn call(
        &self,
        target: NodeId,
        node: &Node,
        group: GroupId,
        request: RaftRequest,
    ) -> Result<RaftResponse, TransportError> {
        self.0.call_dyn(target, node, group, request).await
    }
}
