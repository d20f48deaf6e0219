"""Resharding a replicated table on real `ponder` processes (docs/clustering.md,
"Resharding"): three servers, a table of three replicas and one shard with 2000
documents and a secondary index, resharded to 2, 4 and 1 shards (`reconfigure`), then
rebalanced and resharded through `table_config`, while a bounded writer inserts and
updates through another server. Writes refused during a switch are RethinkDB's
availability errors; afterwards every acknowledged write is read through every server
with `read_mode="majority"`, the index answers as the documents say, the count is
right, and `table_status`/`wait` show the table ready with the new shards."""
import os
import signal
import threading
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlError, ReqlOpFailedError, ReqlOpIndeterminateError

from test_cluster_join import start, wait_for, names, dirs, procs  # noqa: F401 (fixtures)
from test_cluster_replicated import three_servers, retrying

pytestmark = pytest.mark.single_server('starts its own clusters')

DOCS = 2000


class Writer(threading.Thread):
    """Inserts new documents and updates old ones through one connection, at most
    `limit` operations or `seconds`; records what was acknowledged (the value each key
    must have) and what failed with an availability error."""

    def __init__(self, conn, limit=4000, seconds=120):
        super().__init__(daemon=True)
        self.conn, self.limit, self.seconds = conn, limit, seconds
        self.acked = {}  # id -> v
        self.unknown = set()  # ids whose last write's outcome is unknown
        self.refused = 0
        self.errors = []
        self.stop = threading.Event()

    def run(self):
        until = time.time() + self.seconds
        t = r.db("d").table("t")
        for n in range(self.limit):
            if self.stop.is_set() or time.time() > until:
                break
            if n % 2 == 0:
                key, op = "w%05d" % n, None
            else:
                key, op = "d%05d" % (n % DOCS), n
            try:
                if op is None:
                    res = t.insert({"id": key, "v": n, "g": n % 7}).run(self.conn)
                    ok = res["inserted"] == 1
                else:
                    res = t.get(key).update({"v": op, "g": op % 7}).run(self.conn)
                    ok = res["replaced"] == 1
                if ok:
                    self.acked[key] = n
                    self.unknown.discard(key)
                else:
                    self.errors.append(res)
            except ReqlOpIndeterminateError:
                self.unknown.add(key)
            except ReqlOpFailedError as e:
                # RethinkDB's availability errors while a switch is under way (an
                # update's read of a shard being dropped, a frozen shard's write).
                if "Cannot perform" in str(e):
                    self.refused += 1
                else:
                    self.errors.append(str(e))
                time.sleep(0.02)
            except ReqlError as e:
                self.errors.append(str(e))
                time.sleep(0.02)


def check(conns, writer, base):
    """Every acknowledged write is there through every server (`majority`), the count
    is right and index `g` answers as the documents say."""
    want = dict(base)
    want.update(writer.acked)
    for conn in conns.values():
        t = r.db("d").table("t", read_mode="majority")
        got = {d["id"]: d["v"] for d in t.run(conn)}
        for k, v in want.items():
            if k in writer.unknown:
                continue
            assert got.get(k) == v, (k, got.get(k), v)
        extra = set(got) - set(want) - writer.unknown
        assert not extra, sorted(extra)[:5]
        assert t.count().run(conn) == len(got)
        for g in (0, 3):
            by_index = sorted(d["id"] for d in t.get_all(g, index="g").run(conn))
            assert by_index == sorted(d["id"] for d in t.filter({"g": g}).run(conn))
            assert by_index, g
        assert sorted(d["id"] for d in t.between(1, 2, index="g").run(conn)) == \
            sorted(d["id"] for d in t.filter({"g": 1}).run(conn))


def shard_count(conn):
    return len(r.db("d").table("t").config()["shards"].run(conn))


