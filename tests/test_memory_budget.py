"""The per-query memory budget (`--query-memory-mb`, default 1024): a query that holds
more fails with a ReqlResourceLimitError, while the server and other queries carry on
and the process does not grow past the budget."""
import subprocess

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlResourceLimitError

from conftest import BINARY, assert_serving
from reqlwire import rss_kib

pytestmark = pytest.mark.single_server("one process's memory budget and RSS (its own server)")

BUDGET = "Query exceeded its memory budget of 64 MiB (`--query-memory-mb`)"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    from conftest import Server
    s = Server(str(tmp_path_factory.mktemp("budget")), extra=["--query-memory-mb", "64"]).start()
    yield s
    s.stop()


@pytest.mark.parametrize("query", [
    # ~50,000 arrays of 300 numbers held at once: several hundred MiB.
    lambda: r.range(50_000).map(lambda x: r.range(300).coerce_to("array")).coerce_to("array").count(),
    lambda: r.range(100_000).map(lambda x: {"a": x, "b": r.range(100).coerce_to("array")})
            .order_by("a").count(),
    lambda: r.range(90_000).map(lambda x: r.range(100).coerce_to("array"))
            .group(lambda a: a[1]).ungroup().count(),
    # 41 arrays sharing their halves print as 2^40 elements: the printer allocates, the
    # budget is spent, and printing stops (datum::work) instead of running for hours.
    lambda: r.range(40).fold([1], lambda acc, x: [acc, acc]).to_json_string().count(),
    lambda: r.range(40).fold([1], lambda acc, x: [acc, acc]),
], ids=["collect", "order_by", "group", "shared-print", "shared-result"])
def test_a_query_over_its_budget_fails_alone(small, query):
    c = small.connect()
    other = small.connect()
    with pytest.raises(ReqlResourceLimitError, match=r"Query exceeded its memory budget of 64 MiB"):
        query().run(c)
    # The same connection and another one keep working; memory came back.
    assert r.range(1000).map(lambda x: r.range(300).coerce_to("array")).count().run(c) == 1000
    assert r.expr(1).run(other) == 1
    assert rss_kib(small.proc.pid) < 600 * 1024
    c.close()
    other.close()
    assert_serving(small)


def test_queries_within_the_budget_are_untouched(small):
    c = small.connect()
    # Streams that allocate much more than the budget in total, but hold little at once.
    assert r.range(200_000).map(lambda x: r.range(50).coerce_to("array")).count().run(c) == 200_000
    cur = r.range(100_000).map(lambda x: r.range(50).coerce_to("array")).run(c)
    assert sum(1 for _ in cur) == 100_000
    c.close()


def test_the_budget_must_be_positive(tmp_path):
    p = subprocess.run([BINARY, "serve", "--directory", str(tmp_path), "--query-memory-mb", "0"],
                       capture_output=True, timeout=30)
    assert p.returncode != 0
    assert b"query-memory-mb" in p.stderr


def test_filling_the_storage_cache_is_not_the_querys_memory(make_server):
    """A scan fills the engine's block cache; that memory belongs to the server (bounded
    by --cache-size), not to the query: a table of ~80 MB, more than a memtable holds,
    is scanned under a 32 MiB query budget with a 512 MB cache."""
    s = make_server(extra=["--query-memory-mb", "32", "--cache-size", "512"])
    c = s.connect()
    r.table_create("big").run(c)
    pad = "x" * 1000
    for start in range(0, 80_000, 5_000):
        r.table("big").insert(r.range(start, start + 5_000).map(lambda i: {"id": i, "p": pad}),
                              durability="soft").run(c)
    for _ in range(2):
        assert r.table("big").map(lambda d: d["p"].count()).sum().run(c) == 80_000 * 1000
    assert r.table("big").count().run(c) == 80_000
