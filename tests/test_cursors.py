"""Cursors: a 20,000-document table streamed through the driver and, batch by batch,
over a raw socket with CONTINUE and STOP."""
import time

import pytest
from rethinkdb import r

from conftest import assert_serving
from reqlwire import (CLIENT_ERROR, CONTINUE, SUCCESS_PARTIAL, SUCCESS_SEQUENCE, RawConn,
                      term)

N = 20_000
PAD = "p" * 40


@pytest.fixture(scope="module")
def big(server):
    c = server.connect()
    r.db("test").table_create("big").run(c)
    for start in range(0, N, 1000):
        res = r.table("big").insert(
            [{"id": i, "pad": PAD, "sq": i * i} for i in range(start, start + 1000)]).run(c)
        assert res["inserted"] == 1000 and res["errors"] == 0, res
    assert r.table("big").count().run(c) == N
    c.close()
    return "big"


def test_driver_cursor_yields_every_document(big, conn):
    seen = set()
    cursor = r.table(big).run(conn)
    for doc in cursor:
        assert doc == {"id": doc["id"], "pad": PAD, "sq": doc["id"] ** 2}
        assert doc["id"] not in seen, "duplicate id %r" % doc["id"]
        seen.add(doc["id"])
    assert seen == set(range(N))


def test_driver_cursor_closed_early_leaves_connection_usable(big, conn):
    cursor = r.table(big).run(conn)
    first = [next(cursor) for _ in range(10)]
    assert len({d["id"] for d in first}) == 10
    cursor.close()
    assert r.table(big).get(123).run(conn) == {"id": 123, "pad": PAD, "sq": 123 * 123}
    # A filtered stream over the whole table through the same connection.
    odd = list(r.table(big).filter(lambda d: d["id"].mod(2).eq(1)).pluck("id").run(conn))
    assert sorted(d["id"] for d in odd) == list(range(1, N, 2))


def test_raw_cursor_continue_until_done(big, server):
    c = RawConn(server.port)
    try:
        resp = c.query(1, [15, [big]])                         # r.table("big")
        assert resp["t"] == SUCCESS_PARTIAL, {k: resp[k] for k in resp if k != "r"}
        ids = [d["id"] for d in resp["r"]]
        assert 0 < len(ids) < N
        batches = 1
        while resp["t"] == SUCCESS_PARTIAL:
            assert batches < 2000, "too many batches"
            c.cont(1)
            token, resp = c.recv()
            assert token == 1
            assert resp["t"] in (SUCCESS_PARTIAL, SUCCESS_SEQUENCE), resp
            ids.extend(d["id"] for d in resp["r"])
            batches += 1
        assert resp["t"] == SUCCESS_SEQUENCE
        assert len(ids) == N and set(ids) == set(range(N))
        assert batches >= 2
        # The finished cursor is gone: CONTINUE now fails on that token.
        c.cont(1)
        token, resp = c.recv()
        assert token == 1 and resp["t"] == CLIENT_ERROR, resp
        assert resp["r"] == ["Token 1 not in stream cache."]
    finally:
        c.close()


def test_raw_cursor_stop_ends_it(big, server):
    c = RawConn(server.port)
    try:
        # Small batches so the stream certainly outlives two round trips.
        resp = c.query(5, [15, [big]], {"max_batch_rows": 100})
        assert resp["t"] == SUCCESS_PARTIAL
        assert 0 < len(resp["r"]) <= 100
        first = {d["id"] for d in resp["r"]}

        c.cont(5)
        token, resp = c.recv()
        assert token == 5 and resp["t"] == SUCCESS_PARTIAL, resp
        assert 0 < len(resp["r"]) <= 100
        second = {d["id"] for d in resp["r"]}
        assert not (first & second), "CONTINUE repeated documents"

        c.stop(5)
        token, resp = c.recv()
        assert token == 5 and resp["t"] == SUCCESS_SEQUENCE, resp

        c.cont(5)
        token, resp = c.recv()
        assert token == 5 and resp["t"] == CLIENT_ERROR, resp
        assert resp["r"] == ["Token 5 not in stream cache."]

        # The connection still works, and the token can be reused for a new query.
        resp = c.query(5, [24, [2, 3]])
        assert resp["r"] == [5]
    finally:
        c.close()
    assert_serving(server)


def test_raw_two_cursors_interleaved(big, server):
    c = RawConn(server.port)
    try:
        ids = {10: [], 11: []}
        queries = {10: term(r.table(big).filter(lambda d: d["id"].lt(5000))),
                   11: term(r.table(big).filter(lambda d: d["id"].ge(15000)))}
        open_ = set()
        for tok, q in queries.items():
            resp = c.query(tok, q, {"max_batch_rows": 250})
            ids[tok].extend(d["id"] for d in resp["r"])
            if resp["t"] == SUCCESS_PARTIAL:
                open_.add(tok)
        rounds = 0
        while open_:
            rounds += 1
            assert rounds < 500
            for tok in sorted(open_):
                c.send_frame(tok, [CONTINUE])
            for _ in range(len(open_)):
                tok, resp = c.recv()
                assert resp["t"] in (SUCCESS_PARTIAL, SUCCESS_SEQUENCE), resp
                ids[tok].extend(d["id"] for d in resp["r"])
                if resp["t"] == SUCCESS_SEQUENCE:
                    open_.discard(tok)
        assert sorted(ids[10]) == list(range(5000))
        assert sorted(ids[11]) == list(range(15000, N))
    finally:
        c.close()


def test_stop_while_continue_in_flight_closes_the_cursor(server):
    c = RawConn(server.port)
    try:
        # A stream whose every batch takes its full time budget (max_batch_seconds).
        slow = term(r.range(10 ** 7).filter(lambda x: x.mod(1000).eq(0)))
        resp = c.query(21, slow, {"max_batch_seconds": 0.4})
        assert resp["t"] == SUCCESS_PARTIAL
        c.cont(21)
        time.sleep(0.05)                 # the CONTINUE is now being computed
        c.stop(21)
        c.sock.settimeout(20)
        answers = [c.recv(), c.recv()]
        assert [t for t, _ in answers] == [21, 21]
        # Whatever the two answers were, the stream is closed now.
        c.cont(21)
        token, resp = c.recv()
        assert token == 21 and resp["t"] == CLIENT_ERROR, resp
        assert resp["r"] == ["Token 21 not in stream cache."]
    finally:
        c.close()


def test_noreply_stream_leaves_no_cursor(server):
    c = RawConn(server.port)
    try:
        c.start(22, [173, [1000]], {"noreply": True, "max_batch_rows": 10})  # r.range(1000)
        c.send_frame(23, [4])                                          # NOREPLY_WAIT
        token, resp = c.recv()
        assert token == 23 and resp["t"] == 4, resp
        c.cont(22)
        token, resp = c.recv()
        assert token == 22 and resp["t"] == CLIENT_ERROR, resp
        assert resp["r"] == ["Token 22 not in stream cache."]
    finally:
        c.close()
