"""The long tail of ReQL, checked through the official Python driver against RethinkDB
2.4's rules: merge-ordered `union` (`interleave`), `fold` with `final_emit`, reading
numbers from strings (`coerce_to('number')`), `between` after `order_by(index=)`,
time portions of fractional epoch seconds, and the rows and results of permissions."""
import pytest
from rethinkdb import r
from rethinkdb.errors import (ReqlOpFailedError, ReqlPermissionError, ReqlQueryLogicError,
                              ReqlServerCompileError)


@pytest.fixture
def tables(conn):
    names = ["lt_even", "lt_odd", "lt_odd2"]
    for n in names:
        if n in r.table_list().run(conn):
            r.table_drop(n).run(conn)
        r.table_create(n).run(conn)
    even, odd, odd2 = (r.table(n) for n in names)
    odd.insert([{"id": 1, "num": 1}, {"id": 3, "num": 3}, {"id": 5, "num": 5}]).run(conn)
    even.insert([{"id": 2, "num": 2}, {"id": 4, "num": 4}, {"id": 6, "num": 6}]).run(conn)
    odd2.insert([{"id": 7, "num": 1}, {"id": 8, "num": 3}, {"id": 9, "num": 2}]).run(conn)
    yield even, odd, odd2
    for n in names:
        r.table_drop(n).run(conn)


def ids(rows):
    return [row["id"] for row in rows]


# --- union with interleave -------------------------------------------------------------

def test_union_interleave_false_concatenates_in_argument_order(conn, tables):
    even, odd, _ = tables
    q = odd.order_by("num").union(even.order_by("num"), interleave=False)
    assert ids(q.run(conn)) == [1, 3, 5, 2, 4, 6]
    assert list(r.range().limit(10000).union([1, 2, 3], interleave=False).run(conn)) == \
        list(range(10000)) + [1, 2, 3]


def test_union_merges_on_a_field_a_function_or_several_keys(conn, tables):
    even, odd, odd2 = tables
    assert ids(odd.order_by("num").union(even.order_by("num"), interleave="num")
               .run(conn)) == [1, 2, 3, 4, 5, 6]
    assert ids(odd.order_by("num").union(even.order_by("num"),
                                         interleave=lambda x: x["num"]).run(conn)) == \
        [1, 2, 3, 4, 5, 6]
    q = odd2.order_by("num", r.desc("id")).union(
        even.order_by("num", r.desc("id")), interleave=[lambda x: x["num"], lambda x: x["id"]])
    assert ids(q.run(conn)) == [7, 2, 9, 8, 4, 6]
    q = odd.order_by(r.desc("num")).union(even.order_by(r.desc("num")),
                                          interleave=[r.desc(lambda x: x["num"])])
    assert ids(q.run(conn)) == [6, 5, 4, 3, 2, 1]
    q = odd.order_by("num", "id").union(even.order_by("num", "id"),
                                        odd2.order_by("num", "id"), interleave=["num", "id"])
    assert ids(q.run(conn)) == [1, 7, 2, 9, 3, 8, 4, 5, 6]


def test_union_checks_that_its_inputs_are_in_the_given_order(conn, tables):
    even, odd, odd2 = tables
    msg = "The streams given as arguments are not ordered by given ordering."
    with pytest.raises(ReqlQueryLogicError, match=msg):
        odd.order_by("num").union(even.order_by("num"), interleave=r.desc("num")).run(conn)
    with pytest.raises(ReqlQueryLogicError, match=msg):
        odd.order_by("num", "id").union(even.order_by("num", "id"),
                                        odd2.order_by(r.desc("num"), "id"),
                                        interleave=["num", "id"]).run(conn)
    with pytest.raises(ReqlQueryLogicError, match=msg):
        r.expr([3, 1]).union([2], interleave=lambda x: x).run(conn)


def test_union_merge_puts_missing_keys_first_and_stays_lazy(conn):
    assert r.expr([{"x": 1}, {"x": 3}]).union([{"y": 0}, {"x": 2}], interleave="x") \
        .run(conn) == [{"y": 0}, {"x": 1}, {"x": 2}, {"x": 3}]
    assert r.expr([{"x": 3}, {"x": 1}]).union([{"x": 2}, {"y": 0}], interleave=r.desc("x")) \
        .run(conn) == [{"x": 3}, {"x": 2}, {"x": 1}, {"y": 0}]
    # Two infinite inputs: the merge pulls one item at a time.
    assert list(r.range().union(r.range(), interleave=lambda x: x).limit(5).run(conn)) == \
        [0, 0, 1, 1, 2]


def test_desc_outside_order_by_or_union_is_a_compile_error(conn, tables):
    even, odd, _ = tables
    msg = "DESC may only be used as an argument to ORDER_BY or UNION."
    with pytest.raises(ReqlServerCompileError, match=msg):
        odd.order_by("num").union(even.order_by("num"),
                                  interleave=lambda x: r.desc(x["num"])).run(conn)
    with pytest.raises(ReqlServerCompileError, match=msg):
        r.expr({"a": r.desc("x")}).run(conn)
    with pytest.raises(ReqlServerCompileError, match="ASC may only be used"):
        r.expr([1]).map(lambda x: r.asc(x)).run(conn)


