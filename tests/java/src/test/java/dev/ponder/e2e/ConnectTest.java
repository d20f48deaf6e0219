package dev.ponder.e2e;

import com.rethinkdb.gen.exc.ReqlAuthError;
import com.rethinkdb.gen.exc.ReqlPermissionError;
import com.rethinkdb.model.Server;
import com.rethinkdb.net.Connection;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static com.rethinkdb.RethinkDB.r;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Connecting as admin with no password, and as a user with a password. */
class ConnectTest extends ServerTest {
    @Test
    void adminWithoutPassword() {
        assertTrue(conn.isOpen());
        assertEquals(42L, (Long) atom(r.expr(20).add(22)));
        Server info = conn.server();
        assertFalse(info.getId().isEmpty());
        assertFalse(info.getName().isEmpty());
        List<Object> dbs = atom(r.dbList());
        assertTrue(dbs.contains("test"), dbs.toString());
    }

    @Test
    void userWithPassword() {
        Map<String, Object> created = doc(r.db("rethinkdb").table("users")
                .insert(r.hashMap("id", "bob").with("password", "secret")));
        assertEquals(1L, created.get("inserted"));
        assertEquals(1L, doc(r.tableCreate("bobs")).get("tables_created"));

        try (Connection bob = server.connect("bob", "secret")) {
            assertEquals("bob", r.expr("bob").runAtom(bob));
            // No permissions yet: reading a table is refused.
            ReqlPermissionError refused = assertThrows(ReqlPermissionError.class,
                    () -> r.table("bobs").run(bob).toList());
            assertEquals("User `bob` does not have the required `read` permission.", refused.getMessage());

            assertEquals(1L, doc(r.db("test").grant("bob",
                    r.hashMap("read", true).with("write", true))).get("granted"));
            assertEquals(1L, ((Map<?, ?>) r.table("bobs").insert(r.hashMap("id", 1)).runAtom(bob)).get("inserted"));
            assertEquals(List.of(Map.of("id", 1L)), r.table("bobs").run(bob).toList());
        }

        ReqlAuthError wrong = assertThrows(ReqlAuthError.class, () -> server.connect("bob", "wrong"));
        assertEquals("Wrong password", wrong.getMessage());
        assertThrows(ReqlAuthError.class, () -> server.connect("nobody", "secret"));
        // The password is not shown back.
        Map<String, Object> user = doc(r.db("rethinkdb").table("users").get("bob"));
        assertEquals(Map.of("id", "bob", "password", true), user);
    }
}
