"""RethinkDB behaviours that drivers and ORMs rely on, checked through the official
Python driver: selections that pass through `default`/`branch`/`and`/`or`, `r.args`
expanded before the argument count is checked, `filter`'s `default` with object
predicates, replica placement on one server, and the arity of terms that take no
arguments."""
import pytest
from rethinkdb import r
from rethinkdb.errors import (ReqlNonExistenceError, ReqlOpFailedError, ReqlQueryLogicError,
                              ReqlServerCompileError, ReqlUserError)

from reqlwire import COMPILE_ERROR, RUNTIME_ERROR, RawConn


@pytest.fixture
def table(conn):
    name = "compat"
    if name in r.table_list().run(conn):
        r.table_drop(name).run(conn)
    r.table_create(name).run(conn)
    r.table(name).insert([{"id": 1, "a": 1}, {"id": 2, "a": 2}, {"id": 3}]).run(conn)
    yield r.table(name)
    r.table_drop(name).run(conn)


# --- 1. a selection stays a selection ---------------------------------------------------

def test_default_keeps_a_single_selection_for_writes(conn, table):
    # thinky: get(k).default(r.error(...)).update(...)
    res = table.get(1).default(r.error("missing")).update({"b": 1}).run(conn)
    assert res["replaced"] == 1
    assert table.get(1).run(conn) == {"id": 1, "a": 1, "b": 1}
    assert r.type_of(table.get(1).default(r.error("missing"))).run(conn) == "SELECTION<OBJECT>"
    res = table.get(3).default(r.error("missing")).delete().run(conn)
    assert res["deleted"] == 1
    with pytest.raises(ReqlUserError, match="missing"):
        table.get(99).default(r.error("missing")).update({"b": 1}).run(conn)
    # r.error() as the fallback of a missing document: the selection itself (null).
    assert table.get(99).default(r.error()).run(conn) is None


def test_default_keeps_a_single_selection_for_changes(conn, table):
    feed = table.get(2).default(r.error("missing")).changes(include_initial=True).limit(1)
    assert list(feed.run(conn)) == [{"new_val": {"id": 2, "a": 2}}]


def test_branch_and_or_pass_a_selection_through(conn, table):
    assert table.get(1).do(lambda _: r.branch(True, table.get(1), None)).update(
        {"c": 1}).run(conn)["replaced"] == 1
    assert r.and_(True, table.get(1)).update({"d": 1}).run(conn)["replaced"] == 1
    assert r.or_(False, table.get(2)).update({"d": 2}).run(conn)["replaced"] == 1
    assert r.type_of(r.or_(table.get(1), False)).run(conn) == "SELECTION<OBJECT>"
    assert r.and_(False, table.get(1)).run(conn) is False
    assert table.get(1).run(conn)["d"] == 1 and table.get(2).run(conn)["d"] == 2


# --- 2. r.args is expanded before the argument count is checked --------------------------

def test_args_expanded_before_arity(conn, table):
    t = r.time(r.args([1986, 11, 3, 12, 0, 0, "Z"])).run(conn)
    assert (t.year, t.month, t.day, t.hour) == (1986, 11, 3, 12)
    assert r.time(1986, r.args([11, 3]), "Z").to_iso8601().run(conn) == \
        "1986-11-03T00:00:00+00:00"
    assert r.expr([3, 1, 2]).slice(r.args([1, 2])).run(conn) == [1]
    assert r.db_list().count().eq(r.db_list(r.args([])).count()).run(conn) is True
    assert table.get_all(r.args([1, 2])).count().run(conn) == 2
    feed = table.get_all(r.args([2])).changes(include_initial=True).limit(1)
    assert list(feed.run(conn)) == [{"new_val": {"id": 2, "a": 2}}]


