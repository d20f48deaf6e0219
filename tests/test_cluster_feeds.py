"""Changefeeds on a replicated table through every server: three real `ponder`
processes, a one-shard table placed on two of them. A feed opened on the third server
(which holds no replica) sees the inserts, updates and deletes made through each
server, in order, with `include_initial` (whole table and one document) and with
`squash`; closing the feeds stops that server's poller (`feed_pollers` in
`rethinkdb.stats`). After kill -9 of one of the two replicas the shard has no primary:
the feeds on the remote server and on the surviving replica end with RethinkDB's
`Changefeed aborted (unavailable).` instead of hanging. Many point feeds with
`include_initial` opened one after another on one connection of that server, while
the documents change, each see their document's changes exactly once after its
initial value."""
import threading
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlOpFailedError

from test_cluster_join import wait_for, dirs, procs  # noqa: F401 (fixtures)
from test_cluster_replicated import retrying, three_servers

WAIT = 30  # seconds a change may take to arrive (generous: no speed is asserted)


def placed_on_two(servers, conns):
    """Creates `test.f` with one shard on two of the three servers: the servers holding
    a replica, and the one holding none."""
    a = servers[0]
    res = retrying(lambda: r.db("test").table_create("f", replicas=2).run(conns[a]))
    shard = res["config_changes"][0]["new_val"]["shards"][0]
    names = {s: conns[s].server()["name"] for s in servers}
    holders = [s for s in servers if names[s] in shard["replicas"]]
    (outsider,) = [s for s in servers if s not in holders]
    for conn in conns.values():
        wait_for(lambda: r.db("test").table_list().run(conn), lambda t: "f" in t, timeout=20)
    r.db("test").table("f").wait(timeout=30).run(conns[a])
    return holders, outsider


def pollers(conn):
    rows = r.db("rethinkdb").table("stats").filter(
        lambda s: s["id"].nth(0) == "table_server").run(conn)
    me = conn.server()["id"]
    return sum(s["query_engine"].get("feed_pollers", 0) for s in rows if s["id"][2] == me)


def take(feed, n):
    return [feed.next(wait=WAIT) for _ in range(n)]


def ends_unavailable(feed):
    """Reads `feed` until it ends; it must end with the unavailable error."""
    with pytest.raises(ReqlOpFailedError, match=r"^Changefeed aborted \(unavailable\) in:"):
        for _ in range(1000):
            feed.next(wait=60)


