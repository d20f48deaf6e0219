"""Protocol-level behaviour: many queries in flight on one connection, noreply, and many
connections at once."""
import socket
import threading
import time

from rethinkdb import r

from conftest import assert_serving
from reqlwire import (CLIENT_ERROR, SUCCESS_ATOM, SUCCESS_PARTIAL, SUCCESS_SEQUENCE,
                      RawConn, WAIT_COMPLETE, SERVER_INFO_RESPONSE, term)

SLOW_N = 1_000_000
SLOW = term(r.range(SLOW_N).map(lambda x: x.mul(2)).sum())   # ~0.1-0.3 s of work
SLOW_VALUE = SLOW_N * (SLOW_N - 1)
RANGE_COUNT = [43, [[173, [300000]]]]                          # r.range(300000).count()


def test_100_concurrent_queries_on_one_connection(server):
    c = RawConn(server.port)
    try:
        expected = {}
        frames = []
        slow_tokens = {1, 40, 80}
        for token in range(1, 101):
            if token in slow_tokens:
                t, v = SLOW, SLOW_VALUE
            elif token % 10 == 5:
                t, v = RANGE_COUNT, 300000
            elif token % 10 == 7:
                t, v = term(r.expr({"tok": token}).merge({"x": [token, "s"]})), \
                    {"tok": token, "x": [token, "s"]}
            else:
                t, v = [24, [token, 1000]], token + 1000           # r.expr(token) + 1000
            expected[token] = v
            frames.append((token, t))
        # Everything goes out before anything is read.
        for token, t in frames:
            c.start(token, t)

        arrival = []
        c.sock.settimeout(60)
        for _ in range(100):
            token, resp = c.recv()
            assert token in expected, "response for a token never sent: %r" % token
            assert token not in arrival, "second response for token %d: %r" % (token, resp)
            assert resp["t"] == SUCCESS_ATOM, (token, resp)
            assert resp["r"] == [expected[token]], (token, resp)
            arrival.append(token)
        assert sorted(arrival) == list(range(1, 101))

        # No extra responses.
        c.sock.settimeout(0.3)
        try:
            extra = c.sock.recv(1)
        except socket.timeout:
            extra = None
        assert not extra, "unexpected bytes after the 100 responses"

        # The slow query was sent first, yet fast ones overtook it.
        pos = {tok: i for i, tok in enumerate(arrival)}
        fast_before_slow = [t for t in arrival[:pos[1]] if t not in slow_tokens]
        assert fast_before_slow, "no fast answer arrived before the slow token 1: %r" % arrival
        assert arrival != sorted(arrival)
    finally:
        c.close()


def test_same_connection_still_usable_after_pipelined_burst(server):
    c = RawConn(server.port)
    try:
        for token in range(1000, 1050):
            c.start(token, [24, [token, 1]])
        got = {}
        for _ in range(50):
            token, resp = c.recv()
            got[token] = resp["r"][0]
        assert got == {t: t + 1 for t in range(1000, 1050)}
        # SERVER_INFO and NOREPLY_WAIT answer on their own tokens.
        c.send_frame(7, [5])
        token, resp = c.recv()
        assert token == 7 and resp["t"] == SERVER_INFO_RESPONSE, resp
        assert isinstance(resp["r"][0]["id"], str) and isinstance(resp["r"][0]["name"], str)
        c.send_frame(8, [4])
        token, resp = c.recv()
        assert token == 8 and resp["t"] == WAIT_COMPLETE, resp
    finally:
        c.close()


def test_noreply_then_noreply_wait(conn):
    r.db("test").table_create("noreply").run(conn)
    for i in range(200):
        res = r.table("noreply").insert({"id": i, "v": i * 3}).run(conn, noreply=True)
        assert res is None
    conn.noreply_wait()
    assert r.table("noreply").count().run(conn) == 200
    assert r.table("noreply").sum("v").run(conn) == 3 * sum(range(200))
    assert r.table("noreply").get(199).run(conn) == {"id": 199, "v": 597}


def test_noreply_wait_waits_for_slow_noreply_query(conn):
    """A noreply write queued behind a slow noreply computation is visible after
    noreply_wait."""
    r.db("test").table_create("noreply2").run(conn)
    r.range(SLOW_N).map(lambda x: x.mul(2)).sum().run(conn, noreply=True)
    r.table("noreply2").insert({"id": "late"}).run(conn, noreply=True)
    conn.noreply_wait()
    assert r.table("noreply2").get("late").run(conn) == {"id": "late"}


