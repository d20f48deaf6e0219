"""Sharded tables on one server: table_create(shards=N), reconfigure and rebalance cut a
table into primary-key ranges, each its own store shard; reads merge them in key order,
writes go to the owning shard, feeds cover all of them, and a reshard under concurrent
writes (and a kill -9 during one) neither loses nor duplicates an acknowledged write.

Against a cluster (PONDER_TEST_CLUSTER) a reshard copies the table into new shards
(docs/clustering.md, "Resharding"): as in RethinkDB, writes are refused with an
availability error during the switch (the writers try again) and changefeeds end with
"Changefeed aborted (unavailable)." (the test resubscribes)."""
import tempfile
import threading
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlOpFailedError, ReqlOpIndeterminateError, ReqlQueryLogicError

from conftest import CLUSTER_SIZE, Server


def fresh(conn, name, **kw):
    if name in r.table_list().run(conn):
        r.table_drop(name).run(conn)
    r.table_create(name, **kw).run(conn)
    return r.table(name)


def test_a_sharded_table_reads_and_writes_as_one(conn):
    t = fresh(conn, "sh_basic", shards=4)
    cfg = t.config().run(conn)
    assert len(cfg["shards"]) == 4
    assert len(t.status().run(conn)["shards"]) == 4
    res = t.insert([{"v": i % 10} for i in range(3000)]).run(conn)
    assert res["inserted"] == 3000
    t.insert([{"id": i, "v": i % 10} for i in range(1000)]).run(conn)
    assert t.count().run(conn) == 4000
    ids = t["id"].coerce_to("array").run(conn)
    # Primary-key order across shards: numbers first, then the generated strings.
    expected = sorted(range(1000)) + sorted(k for k in ids if isinstance(k, str))
    assert ids == expected
    assert t.between(10, 20)["id"].coerce_to("array").run(conn) == list(range(10, 20))
    assert list(t.order_by(index=r.desc("id")).limit(3)["id"].run(conn))[-1] == expected[-3]
    t.index_create("v").run(conn)
    t.index_wait("v").run(conn)
    assert t.get_all(3, index="v").count().run(conn) == 400
    assert t.between(2, 4, index="v").count().run(conn) == 800
    assert t.filter({"v": 7}).count().run(conn) == 400
    assert t.map(r.row["v"]).sum().run(conn) == sum(i % 10 for i in range(3000)) + sum(
        i % 10 for i in range(1000))
    some = [k for k in expected if isinstance(k, str)][::500]
    assert [d["id"] for d in t.get_all(*some).run(conn)] == some
    for k in some:
        assert t.get(k).update({"u": 1}).run(conn)["replaced"] == 1
    assert t.filter({"u": 1}).count().run(conn) == len(some)
    assert t.filter({"u": 1}).delete().run(conn)["deleted"] == len(some)
    assert t.count().run(conn) == 4000 - len(some)


def test_feeds_cover_every_shard(server, conn):
    t = fresh(conn, "sh_feed", shards=3)
    feed = t.changes().run(conn)
    point = t.get("ff-last").changes(include_initial=True).run(conn)
    assert next(point) == {"new_val": None}
    other = server.connect()
    keys = ["00-first", "55-mid", "aa-late", "ff-last"]
    for k in keys:
        t.insert({"id": k}).run(other)
    got = [next(feed)["new_val"]["id"] for _ in keys]
    assert sorted(got) == keys
    assert next(point)["new_val"] == {"id": "ff-last"}
    # Feeds survive a reshard on one server; a cluster's end, as RethinkDB's do.
    t.reconfigure(shards=5, replicas=1).run(conn)
    if CLUSTER_SIZE > 1:
        for f in (feed, point):
            with pytest.raises(ReqlOpFailedError, match="Changefeed aborted"):
                next(f)
        feed = t.changes().run(conn)
        point = t.get("ff-last").changes().run(conn)
    t.insert({"id": "77-after"}).run(other)
    assert next(feed)["new_val"]["id"] == "77-after"
    t.get("ff-last").update({"x": 1}).run(other)
    assert next(point)["new_val"] == {"id": "ff-last", "x": 1}
    other.close()


