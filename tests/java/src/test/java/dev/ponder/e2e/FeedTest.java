package dev.ponder.e2e;

import com.rethinkdb.net.Result;
import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import static com.rethinkdb.RethinkDB.r;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Changefeeds: a table feed, a point feed with include_initial, closing a feed. */
class FeedTest extends ServerTest {
    /** The next change, failing after 5 s. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> next(Result<Object> feed) throws TimeoutException {
        return (Map<String, Object>) feed.next(5, TimeUnit.SECONDS);
    }

    static Map<String, Object> change(Object oldVal, Object newVal) {
        Map<String, Object> m = new HashMap<>();
        m.put("old_val", oldVal);
        m.put("new_val", newVal);
        return m;
    }

    @Test
    void tableFeedSeesInsertUpdateDelete() throws Exception {
        doc(r.tableCreate("feed_t"));
        try (Result<Object> feed = r.table("feed_t").changes().run(conn)) {
            assertTrue(feed.isFeed());
            doc(r.table("feed_t").insert(r.hashMap("id", "a").with("v", 1)));
            assertEquals(change(null, Map.of("id", "a", "v", 1L)), next(feed));
            doc(r.table("feed_t").get("a").update(r.hashMap("v", 2)));
            assertEquals(change(Map.of("id", "a", "v", 1L), Map.of("id", "a", "v", 2L)), next(feed));
            doc(r.table("feed_t").get("a").delete());
            assertEquals(change(Map.of("id", "a", "v", 2L), null), next(feed));
        }
    }

    @Test
    void pointFeedWithIncludeInitial() throws Exception {
        doc(r.tableCreate("feed_p"));
        doc(r.table("feed_p").insert(r.hashMap("id", "p").with("v", 0)));
        try (Result<Object> feed = r.table("feed_p").get("p").changes()
                .optArg("include_initial", true).run(conn)) {
            assertEquals(Map.of("new_val", Map.of("id", "p", "v", 0L)), next(feed));
            // A change to another document is not seen.
            doc(r.table("feed_p").insert(r.hashMap("id", "q")));
            doc(r.table("feed_p").get("p").update(r.hashMap("v", 1)));
            assertEquals(change(Map.of("id", "p", "v", 0L), Map.of("id", "p", "v", 1L)), next(feed));
            doc(r.table("feed_p").get("p").delete());
            assertEquals(change(Map.of("id", "p", "v", 1L), null), next(feed));
        }
    }

    @Test
    void closingAFeed() throws Exception {
        doc(r.tableCreate("feed_c"));
        Result<Object> feed = r.table("feed_c").changes().run(conn);
        assertThrows(TimeoutException.class, () -> feed.next(200, TimeUnit.MILLISECONDS));
        feed.close();
        // Closed: no more changes, and the server has dropped the feed.
        assertThrows(NoSuchElementException.class, () -> feed.next(1, TimeUnit.SECONDS));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while ((Long) atom(r.db("rethinkdb").table("jobs").filter(r.hashMap("type", "query")).count()) != 1L) {
            assertTrue(System.nanoTime() < deadline, "the closed feed's job is still listed");
            Thread.sleep(20);
        }
        doc(r.table("feed_c").insert(r.hashMap("id", 1)));
        assertEquals(1L, (Long) atom(r.table("feed_c").count()));

        // changes().limit(n) ends the stream by itself.
        Result<Object> limited = r.table("feed_c").changes().limit(2).run(conn);
        doc(r.table("feed_c").insert(r.array(r.hashMap("id", 2), r.hashMap("id", 3), r.hashMap("id", 4))));
        Set<Object> got = new HashSet<>();
        got.add(((Map<?, ?>) next(limited).get("new_val")).get("id"));
        got.add(((Map<?, ?>) next(limited).get("new_val")).get("id"));
        assertEquals(2, got.size());
        assertTrue(Set.of(2L, 3L, 4L).containsAll(got), got.toString());
        assertThrows(NoSuchElementException.class, () -> limited.next(5, TimeUnit.SECONDS));
    }
}
