"""Backtraces: which part of a query an error is charged to (the frames drivers turn into
`^^^^` under the failing term), per RethinkDB 2.4's rules: a term's own checks and checks
on plain values blame the term; converting an evaluated argument blames the term that
produced the value; checks that name an argument blame it; errors inside functions keep
their own paths. The frames are read from the official driver's `frames` attribute."""
import pytest
from rethinkdb import r


@pytest.fixture(scope="module")
def tconn(server):
    c = server.connect()
    if "bt" not in r.table_list().run(c):
        r.table_create("bt").run(c)
        r.table("bt").insert([{"id": 1, "a": 1}, {"id": 2, "a": "x"}]).run(c)
    yield c
    c.close()


def frames(c, q):
    with pytest.raises(r.ReqlError) as e:
        q.run(c)
    return list(e.value.frames or []), e.value.message


CASES = [
    # Rule 1: a term's own checks blame the term.
    ("div by zero", lambda: r.expr(1).div(0), [], "Cannot divide by zero."),
    ("mod by zero", lambda: r.expr(5).mod(0), [], "Cannot take a number modulo 0."),
    ("r.error", lambda: r.expr(1).add(r.error("boom")), [1], "boom"),
    ("nth out of bounds", lambda: r.expr([1, 2]).nth(5), [], "Index out of bounds: 5"),
    ("missing db", lambda: r.db("nodb").table("t"), [0], "Database `nodb` does not exist."),
    ("missing db, table_list", lambda: r.db("nodb").table_list(), [0],
     "Database `nodb` does not exist."),
    ("missing table", lambda: r.db("test").table("notable"), [],
     "Table `test.notable` does not exist."),
    ("limit negative", lambda: r.expr([1]).limit(-1), [],
     "LIMIT takes a non-negative argument (got -1)"),
    ("negative index on a stream", lambda: r.range(3).nth(-1), [],
     "Cannot use a negative index on a stream."),
    # Rule 2: checks on plain values blame the operator, whichever operand is wrong.
    ("add array + string", lambda: r.expr([7, 8]).add("z"), [],
     "Expected type ARRAY but found STRING."),
    ("add number + string", lambda: r.expr(1).add("z"), [], "Expected type NUMBER but found STRING."),
    ("add object + number", lambda: r.expr({"a": 1}).add(1), [],
     "Expected type NUMBER but found OBJECT."),
    ("sub", lambda: r.expr("a").sub(1), [], "Expected type NUMBER but found STRING."),
    ("mul array by string", lambda: r.expr([1, 2, 3]).mul("Hello"), [],
     "Expected type NUMBER but found STRING."),
    ("div by string", lambda: r.expr(1).div("x"), [], "Expected type NUMBER but found STRING."),
    ("nested add inside and", lambda: r.expr(True).and_(r.expr("s").add(5)), [1],
     "Expected type STRING but found NUMBER."),
    ("add in an array literal", lambda: r.expr([1, r.expr(1).add("x")]), [1],
     "Expected type NUMBER but found STRING."),
    ("add in an object literal", lambda: r.expr({"a": r.expr(1).add("x")}), ["a"],
     "Expected type NUMBER but found STRING."),
    ("r.args spliced value", lambda: r.add(r.args([1, "a"])), [],
     "Expected type NUMBER but found STRING."),
    ("insert_at index", lambda: r.expr([7, 8]).insert_at("q", 1), [],
     "Expected type NUMBER but found STRING."),
    ("delete_at index", lambda: r.expr([7, 8]).delete_at("q"), [],
     "Expected type NUMBER but found STRING."),
    ("set_insert on non-array", lambda: r.expr(1).set_insert(2), [],
     "Expected type ARRAY but found NUMBER."),
    ("convert number to sequence", lambda: r.expr(1).filter(lambda x: x), [],
     "Cannot convert NUMBER to SEQUENCE"),
    ("sum of strings", lambda: r.expr(["a"]).sum(), [], "Expected type NUMBER but found STRING."),
    # Rule 3: converting an argument blames the term that produced the value.
    ("mod converts its arguments", lambda: r.expr([7, 8]).mod("z"), [0],
     "Expected type NUMBER but found ARRAY."),
    ("nth index", lambda: r.expr([7, 8]).nth("q"), [1], "Expected type NUMBER but found STRING."),
    ("limit count", lambda: r.expr([1]).limit("a"), [1], "Expected type NUMBER but found STRING."),
    ("slice start", lambda: r.expr([1, 2]).slice("a"), [1], "Expected type NUMBER but found STRING."),
    ("upcase", lambda: r.expr(1).upcase(), [0], "Expected type STRING but found NUMBER."),
    ("match pattern", lambda: r.expr("a").match(1), [1], "Expected type STRING but found NUMBER."),
    ("get_field name", lambda: r.expr({"a": 1}).get_field(1), [1],
     "Expected type STRING but found NUMBER."),
    ("point coordinate", lambda: r.point(1, "a"), [1], "Expected type NUMBER but found STRING."),
    ("variable", lambda: r.expr("s").do(lambda x: r.expr([1]).nth(x)), [0, 1, 1],
     "Expected type NUMBER but found STRING."),
    ("value passed on by branch", lambda: r.branch(True, "s", 1).mod(2), [0, 1],
     "Expected type NUMBER but found STRING."),
    ("value passed on by do", lambda: r.expr(1).do(lambda x: "s").mod(2), [0, 0, 1],
     "Expected type NUMBER but found STRING."),
    ("nested branches", lambda: r.branch(True, r.branch(False, 1, "s"), 1).mod(2),
     [0, 1, 2], "Expected type NUMBER but found STRING."),
    # Rule 4: checks that name an argument blame it.
    ("keys of a number", lambda: r.expr(1).keys(), [0], "Cannot call `keys` on objects of type `NUMBER`."),
    ("coerce_to", lambda: r.expr(1).coerce_to("array"), [0], "Cannot coerce NUMBER to ARRAY."),
    ("iso8601", lambda: r.iso8601("bad"), [0],
     "Invalid date string `bad` (got `b` but expected a digit)."),
    ("durability optarg", lambda: r.table("bt").insert({}, durability="sofft"), ["durability"],
     'Durability option `sofft` unrecognized (options are "hard" and "soft").'),
    ("invalid table name", lambda: r.table("a b"), [0],
     "Table name `a b` invalid (Use A-Z, a-z, 0-9, _ and - only)."),
    ("bracket on a number", lambda: r.expr([1]).map(lambda x: x["a"]), [1, 1],
     "Cannot perform bracket on a non-object non-sequence `1`."),
    # Rule 5: functions keep their paths, also lazily inside a stream.
    ("function body", lambda: r.expr(3).do(lambda x: x.add("s")), [0, 1],
     "Expected type NUMBER but found STRING."),
    ("lazy map under count", lambda: r.expr([1, 2]).map(lambda x: x.add("a")).count(), [0, 1, 1],
     "Expected type NUMBER but found STRING."),
    ("filter body", lambda: r.expr([1, 2]).filter(lambda x: x.add("a")), [1, 1],
     "Expected type NUMBER but found STRING."),
    ("reduce body", lambda: r.expr([1, 2]).reduce(lambda a, b: a.add("s")), [1, 1],
     "Expected type NUMBER but found STRING."),
    ("fold body", lambda: r.expr([1, 2]).fold(0, lambda a, x: a.add("s")), [2, 1],
     "Expected type NUMBER but found STRING."),
    ("table map body", lambda: r.table("bt").order_by("id").map(lambda d: d["a"].add(1)),
     [1, 1], "Expected type STRING but found NUMBER."),
    ("concat_map result", lambda: r.expr([7, 8]).concat_map(lambda v: v), [1],
     "Cannot convert NUMBER to SEQUENCE"),
    ("map result", lambda: r.expr([1]).map(lambda v: r.table("bt")), [1],
     "Expected type DATUM but found TABLE:\ntable(\"bt\")"),
    ("order_by field", lambda: r.expr([7, 8]).order_by("f"), [1],
     "Cannot perform get_field on a non-object non-sequence `7`."),
    ("order_by desc field", lambda: r.expr([7, 8]).order_by(r.desc("f")), [1, 0],
     "Cannot perform get_field on a non-object non-sequence `7`."),
    ("group field", lambda: r.expr([7, 8]).group("f").count(), [0, 1],
     "Cannot perform get_field on a non-object non-sequence `7`."),
    # Bit operations (`bit_arith_ranged_int`): converting blames the argument, the range
    # check and the shift count's sign blame the term.
    ("bit_and of a string", lambda: r.expr(1).bit_and("a"), [1],
     "Expected type NUMBER but found STRING."),
    ("bit_not of a fraction", lambda: r.expr(1.5).bit_not(), [0], "Number not an integer: 1.5"),
    ("bit_or out of range", lambda: r.expr(2 ** 53).bit_or(1), [],
     "Integer too large: 9007199254740992"),
    ("bit_sal negative count", lambda: r.expr(1).bit_sal(-1), [],
     "Cannot bit-shift by a negative value"),
    ("bit_sal count not an integer", lambda: r.expr(1).bit_sal(0.5), [1],
     "Number not an integer: 0.5"),
    ("bit_sal overflow", lambda: r.expr(1).bit_sal(2000), [], "Non-finite number: inf"),
    ("mul overflow", lambda: r.expr(1e308).mul(10), [], "Non-finite number: inf"),
    # coerce_to: "Cannot coerce" blames the value, the term's own checks the term.
    ("coerce_to a string that is no number", lambda: r.expr("abc").coerce_to("number"), [],
     "Could not coerce `abc` to NUMBER."),
    ("coerce_to an unknown type", lambda: r.expr(1).coerce_to("foo"), [], "Unknown Type: FOO"),
    ("coerce_to object with a duplicate key",
     lambda: r.expr([["a", 1], ["a", {"b": 2}]]).coerce_to("object"), [],
     'Duplicate key "a" in coerced object.  (got 1 and {\n\t"b":\t2\n} as values)'),
    ("coerce_to object from a bad pair", lambda: r.expr([["a", 1, 2]]).coerce_to("object"), [],
     "Expected array of size 2, but got size 3."),
    # `do` takes its arguments as datums: a stream or a table is refused there, blamed on
    # the argument (the function is argument 0, its first argument 1).
    ("do over a stream", lambda: r.range(2, 5).do(lambda x: x.add(1)), [1],
     "Expected type DATUM but found SEQUENCE:\nVALUE SEQUENCE"),
    ("do over a table", lambda: r.table("bt").do(lambda t: t.count()), [1],
     'Expected type DATUM but found TABLE:\ntable("bt")'),
    ("do over a selection", lambda: r.table("bt").filter({"a": 1}).do(lambda t: t.count()), [1],
     "Expected type DATUM but found SELECTION:\nSELECTION ON table(bt)"),
    # Index and write hook functions: the function is blamed for not being deterministic
    # (RethinkDB's `func_t::assert_deterministic`), the term for the hook's arity.
    ("index function not deterministic", lambda: r.table("bt").index_create(
        "nd", lambda d: r.table("bt").get(1)), [2],
     "Could not prove function deterministic.  Index functions must be deterministic."),
    ("index function not a function", lambda: r.table("bt").index_create("nf", 5), [2],
     "Expected type FUNCTION but found DATUM:\n5"),
    ("write hook not deterministic", lambda: r.table("bt").set_write_hook(
        lambda ctx, old, new: r.js("1")), [1],
     "Could not prove function deterministic.  Write hook functions must be deterministic."),
    ("write hook arity", lambda: r.table("bt").set_write_hook(lambda ctx, old: old), [],
     "Write hook functions must expect 3 arguments."),
    # Optarg values: converting one blames the optarg (its name is the last frame); a
    # term's own check of the value blames the term, `rfail_target` on it the optarg.
    ("get_all index not a string", lambda: r.table("bt").get_all(1, index=1), ["index"],
     "Expected type STRING but found NUMBER."),
    ("between index not a string", lambda: r.table("bt").between(1, 2, index=1), ["index"],
     "Expected type STRING but found NUMBER."),
    ("order_by index inside r.desc", lambda: r.table("bt").order_by(index=r.desc(1)),
     ["index", 0], "Expected type STRING but found NUMBER."),
    ("slice bound not a string", lambda: r.expr([1]).slice(0, 1, left_bound=1), ["left_bound"],
     "Expected type STRING but found NUMBER."),
    ("slice bound unknown", lambda: r.expr([1]).slice(0, 1, right_bound="x"), [],
     'Expected `open` or `closed` for optarg `right_bound` (got `"x"`).'),
    ("during bound unknown", lambda: r.now().during(r.now(), r.now(), left_bound="x"), [],
     'Expected `open` or `closed` for optarg `left_bound` (got `"x"`).'),
    ("insert conflict not a string", lambda: r.table("bt").insert({}, conflict=1), ["conflict"],
     "Expected type STRING but found NUMBER."),
    ("insert conflict unknown", lambda: r.table("bt").insert({}, conflict="x"), ["conflict"],
     'Conflict option `x` unrecognized (options are "error", "replace" and "update").'),
    ("table read_mode unknown", lambda: r.table("bt", read_mode="x"), ["read_mode"],
     'Read mode `x` unrecognized (options are "majority", "single", and "outdated").'),
    ("between on an array", lambda: r.expr([1]).between(1, 2), [0],
     "Expected type TABLE_SLICE but found DATUM:\n[1]"),
    # Rule 7: compile-time checks.
    ("unknown optarg", lambda: r.expr([1]).map(lambda x: x).filter(lambda x: x, bogus=1),
     ["bogus"], "Unrecognized optional argument `bogus`."),
    ("nested write", lambda: r.expr([1]).map(lambda x: r.table("bt").insert({})), [1, 1],
     "Cannot nest writes or meta ops in stream operations.  Use FOR_EACH instead."),
]


@pytest.mark.parametrize("name,query,want,message", CASES, ids=[c[0] for c in CASES])
def test_backtrace(tconn, name, query, want, message):
    got, msg = frames(tconn, query())
    assert msg == message
    assert got == want


def test_printed_carets_mark_the_whole_add(tconn):
    """The driver's printed query underlines the blamed term."""
    with pytest.raises(r.ReqlError) as e:
        r.expr([1, 2, 3]).add("Hello").run(tconn)
    lines = str(e.value).split("\n")
    assert lines[1] == "(r.expr([1, 2, 3]) + r.expr('Hello'))"
    assert lines[2] == "^" * len(lines[1])


def test_printed_carets_mark_the_db(tconn):
    with pytest.raises(r.ReqlError) as e:
        r.db("nonExistingDb").table("nonExistingTable").run(tconn)
    lines = str(e.value).split("\n")
    assert lines[1] == "r.db('nonExistingDb').table('nonExistingTable')"
    marked = "".join(q for q, c in zip(lines[1], lines[2]) if c == "^")
    assert marked == "r.db('nonExistingDb')"
