"""The `rethinkdb` system database, users, permissions and TLS, through the official
Python driver."""
import tempfile

import pytest
from rethinkdb import r

from conftest import self_signed_cert
from rethinkdb.errors import ReqlOpFailedError, ReqlPermissionError, ReqlAuthError


def fresh(conn, *names):
    for n in names:
        if n in r.db_list().run(conn):
            r.db_drop(n).run(conn)


def test_system_tables_are_listed_and_shaped(conn):
    assert set(r.db("rethinkdb").table_list().run(conn)) >= {
        "table_config", "table_status", "db_config", "server_config", "server_status",
        "cluster_config", "current_issues", "jobs", "stats", "logs", "users", "permissions"}
    fresh(conn, "shape")
    r.db_create("shape").run(conn)
    r.db("shape").table_create("t").run(conn)
    cfg = r.db("rethinkdb").table("table_config").filter({"db": "shape", "name": "t"}).nth(0).run(conn)
    assert set(cfg) == {"db", "durability", "id", "indexes", "name", "primary_key", "shards",
                        "write_acks", "write_hook"}
    assert cfg == r.db("shape").table("t").config().run(conn)
    assert set(cfg["shards"][0]) == {"primary_replica", "replicas", "nonvoting_replicas"}
    st = r.db("shape").table("t").status().run(conn)
    assert st["status"]["ready_for_writes"] is True and st["name"] == "t"
    assert st == r.db("rethinkdb").table("table_status").get(cfg["id"]).run(conn)
    dbc = r.db("rethinkdb").table("db_config").filter({"name": "shape"}).nth(0).run(conn)
    assert dbc == r.db("shape").config().run(conn)
    srv = r.db("rethinkdb").table("server_status").nth(0).run(conn)
    assert {"id", "name", "network", "process"} <= set(srv)
    assert srv["network"]["reql_port"] > 0
    assert r.db("rethinkdb").table("cluster_config").get("heartbeat").run(conn)["heartbeat_timeout_secs"] == 10
    assert list(r.db("rethinkdb").table("current_issues").run(conn)) == []
    jobs = r.db("rethinkdb").table("jobs").run(conn)
    assert any(j["type"] == "query" for j in jobs)  # this very query
    assert r.db("rethinkdb").table("logs").count().run(conn) >= 1
    # identifier_format: uuid shows the database by id
    row = r.db("rethinkdb").table("table_config", identifier_format="uuid").get(cfg["id"]).run(conn)
    assert row["db"] == dbc["id"]
    fresh(conn, "shape")


def test_stats_count_reads_and_writes(server, conn):
    """Each server has its rows (in a cluster too: every connected server's counters),
    and the cluster and table rows sum them."""
    fresh(conn, "st")
    r.db_create("st").run(conn)
    r.db("st").table_create("t").run(conn)
    r.db("st").table("t").insert([{"id": i} for i in range(5)]).run(conn)
    list(r.db("st").table("t").run(conn))
    tid = r.db("st").table("t").config()["id"].run(conn)
    me = conn.server()["id"]
    stats = r.db("rethinkdb").table("stats")
    row = stats.get(["table_server", tid, me]).run(conn)
    assert row["query_engine"]["written_docs_total"] == 5
    assert row["query_engine"]["read_docs_total"] >= 5
    cluster = stats.get(["cluster"]).run(conn)
    assert "queries_per_sec" in cluster["query_engine"]
    servers = set(r.db("rethinkdb").table("server_status")["id"].run(conn))
    rows = list(stats.run(conn))
    assert {x["id"][1] for x in rows if x["id"][0] == "server"} == servers
    on = {x["id"][2] for x in rows if x["id"][0] == "table_server" and x["id"][1] == tid}
    assert on == servers
    names = {x["server"] for x in rows if x["id"][0] == "server"}
    assert names == set(r.db("rethinkdb").table("server_status")["name"].run(conn))
    # Another server's counters, read through this one.
    for other in getattr(server, "servers", [])[1:]:
        c = other.connect()
        try:
            list(r.db("st").table("t").run(c))
            them = c.server()["id"]
        finally:
            c.close()
        row = stats.get(["table_server", tid, them]).run(conn)
        assert row["query_engine"]["read_docs_total"] >= 5
        assert stats.get(["server", them]).run(conn)["query_engine"]["queries_total"] >= 1
    fresh(conn, "st")


