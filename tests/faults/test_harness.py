"""Tests of the namespace harness (`faults.Net`) with small TCP echo servers and UDP
sockets inside the namespaces, and of a `ponder` server inside one. Skipped with the
reason when the machine cannot create namespaces (not root, no iproute2)."""
import concurrent.futures
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlDriverError, ReqlError

from faults import Net, NetnsError, cleanup_stale, start_ponder
from faults.fixtures import require_netns
from faults.ponder import ponder_binary

PORT = 7000
TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ECHO = """
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(64)
def serve(c):
    with c:
        while True:
            b = c.recv(4096)
            if not b: return
            c.sendall(b)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
"""


def probe(host, port, timeout=0.3):
    """'ok' if an echo round trip to host:port works, else 'timeout' or 'refused'."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as c:
            c.sendall(b"ping")
            return "ok" if c.recv(4) == b"ping" else "bad"
    except ConnectionRefusedError:
        return "refused"
    except (socket.timeout, TimeoutError):
        return "timeout"


def start_echo(net):
    for i in range(net.n):
        net.spawn(i, [sys.executable, "-c", ECHO, net.addr(i), str(PORT)])
    deadline = time.time() + 10
    for i in range(net.n):
        while probe(net.addr(i), PORT, 1) != "ok":
            assert time.time() < deadline, "echo server %d did not start" % i
            time.sleep(0.05)


def matrix(net):
    """{(i, j): probe result from node i to node j}, probed from inside node i."""
    pairs = [(i, j) for i in range(net.n) for j in range(net.n) if i != j]
    with concurrent.futures.ThreadPoolExecutor(len(pairs)) as ex:
        futs = {p: ex.submit(net.call_in, p[0], probe, net.addr(p[1]), PORT) for p in pairs}
        return {p: f.result() for p, f in futs.items()}


def test_partition_isolate_heal(make_net):
    net = make_net(3)
    assert len(set(net.addrs)) == 3 and net.root_addr not in net.addrs
    start_echo(net)
    assert set(matrix(net).values()) == {"ok"}

    net.partition([[0], [1, 2]])
    m = matrix(net)
    for p in [(0, 1), (0, 2), (1, 0), (2, 0)]:
        assert m[p] == "timeout", p
    assert m[(1, 2)] == m[(2, 1)] == "ok"
    # the test process (root namespace) still reaches every node
    assert [probe(a, PORT) for a in net.addrs] == ["ok"] * 3

    net.heal()
    assert set(matrix(net).values()) == {"ok"}

    net.isolate(2)
    m = matrix(net)
    assert {p for p, v in m.items() if v == "timeout"} == {(0, 2), (1, 2), (2, 0), (2, 1)}
    assert m[(0, 1)] == m[(1, 0)] == "ok"
    net.heal()
    assert not net.cuts and set(matrix(net).values()) == {"ok"}


def test_five_nodes_majority_minority_and_non_transitive(make_net):
    net = make_net(5)
    start_echo(net)
    net.partition([[0, 1], [2, 3, 4]])
    m = matrix(net)
    assert {p for p, v in m.items() if v == "ok"} == {
        (i, j) for g in ([0, 1], [2, 3, 4]) for i in g for j in g if i != j}
    assert set(m.values()) == {"ok", "timeout"}
    # non-transitive: 0 and 1 cannot talk, 2 talks to both (nodes in no group)
    net.partition([[0], [1]])
    m = matrix(net)
    assert {p for p, v in m.items() if v != "ok"} == {(0, 1), (1, 0)}
    with pytest.raises(ValueError):
        net.partition([[0, 1], [1, 2]])
    with pytest.raises(ValueError):
        net.partition([[0], [5]])
    net.heal()
    assert set(matrix(net).values()) == {"ok"}


def _udp(bind):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(bind)
    s.settimeout(0.3)
    return s


def _delivered(sender, receiver, dest, n=1):
    """How many of n datagrams sent from `sender` to `dest` reach `receiver`."""
    for k in range(n):
        sender.sendto(b"%d" % k, dest)
    got = 0
    try:
        while got < n:
            receiver.recv(64)
            got += 1
    except socket.timeout:
        pass
    return got


def test_one_way_cut(make_net):
    net = make_net(2)
    a = net.call_in(0, _udp, (net.addr(0), PORT))
    b = net.call_in(1, _udp, (net.addr(1), PORT))
    with a, b:
        assert _delivered(a, b, (net.addr(1), PORT)) == 1
        assert _delivered(b, a, (net.addr(0), PORT)) == 1
        net.partition([[0], [1]], one_way=True)  # drops 0 -> 1 only
        assert set(net.cuts) == {(0, 1)}
        assert _delivered(a, b, (net.addr(1), PORT)) == 0
        assert _delivered(b, a, (net.addr(0), PORT)) == 1
        net.heal()
        net.cut(1, 0)
        assert _delivered(a, b, (net.addr(1), PORT)) == 1
        assert _delivered(b, a, (net.addr(0), PORT)) == 0
        net.uncut(1, 0)
        assert _delivered(b, a, (net.addr(0), PORT)) == 1


def test_loss(make_net):
    net = make_net(1)
    root = _udp((net.root_addr, 0))
    a = net.call_in(0, _udp, (net.addr(0), 0))
    dest = root.getsockname()
    with root, a:
        # resolve ARP first: unresolved, datagrams would wait in the neighbour queue
        assert _delivered(a, root, dest, 5) == 5
        net.loss(0, 100)
        assert _delivered(a, root, dest, 20) == 0
        net.loss(0, 50)
        got = _delivered(a, root, dest, 400)
        assert 100 < got < 300, got
        net.clear_shaping()
        assert _delivered(a, root, dest, 20) == 20


@pytest.mark.parametrize("backend", ["netem", "userspace"])
def test_delay(make_net, backend):
    net = make_net(2)
    start_echo(net)

    def rtt():
        t = time.monotonic()
        assert probe(net.addr(0), PORT, 2) == "ok"
        return time.monotonic() - t

    base = min(rtt() for _ in range(2))
    try:
        net.delay(0, 60, 5, backend=backend)
    except NetnsError as e:
        pytest.skip("netem unavailable: %s" % e)
    assert net.delay_backend(0) == backend
    # connect + echo: two round trips, each 60 ms longer
    assert min(rtt() for _ in range(2)) >= base + 0.11
    # a bulk transfer (TSO/GSO-sized packets) passes through the delay intact
    with socket.create_connection((net.addr(0), PORT), timeout=5) as c:
        big = os.urandom(1 << 18)
        sender = concurrent.futures.ThreadPoolExecutor(1)
        sent = sender.submit(c.sendall, big)
        got = b""
        while len(got) < len(big):
            got += c.recv(1 << 20)
        sent.result()
        sender.shutdown()
        assert got == big
    # cuts still apply to a delayed node
    net.cut(0, 1)
    assert net.call_in(0, probe, net.addr(1), PORT) == "timeout"
    net.heal()
    assert net.call_in(0, probe, net.addr(1), PORT, 2) == "ok"
    net.delay(0, 0)
    assert net.delay_backend(0) is None
    assert min(rtt() for _ in range(3)) < 0.1


def test_delay_default_backend(make_net):
    net = make_net(1)
    start_echo(net)
    net.delay(0, 100)  # netem when the kernel has it, else the userspace delay line
    assert net.delay_backend(0) in ("netem", "userspace")
    t = time.monotonic()
    assert probe(net.addr(0), PORT, 2) == "ok"
    assert time.monotonic() - t >= 0.18
    net.clear_shaping()
    assert net.delay_backend(0) is None


def test_degrade_every_link(make_net):
    """Loss and jittered delay on every node at once (what cluster tests use under
    load): TCP still gets through, every round trip is slower, and delays vary."""
    net = make_net(2)
    start_echo(net)
    # Neighbours resolved first: under loss ARP itself can fail ("no route to host").
    assert net.call_in(0, probe, net.addr(1), PORT, 2) == "ok"
    net.degrade(25, 40, 15)
    assert all(net.delay_backend(i) for i in range(2))
    rtts, failed = [], []
    for _ in range(6):
        t = time.monotonic()
        # TCP retransmits what is lost (a lost SYN costs 1 s): generous timeouts; a
        # connection now and then still fails outright (a reset, an ARP refresh lost).
        try:
            answer = net.call_in(0, probe, net.addr(1), PORT, 8)
        except OSError as e:
            answer = e
        (rtts if answer == "ok" else failed).append(time.monotonic() - t)
    assert len(rtts) >= 4, (rtts, failed)
    # connect + echo: two round trips, each at least 2 x 25 ms longer (40 - 15, both ways)
    assert min(rtts) >= 0.1, rtts
    net.clear_shaping()
    assert all(net.delay_backend(i) is None for i in range(2))
    assert net.call_in(0, probe, net.addr(1), PORT, 2) == "ok"


def _leftovers(names):
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [n for n in names if n in listed]


def test_cleanup_when_the_body_raises():
    require_netns()
    with pytest.raises(RuntimeError):
        with Net(2) as net:
            names = net.names + [net.bridge_ns]
            sleeper = net.spawn(1, ["sleep", "60"])
            net.pause(sleeper)
            assert len(_leftovers(names)) == 3
            raise RuntimeError("test body failed")
    assert _leftovers(names) == []
    assert sleeper.poll() == -signal.SIGKILL
    link = subprocess.run(["ip", "link", "show", net.root_if], capture_output=True)
    assert link.returncode != 0, "the root veth outlived its Net"


def test_cleanup_stale_removes_dead_runs_only(make_net):
    mine = make_net(1)
    # A run that dies by SIGKILL, leaving its namespaces and a process inside them.
    child = subprocess.run(
        [sys.executable, "-c",
         "import os, signal, subprocess as sp, faults; n = faults.Net(2);"
         "n.spawn(0, ['sleep', '60'], stdout=sp.DEVNULL, stderr=sp.DEVNULL);"
         "print(' '.join(n.names + [n.bridge_ns]), n.root_if, flush=True);"
         "os.kill(os.getpid(), signal.SIGKILL)"],
        capture_output=True, text=True, timeout=30,
        env=dict(os.environ, PYTHONPATH=TESTS_DIR))
    assert child.returncode == -signal.SIGKILL, child.stderr
    *names, root_if = child.stdout.split()
    assert len(_leftovers(names)) == 3
    cleanup_stale()  # (a parallel run's fixture may get there first: same effect)
    assert _leftovers(names) == []
    assert subprocess.run(["ip", "link", "show", root_if], capture_output=True).returncode != 0
    # this run's namespaces are untouched
    assert _leftovers(mine.names) == mine.names


def test_ponder_in_a_namespace(make_net, tmp_path):
    if not os.path.exists(ponder_binary()):
        pytest.skip("no ponder binary at %s (set PONDER_BIN)" % ponder_binary())
    net = make_net(1)
    s = start_ponder(net, 0, str(tmp_path / "n0"))
    c = s.connect(timeout=5)
    assert r.expr(20).add(22).run(c) == 42

    s.pause()
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        pending = ex.submit(lambda: r.expr(1).add(1).run(c))
        with pytest.raises(concurrent.futures.TimeoutError):
            pending.result(timeout=0.5)
        with pytest.raises(ReqlError):  # the handshake gets no answer
            s.connect(timeout=0.5)
        s.resume()
        assert pending.result(timeout=10) == 2
    c.close()

    s.kill9()
    assert s.proc.returncode == -signal.SIGKILL
    with pytest.raises(ReqlDriverError, match="refused"):
        s.connect(timeout=2)

    s.start()  # restarts on the same data directory and address
    with s.connect(timeout=5) as c2:
        assert r.expr("up").run(c2) == "up"
