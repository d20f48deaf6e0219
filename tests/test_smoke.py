"""Basic round trips through the official driver."""
from rethinkdb import r


def test_insert_get_update(conn):
    r.db("test").table_create("smoke").run(conn)
    res = r.table("smoke").insert([{"id": i, "v": i} for i in range(5)]).run(conn)
    assert res["inserted"] == 5
    assert r.table("smoke").get(3).run(conn) == {"id": 3, "v": 3}
    r.table("smoke").get(3).update({"w": 1}).run(conn)
    assert r.table("smoke").get(3).run(conn) == {"id": 3, "v": 3, "w": 1}
    assert r.table("smoke").count().run(conn) == 5
