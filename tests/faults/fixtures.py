"""Pytest fixtures for the fault-injection harness. Import them into a conftest.py or a
test module (`from faults.fixtures import make_net, make_proxy  # noqa: F401`).

`make_net(n)` skips the test (with the reason) when the machine cannot create network
namespaces (not root, no iproute2), and closes every Net it made when the test ends,
however it ends (failure, Ctrl-C, SIGTERM; `Net` also closes at interpreter exit);
`cleanup_stale()` runs first, removing leftovers of runs killed with SIGKILL.
"""
import signal
import threading

import pytest

from .netns import Net
from .nsutil import cleanup_stale, unavailable
from .proxy import Proxy

_reason = []


def require_netns():
    """pytest.skip unless network namespaces can be created here."""
    if not _reason:
        _reason.append(unavailable())
    if _reason[0]:
        pytest.skip(_reason[0])


def _terminate_as_interrupt():
    """SIGTERM (e.g. a CI job cancelled) would end the process without teardown or
    atexit; raised as KeyboardInterrupt instead, the fixtures still clean up."""
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        def handler(signum, frame):
            raise KeyboardInterrupt("SIGTERM")
        signal.signal(signal.SIGTERM, handler)


@pytest.fixture
def make_net():
    require_netns()
    _terminate_as_interrupt()
    cleanup_stale()
    nets = []

    def make(n):
        nets.append(Net(n, clean_stale=False))
        return nets[-1]

    try:
        yield make
    finally:
        for net in nets:
            net.close()


@pytest.fixture
def make_proxy():
    """`make_proxy(target_host, target_port)`: a started Proxy on 127.0.0.1, closed at
    the end of the test."""
    proxies = []

    def make(host, port, **kw):
        proxies.append(Proxy(host, port, **kw).start())
        return proxies[-1]

    try:
        yield make
    finally:
        for p in proxies:
            p.close()
