package dev.ponder.e2e;

import com.rethinkdb.ast.ReqlAst;
import com.rethinkdb.gen.exc.ReqlError;
import com.rethinkdb.net.Connection;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertThrows;

/** One scratch server and one admin connection per test class. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(30)
abstract class ServerTest {
    PonderServer server;
    Connection conn;

    @BeforeAll
    void startServer() throws Exception {
        server = PonderServer.start();
        conn = server.connect();
    }

    @AfterAll
    void stopServer() throws Exception {
        if (conn != null) {
            try {
                conn.close();
            } catch (RuntimeException ignored) {
                // the server may be gone already
            }
        }
        if (server != null) {
            server.stop();
        }
    }

    /** Runs a query whose answer is one value. */
    @SuppressWarnings("unchecked")
    <T> T atom(ReqlAst query) {
        return (T) query.runAtom(conn);
    }

    @SuppressWarnings("unchecked")
    Map<String, Object> doc(ReqlAst query) {
        return (Map<String, Object>) query.runAtom(conn);
    }

    /** Runs a query whose answer is a sequence, fetching all of it. */
    List<Object> list(ReqlAst query) {
        return query.run(conn).toList();
    }

    /** Runs a query that must fail with an error of class `type`, and returns the error. */
    <E extends ReqlError> E fails(Class<E> type, ReqlAst query) {
        return assertThrows(type, () -> query.run(conn).toList());
    }
}
