"""Write hooks end to end: set/get, application to every kind of write, the context
object, per-document errors, ignore_write_hook and its permission, persistence."""
import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlOpFailedError, ReqlPermissionError, ReqlQueryLogicError


def fresh(conn, name):
    if name in r.table_list().run(conn):
        r.table_drop(name).run(conn)
    r.table_create(name).run(conn)
    return r.table(name)


def stamp_hook(ctx, old, new):
    """Stamps inserts and updates; lets deletions through."""
    return r.branch(new.eq(None), None, new.merge({"hooked": True, "pk": ctx["primary_key"]}))


def test_set_get_and_remove(conn):
    t = fresh(conn, "wh_basic")
    assert t.get_write_hook().run(conn) is None
    assert t.set_write_hook(stamp_hook).run(conn) == {"created": 1}
    assert t.set_write_hook(stamp_hook).run(conn) == {"replaced": 1}
    hook = t.get_write_hook().run(conn)
    assert set(hook) == {"function", "query"}
    assert isinstance(hook["function"], bytes)
    assert hook["query"].startswith("setWriteHook(function(")
    assert t.config()["write_hook"].run(conn) == hook
    # the binary round-trips into another table
    u = fresh(conn, "wh_basic2")
    assert u.set_write_hook(hook["function"]).run(conn) == {"created": 1}
    assert u.insert({"id": 1}).run(conn)["inserted"] == 1
    assert u.get(1).run(conn) == {"id": 1, "hooked": True, "pk": 1}
    assert t.set_write_hook(None).run(conn) == {"deleted": 1}
    assert t.get_write_hook().run(conn) is None
    assert t.config()["write_hook"].run(conn) is None


def test_hook_applies_to_every_write(conn):
    t = fresh(conn, "wh_writes")
    t.set_write_hook(stamp_hook).run(conn)
    assert t.insert([{"id": 1}, {"id": 2}]).run(conn)["inserted"] == 2
    assert t.get(1).run(conn) == {"id": 1, "hooked": True, "pk": 1}
    t.get(1).update({"x": 1}).run(conn)
    assert t.get(1).run(conn)["x"] == 1
    t.get(2).replace({"id": 2, "y": 2}).run(conn)
    assert t.get(2).run(conn) == {"id": 2, "y": 2, "hooked": True, "pk": 2}
    t.insert({"id": 2, "z": 3}, conflict="update").run(conn)
    assert t.get(2).run(conn)["z"] == 3
    assert t.filter({"id": 1}).update({"w": 4}).run(conn)["replaced"] == 1
    assert t.get(1).run(conn)["w"] == 4
    assert t.get(1).delete().run(conn)["deleted"] == 1
    assert t.count().run(conn) == 1


def test_context_and_old_and_new_values(conn):
    t = fresh(conn, "wh_ctx")
    t.set_write_hook(lambda ctx, old, new: r.branch(
        new.eq(None), None,
        new.merge({"ctx_keys": ctx.keys(), "ts_type": ctx["timestamp"].type_of(),
                   "had_old": old.ne(None), "pk": ctx["primary_key"]}))).run(conn)
    t.insert({"id": "a"}).run(conn)
    doc = t.get("a").run(conn)
    assert doc["ctx_keys"] == ["primary_key", "timestamp"]
    assert doc["ts_type"] == "PTYPE<TIME>"
    assert doc["had_old"] is False
    assert doc["pk"] == "a"
    t.get("a").update({"n": 1}).run(conn)
    assert t.get("a").run(conn)["had_old"] is True
    # The timestamp is the query's r.now().
    t.set_write_hook(lambda ctx, old, new: r.branch(
        new.eq(None), None, new.merge({"at": ctx["timestamp"]}))).run(conn)
    res = r.expr([t.insert({"id": "b"}), r.now()]).run(conn)
    assert t.get("b")["at"].run(conn) == res[1]


def test_hook_errors_are_per_document(conn):
    t = fresh(conn, "wh_err")
    t.set_write_hook(lambda ctx, old, new: new.merge({"n": new["n"].add(1)})).run(conn)
    res = t.insert([{"id": 1, "n": 1}, {"id": 2}]).run(conn)
    assert res["inserted"] == 1 and res["errors"] == 1
    assert res["first_error"].startswith("Error in write hook: No attribute `n` in object:")
    assert t.get(1).run(conn)["n"] == 2
    # the hook would turn a deletion into a write: refused, counted
    res = t.get(1).delete().run(conn)
    assert res["errors"] == 1 and res["deleted"] == 0
    assert "Error in write hook" in res["first_error"]
    t.set_write_hook(lambda ctx, old, new: {"id": ctx["primary_key"]}).run(conn)
    res = t.get(1).delete().run(conn)
    assert res["errors"] == 1
    assert res["first_error"] == "A write hook function must not turn a deletion into a replace/insert."
    t.set_write_hook(lambda ctx, old, new: None).run(conn)
    res = t.insert({"id": 3}).run(conn)
    assert res["errors"] == 1
    assert res["first_error"] == "A write hook function must not turn a replace/insert into a deletion."
    # the hook's result is checked like any new document
    t.set_write_hook(lambda ctx, old, new: r.branch(new.eq(None), None, new.merge({"id": 99}))).run(conn)
    res = t.insert({"id": 4}).run(conn)
    assert res["errors"] == 1 and res["first_error"].startswith("Primary key `id` cannot be changed")
    t.set_write_hook(lambda ctx, old, new: r.branch(new.eq(None), None, 5)).run(conn)
    res = t.insert({"id": 4}).run(conn)
    assert res["errors"] == 1 and res["first_error"].startswith("Inserted value must be an OBJECT")
    assert t.count().run(conn) == 1


