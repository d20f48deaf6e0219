"""Replicated tables on real `ponder` processes: a server started alone converts its
catalog to the cluster's (Raft group 0) when servers `--join` it; a table created with
three replicas is replicated by each shard's group, so writes through any server are
read through every other, with each `read_mode`; after kill -9 of a server the others
go on writing, and the server catches up when it comes back. A founder that already
has tables keeps its catalog to itself and says why."""
import re
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlAuthError, ReqlError

from test_cluster_join import start, wait_for, names, dirs, procs  # noqa: F401 (fixtures)


def retrying(f, timeout=20.0):
    """Runs `f` until it does not raise a ReQL error (a leader being elected)."""
    deadline = time.time() + timeout
    while True:
        try:
            return f()
        except ReqlError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def ids(conn, **opts):
    return sorted(d["id"] for d in r.db("d").table("t", **opts).run(conn))


def restart(s):
    s.kill9()
    return s.start()


def connect_or_none(server):
    """A connection to `server`, or None while it does not know the user yet."""
    try:
        return server.connect()
    except ReqlAuthError:
        time.sleep(0.2)
        return None


def three_servers(dirs, procs):
    """alpha alone, beta and gamma joining it; once every server sees the others and
    has the founder's catalog (its `test` database): the servers and a connection to
    each."""
    a = start(dirs(), "alpha")
    procs.append(a)
    b = start(dirs(), "beta", joins=[a])
    procs.append(b)
    c = start(dirs(), "gamma", joins=[a])
    procs.append(c)
    # A joiner knows no users until the catalog's leader has sent it the catalog.
    conns = {s: wait_for(lambda: connect_or_none(s), lambda conn: conn is not None,
                         timeout=20) for s in (a, b, c)}
    for conn in conns.values():
        wait_for(lambda: names(conn), lambda n: n == ["alpha", "beta", "gamma"])
        wait_for(lambda: r.db_list().run(conn), lambda dbs: "test" in dbs, timeout=20)
    return (a, b, c), conns


def test_three_servers_replicate_a_table_and_survive_a_kill(dirs, procs):  # noqa: F811
    (a, b, c), conns = three_servers(dirs, procs)
    # A database created through a joiner is seen everywhere — once the others have
    # applied the catalog's entry (as in RethinkDB, metadata spreads asynchronously).
    retrying(lambda: r.db_create("d").run(conns[b]))
    for conn in conns.values():
        wait_for(lambda: r.db_list().run(conn), lambda dbs: "d" in dbs)
    res = r.db("d").table_create("t", shards=2, replicas=3).run(conns[c])
    shards = res["config_changes"][0]["new_val"]["shards"]
    assert [sorted(s["replicas"]) for s in shards] == [["alpha", "beta", "gamma"]] * 2
    for conn in conns.values():
        wait_for(lambda: r.db("d").table_list().run(conn), lambda t: t == ["t"])

    # Writes through every server, to keys of both shards; every server reads them all.
    written = []
    for n, s in enumerate((a, b, c)):
        for key in ("a%d" % n, "z%d" % n):
            res = retrying(lambda: r.db("d").table("t").insert({"id": key, "n": n}).run(conns[s]))
            assert res["inserted"] == 1, res
            written.append(key)
    for conn in conns.values():
        assert ids(conn) == sorted(written)
        assert ids(conn, read_mode="majority") == sorted(written)
        assert r.db("d").table("t").count().run(conn) == len(written)
        # A replica's own copy catches up on its own.
        wait_for(lambda: ids(conn, read_mode="outdated"), lambda got: got == sorted(written))
    # A conflicting insert is refused with RethinkDB's error, wherever it comes from.
    res = r.db("d").table("t").insert({"id": "a0"}).run(conns[c])
    assert res["errors"] == 1 and "Duplicate primary key" in res["first_error"], res
    # An update through one server, read back through another.
    res = r.db("d").table("t").get("z1").update({"n": r.row["n"] + 10}).run(conns[a])
    assert res["replaced"] == 1, res
    assert r.db("d").table("t").get("z1")["n"].run(conns[c]) == 11

    # Kill -9 of the founder (a voter of every group): the others go on.
    a.kill9()
    for conn in (conns[b], conns[c]):
        for key in ("a9", "z9") if conn is conns[b] else ("a8", "z8"):
            res = retrying(lambda: r.db("d").table("t").insert({"id": key}).run(conn))
            assert res["inserted"] == 1, res
            written.append(key)
    retrying(lambda: r.db_create("e").run(conns[c]))
    for conn in (conns[b], conns[c]):
        assert ids(conn) == sorted(written)
    # The lost replica is reported: the table stays writable, so not critical.
    issues = wait_for(
        lambda: [i for i in r.db("rethinkdb").table("current_issues").run(conns[b])
                 if i["type"] == "table_availability"],
        lambda found: len(found) == 1)
    assert issues[0]["critical"] is False, issues
    assert issues[0]["description"].startswith(
        "Table `d.t` is available for all operations, but some replicas are not ready."
        "\nThe servers that are not ready are:\n alpha ("), issues
    assert issues[0]["info"]["table"] == "t" and issues[0]["info"]["db"] == "d", issues
    assert r.db("d").table("t").status().run(conns[b])["status"]["ready_for_writes"]

    # It comes back from its directory as a member, and catches up.
    a.start()
    conn_a = a.connect()
    wait_for(lambda: r.db_list().run(conn_a), lambda dbs: "e" in dbs, timeout=20)
    wait_for(lambda: ids(conn_a, read_mode="outdated"), lambda got: got == sorted(written),
             timeout=20)
    assert retrying(lambda: ids(conn_a)) == sorted(written)
    r.db("d").table("t").wait(wait_for="all_replicas_ready", timeout=30).run(conn_a)
    wait_for(lambda: list(r.db("rethinkdb").table("current_issues").run(conns[c])),
             lambda found: found == [], timeout=20)

    # Dropping the table drops it everywhere.
    retrying(lambda: r.db("d").table_drop("t").run(conns[b]))
    for conn in (conn_a, conns[c]):
        wait_for(lambda: r.db("d").table_list().run(conn), lambda t: t == [])


