package dev.ponder.e2e;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static com.rethinkdb.RethinkDB.r;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Insert, get, update, replace and delete, with their result documents. */
class CrudTest extends ServerTest {
    @BeforeAll
    void createTable() {
        assertEquals(1L, doc(r.tableCreate("people")).get("tables_created"));
    }

    @Test
    void insertGetUpdateReplaceDelete() {
        var t = r.table("people");
        Map<String, Object> ins = doc(t.insert(r.array(
                r.hashMap("id", 1).with("name", "Ada"),
                r.hashMap("id", 2).with("name", "Grace"))));
        assertEquals(2L, ins.get("inserted"));
        assertEquals(0L, ins.get("errors"));
        assertEquals(0L, ins.get("replaced"));

        assertEquals(Map.of("id", 1L, "name", "Ada"), doc(t.get(1)));
        assertNull(atom(t.get(99)));

        Map<String, Object> up = doc(t.get(1).update(r.hashMap("born", 1815)).optArg("return_changes", true));
        assertEquals(1L, up.get("replaced"));
        assertEquals(0L, up.get("unchanged"));
        assertEquals(List.of(Map.of(
                        "old_val", Map.of("id", 1L, "name", "Ada"),
                        "new_val", Map.of("id", 1L, "name", "Ada", "born", 1815L))),
                up.get("changes"));
        assertEquals(1L, doc(t.get(1).update(r.hashMap("born", 1815))).get("unchanged"));

        Map<String, Object> rep = doc(t.get(2).replace(r.hashMap("id", 2).with("name", "Hopper")));
        assertEquals(1L, rep.get("replaced"));
        assertEquals(Map.of("id", 2L, "name", "Hopper"), doc(t.get(2)));
        assertEquals(List.of("Ada", "Hopper"), atom(t.orderBy("id").g("name")));

        // An update through a function, on the whole table.
        Map<String, Object> all = doc(t.update(row -> r.hashMap("n", row.g("id").mul(10))));
        assertEquals(2L, all.get("replaced"));
        assertEquals(20L, doc(t.get(2)).get("n"));

        Map<String, Object> del = doc(t.get(2).delete().optArg("return_changes", true));
        assertEquals(1L, del.get("deleted"));
        List<?> changes = (List<?>) del.get("changes");
        assertEquals(1, changes.size());
        Map<?, ?> change = (Map<?, ?>) changes.get(0);
        assertNull(change.get("new_val"));
        assertEquals(Map.of("id", 2L, "name", "Hopper", "n", 20L), change.get("old_val"));
        assertNull(atom(t.get(2)));
        assertEquals(1L, (Long) atom(t.count()));
        assertEquals(1L, doc(t.get(2).delete()).get("skipped"));

        Map<String, Object> dup = doc(t.insert(r.hashMap("id", 1)));
        assertEquals(1L, dup.get("errors"));
        assertTrue(((String) dup.get("first_error")).startsWith("Duplicate primary key `id`"),
                (String) dup.get("first_error"));

        // A generated key comes back in generated_keys.
        Map<String, Object> gen = doc(t.insert(r.hashMap("name", "Lovelace")));
        List<?> keys = (List<?>) gen.get("generated_keys");
        assertEquals(1, keys.size());
        assertEquals("Lovelace", doc(t.get(keys.get(0))).get("name"));

        Map<String, Object> upsert = doc(t.insert(r.hashMap("id", 1).with("name", "Byron"))
                .optArg("conflict", "update"));
        assertEquals(1L, upsert.get("replaced"));
        assertEquals("Byron", doc(t.get(1)).get("name"));
    }
}
