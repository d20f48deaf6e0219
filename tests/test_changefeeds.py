"""Changefeeds through the official driver: delivery under concurrent writers, the
queue limit for slow readers, include_initial without gap or duplicate, the wire notes,
STOP, table drop, and release of feeds when a connection closes."""
import json
import struct
import threading
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlOpFailedError, ReqlTimeoutError

from conftest import assert_serving
from reqlwire import (CLIENT_ERROR, CONTINUE, STOP, SUCCESS_PARTIAL, SUCCESS_SEQUENCE,
                      RawConn, rss_kib, term)

WRITERS = 50
DOCS_PER_WRITER = 2
UPDATES_PER_WRITER = 200          # 50 * 200 = 10,000 changes
TABLE_FEEDS, RANGE_FEEDS, POINT_FEEDS = 8, 6, 6   # 20 feeds


def fresh_table(conn, name):
    if name in r.db("test").table_list().run(conn):
        r.db("test").table_drop(name).run(conn)
    r.db("test").table_create(name).run(conn)
    return r.db("test").table(name)


def test_concurrent_writers_every_feed_sees_every_change_once_in_order(server, conn):
    tbl = fresh_table(conn, "cf_load")
    ndocs = WRITERS * DOCS_PER_WRITER
    tbl.insert([{"id": i, "seq": 0} for i in range(ndocs)]).run(conn)

    # Each feed: (query, the documents it covers).
    specs = [(tbl.changes(), set(range(ndocs))) for _ in range(TABLE_FEEDS)]
    for i in range(RANGE_FEEDS):
        lo, hi = i * 15, i * 15 + 20
        specs.append((tbl.between(lo, hi).changes(), set(range(lo, min(hi, ndocs)))))
    for i in range(POINT_FEEDS):
        d = i * 13 + 1
        specs.append((tbl.get(d).changes(), {d}))
    per_doc = UPDATES_PER_WRITER // DOCS_PER_WRITER

    results, errors = [], []
    ready = threading.Barrier(len(specs) + 1)

    def read(query, docs):
        c = server.connect()
        try:
            cur = query.run(c)
            ready.wait()
            want = len(docs) * per_doc
            seen = {d: [] for d in docs}
            got = 0
            deadline = time.time() + 60
            while got < want:
                ch = cur.next(wait=max(0.1, deadline - time.time()))
                assert "error" not in ch, ch
                d = ch["new_val"]["id"]
                assert d in docs, ch
                assert ch["old_val"]["seq"] == ch["new_val"]["seq"] - 1, ch
                seen[d].append(ch["new_val"]["seq"])
                got += 1
            results.append(seen)
            cur.close()
        except BaseException as e:  # noqa: B902 - reported by the main thread
            errors.append(repr(e))
            try:
                ready.abort()
            except threading.BrokenBarrierError:
                pass
        finally:
            c.close()

    def write(w):
        c = server.connect()
        try:
            for k in range(UPDATES_PER_WRITER):
                d = w * DOCS_PER_WRITER + k % DOCS_PER_WRITER
                res = tbl.get(d).update({"seq": r.row["seq"] + 1}, durability="soft").run(c)
                assert res["replaced"] == 1, res
        except BaseException as e:  # noqa: B902
            errors.append(repr(e))
        finally:
            c.close()

    began = time.time()
    readers = [threading.Thread(target=read, args=s) for s in specs]
    for t in readers:
        t.start()
    ready.wait(timeout=30)
    writers = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    for t in writers:
        t.start()
    for t in writers + readers:
        t.join(timeout=90)
    assert not errors, errors[:5]
    assert len(results) == len(specs)
    for seen in results:
        for d, seqs in seen.items():
            assert seqs == list(range(1, per_doc + 1)), (d, seqs[:10])
    assert time.time() - began < 60