def test_reconfigure_and_rebalance_keep_every_document(conn):
    t = fresh(conn, "sh_reconf")
    t.insert([{"id": "user%06d" % i, "n": i} for i in range(20000)]).run(conn)
    t.index_create("n").run(conn)
    t.index_wait().run(conn)
    before = t.order_by("id")["id"].coerce_to("array").run(conn, array_limit=200000)
    for shards in (4, 2, 7, 1, 3):
        res = t.reconfigure(shards=shards, replicas=1).run(conn)
        assert res["reconfigured"] == 1
        assert len(t.config()["shards"].run(conn)) == shards
        assert t.count().run(conn) == 20000
        assert t["id"].coerce_to("array").run(conn, array_limit=200000) == before
        assert t.between(100, 200, index="n").count().run(conn) == 100
    res = t.rebalance().run(conn)
    assert res["rebalanced"] == 1 and len(res["status_changes"]) == 1
    assert t["id"].coerce_to("array").run(conn, array_limit=200000) == before
    assert t.map(r.row["n"]).sum().run(conn) == sum(range(20000))


def test_bad_shard_counts_are_refused(conn):
    t = fresh(conn, "sh_bad")
    with pytest.raises(ReqlQueryLogicError, match="Maximum number of shards is 64."):
        t.reconfigure(shards=65, replicas=1).run(conn)
    with pytest.raises(ReqlQueryLogicError, match="Every table must have at least one shard."):
        t.reconfigure(shards=0, replicas=1).run(conn)
    msg = r"Every table must have at least one shard and at most 64 \(got {}\)"
    with pytest.raises(ReqlQueryLogicError, match=msg.format(65)):
        r.table_create("sh_bad2", shards=65).run(conn)
    with pytest.raises(ReqlQueryLogicError, match=msg.format(0)):
        r.table_create("sh_bad2", shards=0).run(conn)
    assert "sh_bad2" not in r.table_list().run(conn)


def writer(port, table, start, stop, acked, errors, unknown=None):
    """Inserts ids from `start` on until `stop`. Against a cluster, a write refused as
    unavailable (a reshard's switch) is tried again, and one whose outcome is unknown
    goes to `unknown`."""
    c = r.connect("127.0.0.1", port)
    i = start
    try:
        while not stop.is_set() and i < start + 100000:
            try:
                res = r.table(table).insert({"id": i}).run(c)
                if res["inserted"] == 1:
                    acked.append(i)
                else:
                    errors.append(res)
            except ReqlOpFailedError as e:
                if CLUSTER_SIZE > 1 and "not available" in str(e):
                    time.sleep(0.02)
                    continue
                errors.append(repr(e))
                return
            except ReqlOpIndeterminateError as e:
                if CLUSTER_SIZE > 1 and unknown is not None:
                    unknown.append(i)
                else:
                    errors.append(repr(e))
                    return
            except Exception as e:  # noqa: BLE001 - recorded, judged by the test
                errors.append(repr(e))
                return
            i += 1
    finally:
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass


def test_resharding_under_writes_loses_and_duplicates_nothing(server, conn):
    t = fresh(conn, "sh_live")
    t.insert([{"id": -i} for i in range(1, 5001)]).run(conn)
    stop, acked, errors, unknown = threading.Event(), [], [], []
    ws = [threading.Thread(target=writer, args=(server.port, "sh_live", k * 1000000, stop,
                                                 acked, errors, unknown)) for k in range(3)]
    for w in ws:
        w.start()
    for shards in (3, 5, 2, 4):
        time.sleep(0.2)
        t.reconfigure(shards=shards, replicas=1).run(conn)
        t.rebalance().run(conn)
    stop.set()
    for w in ws:
        w.join(30)
    assert not errors, errors[:3]
    assert len(acked) > 100
    ids = t["id"].coerce_to("array").run(conn, array_limit=1000000)
    assert len(ids) == len(set(ids))
    assert set(ids) - set(acked) - set(unknown) == {-i for i in range(1, 5001)}
    assert set(acked) <= set(ids)