# --- fold ------------------------------------------------------------------------------

def test_fold_final_emit_without_emit_returns_its_value(conn):
    assert r.range(0, 10).fold(0, lambda acc, row: acc.add(1),
                               final_emit=lambda acc: acc.mul(2)).run(conn) == 20
    assert r.expr([]).fold(0, lambda acc, row: acc.add(1),
                           final_emit=lambda acc: [acc]).run(conn) == [0]
    with_emit = r.range(0, 10).fold(0, lambda acc, row: acc.add(1),
                                    emit=lambda old, row, acc: r.branch(acc.mod(3).eq(0), [row], []),
                                    final_emit=lambda acc: [acc])
    assert list(with_emit.run(conn)) == [2, 5, 8, 10]
    with pytest.raises(ReqlQueryLogicError, match="Expected type ARRAY but found NUMBER."):
        r.range(0, 10).fold(0, lambda acc, _: acc.add(1), emit=lambda old, row, acc: acc).run(conn)
    with pytest.raises(ReqlQueryLogicError, match="Expected type ARRAY but found NUMBER."):
        r.expr([1]).fold(0, lambda acc, _: acc.add(1), emit=lambda old, row, acc: [acc],
                         final_emit=lambda acc: acc).run(conn)


# --- coerce_to('number') ---------------------------------------------------------------

@pytest.mark.parametrize("text,message", [
    ("inf", "Non-finite number: inf"),
    ("-inf", "Non-finite number: -inf"),
    ("Infinity", "Non-finite number: inf"),
    ("nan", "Non-finite number: nan"),
    ("NaN", "Non-finite number: nan"),
    ("1e400", "Non-finite number: inf"),
    ("-1e400", "Non-finite number: -inf"),
    ("1 ", "Could not coerce `1 ` to NUMBER."),
    ("1e", "Could not coerce `1e` to NUMBER."),
    ("infin", "Could not coerce `infin` to NUMBER."),
    ("", "Could not coerce `` to NUMBER."),
])
def test_coerce_string_to_number_errors(conn, text, message):
    with pytest.raises(ReqlQueryLogicError) as e:
        r.expr(text).coerce_to("number").run(conn)
    assert e.value.message == message


@pytest.mark.parametrize("text,value", [
    ("+1", 1), ("  -2.5", -2.5), (".5", 0.5), ("5.", 5), ("0x10", 16), ("0x1.8p1", 3),
    ("1e-400", 0),
])
def test_coerce_string_to_number_reads_c_syntax(conn, text, value):
    assert r.expr(text).coerce_to("number").run(conn) == value


# --- between after order_by(index=) ----------------------------------------------------

def test_between_after_an_indexed_order_by(conn):
    if "lt_between" in r.table_list().run(conn):
        r.table_drop("lt_between").run(conn)
    r.table_create("lt_between").run(conn)
    t = r.table("lt_between")
    t.insert([{"id": i, "a": 10 - i, "b": i % 3} for i in range(10)]).run(conn)
    t.index_create("a").run(conn)
    t.index_create("b").run(conn)
    t.index_wait().run(conn)
    # Without `index`, between uses the index the slice is ordered by.
    assert ids(t.order_by(index="a").between(3, 6).run(conn)) == [7, 6, 5]
    assert ids(t.order_by(index=r.desc("a")).between(3, 6).run(conn)) == [5, 6, 7]
    assert ids(t.order_by(index="a").between(3, 6, index="a").run(conn)) == [7, 6, 5]
    with pytest.raises(ReqlQueryLogicError,
                       match="Cannot call BETWEEN on index `b` after ordering on index `a`."):
        t.order_by(index="a").between(1, 5, index="b").run(conn)
    with pytest.raises(ReqlQueryLogicError,
                       match="Cannot call BETWEEN on index `id` after ordering on index `a`."):
        t.order_by(index="a").between(1, 5, index="id").run(conn)
    with pytest.raises(ReqlQueryLogicError,
                       match="Cannot order by index `a` after calling BETWEEN on index `id`."):
        t.between(1, 5).order_by(index="a").run(conn)
    r.table_drop("lt_between").run(conn)


# --- times from fractional epoch seconds -----------------------------------------------

def test_fractional_epoch_times(conn):
    assert r.epoch_time(1.2345678).to_epoch_time().run(conn) == 1.235
    assert r.epoch_time(1.1).to_iso8601().run(conn) == "1970-01-01T00:00:01.100+00:00"
    assert r.epoch_time(-1.5).to_iso8601().run(conn) == "1969-12-31T23:59:58.500+00:00"
    assert r.epoch_time(1.9999).to_iso8601().run(conn) == "1970-01-01T00:00:02+00:00"
    # RethinkDB rounds the epoch to 1.001, then prints whole microseconds truncated
    # (1000999) to milliseconds.
    assert r.epoch_time(1.0005).to_epoch_time().run(conn) == 1.001
    assert r.epoch_time(1.0005).to_iso8601().run(conn) == "1970-01-01T00:00:01.000+00:00"
    assert r.epoch_time(61.25).seconds().run(conn) == 1.25
    # `seconds` adds C's signed `modf` fraction to the whole seconds: 58 - 0.5.
    assert r.epoch_time(-1.5).seconds().run(conn) == 57.5


