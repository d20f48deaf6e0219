"""Every term that touches data, configuration, the network or the system tables, run
by a user holding no permissions: each is refused with RethinkDB's error naming the
permission it needs ("User `erin` does not have the required `read` permission."), and
each is allowed once exactly that permission is granted on the narrowest scope that
carries it. As in RethinkDB, `write` is only held together with `read` (a user granted
`write` alone still gets the `write` error), so both are granted for the write cases.
The index list (`index_list`, `index_status`, `index_wait`) needs no permission."""
import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlPermissionError

DB = "tpdb"
T = r.db(DB).table("t")
SYS = r.db("rethinkdb")

# (name, query, permission, scope): scope "table" (tpdb.t), "db" (tpdb), "global",
# or a system table's name (granted on that table).
CASES = [
    ("table scan", lambda: T.coerce_to("array"), "read", "table"),
    ("get", lambda: T.get(1), "read", "table"),
    ("get_all index", lambda: T.get_all(1, index="v").coerce_to("array"), "read", "table"),
    ("between", lambda: T.between(0, 9).count(), "read", "table"),
    ("filter", lambda: T.filter({"v": 1}).count(), "read", "table"),
    ("count", lambda: T.count(), "read", "table"),
    ("order_by index", lambda: T.order_by(index="v").limit(1).coerce_to("array"), "read", "table"),
    ("changes", lambda: T.changes().limit(0), "read", "table"),
    ("get changes", lambda: T.get(1).changes().limit(1), "read", "table"),
    ("get_nearest", lambda: T.get_nearest(r.point(0, 0), index="g").coerce_to("array"), "read", "table"),
    ("get_intersecting", lambda: T.get_intersecting(r.point(0, 0), index="g").coerce_to("array"), "read", "table"),
    ("table in a join", lambda: r.expr([1]).eq_join(lambda x: x, T).coerce_to("array"), "read", "table"),
    ("insert", lambda: T.insert({"id": 100}, conflict="replace"), "write", "table"),
    ("sync", lambda: T.sync(), "write", "table"),
    ("index_create", lambda: T.index_create("w"), "config", "table"),
    ("index_drop", lambda: T.index_drop("v"), "config", "table"),
    ("index_rename", lambda: T.index_rename("v", "v2"), "config", "table"),
    ("set_write_hook", lambda: T.set_write_hook(None), "config", "table"),
    ("get_write_hook", lambda: T.get_write_hook(), "config", "table"),
    ("config", lambda: T.config(), "config", "table"),
    ("reconfigure", lambda: T.reconfigure(shards=1, replicas=1), "config", "table"),
    ("rebalance", lambda: T.rebalance(), "config", "table"),
    ("table_create", lambda: r.db(DB).table_create("u"), "config", "db"),
    ("table_drop", lambda: r.db(DB).table_drop("t2"), "config", "db"),
    ("db config", lambda: r.db(DB).config(), "config", "db"),
    ("db_create", lambda: r.db_create("tpdb2"), "config", "global"),
    ("db_drop", lambda: r.db_drop("tpdb3"), "config", "global"),
    ("http", lambda: r.http("http://127.0.0.1:1/"), "connect", "global"),
    ("users", lambda: SYS.table("users").coerce_to("array"), "read", "users"),
    ("users insert", lambda: SYS.table("users").insert({"id": "mallory", "password": "x"}), "write", "users"),
    ("permissions", lambda: SYS.table("permissions").coerce_to("array"), "read", "permissions"),
    ("server_status", lambda: SYS.table("server_status").coerce_to("array"), "read", "server_status"),
    ("table_config", lambda: SYS.table("table_config").coerce_to("array"), "read", "table_config"),
    ("current_issues", lambda: SYS.table("current_issues").coerce_to("array"), "read", "current_issues"),
    ("stats", lambda: SYS.table("stats").coerce_to("array"), "read", "stats"),
    ("logs", lambda: SYS.table("logs").limit(1).coerce_to("array"), "read", "logs"),
    ("cluster_config", lambda: SYS.table("cluster_config").coerce_to("array"), "read", "cluster_config"),
    ("table status", lambda: T.status(), "read", "table_status"),
]


@pytest.fixture(scope="module")
def erin(server):
    admin = server.connect()
    for d in (DB, "tpdb2", "tpdb3"):
        if d in r.db_list().run(admin):
            r.db_drop(d).run(admin)
    r.db_create(DB).run(admin)
    r.db_create("tpdb3").run(admin)
    r.db(DB).table_create("t").run(admin)
    r.db(DB).table_create("t2").run(admin)
    T.index_create("v").run(admin)
    T.index_create("g", geo=True).run(admin)
    T.index_wait().run(admin)
    T.insert([{"id": 1, "v": 1, "g": r.point(0, 0)}]).run(admin)
    users = SYS.table("users")
    users.get("erin").delete().run(admin)
    users.insert({"id": "erin", "password": "pw"}).run(admin)
    yield admin, lambda: server.connect(user="erin", password="pw")
    users.get("erin").delete().run(admin)
    users.get("mallory").delete().run(admin)
    for d in (DB, "tpdb2", "tpdb3"):
        if d in r.db_list().run(admin):
            r.db_drop(d).run(admin)
    admin.close()


def grant(admin, scope, perm, value):
    target = {"table": T, "db": r.db(DB), "global": r}.get(scope, SYS.table(scope))
    target.grant("erin", {perm: value}).run(admin)


@pytest.mark.parametrize("name,query,perm,scope", CASES, ids=[c[0] for c in CASES])
def test_refused_without_and_allowed_with_the_permission(erin, name, query, perm, scope):
    admin, connect = erin
    c = connect()
    try:
        with pytest.raises(ReqlPermissionError,
                           match="User `erin` does not have the required `%s` permission" % perm):
            query().run(c)
        grant(admin, scope, perm, True)
        if perm == "write":
            grant(admin, scope, "read", True)
        try:
            query().run(c)
        except ReqlPermissionError as e:
            pytest.fail("still refused with %s granted on %s: %s" % (perm, scope, e))
        except Exception:
            pass  # the term ran; its own outcome (e.g. r.http failing to connect) is not checked
    finally:
        grant(admin, scope, perm, None)
        grant(admin, scope, "read", None)
        c.close()


def test_the_index_list_needs_no_permission(erin):
    admin, connect = erin
    c = connect()
    names = T.index_list().run(c)
    assert "g" in names
    assert [s["index"] for s in T.index_status().run(c)] == names
    c.close()
