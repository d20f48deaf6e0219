"""Connection slots: a client that never finishes its handshake is dropped after
`--handshake-timeout-secs`, and a connection over `--max-connections` is told why before
it is closed (it used to be closed without a word, and silent sockets held every slot)."""
import json
import socket
import struct
import tempfile
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlDriverError

from conftest import Server, assert_serving
from reqlwire import V1_0_MAGIC


@pytest.fixture(scope="module")
def capped():
    with tempfile.TemporaryDirectory() as d:
        s = Server(d, extra=["--max-connections", "3", "--handshake-timeout-secs", "1"]).start()
        yield s
        s.stop()


def silent(port, send=b""):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if send:
        s.sendall(send)
    return s


def closed_by_server(sock, within):
    sock.settimeout(within)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


def test_silent_sockets_are_dropped_and_free_their_slots(capped):
    time.sleep(0.5)  # the start-up probe's connection gives its slot back
    # Slots held by: nothing sent, only the magic number, half a handshake.
    socks = [silent(capped.port), silent(capped.port, struct.pack("<I", V1_0_MAGIC)),
             silent(capped.port, struct.pack("<I", V1_0_MAGIC) + b'{"protocol_version"')]
    time.sleep(0.2)
    # Over the cap: an answer, not a silent close.
    with pytest.raises(ReqlDriverError, match="Too many open connections"):
        r.connect("127.0.0.1", capped.port, timeout=5)
    started = time.time()
    for s in socks:
        assert closed_by_server(s, within=5)
        s.close()
    assert time.time() - started < 5
    # The slots are free again: the admin gets in.
    assert_serving(capped)


def test_a_slow_but_finished_handshake_is_served(capped):
    c = r.connect("127.0.0.1", capped.port, timeout=5)
    time.sleep(1.5)  # longer than the handshake timeout, after the handshake
    assert r.expr(1).run(c) == 1
    c.close()


def test_pipelined_queries_left_unread_do_not_grow_the_server(server):
    """6,000 queries of ~110 KB answers each, sent without reading: without a bound the
    server would hold ~660 MB for this one connection. With the bounds (32 started
    queries, 32 MiB of unread answers) it grows by 170-200 MiB, mostly memory the
    allocator keeps after the answers were built and freed."""
    from reqlwire import RawConn, rss_kib, term
    raw = RawConn(server.port, timeout=60)
    q = term(r.range(20000).coerce_to("array"))
    before = rss_kib(server.proc.pid)
    n = 6000
    sent = 0
    raw.sock.setblocking(False)
    deadline = time.time() + 20
    peak = before
    while sent < n and time.time() < deadline:
        payload = json.dumps([1, q]).encode()
        frame = struct.pack("<QL", sent + 1, len(payload)) + payload
        try:
            raw.sock.sendall(frame)
            sent += 1
        except BlockingIOError:
            # The server stopped reading us: it applies back-pressure. Good.
            time.sleep(0.05)
        peak = max(peak, rss_kib(server.proc.pid))
    time.sleep(1.0)
    peak = max(peak, rss_kib(server.proc.pid))
    assert peak - before < 300 * 1024, "server grew by %d MiB" % ((peak - before) // 1024)
    # Everything sent is answered once the client reads.
    raw.sock.setblocking(True)
    got = 0
    while got < sent:
        token, resp = raw.recv()
        assert len(resp["r"][0]) == 20000
        got += 1
        if got == sent // 2 and sent < n:
            break
    raw.close()
    assert_serving(server)


def test_runaway_queries_do_not_starve_a_new_client(make_server):
    """Twice the evaluation pool's size of CPU-bound queries running: a new connection's
    handshake and a point read still answer promptly (the median of ten under 100 ms)."""
    from reqlwire import RawConn, term
    s = make_server(extra=["--eval-threads", "4"])
    c = s.connect()
    r.table_create("fair").run(c)
    r.table("fair").insert({"id": 1}).run(c)
    busy = []
    for _ in range(8):
        rc = RawConn(s.port)
        rc.start(1, term(r.range(10 ** 9).map(lambda x: x.mul(2)).count()))
        busy.append(rc)
    time.sleep(0.5)
    took = []
    for _ in range(10):
        t0 = time.time()
        c2 = s.connect()
        assert r.table("fair").get(1).run(c2) == {"id": 1}
        took.append(time.time() - t0)
        c2.close()
    took.sort()
    assert took[len(took) // 2] < 0.1, took
    for rc in busy:
        rc.close()
    c.close()