def test_a_founder_with_tables_keeps_its_catalog(dirs, procs):  # noqa: F811
    a = start(dirs(), "alpha")
    procs.append(a)
    conn = a.connect()
    r.db("test").table_create("mine").run(conn)
    r.db("test").table("mine").insert({"id": 1}).run(conn)
    b = start(dirs(), "beta", joins=[a])
    procs.append(b)
    wait_for(lambda: names(conn), lambda n: n == ["alpha", "beta"])
    # Still its own: the table answers as before.
    time.sleep(2)
    assert r.db("test").table("mine").count().run(conn) == 1
    logs = [row["message"] for row in r.db("rethinkdb").table("logs").run(conn)]
    assert any("do not share its catalog yet" in m and "has tables" in m for m in logs), logs


def test_impossible_or_unsupported_changes_get_clear_errors(dirs, procs):  # noqa: F811
    (a, b, c), conns = three_servers(dirs, procs)
    conn = conns[b]
    db = r.db("test")
    for create, message in (
            (db.table_create("x", replicas=5),
             "Can't put 5 replicas on servers with the tag `default` because there are "
             "only 3 servers with the tag `default`."),
            (db.table_create("x", replicas={"ssd": 1}, primary_replica_tag="ssd"),
             "Can't put 1 replicas on servers with the tag `ssd` because there are only 0 "
             "servers with the tag `ssd`."),
            (db.table_create("x", replicas=0), "You must set `replicas` to at least one.")):
        with pytest.raises(ReqlError, match=re.escape(message.rstrip("."))):
            create.run(conn)
    retrying(lambda: db.table_create("t", shards=2, replicas=2).run(conn))
    db.table("t").wait(timeout=30).run(conn)
    for change, message in (
            (db.table("t").reconfigure(shards=1, replicas=3),
             "Resharding table `test.t` is not supported yet: its shards are replicated."),
            (db.table("t").index_create("v"),
             "Creating a secondary index of a replicated table is not supported yet.")):
        with pytest.raises(ReqlError, match=re.escape(message.rstrip("."))):
            change.run(conn)
    # table_config names any connected server; moving replicas is refused, naming one
    # that does not exist is RethinkDB's error, and a rename keeps the replicas.
    cfg = db.table("t").config()
    res = cfg.update({"shards": [{"primary_replica": "gamma", "replicas": ["gamma"]}]}).run(conn)
    assert res["first_error"] == (
        "Resharding table `test.t` is not supported yet: its shards are replicated."), res
    res = cfg.update({"shards": [{"primary_replica": "nobody", "replicas": ["nobody"]}]}).run(conn)
    assert res["first_error"] == (
        "In `shards`: Server `nobody` does not exist or is not connected."), res
    before = cfg["shards"].run(conn)
    assert cfg.update({"name": "t2"}).run(conn)["replaced"] == 1
    assert db.table("t2").config()["shards"].run(conn) == before
    assert db.table("t2").insert({"id": 1}).run(conn)["inserted"] == 1
    for s in (a, c):
        other = conns[s]
        wait_for(lambda: db.table("t2", read_mode="outdated").get(1).run(other),
                 lambda doc: doc == {"id": 1})