def test_reshard_replicated_table_under_writes(dirs, procs):  # noqa: F811
    (a, b, c), conns = three_servers(dirs, procs)
    retrying(lambda: r.db_create("d").run(conns[a]))
    for conn in conns.values():
        wait_for(lambda: r.db_list().run(conn), lambda dbs: "d" in dbs)
    r.db("d").table_create("t", shards=1, replicas=3).run(conns[a])
    t = r.db("d").table("t")
    retrying(lambda: t.wait(wait_for="all_replicas_ready", timeout=30).run(conns[a]))
    base = {}
    for i in range(0, DOCS, 500):
        docs = [{"id": "d%05d" % j, "v": -j, "g": j % 7} for j in range(i, i + 500)]
        res = retrying(lambda: t.insert(docs, conflict="replace").run(conns[a]))
        assert res["errors"] == 0, res
        base.update({d["id"]: d["v"] for d in docs})
    retrying(lambda: t.index_create("g").run(conns[a]))
    retrying(lambda: t.index_wait("g").run(conns[a]))

    writer = Writer(b.connect())  # its own connection: the driver is not thread-safe
    writer.start()
    timings = []
    try:
        for shards in (2, 4, 1):
            time.sleep(0.5)
            started = time.time()
            res = t.reconfigure(shards=shards, replicas=3).run(conns[a])
            timings.append(("reconfigure", shards, round(time.time() - started, 2)))
            assert res["reconfigured"] == 1, res
            assert len(res["config_changes"][0]["new_val"]["shards"]) == shards
            t.wait(wait_for="all_replicas_ready", timeout=60).run(conns[c])
            for conn in conns.values():
                wait_for(lambda: shard_count(conn), lambda n: n == shards)
        # rebalance with the same count (new split points), and a table_config write
        # with another number of shards.
        t.reconfigure(shards=3, replicas=3).run(conns[a])
        res = t.rebalance().run(conns[c])
        assert res["rebalanced"] == 1, res
        cfg = t.config().run(conns[a])
        two = [cfg["shards"][0], cfg["shards"][1]]
        res = t.config().update({"shards": two}).run(conns[b])
        assert res["errors"] == 0, res
        t.wait(wait_for="all_replicas_ready", timeout=60).run(conns[a])
        assert shard_count(conns[a]) == 2
    finally:
        # On a loaded machine the reshardings can leave the writer few acknowledged
        # writes: it goes on (bounded) until it has a hundred to check.
        deadline = time.time() + 30
        while len(writer.acked) <= 100 and writer.is_alive() and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        writer.stop.set()
        writer.join(timeout=60)
    print("timings", timings, "acked", len(writer.acked), "refused", writer.refused,
          "unknown", len(writer.unknown))
    assert not writer.errors, writer.errors[:5]
    assert len(writer.acked) > 100
    for conn in conns.values():
        t.wait(wait_for="all_replicas_ready", timeout=60).run(conn)
    check(conns, writer, base)
    status = t.status().run(conns[b])
    assert status["status"]["all_replicas_ready"] and len(status["shards"]) == 2
    # Writable through every server afterwards.
    for n, s in enumerate((a, b, c)):
        res = retrying(lambda: t.insert({"id": "after%d" % n, "v": n, "g": 0}).run(conns[s]))
        assert res["inserted"] == 1, res
    for conn in conns.values():
        majority = r.db("d").table("t", read_mode="majority")
        assert majority.get("after2").run(conn)["v"] == 2


def test_a_resharding_whose_server_dies_is_finished_by_the_others(dirs, procs):  # noqa: F811
    """The server running a resharding is killed once the new shards are recorded: the
    table stays readable, and the catalog's leader finishes the resharding on its own
    (after 20 s); no acknowledged document is lost."""
    (a, b, c), conns = three_servers(dirs, procs)
    retrying(lambda: r.db_create("d").run(conns[a]))
    for conn in conns.values():
        wait_for(lambda: r.db_list().run(conn), lambda dbs: "d" in dbs)
    r.db("d").table_create("t", shards=1, replicas=3).run(conns[a])
    t = r.db("d").table("t")
    retrying(lambda: t.wait(wait_for="all_replicas_ready", timeout=30).run(conns[a]))
    n = 6000
    for i in range(0, n, 1000):
        docs = [{"id": "d%05d" % j, "v": j, "g": j % 7} for j in range(i, i + 1000)]
        res = retrying(lambda: t.insert(docs).run(conns[a]))
        assert res["inserted"] == 1000, res

    def reshard():
        try:
            t.reconfigure(shards=2, replicas=3).run(c.connect())
        except ReqlError:
            pass  # its server is killed under it

    worker = threading.Thread(target=reshard, daemon=True)
    worker.start()
    # Once the new shards are recorded (the table refuses writes), its server dies.
    wait_for(lambda: t.status()["status"]["ready_for_writes"].run(conns[a]),
             lambda ready: not ready, timeout=30)
    c.kill9()
    started = time.time()
    # Readable meanwhile (from the old shards), and finished by the others.
    assert retrying(lambda: t.count().run(conns[b])) == n

    def shards():
        try:
            return len(t.config()["shards"].run(conns[a]))
        except ReqlError:
            return None
    wait_for(shards, lambda k: k == 2, timeout=90)
    print("finished %.1f s after the kill" % (time.time() - started))
    for k, s in enumerate((a, b)):
        retrying(lambda: t.wait(wait_for="ready_for_writes", timeout=30).run(conns[s]))
        majority = r.db("d").table("t", read_mode="majority")
        assert majority.count().run(conns[s]) == n
        got = {d["id"]: d["v"] for d in majority.run(conns[s])}
        assert got == {"d%05d" % j: j for j in range(n)}
    for k, s in enumerate((a, b)):
        res = retrying(lambda: t.insert({"id": "after%d" % k, "v": 0}).run(conns[s]))
        assert res["inserted"] == 1, res
    worker.join(timeout=5)


