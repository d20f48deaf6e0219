"""Point reads (`r.table(T).get(K)`, `r.db(D).table(T).get(K)`) are answered by the
server's fast path (`server::session::point`) when the query arrives in exactly that
shape, with no global optarg but `db`. Each query here runs twice: as the driver sends
it (the fast path) and with `profile=False` added, a global optarg the fast path does
not take (the normal path). Both must give the same value or the same error (class,
message, backtrace), and count the same queries and document reads in
`rethinkdb.stats`."""
import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlError
from rethinkdb.net import Query
from rethinkdb.ql2_pb2 import Query as PbQuery

pQuery = PbQuery.QueryType

DB = "prdb"
T = r.db(DB).table("t")
LONG = "k" * 200


@pytest.fixture(scope="module")
def admin(server):
    c = server.connect()
    r.db_create(DB).run(c)
    r.db(DB).table_create("t").run(c)
    r.table_create("tt").run(c)
    T.insert([
        {"id": "a", "v": 1, "nested": {"x": [1, "two", None, True]}},
        {"id": 5, "v": "five"},
        {"id": -7, "v": -7.5},
        {"id": "é k", "v": "unicode"},
        {"id": "k" * 127, "v": "longest key"},
    ]).run(c)
    r.table("tt").insert({"id": "in test", "v": 2}).run(c)
    yield c
    c.close()


def outcome(query, conn, **optargs):
    try:
        return ("value", query.run(conn, **optargs))
    except ReqlError as e:
        return (type(e).__name__, e.message, e.frames)


def both(query, conn):
    """The query's answer through the fast path, checked equal to the normal path's."""
    fast = outcome(query, conn)
    normal = outcome(query, conn, profile=False)
    assert fast == normal
    return fast


def wire(query, **optargs):
    """The START frame's payload the driver sends for `query`."""
    return Query(pQuery.START, 1, query, optargs).serialize()[12:].decode()


def test_the_driver_sends_the_recognised_shape():
    # What the fast path reads (and the unit tests of `point.rs` check it accepts).
    assert wire(T.get("a")) == '[1,[16,[[15,[[14,["prdb"]],"t"]],"a"]],{}]'
    assert wire(r.table("t").get(5), db=r.db("x")) == '[1,[16,[[15,["t"]],5]],{"db":[14,["x"]]}]'


def test_hits_and_misses(admin):
    assert both(T.get("a"), admin)[1]["nested"] == {"x": [1, "two", None, True]}
    assert both(T.get(5), admin) == ("value", {"id": 5, "v": "five"})
    assert both(T.get(-7), admin) == ("value", {"id": -7, "v": -7.5})
    assert both(T.get("é k"), admin)[1]["v"] == "unicode"
    assert both(T.get("k" * 127), admin)[1]["v"] == "longest key"
    assert both(T.get("nope"), admin) == ("value", None)
    assert both(T.get(6), admin) == ("value", None)
    # Keys the fast path leaves to the normal path give the same answers through it.
    assert both(T.get(5.0), admin)[1]["v"] == "five"
    assert both(T.get('a"b'), admin) == ("value", None)
    assert both(T.get([1, 2]), admin) == ("value", None)
    assert both(T.get(1.5), admin) == ("value", None)


def test_read_modes(admin):
    # `read_mode` on the table term is the one table optarg the fast path takes.
    assert wire(r.table("t", read_mode="outdated").get(5)) == \
        '[1,[16,[[15,["t"],{"read_mode":"outdated"}],5]],{}]'
    for mode in ("single", "majority", "outdated", "_debug_direct"):
        table = r.db(DB).table("t", read_mode=mode)
        assert both(table.get(5), admin) == ("value", {"id": 5, "v": "five"}), mode
        assert both(table.get("nope"), admin) == ("value", None), mode
    # Modes it does not know, and other optargs, are the normal path's, with its errors.
    for bad in ("fast", "Outdated", 1, ""):
        got = both(r.db(DB).table("t", read_mode=bad).get(5), admin)
        assert got[0] == "ReqlQueryLogicError", (bad, got)
    assert both(r.db(DB).table("t", read_mode="fast").get(5), admin)[1] == \
        'Read mode `fast` unrecognized (options are "majority", "single", and "outdated").'
    got = both(r.db(DB).table("t", read_mode="outdated", identifier_format="uuid").get(5),
               admin)
    assert got == ("value", {"id": 5, "v": "five"})


def test_the_default_database(server, admin):
    assert both(r.table("tt").get("in test"), admin)[1]["v"] == 2
    c = server.connect(db=DB)
    try:
        assert both(r.table("t").get("a"), c)[1]["v"] == 1
        # The term's database wins over the connection's.
        assert both(r.db("test").table("tt").get("in test"), c)[1]["v"] == 2
    finally:
        c.close()


def test_errors(server, admin):
    cases = [
        T.get(LONG),
        T.get(None),
        T.get({"a": 1}),
        r.db(DB).table("missing").get(1),
        r.db("missingdb").table("t").get(1),
        r.table("missing").get(1),
        r.db(DB).table("a b").get(1),
        r.db("rethinkdb").table("nope").get(1),
    ]
    for q in cases:
        got = both(q, admin)
        assert got[0] != "value", (q, got)
    assert "too long" in both(T.get(LONG), admin)[1]
    assert both(r.db("missingdb").table("t").get(1), admin)[1] == \
        "Database `missingdb` does not exist."
    c = server.connect(db="missingdb")
    try:
        assert both(r.table("t").get(1), c)[1] == "Database `missingdb` does not exist."
    finally:
        c.close()


def test_system_tables_keep_their_rules(admin):
    sid = r.db("rethinkdb").table("server_config").nth(0)["id"].run(admin)
    assert both(r.db("rethinkdb").table("server_config").get(sid), admin)[1]["id"] == sid


def test_permissions(server, admin):
    r.db("rethinkdb").table("users").insert({"id": "pr_reader", "password": "pw"}).run(admin)
    c = server.connect(user="pr_reader", password="pw")
    try:
        denied = both(T.get("a"), c)
        assert denied[0] == "ReqlPermissionError", denied
        assert "read" in denied[1]
        assert both(T.get("nope"), c)[0] == "ReqlPermissionError"
        T.grant("pr_reader", {"read": True}).run(admin)
        assert both(T.get("a"), c)[1]["v"] == 1
        assert both(T.get("nope"), c) == ("value", None)
        T.grant("pr_reader", {"read": False}).run(admin)
        assert both(T.get("a"), c)[0] == "ReqlPermissionError"
    finally:
        c.close()


def server_stats(conn):
    # The row of the server this connection talks to (a cluster has one per server).
    row = r.db("rethinkdb").table("stats").get(["server", conn.server()["id"]]).run(conn)
    q = row["query_engine"]
    return q["queries_total"], q["read_docs_total"]


@pytest.mark.parametrize("optargs", [{}, {"profile": False}], ids=["fast", "normal"])
def test_stats_count_each_query_and_read(server, admin, optargs):
    c = server.connect()
    try:
        q0, d0 = server_stats(admin)
        for k in ["a", 5, "nope", 6]:
            T.get(k).run(c, **optargs)
        q1, d1 = server_stats(admin)
    finally:
        c.close()
    # The second stats query counts itself.
    assert (q1 - q0, d1 - d0) == (4 + 1, 4)


def test_noreply_and_profile_still_answer_as_before(admin):
    T.get("a").run(admin, noreply=True)
    admin.noreply_wait()
    res = T.get("a").run(admin, profile=True)
    assert res["value"]["v"] == 1
    assert isinstance(res["profile"], list)