def test_slow_reader_gets_queue_limit_error_not_unbounded_memory(server, conn):
    tbl = fresh_table(conn, "cf_slow")
    feed = tbl.changes(changefeed_queue_size=100).run(conn)
    c2 = server.connect()
    rss_before = rss_kib(server.proc.pid)
    for start in range(0, 5000, 500):
        tbl.insert([{"id": i, "pad": "x" * 1000} for i in range(start, start + 500)],
                   durability="soft").run(c2)
    items = []
    while True:
        try:
            items.append(feed.next(wait=1))
        except ReqlTimeoutError:
            break
    errs = [x for x in items if "error" in x]
    assert errs, items[:3]
    assert errs[0]["error"].startswith("Changefeed cache over array size limit, skipped ")
    assert errs[0]["error"].endswith(" elements.")
    # At most the queue limit (plus a batch in flight) of changes was kept.
    assert len(items) - len(errs) <= 300
    # The server kept ~100 changes, not 5,000 documents of 1 KB per feed.
    assert rss_kib(server.proc.pid) - rss_before < 64 * 1024
    # The feed goes on after the overflow.
    tbl.insert({"id": "after"}).run(c2)
    nxt = feed.next(wait=5)
    assert nxt["new_val"] == {"id": "after"}
    feed.close()
    c2.close()


def test_include_initial_then_every_change_without_gap_or_duplicate(server, conn):
    tbl = fresh_table(conn, "cf_initial")
    tbl.insert([{"id": i, "v": 0} for i in range(2000)]).run(conn)
    stop = threading.Event()
    errors = []

    def churn():
        c = server.connect()
        k = 0
        try:
            while not stop.is_set():
                k += 1
                tbl.get(k % 2000).update({"v": r.row["v"] + 1}, durability="soft").run(c)
                tbl.insert({"id": 10_000 + k, "v": 0}, durability="soft").run(c)
                if k % 3 == 0:
                    tbl.get(10_000 + k - 1).delete(durability="soft").run(c)
        except BaseException as e:  # noqa: B902
            errors.append(repr(e))
        finally:
            c.close()

    t = threading.Thread(target=churn)
    t.start()
    time.sleep(0.3)
    feed = tbl.changes(include_initial=True, include_states=True).run(conn)
    state = {}
    phase = "start"
    deadline = time.time() + 30
    settle = None
    while True:
        if phase == "live" and settle is None and time.time() > deadline - 28:
            stop.set()
            t.join()
            settle = time.time()
        try:
            ch = feed.next(wait=1)
        except ReqlTimeoutError:
            if settle is not None:
                break
            continue
        assert "error" not in ch, ch
        if "state" in ch:
            phase = {"initializing": "initial", "ready": "live"}[ch["state"]]
            continue
        if phase == "initial":
            nv = ch["new_val"]
            assert "old_val" not in ch and nv["id"] not in state, ch
            state[nv["id"]] = nv
            continue
        assert phase == "live", ch
        key = (ch["new_val"] or ch["old_val"])["id"]
        # Each change starts from exactly what the client already has.
        assert state.get(key) == ch["old_val"], (key, state.get(key), ch)
        if ch["new_val"] is None:
            del state[key]
        else:
            state[key] = ch["new_val"]
    assert not errors, errors
    feed.close()
    final = {d["id"]: d for d in tbl.run(conn)}
    assert state == final


