package dev.ponder.e2e;

import com.rethinkdb.gen.exc.ReqlError;
import com.rethinkdb.gen.exc.ReqlNonExistenceError;
import com.rethinkdb.gen.exc.ReqlOpFailedError;
import com.rethinkdb.gen.exc.ReqlPermissionError;
import com.rethinkdb.gen.exc.ReqlQueryLogicError;
import com.rethinkdb.gen.exc.ReqlRuntimeError;
import com.rethinkdb.gen.exc.ReqlServerCompileError;
import com.rethinkdb.gen.exc.ReqlUserError;
import com.rethinkdb.net.Connection;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.List;

import static com.rethinkdb.RethinkDB.r;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Errors: the driver's exception class (from the response's error type) and the blamed
 * term (from the backtrace; see {@link Blame}: the Java driver does not print carets).
 */
class ErrorTest extends ServerTest {
    @BeforeAll
    void fill() {
        doc(r.tableCreate("people"));
        doc(r.table("people").insert(r.hashMap("id", 1).with("name", "Ada")));
    }

    @Test
    void addArrayAndStringBlamesTheWholeAdd() {
        var query = r.expr(r.array(1, 2, 3)).add("Hello");
        ReqlQueryLogicError e = fails(ReqlQueryLogicError.class, query);
        assertEquals("Expected type ARRAY but found STRING.", e.getMessage());
        assertSame(query, e.getTerm());
        assertEquals(List.of(), Blame.frames(e));
        assertEquals("[24,[[2,[1,2,3]],\"Hello\"]]", Blame.blamed(e));
    }

    @Test
    void missingDatabaseBlamesTheDb() {
        ReqlOpFailedError e = fails(ReqlOpFailedError.class,
                r.db("nonExistingDb").table("nonExistingTable"));
        assertEquals("Database `nonExistingDb` does not exist.", e.getMessage());
        assertEquals(List.of(0L), Blame.frames(e));
        assertEquals("[14,[\"nonExistingDb\"]]", Blame.blamed(e));
    }

    @Test
    void missingTableInsideAJoinBlamesThatTable() {
        ReqlOpFailedError e = fails(ReqlOpFailedError.class,
                r.table("people").eqJoin("id", r.table("absent")));
        assertEquals("Table `test.absent` does not exist.", e.getMessage());
        // eqJoin's arguments are [the left table, "id", the right table].
        assertEquals(List.of(2L), Blame.frames(e));
        assertEquals("[15,[\"absent\"]]", Blame.blamed(e));
    }

    @Test
    void errorInsideAnObjectLiteralFollowsItsKey() {
        ReqlQueryLogicError e = fails(ReqlQueryLogicError.class,
                r.expr(r.hashMap("a", 1)).merge(r.hashMap("b", r.expr(1).add("x"))));
        assertEquals("Expected type NUMBER but found STRING.", e.getMessage());
        assertEquals(List.of(1L, "b"), Blame.frames(e));
        assertEquals("[24,[1,\"x\"]]", Blame.blamed(e));
    }

    @Test
    void missingField() {
        ReqlNonExistenceError e = fails(ReqlNonExistenceError.class, r.table("people").get(1).g("nope"));
        assertEquals("No attribute `nope` in object:\n{\n\t\"id\":\t1,\n\t\"name\":\t\"Ada\"\n}", e.getMessage());
        assertEquals(List.of(), Blame.frames(e));
        ReqlNonExistenceError nth = fails(ReqlNonExistenceError.class, r.expr(r.array(1, 2)).nth(5));
        assertEquals("Index out of bounds: 5", nth.getMessage());
    }

    @Test
    void userErrorBlamesTheErrorTerm() {
        ReqlUserError e = fails(ReqlUserError.class, r.expr(1).add(r.error("boom")));
        assertEquals("boom", e.getMessage());
        assertEquals(List.of(1L), Blame.frames(e));
        assertEquals("[12,[\"boom\"]]", Blame.blamed(e));
    }

    @Test
    void unknownOptionalArgumentIsACompileErrorOnItsValue() {
        ReqlServerCompileError e = fails(ReqlServerCompileError.class,
                r.table("people").get(1).update(r.hashMap()).optArg("bogus", true));
        assertEquals("Unrecognized optional argument `bogus`.", e.getMessage());
        assertEquals(List.of("bogus"), Blame.frames(e));
        assertEquals("true", Blame.blamed(e));
    }

    @Test
    void permissionError() {
        doc(r.db("rethinkdb").table("users").insert(r.hashMap("id", "eve").with("password", "pw")));
        try (Connection eve = server.connect("eve", "pw")) {
            ReqlPermissionError e = assertThrows(ReqlPermissionError.class,
                    () -> r.table("people").insert(r.hashMap("id", 2)).runAtom(eve));
            assertEquals("User `eve` does not have the required `write` permission.", e.getMessage());
            assertTrue(e instanceof ReqlRuntimeError);
            ReqlPermissionError create = assertThrows(ReqlPermissionError.class,
                    () -> r.tableCreate("eves").runAtom(eve));
            assertEquals("User `eve` does not have the required `config` permission.", create.getMessage());
        }
    }

    @Test
    void errorsLeaveTheConnectionUsable() {
        for (int i = 0; i < 3; i++) {
            ReqlError e = fails(ReqlQueryLogicError.class, r.expr(1).div("x"));
            assertEquals("Expected type NUMBER but found STRING.", e.getMessage());
        }
        assertEquals(1L, (Long) atom(r.table("people").count()));
    }
}
