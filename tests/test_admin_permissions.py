"""Administration terms for a user without admin rights: RethinkDB requires `config` for
`table.config()`, `db.config()`, `reconfigure` and `rebalance`, `write` for `sync`, and
`read` on `rethinkdb.table_status` for `table.status()`. Each used to succeed with no
permissions at all."""
import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlPermissionError


@pytest.fixture(scope="module")
def dave(server):
    admin = server.connect()
    if "apdb" in r.db_list().run(admin):
        r.db_drop("apdb").run(admin)
    r.db_create("apdb").run(admin)
    r.db("apdb").table_create("t").run(admin)
    r.db("apdb").table("t").insert({"id": 1}).run(admin)
    users = r.db("rethinkdb").table("users")
    users.get("dave").delete().run(admin)
    users.insert({"id": "dave", "password": "pw"}).run(admin)
    c = server.connect(user="dave", password="pw")
    yield admin, c
    c.close()
    users.get("dave").delete().run(admin)
    r.db_drop("apdb").run(admin)
    admin.close()


def refused(query, conn, perm):
    with pytest.raises(ReqlPermissionError,
                       match="User `dave` does not have the required `%s` permission" % perm):
        query.run(conn)


def test_nothing_granted_refuses_every_admin_term(dave):
    admin, c = dave
    t = r.db("apdb").table("t")
    refused(t.config(), c, "config")
    refused(r.db("apdb").config(), c, "config")
    refused(t.rebalance(), c, "config")
    refused(t.reconfigure(shards=1, replicas=1), c, "config")
    refused(t.status(), c, "read")
    refused(t.sync(), c, "write")


def test_each_grant_opens_its_terms(dave):
    admin, c = dave
    t = r.db("apdb").table("t")
    r.db("apdb").table("t").grant("dave", {"read": True, "write": True}).run(admin)
    assert t.sync().run(c) == {"synced": 1}
    refused(t.config(), c, "config")
    r.db("apdb").table("t").grant("dave", {"config": True}).run(admin)
    assert t.config()["name"].run(c) == "t"
    assert t.rebalance().run(c)["rebalanced"] == 1
    refused(r.db("apdb").config(), c, "config")
    r.db("apdb").grant("dave", {"config": True}).run(admin)
    assert r.db("apdb").config()["name"].run(c) == "apdb"
    refused(t.status(), c, "read")
    r.db("rethinkdb").table("table_status").grant("dave", {"read": True}).run(admin)
    assert t.status()["name"].run(c) == "t"


def test_jobs_show_and_end_only_ones_own_queries(dave):
    admin, c = dave
    jobs = r.db("rethinkdb").table("jobs")
    jobs.grant("dave", {"read": True, "write": True}).run(admin)
    # A long-lived query of admin's: a changefeed.
    feed = r.db("apdb").table("t").changes().run(admin)
    mine = jobs.coerce_to("array").run(c)
    assert mine and all(j["info"]["user"] == "dave" for j in mine), mine
    theirs = [j for j in jobs.coerce_to("array").run(admin) if j["info"]["user"] == "admin"]
    assert theirs, "admin sees admin's jobs"
    for j in theirs:
        res = jobs.get(j["id"]).delete().run(c)
        assert res["deleted"] == 0, res
    # admin's feed is alive: it sees a write.
    r.db("apdb").table("t").insert({"id": 2}).run(admin)
    assert next(feed)["new_val"] == {"id": 2}
    feed.close()