def test_point_feed_notes_stop_and_table_drop(server, conn):
    tbl = fresh_table(conn, "cf_point")
    c = RawConn(server.port)
    try:
        resp = c.query(1, term(tbl.get(1).changes(include_initial=True)))
        assert resp["t"] == SUCCESS_PARTIAL and resp["n"] == [2], resp   # ATOM_FEED
        assert resp["r"] == [{"new_val": None}]
        resp = c.query(2, term(tbl.changes(include_states=True)))
        assert resp["t"] == SUCCESS_PARTIAL and sorted(resp["n"]) == [1, 5], resp
        tbl.insert({"id": 1}).run(conn)
        c.cont(1)
        tok, resp = c.recv()
        assert tok == 1 and resp["t"] == SUCCESS_PARTIAL, resp
        assert resp["r"] == [{"old_val": None, "new_val": {"id": 1}}]
        # A waiting CONTINUE answered by STOP: two replies, the stream ends.
        c.cont(1)
        time.sleep(0.1)
        c.stop(1)
        replies = [c.recv(), c.recv()]
        assert [t for t, _ in replies] == [1, 1], replies
        assert [x["t"] for _, x in replies] == [SUCCESS_SEQUENCE, SUCCESS_SEQUENCE]
    finally:
        c.close()
    feed = tbl.changes().run(conn)
    c2 = server.connect()
    r.db("test").table_drop("cf_point").run(c2)
    with pytest.raises(ReqlOpFailedError, match=r"Changefeed aborted \(table unavailable\)"):
        feed.next(wait=5)
    c2.close()


def test_requests_on_one_token_are_answered_in_the_order_sent(server, conn):
    """RethinkDB serves a token's requests one after the other: a CONTINUE sent while
    the previous one waits is queued, not refused, and a STOP interrupts the request in
    flight but is answered after it. The Node drivers send both patterns."""
    tbl = fresh_table(conn, "cf_order")
    c = RawConn(server.port)
    try:
        resp = c.query(1, term(tbl.changes()))
        assert resp["t"] == SUCCESS_PARTIAL and resp["n"] == [1], resp
        # Two CONTINUEs in one write: the second waits for the first's answer.
        c.send_raw(c_frame(1, [CONTINUE]) + c_frame(1, [CONTINUE]))
        time.sleep(0.1)
        tbl.insert({"id": 1}).run(conn)
        tok, resp = c.recv()
        assert tok == 1 and resp["t"] == SUCCESS_PARTIAL, resp
        assert resp["r"] == [{"old_val": None, "new_val": {"id": 1}}]
        tbl.insert({"id": 2}).run(conn)
        tok, resp = c.recv()
        assert tok == 1 and resp["t"] == SUCCESS_PARTIAL, resp
        assert resp["r"] == [{"old_val": None, "new_val": {"id": 2}}]
        # CONTINUE and STOP in one write on an idle feed (a driver closing the feed from
        # the callback of the batch it just received): both answered, in order, with
        # the feed's end, and the token is free again.
        for _ in range(20):
            c.send_raw(c_frame(1, [CONTINUE]) + c_frame(1, [STOP]))
            replies = [c.recv(), c.recv()]
            assert [t for t, _ in replies] == [1, 1], replies
            assert [x["t"] for _, x in replies] == [SUCCESS_SEQUENCE, SUCCESS_SEQUENCE], replies
            resp = c.query(1, term(tbl.changes()))
            assert resp["t"] == SUCCESS_PARTIAL, resp
        # A CONTINUE queued behind one that ends the feed is refused as RethinkDB
        # refuses it, after the feed's last answer.
        c.send_raw(c_frame(1, [CONTINUE]) + c_frame(1, [CONTINUE]))
        time.sleep(0.1)
        c.stop(1)
        replies = [c.recv(), c.recv(), c.recv()]
        assert [x["t"] for _, x in replies] == [SUCCESS_SEQUENCE, CLIENT_ERROR,
                                                SUCCESS_SEQUENCE], replies
        assert replies[1][1]["r"] == ["ERROR: duplicate token 1"]
    finally:
        c.close()


def c_frame(token, payload):
    """One query frame's bytes (several can go out in one write)."""
    body = json.dumps(payload).encode()
    return struct.pack("<QL", token, len(body)) + body