# --- permissions -----------------------------------------------------------------------

@pytest.fixture
def grantee(conn):
    users = r.db("rethinkdb").table("users")
    users.get("lt_user").delete().run(conn)
    users.insert({"id": "lt_user", "password": False}).run(conn)
    for name in ("lt_db",):
        if name in r.db_list().run(conn):
            r.db_drop(name).run(conn)
    r.db_create("lt_db").run(conn)
    r.db("lt_db").table_create("t").run(conn)
    yield "lt_user"
    users.get("lt_user").delete().run(conn)
    r.db_drop("lt_db").run(conn)


def test_grant_results_at_every_scope(conn, grantee):
    def change(old, new):
        return {"granted": 1, "permissions_changes": [{"old_val": old, "new_val": new}]}

    full = {"read": True, "write": True, "config": True, "connect": True}
    assert r.grant(grantee, full).run(conn) == change(None, full)
    assert r.grant(grantee, {"read": False, "write": False}).run(conn) == \
        change(full, {"read": False, "write": False, "config": True, "connect": True})
    assert r.grant(grantee, {"read": None}).run(conn) == \
        change({"read": False, "write": False, "config": True, "connect": True},
               {"write": False, "config": True, "connect": True})
    same = {"write": False, "config": True, "connect": True}
    assert r.grant(grantee, {}).run(conn) == change(same, same)
    assert r.grant(grantee, {"write": None, "config": None, "connect": None}).run(conn) == \
        change(same, None)
    scoped = {"read": True, "write": True, "config": True}
    assert r.db("lt_db").grant(grantee, scoped).run(conn) == change(None, scoped)
    assert r.db("lt_db").table("t").grant(grantee, scoped).run(conn) == change(None, scoped)
    assert r.db("lt_db").grant(grantee, {"read": None, "write": None, "config": None}) \
        .run(conn) == change(scoped, None)
    assert r.db("lt_db").grant(grantee, {"read": None}).run(conn) == change(None, None)
    for scope in (r, r.db("lt_db"), r.db("lt_db").table("t")):
        with pytest.raises(ReqlOpFailedError, match="Expected a boolean or null for `read`, got 1."):
            scope.grant(grantee, {"read": 1}).run(conn)
        with pytest.raises(ReqlOpFailedError, match=r"Unexpected key\(s\) `invalid`."):
            scope.grant(grantee, {"invalid": "invalid"}).run(conn)
        with pytest.raises(ReqlOpFailedError,
                           match="The permissions of the user `admin` can't be modified."):
            scope.grant("admin", {"config": False}).run(conn)
        with pytest.raises(ReqlOpFailedError, match="User `nobody` not found."):
            scope.grant("nobody", {"read": True}).run(conn)
    for scope in (r.db("lt_db"), r.db("lt_db").table("t")):
        with pytest.raises(ReqlOpFailedError,
                           match="The `connect` permission is only valid at the global scope."):
            scope.grant(grantee, {"connect": True}).run(conn)


def test_permission_rows_name_their_user(conn, server, grantee):
    perms = r.db("rethinkdb").table("permissions")
    r.grant(grantee, {"read": True}).run(conn)
    r.db("lt_db").grant(grantee, {"write": True}).run(conn)
    r.db("lt_db").table("t").grant(grantee, {"config": False}).run(conn)
    rows = perms.filter({"user": grantee}).run(conn)
    assert sorted(len(row["id"]) for row in rows) == [1, 2, 3]
    assert all(row["user"] == grantee for row in rows)
    # admin: every global permission and every permission on `rethinkdb`, fixed.
    admin = perms.filter({"user": "admin"}).order_by(lambda row: row["id"].count()).run(conn)
    assert [row["permissions"] for row in admin] == [
        {"read": True, "write": True, "config": True, "connect": True},
        {"read": True, "write": True, "config": True}]
    assert admin[1]["database"] == "rethinkdb"
    # Writes may repeat the user, which must match the key.
    assert perms.get([grantee]).update({"user": grantee, "permissions": {"write": True}}) \
        .run(conn)["replaced"] == 1
    res = perms.get([grantee]).update({"user": "someone", "permissions": {}}).run(conn)
    assert res["first_error"] == "The key `user` does not match the primary key."
    # Deleting by `user` removes every scope, as RethinkDB's grant test does.
    assert perms.filter({"user": grantee}).delete().run(conn)["deleted"] == 3
    with server.connect(user=grantee, password="") as c:
        with pytest.raises(ReqlPermissionError,
                           match="User `lt_user` does not have the required `read` permission."):
            r.grant(grantee, {"read": True}).run(c)
