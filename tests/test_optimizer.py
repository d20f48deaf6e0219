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


# ------------------------------------------- one-sided ranges, count, statistics

def agree(c, q, served, index="n"):
    """Runs `q` with the optimizer on and off: same answer (as a list); `served` says
    whether the plan must read index `index`."""
    res = q.run(c, profile=True)
    on = res["value"] if isinstance(res["value"], (int, float)) else list(res["value"])
    off = q.run(c, optimizer=False)
    off = off if isinstance(off, (int, float)) else list(off)
    assert on == off
    read = any(("index `%s`" % index in p or "primary key `%s`" % index in p)
               and "Optimizer" in p for p in plans(res))
    assert read == served, plans(res)
    return on, plans(res)


def test_one_sided_ranges_follow_the_statistics(db):
    c, t = db
    t.delete().run(c)
    t.insert([{"id": i, "n": i} for i in range(200)] + [{"id": 1000 + i} for i in range(20)]
             + [{"id": 500, "n": None}]).run(c)
    # Null sorts below numbers: `>` never reaches it, `<` does.
    agree(c, t.filter(r.row["n"] > 190), True)
    agree(c, t.filter(lambda d: d["n"].ge(195)), True)
    agree(c, t.filter(lambda d: r.expr(195).lt(d["n"])), True)
    agree(c, t.filter((r.row["n"] > 30) & (r.row["n"] < 40)), True)
    got, _ = agree(c, t.filter(r.row["n"] < 3), False)
    assert [d["id"] for d in got] == [0, 1, 2, 500]
    # Without the null, `<` is served; a default that lets missing fields match is not.
    t.get(500).update({"n": 250}).run(c)
    agree(c, t.filter(r.row["n"] < 3), True)
    agree(c, t.filter(lambda d: d["n"].le(4)), True)
    agree(c, t.filter(lambda d: d["n"].default(-1) < 3), False)
    agree(c, t.filter(lambda d: d["n"].default(9) < 3), True)
    # An object sorts above numbers: `>` must see it, `<` need not.
    t.insert({"id": 501, "n": {"k": 1}}).run(c)
    got, _ = agree(c, t.filter(r.row["n"] > 240), False)
    assert [d["id"] for d in got] == [500, 501]
    agree(c, t.filter(r.row["n"] < 3), True)
    agree(c, t.filter(r.row["n"] > "a"), True)
    # An array holding an object has no entry and sorts below everything.
    t.insert({"id": 502, "n": [{"k": 1}]}).run(c)
    got, _ = agree(c, t.filter(r.row["n"] < 1), False)
    assert [d["id"] for d in got] == [0, 502]
    agree(c, t.filter((r.row["n"] > 0.5) & (r.row["n"] < 1.5)), True)
    # Moved out of the bands again: both sides served.
    t.get(501).update({"n": 300}).run(c)
    t.get(502).delete().run(c)
    agree(c, t.filter(r.row["n"] > 240), True)
    agree(c, t.filter(r.row["n"] < 1), True)


def test_count_of_an_exact_plan_reads_no_document(db):
    c, t = db
    t.delete().run(c)
    t.insert([{"id": i, "n": i % 100, "a": ("%s%03d" % (LONG, i % 50)) if i % 2 else i % 7,
               "tags": [i % 5, (i + 1) % 5]} for i in range(400)]
             + [{"id": 1000 + i} for i in range(50)]).run(c)
    for q in [t.filter({"n": 7}), t.filter(r.row["n"] > 90), t.filter(lambda d: d["n"].ge(95)),
              t.filter((r.row["n"] >= 10) & (r.row["n"] < 20)),
              t.filter(lambda d: (d["n"] < 3) | (d["n"] > 97)), t.filter(r.row["id"] < 30)]:
        n, p = agree(c, q.count(), True, index="n" if "id" not in str(q) else "id")
        assert any("counted from index keys" in x and "0 documents read" in x for x in p), p
    # Truncated keys: strings sharing a 300-byte prefix, counted by their whole value.
    for q in [t.filter(r.row["a"] > LONG + "010"), t.filter(r.row["a"] == LONG + "007"),
              t.filter((r.row["a"] >= LONG + "020") & (r.row["a"] < LONG + "025"))]:
        n, p = agree(c, q.count(), True, index="a")
        assert n > 0
        assert any("counted from index keys" in x for x in p), p
    # A residual test, a multi index (a document matching twice): documents are read.
    for q, ix in [(t.filter((r.row["n"] == 7) & (r.row["id"] != 7)), "n"), (t.filter({"tags": 3}), "tags")]:
        n, p = agree(c, q.count(), True, index=ix)
        assert not any("counted from index keys" in x for x in p), p


def test_the_index_with_fewer_entries_in_range_is_chosen(db):
    c, t = db
    t.delete().run(c)
    t.insert([{"id": i, "a": i % 200, "n": i % 4} for i in range(400)]).run(c)
    q = t.filter({"a": 3, "n": 1})
    _, p = agree(c, q, True, index="a")
    assert any("index `a`" in x and "2 documents read" in x for x in p), p
    t.delete().run(c)
    t.insert([{"id": i, "a": i % 4, "n": i % 200} for i in range(400)]).run(c)
    _, p = agree(c, t.filter(lambda d: (d["a"] == 1) & (d["n"] > 196)), True, index="n")
    assert not any("index `a`" in x for x in p), p