def test_limit_union_filter_and_squash(server, conn):
    tbl = fresh_table(conn, "cf_misc")
    two = tbl.changes().limit(2).run(conn)
    odd = tbl.filter(r.row["id"].mod(2).eq(1)).changes()["new_val"]["id"].run(conn)
    both = tbl.get(1).changes().union(tbl.get(2).changes()).run(conn)
    tbl.insert([{"id": i} for i in range(1, 6)]).run(conn)
    assert [ch["new_val"]["id"] for ch in two] in ([1, 2], [2, 1]) or len(list(two)) == 0
    assert sorted(odd.next(wait=5) for _ in range(3)) == [1, 3, 5]
    assert sorted(both.next(wait=5)["new_val"]["id"] for _ in range(2)) == [1, 2]
    squashed = tbl.get(9).changes(squash=0.3).run(conn)
    for v in range(5):
        tbl.insert({"id": 9, "v": v}, conflict="replace").run(conn)
    ch = squashed.next(wait=5)
    assert ch == {"old_val": None, "new_val": {"id": 9, "v": 4}}, ch
    with pytest.raises(Exception, match="infinite stream"):
        tbl.changes().order_by("id").run(conn)


def test_feeds_released_when_connection_closes(server, conn):
    tbl = fresh_table(conn, "cf_release")
    pid = server.proc.pid

    def cycle(n):
        c = server.connect()
        cursors = [tbl.get(i).changes(include_initial=True).run(c) for i in range(n)]
        for cur in cursors[:5]:
            assert cur.next(wait=5) == {"new_val": None}
        c.close()

    cycle(300)
    time.sleep(0.5)
    base = rss_kib(pid)
    for _ in range(8):
        cycle(300)
    time.sleep(0.5)
    # 2,400 leaked feeds (subscriptions, cursors, waiting tasks) would show here.
    assert rss_kib(pid) - base < 8 * 1024
    # Writes still work and a new feed still sees them.
    cur = tbl.get("x").changes().run(conn)
    tbl.insert({"id": "x"}).run(conn)
    assert cur.next(wait=5)["new_val"] == {"id": "x"}
    assert_serving(server)


def apply_offsets(mirror, ch):
    """Applies one top-n change to a client-side copy, as RethinkDB's clients do."""
    if ch.get("old_offset") is not None:
        assert mirror[ch["old_offset"]] == ch["old_val"], (mirror, ch)
        del mirror[ch["old_offset"]]
    if ch.get("new_offset") is not None:
        mirror.insert(ch["new_offset"], ch["new_val"])


def test_order_by_limit_feed_offsets_track_the_top_n(server, conn):
    tbl = fresh_table(conn, "cf_topn")
    tbl.index_create("v").run(conn)
    tbl.index_wait("v").run(conn)
    tbl.insert([{"id": i, "v": i * 10} for i in range(6)]).run(conn)
    c = RawConn(server.port)
    try:
        q = tbl.order_by(index=r.desc("v")).limit(3).changes(include_initial=True)
        resp = c.query(1, term(q))
        assert resp["t"] == SUCCESS_PARTIAL and resp["n"] == [3], resp  # ORDER_BY_LIMIT_FEED
    finally:
        c.close()
    feed = tbl.order_by(index=r.desc("v")).limit(3).changes(
        include_initial=True, include_offsets=True, include_types=True).run(conn)
    mirror = []
    for _ in range(3):
        ch = feed.next(wait=5)
        assert ch["type"] == "initial"
        apply_offsets(mirror, ch)
    top = lambda: list(tbl.order_by(index=r.desc("v")).limit(3).run(conn))  # noqa: E731
    assert mirror == top()
    steps = [
        tbl.insert({"id": 10, "v": 45}),            # enters, evicts v=30
        tbl.get(5).update({"v": 1}),                # leaves, v=30 comes back
        tbl.get(10).update({"v": 46}),              # changes in place
        tbl.get(0).update({"v": 2}),                # outside the set: nothing
        tbl.get(4).delete(),                        # leaves, next one enters
        tbl.insert({"id": 11, "v": 100}),
    ]
    for step in steps:
        before = list(mirror)
        step.run(conn)
        want = top()
        deadline = time.time() + 5
        while mirror != want and time.time() < deadline:
            try:
                ch = feed.next(wait=0.5)
            except ReqlTimeoutError:
                continue
            assert ch["type"] in ("add", "remove", "change"), ch
            apply_offsets(mirror, ch)
        assert mirror == want, (before, mirror, want)
    with pytest.raises(ReqlTimeoutError):
        feed.next(wait=0.3)


