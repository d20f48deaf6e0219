package site.ycsb.db.rethinkdb;

import static com.rethinkdb.RethinkDB.r;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.ConcurrentHashMap;

import com.rethinkdb.gen.exc.ReqlError;
import com.rethinkdb.gen.exc.ReqlOpFailedError;
import com.rethinkdb.net.Connection;
import com.rethinkdb.net.Result;

import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * YCSB binding for Ponder and RethinkDB on the official RethinkDB Java driver.
 *
 * <p>YCSB makes one instance per client thread, so each thread has its own
 * connection (YCSB's {@code threadcount} is the number of connections).  Records
 * are documents {@code {id: key, field0: "...", ...}} in {@code rethinkdb.db}.
 * {@code rethinkdb.table}; writes use {@code rethinkdb.durability}, reads and
 * scans {@code rethinkdb.read_mode}.  See {@link RethinkDBConfig} for every
 * property.
 */
public class RethinkDBClient extends DB {
  /** Databases and tables known to exist, shared by the client threads of this JVM. */
  private static final Set<String> READY = ConcurrentHashMap.newKeySet();
  private static final Object SCHEMA_LOCK = new Object();

  private RethinkDBConfig cfg;
  private Queries queries;
  private Connection conn;

  @Override
  public void init() throws DBException {
    cfg = RethinkDBConfig.fromProperties(getProperties());
    queries = new Queries(cfg);
    try {
      conn = r.connection()
          .hostname(cfg.host())
          .port(cfg.port())
          .user(cfg.user(), cfg.password())
          .timeout(cfg.timeoutSeconds() * 1000L) // the driver takes milliseconds
          .connect();
    } catch (RuntimeException e) {
      throw new DBException("cannot connect to " + cfg + ": " + e.getMessage(), e);
    }
    try {
      ensureTable(conn, cfg.db(), cfg.table());
    } catch (RuntimeException e) {
      throw new DBException("cannot create " + cfg.db() + "." + cfg.table() + ": " + e.getMessage(),
          e);
    }
  }

  /**
   * Creates the database and table if missing.  Threads of one JVM take turns;
   * another process creating them at the same time shows as "already exists",
   * which counts as success.
   */
  static void ensureTable(Connection conn, String db, String table) {
    String key = db + "\u0000" + table;
    if (READY.contains(key)) {
      return;
    }
    synchronized (SCHEMA_LOCK) {
      if (READY.contains(key)) {
        return;
      }
      List<?> dbs = r.dbList().run(conn, List.class).single();
      if (dbs == null || !dbs.contains(db)) {
        try {
          r.dbCreate(db).run(conn).single();
        } catch (ReqlOpFailedError e) {
          if (!isAlreadyExists(e)) {
            throw e;
          }
        }
      }
      List<?> tables = r.db(db).tableList().run(conn, List.class).single();
      if (tables == null || !tables.contains(table)) {
        try {
          r.db(db).tableCreate(table).optArg("primary_key", Queries.PRIMARY_KEY).run(conn).single();
        } catch (ReqlOpFailedError e) {
          if (!isAlreadyExists(e)) {
            throw e;
          }
        }
      }
      try {
        // RethinkDB may accept a new table before it is ready for writes.
        r.db(db).table(table).wait_().run(conn).single();
      } catch (ReqlError e) {
        // A server without `wait` (or with the table always ready) is fine.
      }
      READY.add(key);
    }
  }

  static boolean isAlreadyExists(ReqlError e) {
    String m = e.getMessage();
    return m != null && m.contains("already exists");
  }

  @Override
  public void cleanup() throws DBException {
    if (conn != null) {
      try {
        conn.close();
      } catch (RuntimeException e) {
        throw new DBException("closing the connection: " + e.getMessage(), e);
      } finally {
        conn = null;
      }
    }
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
                     Map<String, ByteIterator> result) {
    try {
      Object doc = queries.read(table, key, fields).run(conn).single();
      if (doc == null) {
        return Status.NOT_FOUND;
      }
      if (!(doc instanceof Map)) {
        return Status.UNEXPECTED_STATE;
      }
      Documents.fromDocument((Map<?, ?>) doc, fields, result);
      return Status.OK;
    } catch (ReqlError | IllegalStateException e) {
      return error("read", key, e);
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    try (Result<Object> rows = queries.scan(table, startkey, recordcount, fields).run(conn)) {
      for (Object doc : rows) {
        if (!(doc instanceof Map)) {
          return Status.UNEXPECTED_STATE;
        }
        result.add(Documents.row((Map<?, ?>) doc, fields));
      }
      return Status.OK;
    } catch (ReqlError | IllegalStateException e) {
      return error("scan", startkey, e);
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      Object res = queries.update(table, key, Documents.toFields(values)).run(conn).single();
      return Documents.writeStatus(res, Documents.Write.UPDATE);
    } catch (ReqlError | IllegalStateException e) {
      return error("update", key, e);
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      Object res = queries.insert(table, Documents.toDocument(key, values)).run(conn).single();
      return Documents.writeStatus(res, Documents.Write.INSERT);
    } catch (ReqlError | IllegalStateException e) {
      return error("insert", key, e);
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      Object res = queries.delete(table, key).run(conn).single();
      return Documents.writeStatus(res, Documents.Write.DELETE);
    } catch (ReqlError | IllegalStateException e) {
      return error("delete", key, e);
    }
  }

  private static volatile long lastErrorReport;

  /** Reports an error at most once a second (YCSB counts them per operation). */
  private static Status error(String op, String key, Exception e) {
    long now = System.currentTimeMillis();
    if (now - lastErrorReport > 1000) {
      lastErrorReport = now;
      System.err.println("rethinkdb binding: " + op + " " + key + ": " + e);
    }
    return Status.ERROR;
  }
}
