"""Fault injection for cluster tests: network namespaces with partitions, loss and delay
(`Net`), a fault-injecting TCP proxy for loopback setups (`Proxy`), `ponder` servers
inside namespaces (`start_ponder`), and pytest fixtures (`faults.fixtures`). See
docs/clustering.md, "Fault injection for cluster tests"."""
from .netns import Net
from .nsutil import NetnsError, cleanup_stale, unavailable
from .ponder import NsServer, start_ponder
from .proxy import Proxy

__all__ = ["Net", "NetnsError", "NsServer", "Proxy", "cleanup_stale", "start_ponder",
           "unavailable"]
