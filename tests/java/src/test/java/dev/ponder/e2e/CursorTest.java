package dev.ponder.e2e;

import com.rethinkdb.gen.proto.ResponseType;
import com.rethinkdb.model.OptArgs;
import com.rethinkdb.net.Result;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import static com.rethinkdb.RethinkDB.r;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Iterating a 2,500-row table across batches, closing a cursor early, toList. */
class CursorTest extends ServerTest {
    static final int ROWS = 2500;

    @BeforeAll
    void fill() {
        doc(r.tableCreate("many"));
        Map<String, Object> ins = doc(r.table("many").insert(
                r.range(ROWS).map(i -> r.hashMap("id", i).with("pad", "x".repeat(100)))));
        assertEquals((long) ROWS, ins.get("inserted"));
    }

    /**
     * Every row of a cursor, read with next() until it throws NoSuchElementException (the
     * driver's end of the rows). Not `for (row : cursor)`: a read whose last batch was full
     * ends with an empty SUCCESS_SEQUENCE (as RethinkDB's does), and this driver's hasNext()
     * answers true while that CONTINUE is in flight, so the next() after it throws.
     */
    static List<Object> drain(Result<Object> cursor) throws Exception {
        List<Object> rows = new ArrayList<>();
        while (true) {
            try {
                rows.add(cursor.next(5, TimeUnit.SECONDS));
            } catch (NoSuchElementException end) {
                return rows;
            }
        }
    }

    static Set<Object> ids(List<Object> rows) {
        Set<Object> ids = new HashSet<>();
        for (Object row : rows) {
            ids.add(((Map<?, ?>) row).get("id"));
        }
        return ids;
    }

    @Test
    void iterateAcrossBatches() throws Exception {
        // 100 rows a batch: the first answer is a partial sequence of 100 rows, the rest
        // comes by CONTINUE as the loop drains it.
        Result<Object> cursor = r.table("many").run(conn, OptArgs.of("max_batch_rows", 100));
        assertEquals(ResponseType.SUCCESS_PARTIAL, cursor.responseType());
        assertEquals(100, cursor.bufferedCount());
        // Driver 2.4.4's default LAZY fetch mode can stall mid-iteration, never sending the
        // next CONTINUE: when a CONTINUE's answer is handled on a pool thread while the reader
        // drains the batch, Result keeps an older PartialSequence (whose CONTINUE was already
        // sent) as the current one. Seen here about one run in three. AGGRESSIVE sends each
        // CONTINUE as the previous answer arrives, so the chain never depends on it.
        cursor.overrideFetchMode(Result.FetchMode.AGGRESSIVE);
        List<Object> rows = drain(cursor);
        assertEquals(ROWS, rows.size());
        assertEquals(ROWS, ids(rows).size());
        assertFalse(cursor.hasNext());

        // The server's own batch size (a first batch scaled down to 256 KB, as RethinkDB's):
        // two batches for 2,500 rows of ~120 bytes, so one CONTINUE (LAZY is safe then).
        Result<Object> dflt = r.table("many").run(conn);
        int first = dflt.bufferedCount();
        assertTrue(first > 0 && first < ROWS, "first batch " + first);
        List<Object> all = drain(dflt);
        assertEquals(ROWS, all.size());
        assertEquals(ROWS, ids(all).size());
    }

    @Test
    void toList() {
        // Two batches with the server's batch size, the last one not empty.
        Result<Object> cursor = r.table("many").orderBy().optArg("index", "id").run(conn);
        assertTrue(cursor.bufferedCount() < ROWS, "one batch");
        List<Object> all = cursor.toList();
        assertEquals(ROWS, all.size());
        for (int i = 0; i < ROWS; i++) {
            assertEquals((long) i, ((Map<?, ?>) all.get(i)).get("id"));
        }
        List<Object> ids = r.table("many").orderBy().optArg("index", "id").g("id").run(conn).toList();
        assertEquals(ROWS, ids.size());
        for (int i = 0; i < ROWS; i++) {
            assertEquals((long) i, ids.get(i));
        }
        assertEquals(List.of(0L, 1L, 2L), r.range(3).run(conn).toList());
        assertEquals(List.of(), r.table("many").filter(r.hashMap("id", -1)).run(conn).toList());
    }

    @Test
    void closeEarly() throws Exception {
        // 25 rows of a first batch of 100 (no CONTINUE yet), then close.
        Result<Object> cursor = r.table("many").run(conn, OptArgs.of("max_batch_rows", 100));
        for (int i = 0; i < 25; i++) {
            assertTrue(cursor.next(5, TimeUnit.SECONDS) instanceof Map);
        }
        assertEquals(1, queryJobs(), "the open cursor is a query job on the server");
        cursor.close();
        // The driver sends STOP; the server drops the query's job.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (queryJobs() != 0) {
            assertTrue(System.nanoTime() < deadline, "the closed cursor's job is still listed");
            Thread.sleep(20);
        }
        // The connection still serves queries.
        assertEquals((long) ROWS, (Long) atom(r.table("many").count()));
    }

    /** Query jobs on the server other than the one asking. */
    private long queryJobs() {
        return atom(r.db("rethinkdb").table("jobs").filter(r.hashMap("type", "query")).count().sub(1));
    }
}