def test_config_writes_take_effect(conn):
    fresh(conn, "cw", "cw2")
    r.db_create("cw").run(conn)
    r.db("cw").table_create("a").run(conn)
    r.db("cw").table("a").insert({"id": 1}).run(conn)
    res = r.db("cw").table("a").config().update({"durability": "soft"}).run(conn)
    assert res["replaced"] == 1
    assert r.db("cw").table("a").config()["durability"].run(conn) == "soft"
    # write_acks is recorded as written, and reported back
    assert r.db("cw").table("a").config()["write_acks"].run(conn) == "majority"
    res = r.db("cw").table("a").config().update({"write_acks": "single"}).run(conn)
    assert res["replaced"] == 1
    assert r.db("cw").table("a").config()["write_acks"].run(conn) == "single"
    res = r.db("cw").table("a").config().update({"write_acks": "all"}).run(conn)
    assert res["errors"] == 1
    assert res["first_error"] == 'In `write_acks`: Expected "single" or "majority", got: "all"'
    assert r.db("cw").table("a").config()["write_acks"].run(conn) == "single"
    # rename a table through table_config
    res = r.db("rethinkdb").table("table_config").filter({"db": "cw", "name": "a"}).update({"name": "b"}).run(conn)
    assert res["replaced"] == 1
    assert r.db("cw").table_list().run(conn) == ["b"]
    assert r.db("cw").table("b").get(1).run(conn) == {"id": 1}
    # rename a database through db_config
    r.db("cw").config().update({"name": "cw2"}).run(conn)
    assert "cw2" in r.db_list().run(conn) and "cw" not in r.db_list().run(conn)
    assert r.db("cw2").table("b").count().run(conn) == 1
    # invalid writes get RethinkDB's errors
    res = r.db("cw2").table("b").config().update({"durability": "sometimes"}).run(conn)
    assert res["errors"] == 1 and "durability" in res["first_error"]
    res = r.db("cw2").table("b").config().update({"primary_key": "x"}).run(conn)
    assert res["first_error"] == "It's illegal to change a table's primary key"
    res = r.db("rethinkdb").table("table_status").delete().run(conn)
    assert res["first_error"] == "It's illegal to write to the `rethinkdb.table_status` table."
    # reconfigure records shards, dry_run does not
    assert r.db("cw2").table("b").reconfigure(shards=2, replicas=1, dry_run=True).run(conn)["reconfigured"] == 0
    assert len(r.db("cw2").table("b").config()["shards"].run(conn)) == 1
    assert r.db("cw2").table("b").reconfigure(shards=2, replicas=1).run(conn)["reconfigured"] == 1
    assert len(r.db("cw2").table("b").config()["shards"].run(conn)) == 2
    assert r.db("cw2").table("b").rebalance().run(conn)["rebalanced"] == 1
    fresh(conn, "cw2")


def test_users_insert_update_delete_and_login(server, conn):
    users = r.db("rethinkdb").table("users")
    users.get("carol").delete().run(conn)
    assert users.insert({"id": "carol", "password": "s3cret"}).run(conn)["inserted"] == 1
    assert users.get("carol").run(conn) == {"id": "carol", "password": True}
    c = server.connect(user="carol", password="s3cret")
    c.close()
    with pytest.raises(ReqlAuthError):
        server.connect(user="carol", password="wrong")
    assert users.get("carol").update({"password": "n3w"}).run(conn)["replaced"] == 1
    with pytest.raises(ReqlAuthError):
        server.connect(user="carol", password="s3cret")
    server.connect(user="carol", password="n3w").close()
    users.get("carol").update({"password": False}).run(conn)
    assert users.get("carol")["password"].run(conn) is False
    server.connect(user="carol", password="").close()
    res = users.insert({"id": "dave"}).run(conn)
    assert res["first_error"] == "Expected a field named `password`."
    assert users.get("carol").delete().run(conn)["deleted"] == 1
    with pytest.raises(ReqlAuthError):
        server.connect(user="carol", password="")
    res = users.get("admin").delete().run(conn)
    assert res["errors"] == 1 and res["first_error"] == "The user `admin` can't be deleted"
    assert users.get("admin").run(conn) == {"id": "admin", "password": False}


