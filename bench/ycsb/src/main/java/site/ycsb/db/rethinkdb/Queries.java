package site.ycsb.db.rethinkdb;

import static com.rethinkdb.RethinkDB.r;

import java.util.Map;
import java.util.Set;

import com.rethinkdb.gen.ast.Between;
import com.rethinkdb.gen.ast.Delete;
import com.rethinkdb.gen.ast.Get;
import com.rethinkdb.gen.ast.Insert;
import com.rethinkdb.gen.ast.ReqlExpr;
import com.rethinkdb.gen.ast.Table;
import com.rethinkdb.gen.ast.Update;

/**
 * The ReQL terms of each YCSB operation.  Pure: builds queries, runs nothing, so
 * that their wire form can be checked without a server.
 */
final class Queries {
  /** The primary key of every table the binding creates. */
  static final String PRIMARY_KEY = "id";

  private final RethinkDBConfig cfg;

  Queries(RethinkDBConfig cfg) {
    this.cfg = cfg;
  }

  /** The table for reads: with read_mode unless it is the default (single). */
  Table readTable(String table) {
    Table t = r.db(cfg.db()).table(cfg.tableFor(table));
    if (!"single".equals(cfg.readMode())) {
      t = t.optArg("read_mode", cfg.readMode());
    }
    return t;
  }

  /** The table for writes (read_mode does not apply to writes). */
  Table writeTable(String table) {
    return r.db(cfg.db()).table(cfg.tableFor(table));
  }

  /** One record; {@code fields} null means every field. */
  ReqlExpr read(String table, String key, Set<String> fields) {
    Get get = readTable(table).get(key);
    if (fields == null) {
      return get;
    }
    // pluck on a missing document (null) fails; default(null) turns that into null.
    return get.pluck(fields.toArray()).default_((Object) null);
  }

  /** Up to {@code count} records from {@code startKey} on, in primary-key order. */
  ReqlExpr scan(String table, String startKey, int count, Set<String> fields) {
    Between between = readTable(table).between(startKey, r.maxval());
    ReqlExpr q = between.orderBy().optArg("index", r.asc(PRIMARY_KEY)).limit(count);
    if (fields != null) {
      q = q.pluck(fields.toArray());
    }
    return q;
  }

  Insert insert(String table, Map<String, Object> document) {
    return writeTable(table).insert(document).optArg("durability", cfg.durability());
  }

  Update update(String table, String key, Map<String, Object> fields) {
    return writeTable(table).get(key).update(fields).optArg("durability", cfg.durability());
  }

  Delete delete(String table, String key) {
    return writeTable(table).get(key).delete().optArg("durability", cfg.durability());
  }
}