@pytest.mark.parametrize("query,message", [
    (lambda: r.time(r.args([1986, 11])), "Expected between 4 and 7 arguments but found 2."),
    (lambda: r.ast.Now(r.args([1])), "Expected 0 arguments but found 1."),
    (lambda: r.expr([1]).append(r.args([1, 2])), "Expected 2 arguments but found 3."),
    (lambda: r.add(r.args([])), "Expected 1 or more arguments but found 0."),
])
def test_args_wrong_count_after_expansion(conn, query, message):
    # RethinkDB checks the expanded count when the term runs: a runtime error, worded as
    # the compile-time one.
    with pytest.raises(ReqlQueryLogicError) as e:
        query().run(conn)
    assert e.value.message == message


# --- 3. filter with an object predicate and default --------------------------------------

def test_filter_object_predicate_default(conn, table):
    ids = lambda q: sorted(d["id"] for d in q.run(conn))
    # Rows lacking the field: kept with default=True, dropped otherwise.
    assert ids(table.filter({"missing_field": 10}, default=True)) == [1, 2, 3]
    assert ids(table.filter({"a": 1}, default=True)) == [1, 3]
    assert ids(table.filter({"a": 1})) == [1]
    assert ids(table.filter({"a": 1}, default=False)) == [1]
    with pytest.raises(ReqlNonExistenceError, match="No attribute `a` in object"):
        list(table.filter({"a": 1}, default=r.error()).run(conn))
    with pytest.raises(ReqlUserError, match="no a"):
        list(table.filter({"a": 1}, default=r.error("no a")).run(conn))
    # A function whose body is an object literal is a pattern too.
    assert ids(table.filter(lambda row: {"a": 2}, default=True)) == [2, 3]
    assert ids(table.filter(lambda row: row["a"].eq(2), default=True)) == [2, 3]


def test_filter_nested_pattern_and_count(conn):
    docs = r.expr([{"a": {"b": 1}}, {"a": {}}, {"a": 5}, {}])
    assert docs.filter({"a": {"b": 1}}).run(conn) == [{"a": {"b": 1}}]
    assert docs.filter({"a": {"b": 1}}, default=True).run(conn) == \
        [{"a": {"b": 1}}, {"a": {}}, {}]
    # count(f) is filter(f).count(): a row without the field is not counted.
    assert r.expr([{"a": 1}, {}]).count(lambda x: x["a"].eq(1)).run(conn) == 1


# --- 4. replica placement on one server --------------------------------------------------

def placement_error(servers):
    """RethinkDB's error for one replica more than there are servers."""
    return ("Can't put %d replicas on servers with the tag `default` because there are only %d "
            "servers with the tag `default`. It's impossible to have more replicas of the "
            "data than there are servers." % (servers + 1, servers))


def test_table_create_too_many_replicas(conn):
    # One replica more than there are servers (one, or PONDER_TEST_CLUSTER's).
    n = r.db("rethinkdb").table("server_config").count().run(conn)
    with pytest.raises(ReqlOpFailedError) as e:
        r.table_create("placed", replicas=n + 1).run(conn)
    assert e.value.message == placement_error(n)
    with pytest.raises(ReqlOpFailedError) as e:
        r.table_create("placed", replicas={"default": n + 1},
                       primary_replica_tag="default").run(conn)
    assert e.value.message == placement_error(n)
    with pytest.raises(ReqlOpFailedError, match="only 0 servers with the tag `other`"):
        r.table_create("placed", replicas={"default": 1, "other": 1},
                       primary_replica_tag="default").run(conn)
    with pytest.raises(ReqlQueryLogicError,
                       match="`replicas` must be an OBJECT if `primary_replica_tag`"):
        r.table_create("placed", replicas=1, primary_replica_tag="default").run(conn)
    assert "placed" not in r.table_list().run(conn)
    assert r.table_create("placed", replicas=1).run(conn)["tables_created"] == 1
    r.table_drop("placed").run(conn)
    assert r.table_create("placed", replicas={"default": 1},
                          primary_replica_tag="default").run(conn)["tables_created"] == 1
    with pytest.raises(ReqlOpFailedError) as e:
        r.table("placed").reconfigure(shards=1, replicas=n + 1).run(conn)
    assert e.value.message == placement_error(n)
    r.table_drop("placed").run(conn)