def test_bad_hook_functions_are_refused(conn):
    t = fresh(conn, "wh_bad")
    with pytest.raises(ReqlQueryLogicError, match="Write hook functions must be deterministic."):
        t.set_write_hook(lambda ctx, old, new: new.merge({"r": r.random()})).run(conn)
    with pytest.raises(ReqlQueryLogicError, match="Write hook functions must be deterministic."):
        t.set_write_hook(lambda ctx, old, new: r.table("wh_bad").get(1)).run(conn)
    with pytest.raises(ReqlQueryLogicError, match="Write hook functions must expect 3 arguments."):
        t.set_write_hook(lambda old, new: new).run(conn)
    with pytest.raises(ReqlQueryLogicError, match="Expected type FUNCTION"):
        t.set_write_hook(5).run(conn)
    with pytest.raises(ReqlQueryLogicError, match="Cannot create a write hook except from"):
        t.set_write_hook(r.binary(b"nope")).run(conn)
    # r.now() is allowed
    assert t.set_write_hook(lambda ctx, old, new: r.branch(
        new.eq(None), None, new.merge({"t": r.now()}))).run(conn) == {"created": 1}
    assert t.get_write_hook().run(conn) is not None


def test_ignore_write_hook_and_permissions(server, conn):
    if "whdb" in r.db_list().run(conn):
        r.db_drop("whdb").run(conn)
    r.db_create("whdb").run(conn)
    t = r.db("whdb").table
    r.db("whdb").table_create("t").run(conn)
    t("t").set_write_hook(stamp_hook).run(conn)
    t("t").insert({"id": 1}, ignore_write_hook=True).run(conn)
    assert t("t").get(1).run(conn) == {"id": 1}
    users = r.db("rethinkdb").table("users")
    users.get("hooky").delete().run(conn)
    users.insert({"id": "hooky", "password": "pw"}).run(conn)
    r.db("whdb").grant("hooky", {"read": True, "write": True}).run(conn)
    e = server.connect(user="hooky", password="pw")
    try:
        assert t("t").insert({"id": 2}).run(e)["inserted"] == 1
        assert t("t").get(2).run(e)["hooked"] is True
        with pytest.raises(ReqlPermissionError, match="`config` permission"):
            t("t").insert({"id": 3}, ignore_write_hook=True).run(e)
        with pytest.raises(ReqlPermissionError, match="`config` permission"):
            t("t").get_write_hook().run(e)
        with pytest.raises(ReqlPermissionError, match="`config` permission"):
            t("t").set_write_hook(None).run(e)
        r.db("whdb").grant("hooky", {"config": True}).run(conn)
        t("t").insert({"id": 3}, ignore_write_hook=True).run(e)
        assert t("t").get(3).run(e) == {"id": 3}
        assert t("t").get_write_hook().run(e) is not None
    finally:
        e.close()
        users.get("hooky").delete().run(conn)
        r.db_drop("whdb").run(conn)


def test_config_update_keeps_the_hook(conn):
    t = fresh(conn, "wh_cfg")
    t.set_write_hook(stamp_hook).run(conn)
    assert t.config().update({"durability": "soft"}).run(conn)["replaced"] == 1
    assert t.get_write_hook().run(conn) is not None
    res = t.config().update({"write_hook": None}).run(conn)
    assert res["errors"] == 1 and "read-only" in res["first_error"]


def test_hook_survives_restart_and_rename(make_server):
    s = make_server()
    c = s.connect()
    r.table_create("h").run(c)
    r.table("h").set_write_hook(stamp_hook).run(c)
    r.table("h").config().update({"name": "h2"}).run(c)
    c.close()
    s.stop()
    s.start()
    c = s.connect()
    try:
        assert r.table("h2").get_write_hook().run(c) is not None
        r.table("h2").insert({"id": 1}).run(c)
        assert r.table("h2").get(1).run(c)["hooked"] is True
        with pytest.raises(ReqlOpFailedError, match="does not exist"):
            r.table("h").count().run(c)
    finally:
        c.close()
