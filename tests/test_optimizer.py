"""The query optimizer (crates/reql/src/optimize.rs): unmodified queries answered from
indexes give exactly the answers of the table scan (`optimizer=False`), and the profile
says which plan ran."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from rethinkdb import r

LONG = "x" * 300


def plans(profiled):
    return [t["description"] for t in profiled["profile"][0]["sub_tasks"]]


@pytest.fixture(scope="module")
def db(server):
    c = server.connect()
    r.db_create("opt").run(c)
    t = r.db("opt").table_create("t").run(c)
    assert t["tables_created"] == 1
    tbl = r.db("opt").table("t")
    tbl.index_create("a").run(c)
    tbl.index_create("n").run(c)
    tbl.index_create("tags", multi=True).run(c)
    tbl.index_create("ab", [r.row["a"], r.row["b"]]).run(c)
    tbl.index_wait().run(c)
    yield c, tbl
    c.close()


def test_filter_forms_use_the_index_and_say_so(db):
    c, t = db
    t.delete().run(c)
    t.insert([{"id": i, "a": i % 10, "n": i, "b": "s%d" % (i % 3)} for i in range(200)]).run(c)
    want = [d for d in t.run(c, optimizer=False) if d["a"] == 3]
    want.sort(key=lambda d: d["id"])
    for q in [
        t.filter({"a": 3}),
        t.filter(r.row["a"] == 3),
        t.filter(lambda x: x["a"].eq(3)),
        t.filter(lambda x: r.expr(3).eq(x["a"])),
    ]:
        res = q.run(c, profile=True)
        assert list(res["value"]) == want
        assert any("index `a`" in p and "20 documents read" in p for p in plans(res)), plans(res)
        assert q.count().run(c) == 20
    off = t.filter({"a": 3}).run(c, profile=True, optimizer=False)
    assert list(off["value"]) == want
    assert any("Table scan" in p and "200 documents read" in p for p in plans(off)), plans(off)
    # the primary key
    res = t.filter(lambda x: (x["id"] >= 10) & (x["id"] < 13)).run(c, profile=True)
    assert [d["id"] for d in list(res["value"])] == [10, 11, 12]
    assert any("primary key `id`" in p for p in plans(res)), plans(res)
    # a compound index
    res = t.filter({"a": 1, "b": "s2"}).run(c, profile=True)
    assert [d["id"] for d in list(res["value"])] == [i for i in range(200) if i % 10 == 1 and i % 3 == 2]
    assert any("index `ab`" in p for p in plans(res)), plans(res)


def test_order_by_limit_min_max_from_the_index(db):
    c, t = db
    t.delete().run(c)
    t.insert([{"id": i, "n": (i * 7) % 50} for i in range(100)]).run(c)
    for q in [
        t.order_by("n").limit(5),
        t.order_by(r.desc("n")).limit(5),
        t.order_by("n"),
        t.order_by(r.desc("n")),
    ]:
        res = q.run(c, profile=True)
        assert list(res["value"]) == list(q.run(c, optimizer=False))
        assert any("from index `n`" in p for p in plans(res)), plans(res)
    assert t.min("n").run(c) == t.min("n").run(c, optimizer=False)
    assert t.max("n").run(c) == t.max("n").run(c, optimizer=False)
    # a document without the field: the index no longer orders every document
    t.insert({"id": 1000}).run(c)
    res = t.order_by("n").limit(3).run(c, profile=True)
    assert res["value"][0]["id"] == 1000
    assert not any("from index" in p for p in plans(res))


def test_changefeeds_on_filtered_tables_are_unchanged(db):
    c, t = db
    t.delete().run(c)
    feed = t.filter({"a": 5}).changes().run(c)
    t.insert([{"id": 1, "a": 5}, {"id": 2, "a": 6}]).run(c)
    ch = next(feed)
    assert ch["new_val"] == {"id": 1, "a": 5}
    feed.close()


def test_bad_optarg(db):
    c, t = db
    with pytest.raises(r.ReqlQueryLogicError, match="Expected type BOOL for optarg `optimizer`"):
        t.count().run(c, optimizer=1)


# ---------------------------------------------------------------- properties

values = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["a", "b", "m", "z", LONG + "a", LONG + "b", LONG]),
    st.booleans(),
    st.none(),
    st.lists(st.integers(-2, 2), max_size=3),
    st.fixed_dictionaries({"k": st.integers(0, 2)}),
)
MISSING = object()
field_value = st.one_of(st.just(MISSING), values)


@st.composite
def documents(draw):
    n = draw(st.integers(0, 25))
    docs = []
    for i in range(n):
        d = {"id": i * 3 % 31}
        for f in ("a", "b", "tags"):
            v = draw(field_value)
            if v is not MISSING:
                d[f] = v
        docs.append(d)
    return list({d["id"]: d for d in docs}.values())


consts = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["a", "m", "z", LONG, LONG + "a"]),
    st.booleans(),
    st.just([1, 2]),
)


@st.composite
def predicates(draw, depth=0):
    """(form, spec): spec is a nested tuple built into a query by `build`."""
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "and", "or", "not", "default"]))
    if depth > 1:
        kind = "cmp"
    f = draw(st.sampled_from(["a", "b", "id", "tags"]))
    op = draw(st.sampled_from(["eq", "lt", "le", "gt", "ge", "ne"]))
    c = draw(consts)
    if kind == "cmp":
        return ("cmp", f, op, c, draw(st.booleans()))
    if kind == "default":
        return ("default", f, op, c, draw(consts))
    if kind == "not":
        return ("not", draw(predicates(depth + 1)))
    return (kind, draw(predicates(depth + 1)), draw(predicates(depth + 1)))


def build(spec, row):
    k = spec[0]
    if k == "cmp":
        _, f, op, c, flipped = spec
        if flipped and op in ("eq", "ne"):
            return getattr(r.expr(c), op)(row[f])
        return getattr(row[f], op)(c)
    if k == "default":
        _, f, op, c, d = spec
        return getattr(row[f].default(d), op)(c)
    if k == "not":
        return build(spec[1], row).not_()
    a, b = build(spec[1], row), build(spec[2], row)
    return a & b if k == "and" else a | b


@st.composite
def queries(draw):
    form = draw(st.sampled_from(["lambda", "row", "object", "object"]))
    if form == "object":
        obj = {}
        for f in draw(st.lists(st.sampled_from(["a", "b", "id", "tags"]), min_size=1, max_size=2)):
            obj[f] = draw(consts)
        return ("object", obj, None)
    spec = draw(predicates())
    default = draw(st.sampled_from([None, None, False, True]))
    return (form, spec, default)


def make_filter(t, q):
    form, spec, default = q
    opts = {} if default is None else {"default": default}
    if form == "object":
        return t.filter(spec, **opts)
    if form == "row":
        return t.filter(build(spec, r.row), **opts)
    return t.filter(lambda x: build(spec, x), **opts)


def outcome(q, c, **kw):
    try:
        return ("ok", q.run(c, **kw))
    except r.ReqlError as e:
        return ("error", type(e).__name__, e.message)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(docs=documents(), qs=st.lists(queries(), min_size=1, max_size=4), n=st.integers(0, 5))
def test_optimizer_on_and_off_agree(db, docs, qs, n):
    c, t = db
    t.delete().run(c)
    t.insert(docs).run(c)
    for q in qs:
        f = make_filter(t, q)
        for query in (f, f.count(), f.limit(2)):
            on = outcome(query, c)
            off = outcome(query, c, optimizer=False)
            if on[0] == "ok" and not isinstance(on[1], (int, float)):
                on = ("ok", list(on[1]))
                off = ("ok", list(off[1]))
            assert on == off, (q, docs)
    for field in ("a", "b", "tags"):
        for query in (
            t.order_by(field).limit(n),
            t.order_by(r.desc(field)).limit(n),
            t.order_by(field),
            t.min(field),
            t.max(field),
        ):
            assert outcome(query, c) == outcome(query, c, optimizer=False), (field, docs)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(vals=st.lists(st.one_of(st.integers(-5, 5), st.sampled_from(["a", LONG + "b", LONG + "a"])), max_size=25),
       n=st.integers(0, 6))
def test_order_by_from_a_complete_index_agrees(db, vals, n):
    c, t = db
    t.delete().run(c)
    t.insert([{"id": i, "a": v} for i, v in enumerate(vals)]).run(c)
    for query in (t.order_by("a").limit(n), t.order_by(r.desc("a")).limit(n),
                  t.order_by("a"), t.order_by(r.desc("a")), t.min("a"), t.max("a")):
        assert outcome(query, c) == outcome(query, c, optimizer=False), vals
