package site.ycsb.db.rethinkdb;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.junit.jupiter.api.Test;

import com.rethinkdb.ast.ReqlAst;
import com.rethinkdb.ast.WireForm;

import site.ycsb.DBException;

/**
 * The wire form of each operation's query (ReQL term numbers: DB 14, TABLE 15,
 * GET 16, PLUCK 33, ORDER_BY 41, UPDATE 53, DELETE 54, INSERT 56, LIMIT 71,
 * DEFAULT 92, ASC 73, MAXVAL 181, BETWEEN 182; the driver sends objects as
 * MAKE_OBJ, 3, with the fields as optional arguments).
 */
class QueriesTest {
  private static Queries queries(String... kv) throws DBException {
    Properties p = new Properties();
    for (int i = 0; i < kv.length; i += 2) {
      p.setProperty(kv[i], kv[i + 1]);
    }
    return new Queries(RethinkDBConfig.fromProperties(p));
  }

  private static String wire(ReqlAst q) {
    return WireForm.json(q);
  }

  private static final String TABLE = "[15,[[14,[\"ycsb\"]],\"usertable\"]]";
  private static final String TABLE_OUTDATED =
      "[15,[[14,[\"ycsb\"]],\"usertable\"],{\"read_mode\":\"outdated\"}]";

  @Test
  void readAllFields() throws DBException {
    assertEquals("[16,[" + TABLE + ",\"user1\"]]",
        wire(queries().read("usertable", "user1", null)));
  }

  @Test
  void readWithReadMode() throws DBException {
    assertEquals("[16,[" + TABLE_OUTDATED + ",\"user1\"]]",
        wire(queries("rethinkdb.read_mode", "outdated").read("usertable", "user1", null)));
    assertEquals("[16,[[15,[[14,[\"ycsb\"]],\"usertable\"],{\"read_mode\":\"majority\"}],\"k\"]]",
        wire(queries("rethinkdb.read_mode", "majority").read("usertable", "k", null)));
  }

  @Test
  void readSomeFields() throws DBException {
    Set<String> fields = new LinkedHashSet<>(List.of("field1", "field7"));
    assertEquals("[92,[[33,[[16,[" + TABLE + ",\"user1\"]],\"field1\",\"field7\"]],null]]",
        wire(queries().read("usertable", "user1", fields)));
  }

  @Test
  void scanIsBetweenOnThePrimaryKeyInOrder() throws DBException {
    assertEquals("[71,[[41,[[182,[" + TABLE + ",\"user5\",[181,[]]]]],{\"index\":[73,[\"id\"]]}],"
            + "10]]",
        wire(queries().scan("usertable", "user5", 10, null)));
    assertEquals("[33,[[71,[[41,[[182,[" + TABLE_OUTDATED + ",\"user5\",[181,[]]]]],"
            + "{\"index\":[73,[\"id\"]]}],3]],\"field0\"]]",
        wire(queries("rethinkdb.read_mode", "outdated")
            .scan("usertable", "user5", 3, Set.of("field0"))));
  }

  @Test
  void writesCarryDurability() throws DBException {
    Map<String, Object> doc = new LinkedHashMap<>();
    doc.put("id", "user1");
    doc.put("field0", "x");
    assertEquals("[56,[" + TABLE + ",[3,[],{\"id\":\"user1\",\"field0\":\"x\"}]],{\"durability\":\"hard\"}]",
        wire(queries().insert("usertable", doc)));
    assertEquals("[53,[[16,[" + TABLE + ",\"user1\"]],[3,[],{\"field0\":\"x\"}]],"
            + "{\"durability\":\"soft\"}]",
        wire(queries("rethinkdb.durability", "soft").update("usertable", "user1",
            Map.of("field0", "x"))));
    assertEquals("[54,[[16,[" + TABLE + ",\"user1\"]]],{\"durability\":\"hard\"}]",
        wire(queries().delete("usertable", "user1")));
  }

  @Test
  void writesIgnoreReadMode() throws DBException {
    assertEquals("[54,[[16,[" + TABLE + ",\"u\"]]],{\"durability\":\"hard\"}]",
        wire(queries("rethinkdb.read_mode", "outdated").delete("usertable", "u")));
  }

  @Test
  void tableOverride() throws DBException {
    assertEquals("[16,[[15,[[14,[\"bench\"]],\"t\"]],\"k\"]]",
        wire(queries("rethinkdb.db", "bench", "rethinkdb.table", "t").read("usertable", "k", null)));
  }
}