# --- 5. arity of terms that take no arguments --------------------------------------------

@pytest.mark.parametrize("query,message", [
    (lambda: r.ast.DbList(1), "Expected 0 arguments but found 1."),
    (lambda: r.ast.Now(1), "Expected 0 arguments but found 1."),
    (lambda: r.ast.TableList(r.db("test"), 1), "Expected between 0 and 1 arguments but found 2."),
    (lambda: r.ast.UUID("a", "b"), "Expected between 0 and 1 arguments but found 2."),
    (lambda: r.ast.Random(1, 2, 3), "Expected between 0 and 2 arguments but found 3."),
    (lambda: r.ast.IndexCreate(r.table("x")), "Expected between 2 and 3 arguments but found 1."),
    (lambda: r.ast.Slice(r.expr([1])), "Expected between 2 and 3 arguments but found 1."),
    (lambda: r.ast.Distinct(r.expr([1]), 1), "Expected 1 argument but found 2."),
    (lambda: r.ast.Wait(r.db("test"), 1), "Expected between 0 and 1 arguments but found 2."),
    (lambda: r.ast.Add(), "Expected 1 or more arguments but found 0."),
])
def test_arity_compile_errors(conn, query, message):
    with pytest.raises(ReqlServerCompileError) as e:
        query().run(conn)
    assert e.value.message == message


@pytest.mark.parametrize("term,name", [(177, "wait"), (179, "rebalance"), (176, "reconfigure")])
def test_table_or_db_terms_without_target(server, term, name):
    # The Python driver has no r.wait()/r.rebalance(): send the term as JavaScript's would.
    c = RawConn(server.port)
    try:
        resp = c.query(1, [term, []])
        assert resp["t"] == RUNTIME_ERROR, resp
        assert resp["r"] == ["`%s` can only be called on a table or database." % name]
        resp = c.query(2, [59, [1]])
        assert resp["t"] == COMPILE_ERROR, resp
        assert resp["r"] == ["Expected 0 arguments but found 1."]
    finally:
        c.close()


def test_table_create_placement_errors(conn):
    # RethinkDB's table_generate_config checks, in its order (cluster::placement).
    zero = ("You must set `replicas` to at least one. `replicas` includes the primary "
            "replica; if there are zero replicas, there is nowhere to put the data.")
    with pytest.raises(ReqlOpFailedError) as e:
        r.table_create("placed", replicas=0).run(conn)
    assert e.value.message == zero
    with pytest.raises(ReqlOpFailedError) as e:
        r.table_create("placed", replicas={"other": 0}, primary_replica_tag="ssd").run(conn)
    assert e.value.message == zero
    with pytest.raises(ReqlOpFailedError) as e:
        r.table_create("placed", replicas={"default": 1, "ssd": 0},
                       primary_replica_tag="ssd").run(conn)
    assert e.value.message == ("Can't use server tag `ssd` for primary replicas because you "
                               "specified no replicas in server tag `ssd`.")
    with pytest.raises(ReqlOpFailedError) as e:
        r.table_create("placed", replicas={"default": 1}, primary_replica_tag="default",
                       nonvoting_replica_tags=["arch"]).run(conn)
    assert e.value.message == ("You specified that the replicas in server tag `arch` should "
                               "be non-voting, but you didn't specify a number of replicas "
                               "in server tag `arch`.")
    with pytest.raises(ReqlOpFailedError, match="only 0 servers with the tag `arch`"):
        r.table_create("placed", replicas={"default": 1, "arch": 1},
                       primary_replica_tag="default", nonvoting_replica_tags=["arch"]).run(conn)
    assert "placed" not in r.table_list().run(conn)
