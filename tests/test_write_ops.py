"""Writes as operations: user code runs outside any lock, the write applies only if the
document is still the one it was computed from, and is evaluated again if not."""
import threading
import time

from rethinkdb import r


def fresh(conn, name):
    if name in r.table_list().run(conn):
        r.table_drop(name).run(conn)
    r.table_create(name).run(conn)
    return r.table(name)


def test_a_write_nested_in_its_own_update_answers_and_locks_nothing(server, conn):
    t = fresh(conn, "wo_nested")
    t.insert([{"id": 1, "y": 0}, {"id": 2}]).run(conn)
    res = t.get(1).update(
        lambda d: {"x": t.get(1).update({"y": 1})["replaced"]}, non_atomic=True
    ).run(conn)
    # The inner write changed the document under the outer one, so the outer update
    # was evaluated again on the new document (where the inner one changes nothing).
    assert res["replaced"] == 1 and res["errors"] == 0, res
    assert t.get(1).run(conn) == {"id": 1, "x": 0, "y": 1}
    # Nothing stays locked: other connections write the same document and others.
    other = server.connect()
    try:
        for k in range(1, 50):
            out = t.get(k).replace({"id": k, "z": k}).run(other)
            assert out["errors"] == 0, out
        assert t.get(1).run(other) == {"id": 1, "z": 1}
    finally:
        other.close()


def test_a_write_that_always_conflicts_gives_up_with_an_error(conn):
    t = fresh(conn, "wo_conflict")
    t.insert({"id": 1, "y": 0}).run(conn)
    started = time.time()
    res = t.get(1).update(
        lambda d: {"x": t.get(1).update(lambda e: {"y": e["y"].add(1)})["replaced"]},
        non_atomic=True,
    ).run(conn)
    assert res["errors"] == 1, res
    assert "changed during each of 1000 evaluations" in res["first_error"], res
    assert time.time() - started < 30
    # The inner writes happened (each attempt's), the outer one never did.
    doc = t.get(1).run(conn)
    assert "x" not in doc and doc["y"] == 1000


def test_concurrent_updates_of_one_document_are_atomic(server, conn):
    t = fresh(conn, "wo_counter")
    t.insert({"id": 1, "n": 0}).run(conn)
    threads, per = 6, 150
    errors = []

    def bump():
        c = server.connect()
        try:
            for _ in range(per):
                res = t.get(1).update({"n": r.row["n"].add(1)}, durability="soft").run(c)
                if res["replaced"] != 1:
                    errors.append(res)
        finally:
            c.close()

    ts = [threading.Thread(target=bump) for _ in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join(60)
    assert not errors, errors[:3]
    assert t.get(1)["n"].run(conn) == threads * per


def test_insert_conflict_functions_see_the_current_document(server, conn):
    t = fresh(conn, "wo_upsert")
    threads, per = 4, 100

    def upsert():
        c = server.connect()
        try:
            for _ in range(per):
                t.insert(
                    {"id": 1, "n": 1},
                    conflict=lambda k, old, new: old.merge({"n": old["n"].add(new["n"])}),
                ).run(c)
        finally:
            c.close()

    ts = [threading.Thread(target=upsert) for _ in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join(60)
    assert t.get(1)["n"].run(conn) == threads * per


def test_updates_with_plain_values_answer_as_merges_do(conn):
    """Plain values are merged into the stored text without decoding it (issue #16):
    the answers, counts, changes and documents are those of the merged maps."""
    t = fresh(conn, "wo_plain")
    doc = {"id": "k", "a": 1, "n": {"x": [1, 2]}, "s\u00e9": "v", "q\"\\": None, "z": 2.5}
    t.insert(doc).run(conn)
    # Replaced, added before, between and after the stored keys; old and new changes.
    res = t.get("k").update(
        {"0": True, "a": "x", "m": -0.5, "zz": None}, return_changes=True
    ).run(conn)
    assert res["replaced"] == 1 and res["errors"] == 0, res
    new = dict(doc, **{"0": True, "a": "x", "m": -0.5, "zz": None})
    assert res["changes"] == [{"old_val": doc, "new_val": new}]
    assert t.get("k").run(conn) == new
    assert list(t.get("k").keys().run(conn)) == sorted(new)
    # The same values again: unchanged; an empty patch too.
    res = t.get("k").update({"a": "x", "z": 2.5}).run(conn)
    assert res["unchanged"] == 1 and res["replaced"] == 0, res
    assert t.get("k").update({}).run(conn)["unchanged"] == 1
    # A number printed alike in another form is the same value.
    assert t.get("k").update({"z": 25e-1}).run(conn)["unchanged"] == 1
    # The primary key cannot change, whichever way the merge runs.
    res = t.get("k").update({"id": "other"}).run(conn)
    assert res["errors"] == 1, res
    assert res["first_error"].startswith("Primary key `id` cannot be changed"), res
    assert t.get("k").run(conn) == new
    # Values that merge deeper, and literals, still merge as maps.
    t.get("k").update({"n": {"y": 1}}).run(conn)
    assert t.get("k")["n"].run(conn) == {"x": [1, 2], "y": 1}
    t.get("k").update({"n": r.literal({"w": 0})}).run(conn)
    assert t.get("k")["n"].run(conn) == {"w": 0}
    # An index on an updated field follows.
    t.index_create("a").run(conn)
    t.index_wait("a").run(conn)
    t.get("k").update({"a": "y"}).run(conn)
    assert t.get_all("y", index="a")["id"].coerce_to("array").run(conn) == ["k"]
    assert t.get_all("x", index="a").count().run(conn) == 0