def test_noreply_wait_is_not_held_by_later_noreply_queries(server):
    """NOREPLY_WAIT waits for the noreply queries sent before it, not for those sent
    after it (RethinkDB numbers queries on arrival): a very long noreply query sent
    after the wait does not delay its answer."""
    c = RawConn(server.port)
    try:
        c.start(1, SLOW, {"noreply": True})
        c.send_frame(2, [4])                                   # NOREPLY_WAIT
        # Would run for minutes; ended when the connection closes.
        c.start(3, term(r.range(10 ** 9).map(lambda x: x.mul(2)).sum()), {"noreply": True})
        token, resp = c.recv()
        assert (token, resp["t"]) == (2, WAIT_COMPLETE), resp
        # The long query is still running: the wait did not wait for it.
        jobs = c.query(4, term(r.db("rethinkdb").table("jobs")
                               .filter({"type": "query"}).count()))
        assert jobs["r"][0] >= 2, jobs
    finally:
        c.close()


def test_stop_and_noreply_wait_on_tokens(server):
    """STOP looks its token up as RethinkDB's does: an open cursor is closed with an
    empty SUCCESS_SEQUENCE, a token with no query gets "Token N not in stream cache.";
    NOREPLY_WAIT on a token in use is a duplicate token."""
    c = RawConn(server.port)
    try:
        resp = c.query(10, term(r.range(100000)), {"max_batch_rows": 10})
        assert resp["t"] == SUCCESS_PARTIAL, resp
        c.send_frame(10, [4])
        token, resp = c.recv()
        assert (token, resp["t"], resp["r"]) == (10, CLIENT_ERROR, ["ERROR: duplicate token 10"])
        c.stop(10)
        token, resp = c.recv()
        assert (token, resp["t"], resp["r"]) == (10, SUCCESS_SEQUENCE, []), resp
        for unknown in (10, 77):
            c.stop(unknown)
            token, resp = c.recv()
            assert (token, resp["t"], resp["r"]) == \
                (unknown, CLIENT_ERROR, ["Token %d not in stream cache." % unknown]), resp
        # A finished stream leaves nothing to stop either.
        resp = c.query(11, term(r.range(3)))
        assert (resp["t"], resp["r"]) == (SUCCESS_SEQUENCE, [0, 1, 2]), resp
        c.stop(11)
        token, resp = c.recv()
        assert (token, resp["t"]) == (11, CLIENT_ERROR), resp
        assert c.query(12, [24, [1, 1]])["r"] == [2]
    finally:
        c.close()


def test_many_connections_concurrently(server):
    setup = server.connect()
    r.db("test").table_create("multi").run(setup)
    r.table("multi").insert([{"id": "shared-%d" % k, "n": k} for k in range(10)]).run(setup)

    n_threads, ops = 20, 40
    errors = []
    barrier = threading.Barrier(n_threads, timeout=30)

    def worker(w):
        try:
            c = server.connect(timeout=20)
            try:
                barrier.wait()
                deadline = time.time() + 40
                for i in range(ops):
                    assert time.time() < deadline, "worker %d too slow" % w
                    key = "w%d-%d" % (w, i)
                    res = r.table("multi").insert({"id": key, "w": w, "i": i}).run(c)
                    assert res["inserted"] == 1 and res["errors"] == 0, res
                    assert r.table("multi").get(key).run(c) == {"id": key, "w": w, "i": i}
                    if i % 4 == 0:
                        up = r.table("multi").get(key).update({"u": w * 1000 + i}).run(c)
                        assert up["replaced"] == 1, up
                    shared = r.table("multi").get("shared-%d" % (i % 10)).run(c)
                    assert shared == {"id": "shared-%d" % (i % 10), "n": i % 10}
                    assert r.expr([w, i]).sum().run(c) == w + i
                mine = r.table("multi").filter({"w": w}).count().run(c)
                assert mine == ops, (w, mine)
            finally:
                c.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("worker %d: %r" % (w, e))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "workers hung"
    assert errors == []

    assert r.table("multi").count().run(setup) == 10 + n_threads * ops
    updated = r.table("multi").has_fields("u").count().run(setup)
    assert updated == n_threads * len(range(0, ops, 4))
    for w in (0, 7, 19):
        got = r.table("multi").get("w%d-8" % w).run(setup)
        assert got == {"id": "w%d-8" % w, "w": w, "i": 8, "u": w * 1000 + 8}
    setup.close()
    assert_serving(server)