def test_a_resharding_whose_new_shards_lost_their_server_is_abandoned(dirs, procs):  # noqa: F811
    """A resharding whose new shards are all on a server that stopped answering
    (SIGSTOP) cannot finish: the table refuses writes. Once the others see that server
    gone, a `reconfigure` back to one shard on them abandons it (docs/clustering.md,
    "Abandoning a resharding"): writes are taken again, every document is there, and
    the paused server, resumed, follows."""
    (a, b, c), conns = three_servers(dirs, procs)
    sys = r.db("rethinkdb")
    retrying(lambda: r.db_create("d").run(conns[a]))
    # A long heartbeat: gamma stays "connected" while paused, long enough to be given
    # the new shards.
    sys.table("cluster_config").get("heartbeat").update(
        {"heartbeat_timeout_secs": 60}).run(conns[a])
    sys.table("server_config").filter({"name": "gamma"}).update(
        {"tags": ["lost"]}).run(conns[a])
    for conn in conns.values():
        wait_for(lambda: r.db_list().run(conn), lambda dbs: "d" in dbs)
        wait_for(lambda: sys.table("cluster_config").get("heartbeat").run(conn),
                 lambda row: row["heartbeat_timeout_secs"] == 60)
        wait_for(lambda: sys.table("server_config").filter({"name": "gamma"})
                 .nth(0)["tags"].run(conn), lambda tags: tags == ["lost"])
    r.db("d").table_create("t", shards=1, replicas={"default": 2, "lost": 1},
                           primary_replica_tag="default").run(conns[a])
    t = r.db("d").table("t")
    retrying(lambda: t.wait(wait_for="all_replicas_ready", timeout=30).run(conns[a]))
    n = 1000
    docs = [{"id": "d%05d" % j, "v": j} for j in range(n)]
    assert retrying(lambda: t.insert(docs).run(conns[a]))["inserted"] == n

    os.kill(c.proc.pid, signal.SIGSTOP)
    try:
        def under_way():
            return not t.status()["status"]["ready_for_writes"].run(conns[a])

        deadline = time.time() + 45
        while not under_way():
            assert time.time() < deadline, "the resharding never began"
            try:
                t.reconfigure(shards=2, replicas={"lost": 1},
                              primary_replica_tag="lost").run(conns[a])
                pytest.fail("a resharding onto a paused server finished")
            except ReqlError:
                time.sleep(0.2)  # the copy cannot reach the new shards (or no leader yet)
        with pytest.raises(ReqlOpFailedError, match="Cannot perform"):
            t.insert({"id": "frozen"}).run(conns[b])
        # The others notice gamma is gone (a short heartbeat), then a reconfigure
        # through them abandons the resharding and moves the table onto them.
        sys.table("cluster_config").get("heartbeat").update(
            {"heartbeat_timeout_secs": 2}).run(conns[a])
        for s in (a, b):
            wait_for(lambda: names(conns[s]), lambda got: got == ["alpha", "beta"],
                     timeout=20)
        res = t.reconfigure(shards=1, replicas=2).run(conns[b])
        assert res["reconfigured"] == 1, res
        for k, s in enumerate((a, b)):
            retrying(lambda: t.wait(wait_for="ready_for_writes", timeout=30).run(conns[s]))
            res = retrying(lambda: t.insert({"id": "after%d" % k, "v": -1}).run(conns[s]))
            assert res["inserted"] == 1, res
        want = {d["id"]: d["v"] for d in docs}
        want.update({"after0": -1, "after1": -1})
        for s in (a, b):
            majority = r.db("d").table("t", read_mode="majority")
            assert {d["id"]: d["v"] for d in majority.run(conns[s])} == want
            assert len(t.config()["shards"].run(conns[s])) == 1
    finally:
        os.kill(c.proc.pid, signal.SIGCONT)
    # gamma, resumed, applies the abandon and reads the table as the others do.
    cc = c.connect()
    wait_for(lambda: retrying(lambda: t.count().run(cc)), lambda k: k == n + 2, timeout=30)