def test_kill_during_resharding_keeps_acknowledged_writes():
    with tempfile.TemporaryDirectory() as d:
        s = Server(d).start()
        c = s.connect()
        r.table_create("sh_crash").run(c)
        r.table("sh_crash").insert([{"id": "k%05d" % i} for i in range(20000)]).run(c)
        stop, acked, errors = threading.Event(), [], []
        w = threading.Thread(target=writer, args=(s.port, "sh_crash", 0, stop, acked, errors))
        w.start()
        shards = [4, 2, 6]

        def reshard():
            try:
                for n in shards:
                    r.table("sh_crash").reconfigure(shards=n, replicas=1).run(c)
            except Exception:  # noqa: BLE001 - the server is killed under it
                pass

        rs = threading.Thread(target=reshard)
        rs.start()
        time.sleep(0.3)
        s.kill9()
        stop.set()
        w.join(30)
        rs.join(30)
        s2 = Server(d)
        s2.port = s.port
        s2.start()
        c2 = s2.connect()
        ids = r.table("sh_crash")["id"].coerce_to("array").run(c2, array_limit=1000000)
        assert len(ids) == len(set(ids))
        assert set(acked) <= set(ids)
        assert len([k for k in ids if isinstance(k, str)]) == 20000
        n = len(r.table("sh_crash").config()["shards"].run(c2))
        assert n in (1, 4, 2, 6)
        assert r.table("sh_crash").count().run(c2) == len(ids)
        c2.close()
        s2.stop()


def test_resharding_around_an_index_build_keeps_the_index_exact(conn):
    t = fresh(conn, "sh_build")
    t.insert([{"id": i, "g": i % 7} for i in range(30000)], durability="soft").run(conn)
    t.index_create("g").run(conn)
    refused = 0
    for shards in (3, 2):
        try:
            t.reconfigure(shards=shards, replicas=1).run(conn)
        except ReqlOpFailedError as e:
            assert "while its index `g` is being built" in str(e)
            refused += 1
    t.index_wait("g").run(conn)
    t.reconfigure(shards=4, replicas=1).run(conn)
    t.insert([{"id": -i, "g": 3} for i in range(1, 101)]).run(conn)
    t.filter(lambda d: d["id"] % 11 == 0).update({"g": 6}).run(conn)
    for g in range(7):
        assert t.get_all(g, index="g").count().run(conn) == t.filter({"g": g}).count().run(conn)


def test_a_feed_reading_its_own_table_does_not_block_resharding(server, conn):
    """The feed's filter reads the table while a write publishes to it (under the
    layout's read lock) and reshards queue for the write lock: all must go on."""
    t = fresh(conn, "sh_feedread")
    t.insert({"id": "cfg", "on": True}).run(conn)
    feed = t.filter(lambda d: t.get("cfg")["on"]).changes().run(conn)
    stop, acked, errors, unknown = threading.Event(), [], [], []
    w = threading.Thread(target=writer, args=(server.port, "sh_feedread", 0, stop, acked,
                                              errors, unknown))
    w.start()
    other = server.connect()
    for shards in (3, 2, 4, 1):
        t.reconfigure(shards=shards, replicas=1).run(other)
    stop.set()
    w.join(30)
    assert not w.is_alive() and not errors, errors[:3]
    if CLUSTER_SIZE > 1:
        with pytest.raises(ReqlOpFailedError, match="Changefeed aborted"):
            for _ in range(100000):
                next(feed)
    else:
        assert next(feed)["new_val"] is not None
    assert 1 + len(acked) <= t.count().run(other) <= 1 + len(acked) + len(unknown)
    other.close()
