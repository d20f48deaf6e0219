"""Aggregations over a large table run in parallel key ranges (reql::parallel): their
results, errors and empty-range cases must be those of a sequential evaluation, which
`coerce_to('array')` forces (an array is never split)."""
import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlNonExistenceError, ReqlQueryLogicError

N = 30000  # above reql::parallel::MIN_DOCS


@pytest.fixture(scope="module")
def big(server):
    c = server.connect()
    if "par" in r.table_list().run(c):
        r.table_drop("par").run(c)
    r.table_create("par").run(c)
    for lo in range(0, N, 5000):
        docs = [{"id": i, "v": (i * 7919) % 1000, "s": "k%05d" % i,
                 "tags": ["a", "b"] if i % 3 == 0 else [], "odd": i % 2 == 1}
                for i in range(lo, lo + 5000)]
        # a few documents without `v`, and one with a string `v`
        for d in docs:
            if d["id"] % 4999 == 7:
                del d["v"]
        r.table("par").insert(docs, durability="soft").run(c)
    r.table("par").get(12345).update({"w": "str"}).run(c)
    yield c
    c.close()


def both(conn, make):
    """The query over the table (parallel) and over the same rows as an array."""
    par = make(r.table("par")).run(conn)
    seq = make(r.table("par").coerce_to("array")).run(conn, array_limit=200000)
    return par, seq


@pytest.mark.parametrize("make", [
    lambda t: t.count(),
    lambda t: t.filter({"odd": True}).count(),
    lambda t: t.count(lambda d: d["v"].default(0) > 500),
    lambda t: t.map(lambda d: d["v"].default(0)).sum(),
    lambda t: t.sum(lambda d: d["v"].default(0)),
    lambda t: t.sum("v"),
    lambda t: t.concat_map(lambda d: d["tags"]).count(),
    lambda t: t.pluck("v").min("v"),
    lambda t: t.max("v"),
    lambda t: t.min(lambda d: d["s"]),
    lambda t: t.has_fields("w").max("id"),
    lambda t: t["id"].reduce(lambda a, b: a.add(b)),
    lambda t: t.filter(lambda d: d["id"] < 10).min("id"),
    lambda t: t.filter(lambda d: d["id"] > N - 5).max("id"),
    lambda t: t.avg("v"),
    lambda t: t.map(lambda d: d["id"]).avg(),
    lambda t: t.filter(lambda d: d["id"] < 100).avg(lambda d: d["v"]),
    # grouped: each range folds its groups, merged per group
    lambda t: t.group("v").count(),
    lambda t: t.group(lambda d: d["id"] % 10).sum("id"),
    lambda t: t.group("odd").avg("v"),
    lambda t: t.group("odd").min("v"),
    lambda t: t.group("odd").max("s"),
    lambda t: t.group("odd").map(lambda d: d["id"]).reduce(lambda a, b: a.add(b)),
    lambda t: t.group("odd").filter(lambda d: d["v"].default(0) > 500).count(),
    lambda t: t.group("tags", multi=True).count(),
    lambda t: t.pluck("v", "odd").group("odd").count(),
    lambda t: t.group("odd").pluck("v").count(),
    lambda t: t.group("odd", "v").count(),
], ids=range(28))
def test_parallel_results_equal_sequential(big, make):
    par, seq = both(big, make)
    assert par == seq


def test_errors_are_those_of_a_sequential_scan(big):
    def bad(t):
        return t.map(lambda d: d["v"].add(1)).sum()

    msgs = []
    for make in (lambda: bad(r.table("par")),
                 lambda: bad(r.table("par").coerce_to("array"))):
        with pytest.raises((ReqlNonExistenceError, ReqlQueryLogicError)) as e:
            make().run(big, array_limit=200000)
        msgs.append(e.value.message)
    assert msgs[0] == msgs[1]


def test_empty_everywhere_is_the_empty_stream_error(big):
    with pytest.raises(ReqlNonExistenceError, match="Cannot take the min of an empty stream"):
        r.table("par").filter(lambda d: d["id"] < 0).min("id").run(big)
    with pytest.raises(ReqlNonExistenceError, match="Cannot take the average of an empty stream"):
        r.table("par").filter(lambda d: d["id"] < 0).avg("id").run(big)
    with pytest.raises(ReqlNonExistenceError, match="Cannot reduce over an empty stream"):
        r.table("par").filter(lambda d: d["id"] < 0)["id"].reduce(lambda a, b: a + b).run(big)


def test_a_non_deterministic_chain_still_answers(big):
    # r.random in the chain: not split (must still give a plausible answer).
    n = r.table("par").filter(lambda d: r.random() < 2).count().run(big)
    assert n == N