def test_permission_scopes(server, conn):
    fresh(conn, "pdb")
    r.db_create("pdb").run(conn)
    r.db("pdb").table_create("t").run(conn)
    r.db("pdb").table_create("u").run(conn)
    r.db("pdb").table("t").insert({"id": 1}).run(conn)
    users = r.db("rethinkdb").table("users")
    users.get("erin").delete().run(conn)
    users.insert({"id": "erin", "password": "pw"}).run(conn)
    e = server.connect(user="erin", password="pw")
    try:
        t = r.db("pdb").table("t")
        with pytest.raises(ReqlPermissionError, match=r"User `erin` does not have the required `read` permission"):
            t.get(1).run(e)
        # table scope: read only
        res = t.grant("erin", {"read": True}).run(conn)
        assert res == {"granted": 1, "permissions_changes": [{"old_val": None, "new_val": {"read": True}}]}
        assert t.get(1).run(e) == {"id": 1}
        with pytest.raises(ReqlPermissionError, match="`write` permission"):
            t.insert({"id": 2}).run(e)
        with pytest.raises(ReqlPermissionError, match="`read` permission"):
            r.db("pdb").table("u").count().run(e)
        # database scope: write inherited by every table of the database
        r.db("pdb").grant("erin", {"write": True}).run(conn)
        assert t.insert({"id": 2}).run(e)["inserted"] == 1
        with pytest.raises(ReqlPermissionError, match="`write` permission"):
            r.db("pdb").table("u").insert({"id": 1}).run(e)  # writing needs read too
        r.db("pdb").grant("erin", {"read": True}).run(conn)
        assert r.db("pdb").table("u").insert({"id": 1}).run(e)["inserted"] == 1
        # table scope overrides database scope
        r.db("pdb").table("u").grant("erin", {"write": False}).run(conn)
        with pytest.raises(ReqlPermissionError, match="`write` permission"):
            r.db("pdb").table("u").insert({"id": 2}).run(e)
        # config: DDL refused until granted globally
        with pytest.raises(ReqlPermissionError, match="`config` permission"):
            r.db_create("erin_db").run(e)
        with pytest.raises(ReqlPermissionError, match="`config` permission"):
            r.db("pdb").table_create("v").run(e)
        r.grant("erin", {"config": True}).run(conn)
        assert r.db("pdb").table_create("v").run(e)["tables_created"] == 1
        # the permissions table shows each scope
        rows = list(r.db("rethinkdb").table("permissions").filter(lambda p: p["id"][0] == "erin").run(conn))
        assert {len(p["id"]) for p in rows} == {1, 2, 3}
        # a user can't grant without access to rethinkdb.permissions
        with pytest.raises(ReqlPermissionError):
            r.grant("erin", {"read": True}).run(e)
        with pytest.raises(ReqlOpFailedError, match="can't be modified"):
            r.grant("admin", {"read": False}).run(conn)
        with pytest.raises(ReqlOpFailedError, match="Unexpected key"):
            r.grant("erin", {"bogus": True}).run(conn)
        with pytest.raises(ReqlOpFailedError, match="only valid at the global scope"):
            r.db("pdb").grant("erin", {"connect": True}).run(conn)
        # global grants don't open the system database
        r.grant("erin", {"read": True}).run(conn)
        with pytest.raises(ReqlPermissionError):
            r.db("rethinkdb").table("users").run(e)
    finally:
        e.close()
    users.get("erin").delete().run(conn)
    fresh(conn, "pdb")


def test_tls_driver_port(make_server):
    with tempfile.TemporaryDirectory() as d:
        key, cert = self_signed_cert(d)
        s = make_server(extra=["--driver-tls-key", key, "--driver-tls-cert", cert])
        c = r.connect("127.0.0.1", s.port, ssl={"ca_certs": cert})
        try:
            assert r.expr(20).add(22).run(c) == 42
            assert "rethinkdb" in r.db_list().run(c)
        finally:
            c.close()


def test_user_with_read_permission_uses_indexes_and_feeds(server, conn):
    """Every table operation goes through the permission wrapper, including secondary
    index joins and changefeeds (which a wrapper could silently fail to forward)."""
    for t in ("perm_feed", "perm_join"):
        if t in r.db("test").table_list().run(conn):
            r.db("test").table_drop(t).run(conn)
        r.db("test").table_create(t).run(conn)
    r.table("perm_join").index_create("k").run(conn)
    r.table("perm_join").index_wait("k").run(conn)
    r.table("perm_join").insert({"id": 1, "k": "a"}).run(conn)
    r.table("perm_feed").insert({"id": "a"}).run(conn)
    r.db("rethinkdb").table("users").insert({"id": "reader", "password": "pw"}).run(conn)
    try:
        r.db("test").grant("reader", {"read": True}).run(conn)
        user = server.connect(user="reader", password="pw")
        joined = list(r.table("perm_feed").eq_join("id", r.table("perm_join"), index="k")
                      .run(user))
        assert joined == [{"left": {"id": "a"}, "right": {"id": 1, "k": "a"}}]
        feed = r.table("perm_feed").changes().run(user)
        r.table("perm_feed").insert({"id": "b"}).run(conn)
        assert next(feed) == {"old_val": None, "new_val": {"id": "b"}}
        feed.close()
        with pytest.raises(ReqlPermissionError):
            r.table("perm_feed").insert({"id": "c"}).run(user)
        user.close()
    finally:
        r.db("rethinkdb").table("users").get("reader").delete().run(conn)