def test_min_max_and_secondary_index_feeds(server, conn):
    tbl = fresh_table(conn, "cf_sindex")
    tbl.index_create("a").run(conn)
    tbl.index_wait("a").run(conn)
    tbl.insert([{"id": 1, "a": 8}, {"id": 2, "a": 7}]).run(conn)
    amin = tbl.min(index="a").changes(include_initial=True).limit(2).run(conn)
    idmax = tbl.max(index="id").changes(include_initial=True).limit(2).run(conn)
    between = tbl.between(5, 7, index="a", right_bound="closed").changes()["new_val"].run(conn)
    get_all = tbl.get_all(9, index="a").changes(include_initial=True).run(conn)
    tbl.insert([{"id": 0, "a": 9}, {"id": 3, "a": 6}]).run(conn)
    assert list(amin) == [{"new_val": {"id": 2, "a": 7}},
                          {"old_val": {"id": 2, "a": 7}, "new_val": {"id": 3, "a": 6}}]
    assert list(idmax) == [{"new_val": {"id": 2, "a": 7}},
                           {"old_val": {"id": 2, "a": 7}, "new_val": {"id": 3, "a": 6}}]
    assert between.next(wait=5) == {"id": 3, "a": 6}
    assert get_all.next(wait=5) == {"old_val": None, "new_val": {"id": 0, "a": 9}}
    tbl.get(1).update({"a": 5}).run(conn)
    assert between.next(wait=5) == {"id": 1, "a": 5}


def test_system_table_feeds(server, conn):
    scratch = r.db("rethinkdb").table("_debug_scratch")
    feed = scratch.changes().run(conn)
    point = scratch.get("cf1").changes(include_initial=True).run(conn)
    assert point.next(wait=5) == {"new_val": None}
    scratch.insert({"id": "cf1"}).run(conn)
    scratch.get("cf1").update({"v": 1}).run(conn)
    scratch.get("cf1").delete().run(conn)
    want = [{"old_val": None, "new_val": {"id": "cf1"}},
            {"old_val": {"id": "cf1"}, "new_val": {"id": "cf1", "v": 1}},
            {"old_val": {"id": "cf1", "v": 1}, "new_val": None}]
    assert [feed.next(wait=5) for _ in range(3)] == want
    assert [point.next(wait=5) for _ in range(3)] == want
    fresh_table(conn, "cf_sys")
    status = r.db("rethinkdb").table("table_config").filter({"name": "cf_sys2"}).changes()
    cur = status.run(conn)
    r.db("test").table_create("cf_sys2").run(conn)
    assert cur.next(wait=5)["new_val"]["name"] == "cf_sys2"
    r.db("test").table_drop("cf_sys2").run(conn)


def test_skip_counts_items_and_aggregates_fail_with_the_feed_error(server, conn):
    tbl = fresh_table(conn, "cf_skip")
    cur = tbl.changes().skip(2)["new_val"]["id"].run(conn)
    for i in range(5):
        time.sleep(0.05)   # each insert reaches the feed alone: polls find nothing between
        tbl.insert({"id": i}).run(conn)
    assert [cur.next(wait=5) for _ in range(3)] == [2, 3, 4]
    for q in (tbl.changes().count(), tbl.changes().reduce(lambda a, b: a)):
        with pytest.raises(Exception, match=r"Cannot call a terminal \(`reduce`, `count`, etc.\) "
                                            r"on an infinite stream \(such as a changefeed\)."):
            q.run(conn)
    with pytest.raises(Exception, match="Cannot use an infinite stream"):
        r.range().count().run(conn)
