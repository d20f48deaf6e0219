"""Deep values and deep queries: Ponder bounds nesting at 1,024 levels of arrays and
objects (RethinkDB has no such bound and could crash on deep values; see
docs/compatibility.md). Values a loop builds deeper fail that query with a clear error;
documents up to the bound are stored and read back, also after a restart; a query at
the payload's nesting limit evaluates. The server keeps serving throughout."""
import sys

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlResourceLimitError

from conftest import assert_serving

LIMIT = 1024
NESTING = "Nesting depth limit exceeded: arrays and objects may nest at most 1024 levels deep"


def nested_json(n):
    return "[" * n + "1" + "]" * n


@pytest.mark.parametrize("query", [
    lambda: r.range(100_000).fold([], lambda acc, x: [acc]).count(),
    lambda: r.range(100_000).fold({}, lambda acc, x: {"a": acc}).keys(),
    lambda: r.range(5_000).map(lambda x: [x]).reduce(lambda a, b: [a, b]).count(),
    lambda: r.range(5_000).group(lambda x: x % 2).reduce(lambda a, b: [a, b]).count(),
    lambda: r.range(100_000).fold([], lambda acc, x: [acc], emit=lambda o, x, n: [1]).count(),
], ids=["fold-array", "fold-object", "reduce", "group-reduce", "fold-emit"])
def test_loops_cannot_build_values_deeper_than_the_bound(server, conn, query):
    # Before the bound, freeing such a value overflowed the evaluator's stack and
    # aborted the server.
    with pytest.raises(ReqlResourceLimitError) as e:
        query().run(conn)
    assert NESTING in str(e.value)
    assert r.expr(1).run(conn) == 1
    assert_serving(server)


def test_loops_may_build_values_up_to_the_bound(conn):
    depth = r.range(LIMIT - 1).fold([], lambda acc, x: [acc]) \
        .do(lambda v: r.range(LIMIT + 5).fold([v, 0], lambda a, x: r.branch(
            a[0].type_of().eq("ARRAY").and_(a[0].count().gt(0)), [a[0][0], a[1].add(1)], a))[1]) \
        .run(conn)
    assert depth == LIMIT - 1


def test_deep_documents_are_stored_and_read_back(make_server, tmp_path):
    s = make_server(directory=str(tmp_path))
    c = s.connect()
    r.db("test").table_create("t").run(c)
    t = r.db("test").table("t")
    deep = nested_json(LIMIT - 1)  # the document adds one level: exactly at the bound
    assert t.insert({"id": 1, "v": r.json(deep)}).run(c)["inserted"] == 1
    c.close()
    s.stop()
    s = make_server(directory=str(tmp_path))
    c = s.connect()
    sys.setrecursionlimit(20_000)  # the driver decodes the reply recursively
    assert t.get(1)["v"].to_json_string().run(c) == deep
    assert t.get(1).to_json_string().run(c) == '{"id":1,"v":' + deep + "}"
    assert t.filter(lambda d: d["v"].ne(0)).count().run(c) == 1
    # One more level would pass the bound: refused, and the stored document unchanged.
    res = t.get(1).update({"v": [r.row["v"]]}).run(c)
    assert res["errors"] == 1 and NESTING in res["first_error"], res
    assert t.get(1)["v"].to_json_string().run(c) == deep
    res = t.insert({"id": 2, "v": [r.json(deep)]}).run(c)
    assert res["errors"] == 1 and NESTING in res["first_error"], res
    assert t.count().run(c) == 1


def test_a_query_at_the_payload_limit_evaluates(conn):
    # 1,024 levels of JSON: each `add` term takes two ([type, [args]]).
    sys.setrecursionlimit(20_000)
    q = r.expr(1)
    for _ in range(510):
        q = q.add(1)
    assert q.run(conn) == 511
    q = r.expr(1)
    for _ in range(340):
        q = r.branch(True, q, 0)
    assert q.run(conn) == 1
