package dev.ponder.e2e;

import com.rethinkdb.gen.ast.Time;
import com.rethinkdb.gen.exc.ReqlOpFailedError;
import com.rethinkdb.gen.exc.ReqlUserError;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import static com.rethinkdb.RethinkDB.r;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * The behaviours drivers and ORMs rely on (see tests/test_compat.py), through the Java
 * driver: a defaulted selection stays writable, r.args in r.time, filter's default with an
 * object predicate, and replica placement on one server.
 */
class CompatTest extends ServerTest {
    static final String PLACEMENT = "Can't put 2 replicas on servers with the tag `default` because "
            + "there are only 1 servers with the tag `default`. It's impossible to have more replicas "
            + "of the data than there are servers.";

    @BeforeEach
    void table() {
        if (this.<List<?>>atom(r.tableList()).contains("compat")) {
            doc(r.tableDrop("compat"));
        }
        doc(r.tableCreate("compat"));
        doc(r.table("compat").insert(r.array(
                r.hashMap("id", 1).with("a", 1), r.hashMap("id", 2).with("a", 2), r.hashMap("id", 3))));
    }

    @Test
    void defaultedSelectionAcceptsUpdate() {
        var t = r.table("compat");
        Map<String, Object> res = doc(t.get(1).default_(r.error("missing")).update(r.hashMap("b", 1)));
        assertEquals(1L, res.get("replaced"));
        assertEquals(Map.of("id", 1L, "a", 1L, "b", 1L), doc(t.get(1)));
        assertEquals("SELECTION<OBJECT>", atom(t.get(1).default_(r.error("missing")).typeOf()));
        assertEquals(1L, doc(t.get(3).default_(r.error("missing")).delete()).get("deleted"));
        ReqlUserError e = fails(ReqlUserError.class,
                t.get(99).default_(r.error("missing")).update(r.hashMap("b", 1)));
        assertEquals("missing", e.getMessage());
        assertNull(atom(t.get(99).default_(r.error())));
    }

    @Test
    void timeWithArgs() {
        OffsetDateTime t = atom(new Time(r.args(r.array(1986, 11, 3, 12, 0, 0, "Z"))));
        assertEquals(OffsetDateTime.of(1986, 11, 3, 12, 0, 0, 0, ZoneOffset.UTC), t);
        assertEquals("1986-11-03T00:00:00+00:00",
                atom(r.time(1986, r.args(r.array(11)), 3, "Z").toIso8601()));
        assertEquals(2L, (Long) atom(r.table("compat").getAll(r.args(r.array(1, 2))).count()));
    }

    @Test
    void filterObjectWithDefaultTrueKeepsEveryDocument() {
        var t = r.table("compat");
        assertEquals(List.of(1L, 2L, 3L), ids(t.filter(r.hashMap("missing_field", 10)).optArg("default", true)));
        assertEquals(List.of(1L, 3L), ids(t.filter(r.hashMap("a", 1)).optArg("default", true)));
        assertEquals(List.of(1L), ids(t.filter(r.hashMap("a", 1))));
        assertEquals(List.of(), ids(t.filter(r.hashMap("missing_field", 10))));
    }

    @Test
    void tableCreateWithTwoReplicasOnOneServer() {
        ReqlOpFailedError e = fails(ReqlOpFailedError.class, r.tableCreate("placed").optArg("replicas", 2));
        assertEquals(PLACEMENT, e.getMessage());
        assertEquals(false, this.<List<?>>atom(r.tableList()).contains("placed"));
        assertEquals(1L, doc(r.tableCreate("placed").optArg("replicas", 1)).get("tables_created"));
        ReqlOpFailedError re = fails(ReqlOpFailedError.class,
                r.table("placed").reconfigure().optArg("shards", 1).optArg("replicas", 2));
        assertEquals(PLACEMENT, re.getMessage());
        doc(r.tableDrop("placed"));
    }

    private List<Object> ids(com.rethinkdb.gen.ast.ReqlExpr q) {
        return List.copyOf(new TreeSet<>(q.g("id").run(conn).toList().stream()
                .map(x -> (Long) x).toList()));
    }
}
