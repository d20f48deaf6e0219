package dev.ponder.e2e;

import com.rethinkdb.gen.exc.ReqlDriverError;
import com.rethinkdb.gen.exc.ReqlError;
import com.rethinkdb.model.OptArgs;
import com.rethinkdb.net.Result;
import org.junit.jupiter.api.Test;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import static com.rethinkdb.RethinkDB.r;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** A cursor and a feed whose connection dies (the server is killed) end with an error. */
class DeadConnectionTest extends ServerTest {
    @Test
    void iterationEndsWithAnErrorWhenTheServerDies() throws Exception {
        doc(r.tableCreate("t"));
        Result<Object> feed = r.table("t").changes().run(conn);
        // An endless stream, 1,000 rows a batch: read half of the first batch, kill the
        // server, and the rest of the batch still comes, then the next CONTINUE fails.
        Result<Object> cursor = r.range().run(conn, OptArgs.of("max_batch_rows", 1000));
        for (long i = 0; i < 500; i++) {
            assertEquals(i, cursor.next(5, TimeUnit.SECONDS));
        }
        server.kill();
        Ended c = drain(cursor);
        // 499 when the driver has already seen the socket close: the next() that takes the
        // batch's last row sends the CONTINUE, which throws, and that row is not returned.
        assertTrue(c.rows == 499 || c.rows == 500, c.rows + " rows after the kill");
        assertClosed(c.error);
        // The feed's CONTINUE, waiting for a change, fails too.
        Ended f = drain(feed);
        assertEquals(0, f.rows);
        assertClosed(f.error);
        assertFalse(server.proc.isAlive());
    }

    /** How a result ended: the rows it still gave, then its error. */
    private record Ended(long rows, ReqlError error) {
    }

    /** Reads until the result fails (within 10 s). */
    private static Ended drain(Result<Object> result) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        long rows = 0;
        while (System.nanoTime() < deadline) {
            try {
                assertTrue(result.next(1, TimeUnit.SECONDS) != null);
                rows += 1;
            } catch (TimeoutException stillWaiting) {
                // the driver has not noticed yet
            } catch (ReqlError expected) {
                return new Ended(rows, expected);
            }
        }
        return fail("the result did not fail after the server was killed (" + rows + " rows)");
    }

    /** The driver's error for a connection the server closed. */
    private static void assertClosed(ReqlError e) {
        assertTrue(e instanceof ReqlDriverError, e.toString());
        Throwable root = e.getCause() != null ? e.getCause() : e;
        assertEquals("Reached the end of the read stream.", root.getMessage(), e.toString());
    }
}
