package site.ycsb.db.rethinkdb;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Properties;

import org.junit.jupiter.api.Test;

import site.ycsb.DBException;

class RethinkDBConfigTest {
  private static Properties props(String... kv) {
    Properties p = new Properties();
    for (int i = 0; i < kv.length; i += 2) {
      p.setProperty(kv[i], kv[i + 1]);
    }
    return p;
  }

  @Test
  void defaults() throws DBException {
    RethinkDBConfig c = RethinkDBConfig.fromProperties(new Properties());
    assertEquals("127.0.0.1", c.host());
    assertEquals(28015, c.port());
    assertEquals("ycsb", c.db());
    assertEquals("usertable", c.table());
    assertEquals("hard", c.durability());
    assertEquals("single", c.readMode());
    assertEquals("admin", c.user());
    assertEquals("", c.password());
  }

  @Test
  void everyProperty() throws DBException {
    RethinkDBConfig c = RethinkDBConfig.fromProperties(props(
        "rethinkdb.host", "db.example", "rethinkdb.port", "28115", "rethinkdb.db", "bench",
        "rethinkdb.table", "t1", "rethinkdb.durability", "SOFT", "rethinkdb.read_mode", "outdated",
        "rethinkdb.user", "bob", "rethinkdb.password", "s3cret"));
    assertEquals("db.example", c.host());
    assertEquals(28115, c.port());
    assertEquals("bench", c.db());
    assertEquals("t1", c.table());
    assertEquals("soft", c.durability());
    assertEquals("outdated", c.readMode());
    assertEquals("bob", c.user());
    assertEquals("s3cret", c.password());
    assertTrue(c.toString().contains("durability=soft"));
  }

  @Test
  void tableFollowsYcsbUnlessOverridden() throws DBException {
    RethinkDBConfig ycsb = RethinkDBConfig.fromProperties(props("table", "people"));
    assertEquals("people", ycsb.table());
    assertEquals("people", ycsb.tableFor("people"));
    assertEquals("other", ycsb.tableFor("other"));
    assertEquals("people", ycsb.tableFor(null));

    RethinkDBConfig over = RethinkDBConfig.fromProperties(
        props("table", "people", "rethinkdb.table", "docs"));
    assertEquals("docs", over.table());
    assertEquals("docs", over.tableFor("people"));
  }

  @Test
  void readModes() throws DBException {
    for (String m : new String[] {"single", "majority", "outdated"}) {
      assertEquals(m, RethinkDBConfig.fromProperties(props("rethinkdb.read_mode", m)).readMode());
    }
  }

  @Test
  void rejectsBadValues() {
    assertThrows(DBException.class,
        () -> RethinkDBConfig.fromProperties(props("rethinkdb.durability", "medium")));
    assertThrows(DBException.class,
        () -> RethinkDBConfig.fromProperties(props("rethinkdb.read_mode", "fast")));
    assertThrows(DBException.class,
        () -> RethinkDBConfig.fromProperties(props("rethinkdb.port", "http")));
    assertThrows(DBException.class,
        () -> RethinkDBConfig.fromProperties(props("rethinkdb.port", "70000")));
    assertThrows(DBException.class,
        () -> RethinkDBConfig.fromProperties(props("rethinkdb.db", "  ")));
    DBException e = assertThrows(DBException.class,
        () -> RethinkDBConfig.fromProperties(props("rethinkdb.read_mode", "fast")));
    assertTrue(e.getMessage().contains("rethinkdb.read_mode"), e.getMessage());
  }
}
