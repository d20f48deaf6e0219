"""Single-document writes (`get(k).update/replace/delete`, `insert` of one object) are
evaluated on the connection's task (`reql::plan::inline_write`), the others on the
evaluation pool. Each write here runs twice from the same starting document: as the
driver sends it (inline), and with a global optarg the server ignores (`data`) padded
past the size the server evaluates inline, so the same term runs on the pool. Both
must answer alike: counters, `first_error`, `changes`, errors and backtraces."""
import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlError

T = r.table("iw")
ORIG = {"id": 1, "n": 1, "s": "x"}
# Past the server's inline limit (64 KiB of query).
PAD = "p" * (70 << 10)


@pytest.fixture(scope="module")
def c(server):
    conn = server.connect()
    r.table_create("iw").run(conn)
    yield conn
    conn.close()


def outcome(query, conn, **optargs):
    try:
        return ("value", query.run(conn, **optargs))
    except ReqlError as e:
        return (type(e).__name__, e.message, e.frames)


def alike(conn, query, **optargs):
    """Runs `query` inline and on the pool from the same starting documents; returns the
    answer, checked equal, having checked that both left the same documents."""
    answers, docs = [], []
    for pad in ({}, {"data": PAD}):
        T.get(1).replace(ORIG).run(conn)
        T.get(2).delete().run(conn)
        answers.append(outcome(query, conn, **optargs, **pad))
        docs.append(T.order_by("id").coerce_to("array").run(conn))
    assert answers[0] == answers[1]
    assert docs[0] == docs[1]
    return answers[0]


def test_updates_answer_as_on_the_pool(c):
    cases = [
        ({"n": 2}, {}),
        ({"n": 1}, {}),                                      # unchanged
        (lambda d: {"n": d["n"] + 1}, {}),
        (r.row["n"] * 10, {}),                               # not an object: error
        ({"id": 5}, {}),                                     # changes the primary key
        ({"n": r.literal({"a": 1})}, {"return_changes": True}),
        ({"n": 3}, {"return_changes": "always", "durability": "soft"}),
        ({"n": 3}, {"durability": "medium"}),                # a bad optarg's error
    ]
    for value, opts in cases:
        alike(c, T.get(1).update(value, **opts))
    got = alike(c, T.get(9).update({"n": 2}))
    assert got[1]["skipped"] == 1, got
    # A failing function is counted, not raised.
    got = alike(c, T.get(1).update(lambda d: {"n": d["s"] + 1}))
    assert got[1]["errors"] == 1 and "first_error" in got[1], got
    assert T.get(1)["n"].run(c) == 1
    # The global durability optarg.
    got = alike(c, T.get(1).update({"n": 4}), durability="soft")
    assert got[1]["replaced"] == 1, got


def test_replaces_deletes_and_inserts_answer_as_on_the_pool(c):
    alike(c, T.get(1).replace({"id": 1, "z": 1}))
    got = alike(c, T.get(1).replace({"z": 1}))               # no primary key: error
    assert got[0] != "value" or got[1]["errors"] == 1, got
    alike(c, T.get(1).replace(lambda d: d.merge({"z": d["n"]}), return_changes=True))
    got = alike(c, T.get(1).delete(return_changes=True))
    assert got[1]["deleted"] == 1, got
    got = alike(c, T.get(9).delete())
    assert got[1]["skipped"] == 1, got
    got = alike(c, T.insert({"id": 2, "v": [1, 2]}))
    assert got[1]["inserted"] == 1, got
    got = alike(c, T.insert({"id": 1}))
    assert got[1]["errors"] == 1 and "Duplicate primary key" in got[1]["first_error"], got
    alike(c, T.insert({"id": 1, "n": 7}, conflict="update", return_changes=True))


def test_errors_and_backtraces_match_the_pool(c):
    missing = r.table("iw_missing")
    for query in [
        missing.get(1).update({"n": 1}),
        missing.get(1).delete(),
        missing.insert({"id": 1}),
        T.get(1).update({"n": r.error("boom")}),
        T.get(1).update({"n": r.expr([1, 2])[5]}),
    ]:
        got = alike(c, query)
        assert got[0] != "value" or got[1]["errors"] == 1, got


def test_noreply_inline_writes_are_all_done_after_noreply_wait(server):
    conn = server.connect()
    try:
        T.get(1).replace(ORIG).run(conn)
        for i in range(200):
            T.get(1).update({"n": i}).run(conn, noreply=True)
            T.insert({"id": 1000 + i}).run(conn, noreply=True, durability="soft")
        conn.noreply_wait()
        assert T.get(1)["n"].run(conn) == 199
        got = T.between(1000, 1200).count().run(conn)
        assert got == 200
        T.between(1000, 1200).delete().run(conn)
    finally:
        conn.close()