def test_feeds_through_a_server_without_a_replica(dirs, procs):  # noqa: F811
    servers, conns = three_servers(dirs, procs)
    holders, outsider = placed_on_two(servers, conns)
    t = r.db("test").table("f")
    out = conns[outsider]
    assert t.insert([{"id": 1, "v": 0}, {"id": 2, "v": 0}]).run(conns[holders[0]])["inserted"] == 2

    whole = t.changes(include_initial=True).run(out)
    point = t.get(2).changes(include_initial=True).run(out)
    squashed = t.changes(squash=True).run(out)
    assert pollers(out) == 1
    initial = sorted((d["new_val"]["id"], d["new_val"]["v"]) for d in take(whole, 2))
    assert initial == [(1, 0), (2, 0)]
    assert point.next(wait=WAIT) == {"new_val": {"id": 2, "v": 0}}

    # Writes through each server in turn (the outsider's are routed to the primary).
    order = [holders[0], outsider, holders[1]]
    expected = []
    for n, s in enumerate(order):
        retrying(lambda: t.insert({"id": 10 + n, "v": n}).run(conns[s]))
        expected.append((None, {"id": 10 + n, "v": n}))
        retrying(lambda: t.get(2).update({"v": n + 1}).run(conns[s]))
        expected.append(({"id": 2, "v": n}, {"id": 2, "v": n + 1}))
    retrying(lambda: t.get(1).delete().run(conns[outsider]))
    expected.append(({"id": 1, "v": 0}, None))
    got = [(c.get("old_val"), c.get("new_val")) for c in take(whole, len(expected))]
    assert got == expected
    point_got = [(c["old_val"], c["new_val"]) for c in take(point, 3)]
    assert point_got == [e for e in expected if (e[0] or e[1])["id"] == 2]
    # Squashed: the changes of one document chain, ending at its last value.
    last, seen = {1: {"id": 1, "v": 0}, 2: {"id": 2, "v": 0}}, 0
    while last.get(2) != {"id": 2, "v": 3} or last.get(1, "x") is not None:
        c = squashed.next(wait=WAIT)
        key = (c["new_val"] or c["old_val"])["id"]
        assert c["old_val"] == last.get(key), c
        last[key] = c["new_val"]
        seen += 1
    assert seen <= len(expected)

    # A feed opened later, with the poller running, cuts its initial values cleanly.
    late = t.changes(include_initial=True).run(out)
    now = sorted(d["new_val"]["id"] for d in take(late, 4))
    assert now == [2, 10, 11, 12]
    retrying(lambda: t.insert({"id": 20}).run(conns[holders[1]]))
    assert late.next(wait=WAIT) == {"old_val": None, "new_val": {"id": 20}}
    assert whole.next(wait=WAIT) == {"old_val": None, "new_val": {"id": 20}}

    # Closing every feed stops the poller.
    for f in (whole, point, squashed, late):
        f.close()
    wait_for(lambda: pollers(out), lambda n: n == 0, timeout=WAIT)

    # Kill -9 of one replica: the shard's group (two voters) has no primary. The feeds
    # on the outsider and on the surviving replica end instead of hanging.
    remote = t.changes().run(out)
    survivor, victim = holders[1], holders[0]
    local = t.changes().run(conns[survivor])
    retrying(lambda: t.insert({"id": 30}).run(conns[survivor]))
    assert remote.next(wait=WAIT)["new_val"] == {"id": 30}
    assert local.next(wait=WAIT)["new_val"] == {"id": 30}
    victim.kill9()
    ends_unavailable(remote)
    ends_unavailable(local)
    wait_for(lambda: pollers(out), lambda n: n == 0, timeout=WAIT)


def test_many_initial_point_feeds_on_one_connection_under_writes(dirs, procs):  # noqa: F811
    """Each `get(k).changes(include_initial=True)` through the server holding no replica
    cuts its initial value against the changes its server's poller publishes. Before, it
    waited for the poller's long poll (up to 500 ms with no change) to come back: 300
    feeds took minutes and looked like a hung connection. Now the feeds' initial values
    and changes must chain without overlap or gap while a writer updates the documents."""
    servers, conns = three_servers(dirs, procs)
    holders, outsider = placed_on_two(servers, conns)
    t = r.db("test").table("f")
    keys = list(range(10))
    retrying(lambda: t.insert([{"id": k, "v": 0} for k in keys]).run(conns[holders[0]]))
    out = outsider.connect()

    stop = threading.Event()
    writes = {"n": 0}

    def writer():
        conn = holders[0].connect()
        try:
            for n in range(2000):  # bounded; stopped once every feed is open
                if stop.is_set():
                    return
                t.get(keys[n % len(keys)]).update({"v": r.row["v"] + 1}).run(conn)
                writes["n"] += 1
        finally:
            conn.close()

    feeds = []

    def open_feeds(n):
        for i in range(n):
            k = keys[i % len(keys)]
            feed = t.get(k).changes(include_initial=True).run(out)
            feeds.append((k, feed, feed.next(wait=WAIT)["new_val"]))

    # With no change to answer, the poller's long poll lasts its whole wait: a feed
    # that waited for it again (0.5 s each, 60 s for these) fails here. Not a speed
    # check: the bound is many times what the feeds take.
    began = time.monotonic()
    open_feeds(120)
    opened = time.monotonic() - began
    assert opened < 40, opened
    # Then under writes: initial values cut between changes.
    w = threading.Thread(target=writer, daemon=True)
    w.start()
    open_feeds(150)
    stop.set()
    w.join(60)
    assert not w.is_alive()
    assert writes["n"] > 0
    final = {d["id"]: d["v"] for d in t.run(conns[holders[0]], read_mode="majority")}
    for k, feed, first in feeds:
        v = first["v"]
        while v < final[k]:
            c = feed.next(wait=WAIT)
            assert c["old_val"] == {"id": k, "v": v}, (k, v, c)
            assert c["new_val"] == {"id": k, "v": v + 1}, (k, v, c)
            v += 1
        feed.close()
    out.close()