def test_statistics_survive_restarts(make_server, tmp_path):
    d = str(tmp_path / "data")
    srv = make_server(directory=d)
    c = srv.connect()
    r.table_create("s").run(c)
    t = r.table("s")
    t.index_create("n").run(c)
    t.index_wait().run(c)
    t.insert([{"id": i, "n": i} for i in range(300)] + [{"id": 900, "n": None},
                                                         {"id": 901, "n": {"o": 1}}]).run(c)
    agree(c, t.filter(r.row["n"] < 3), False)
    agree(c, t.filter(r.row["n"] > 296), False)
    c.close()
    srv.kill9()
    srv = make_server(directory=d)
    c = srv.connect()
    # Counted again from the markers: still neither side.
    agree(c, t.filter(r.row["n"] < 3), False)
    agree(c, t.filter(r.row["n"] > 296), False)
    t.get(900).delete().run(c)
    agree(c, t.filter(r.row["n"] < 3), True)
    c.close()
    srv.stop()
    srv = make_server(directory=d)
    c = srv.connect()
    agree(c, t.filter(r.row["n"] < 3), True)
    agree(c, t.filter(r.row["n"] > 296), False)
    t.get(901).update({"n": 5}).run(c)
    agree(c, t.filter(r.row["n"] > 296), True)
    # An index built on a table holding such values counts them in its backfill.
    t.insert({"id": 902, "n": [{"x": 1}]}).run(c)
    t.index_create("m", r.row["n"]).run(c)
    t.index_wait().run(c)
    agree(c, t.filter(r.row["n"] < 3), False)
    c.close()


range_values = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["a", "m", LONG + "a", LONG + "b", LONG]),
    st.booleans(),
    st.none(),
    st.lists(st.integers(-2, 2), max_size=2),
    st.just([{"k": 1}]),
    st.fixed_dictionaries({"k": st.integers(0, 2)}),
)


@st.composite
def range_predicates(draw):
    f = draw(st.sampled_from(["n", "n", "tags"]))
    ops = draw(st.lists(st.sampled_from(["lt", "le", "gt", "ge", "eq"]), min_size=1, max_size=2))
    cs = [draw(st.one_of(st.integers(-3, 3), st.sampled_from(["a", "m", LONG + "a"]), st.booleans()))
          for _ in ops]
    joiner = draw(st.sampled_from(["and", "or"]))
    form = draw(st.sampled_from(["lambda", "row"]))
    default = draw(st.sampled_from([None, None, None, -10, 10]))
    return (f, list(zip(ops, cs)), joiner, form, default)


def range_filter(t, p):
    f, parts, joiner, form, default = p

    def body(row):
        v = row[f] if default is None else row[f].default(default)
        terms = [getattr(v, op)(c) for op, c in parts]
        out = terms[0]
        for x in terms[1:]:
            out = (out & x) if joiner == "and" else (out | x)
        return out

    return t.filter(lambda d: body(d)) if form == "lambda" else t.filter(body(r.row))


@st.composite
def steps(draw):
    if draw(st.booleans()):
        return ("query", draw(range_predicates()))
    key = draw(st.integers(0, 14))
    kind = draw(st.sampled_from(["put", "put", "delete"]))
    return ("write", key, kind, draw(st.one_of(st.just(MISSING), range_values)),
            draw(st.one_of(st.just(MISSING), range_values)))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.lists(st.tuples(st.one_of(st.just(MISSING), range_values),
                                st.one_of(st.just(MISSING), range_values)), max_size=15),
       plan=st.lists(steps(), min_size=1, max_size=10))
def test_ranges_and_counts_agree_through_writes(db, seed, plan):
    """One-sided and two-sided ranges and their counts, with values in every band
    (null, objects, arrays holding objects, long strings), a multi index, and writes
    between queries moving values into and out of the bands the statistics count.
    Fillers lacking the fields keep index plans selective."""
    c, t = db
    t.delete().run(c)

    def doc(i, n, tags):
        d = {"id": i}
        if n is not MISSING:
            d["n"] = n
        if tags is not MISSING:
            d["tags"] = tags
        return d

    t.insert([doc(i, n, g) for i, (n, g) in enumerate(seed)]
             + [{"id": 100 + i} for i in range(40)]).run(c)
    for s in plan:
        if s[0] == "write":
            _, key, kind, n, g = s
            if kind == "delete":
                t.get(key).delete().run(c)
            else:
                t.insert(doc(key, n, g), conflict="replace").run(c)
            continue
        q = range_filter(t, s[1])
        for query in (q, q.count()):
            on = outcome(query, c)
            off = outcome(query, c, optimizer=False)
            if on[0] == "ok" and not isinstance(on[1], (int, float)):
                on, off = ("ok", list(on[1])), ("ok", list(off[1]))
            assert on == off, (s, list(t.run(c, optimizer=False)))
