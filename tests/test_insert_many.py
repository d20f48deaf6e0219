"""`insert` of many documents writes them a chunk at a time (`reql::terms::insert_many`:
256 documents, a repeated primary key closes a chunk) but must answer exactly as
inserting them one by one: counts, `first_error`, generated keys, the changes in order,
and the stored documents. A small model of one-by-one insertion gives the expected
answers here, for every conflict mode, over batches that cross chunks, repeat keys
within and across chunks, and mix in invalid documents."""
import random

import pytest
from rethinkdb import r


def fresh(conn, name, existing):
    if name in r.table_list().run(conn):
        r.table_drop(name).run(conn)
    r.table_create(name).run(conn)
    if existing:
        r.table(name).insert(existing).run(conn)
    return r.table(name)


def model(existing, docs, conflict):
    """What inserting `docs` one by one does: (stored documents by id, counts, the
    changes of `return_changes=True`, first_error)."""
    stored = {d["id"]: d for d in existing}
    counts = {"inserted": 0, "replaced": 0, "unchanged": 0, "errors": 0}
    changes, first_error, first_invalid = [], None, None
    for d in docs:
        if not isinstance(d, dict):
            counts["errors"] += 1
            first_invalid = first_invalid or "Expected type OBJECT but found NUMBER."
            continue
        if "id" not in d:
            counts["inserted"] += 1
            changes.append(("generated", d))
            continue
        old = stored.get(d["id"])
        if old is None:
            new = d
        elif conflict == "error":
            counts["errors"] += 1
            first_error = first_error or "Duplicate primary key `id`"
            continue
        elif conflict == "replace":
            new = d
        else:  # update, or the function below, which merges too
            new = dict(old, **d)
        stored[d["id"]] = new
        if old is None:
            counts["inserted"] += 1
        elif old == new:
            counts["unchanged"] += 1
            continue
        else:
            counts["replaced"] += 1
        changes.append((old, new))
    return stored, counts, changes, first_invalid or first_error


def batch(seed):
    """Existing documents and a batch of about 700 to insert."""
    rng = random.Random(seed)
    existing = [{"id": k, "v": "old"} for k in range(0, 600, 7)]
    docs = []
    for i in range(700):
        roll = rng.random()
        if roll < 0.02:
            docs.append(i)  # not an object
        elif roll < 0.07:
            docs.append({"v": i})  # a generated key
        else:
            # Keys repeat within a chunk, across chunks and with existing documents.
            docs.append({"id": rng.randrange(650), "v": rng.choice(["old", i, i % 3])})
    return existing, docs


@pytest.mark.parametrize("conflict", ["error", "replace", "update", "function"])
def test_many_documents_answer_as_one_by_one(conn, conflict):
    for seed in range(3):
        existing, docs = batch(seed)
        t = fresh(conn, "im_" + conflict, existing)
        option = conflict
        if conflict == "function":
            option = lambda _id, old, new: old.merge(new)  # noqa: E731
        res = t.insert(docs, conflict=option, return_changes=True).run(conn)
        stored, counts, changes, first_error = model(existing, docs, conflict)
        for k, v in counts.items():
            assert res[k] == v, (seed, k, res[k], v)
        assert res["deleted"] == 0 and res["skipped"] == 0
        if first_error:
            assert res["first_error"].startswith(first_error), (seed, res["first_error"])
        else:
            assert "first_error" not in res
        generated = res.get("generated_keys", [])
        assert len(generated) == sum(1 for c in changes if c[0] == "generated")
        # The changes come in the documents' order (generated keys in theirs).
        got = [(c["old_val"], c["new_val"]) for c in res["changes"] if c.get("error") is None]
        keys = iter(generated)
        want = []
        for old, new in changes:
            if old == "generated":
                want.append((None, dict(new, id=next(keys))))
            else:
                want.append((old, new))
        assert got == want, seed
        rows = {d["id"]: d for d in t.run(conn) if not isinstance(d["id"], str)}
        assert rows == stored, seed


def test_a_stream_error_comes_after_the_documents_before_it(conn):
    t = fresh(conn, "im_stream", [])
    # The stream fails at 280, after one full chunk (256) and 24 more documents.
    docs = r.range(300).map(lambda i: r.branch(i.lt(280), {"id": i}, r.error("stop")))
    with pytest.raises(r.ReqlUserError, match="stop"):
        t.insert(docs).run(conn)
    assert t.count().run(conn) == 280
