package site.ycsb.db.rethinkdb;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.Test;

import site.ycsb.ByteIterator;
import site.ycsb.RandomByteIterator;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

class DocumentsTest {
  private static Map<String, ByteIterator> values(String... kv) {
    Map<String, ByteIterator> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put(kv[i], new StringByteIterator(kv[i + 1]));
    }
    return m;
  }

  @Test
  void documentHasKeyAndStringFields() {
    Map<String, Object> doc = Documents.toDocument("user42", values("field0", "a", "field1", "b"));
    assertEquals(List.of("id", "field0", "field1"), List.copyOf(doc.keySet()));
    assertEquals("user42", doc.get("id"));
    assertEquals("a", doc.get("field0"));
    assertEquals("b", doc.get("field1"));
  }

  @Test
  void randomFieldsBecomeStringsOfTheirLength() {
    Map<String, ByteIterator> v = new HashMap<>();
    for (int i = 0; i < 10; i++) {
      v.put("field" + i, new RandomByteIterator(100));
    }
    Map<String, Object> doc = Documents.toDocument("k", v);
    assertEquals(11, doc.size());
    for (int i = 0; i < 10; i++) {
      assertEquals(100, ((String) doc.get("field" + i)).length());
    }
  }

  @Test
  void updateNeverTouchesThePrimaryKey() {
    Map<String, Object> f = Documents.toFields(values("id", "other", "field3", "z"));
    assertEquals(Map.of("field3", "z"), f);
  }

  @Test
  void allFieldsLeaveOutThePrimaryKey() {
    Map<String, Object> doc = Map.of("id", "k", "field0", "a", "field1", "b");
    Map<String, ByteIterator> result = new HashMap<>();
    Documents.fromDocument(doc, null, result);
    assertEquals(Set.of("field0", "field1"), result.keySet());
    assertEquals("a", result.get("field0").toString());
  }

  @Test
  void requestedFieldsOnly() {
    Map<String, Object> doc = Map.of("id", "k", "field0", "a", "field1", "b");
    Map<String, ByteIterator> result = new HashMap<>();
    Documents.fromDocument(doc, Set.of("field1", "field9"), result);
    assertEquals(Set.of("field1"), result.keySet());
    assertEquals("b", result.get("field1").toString());
    HashMap<String, ByteIterator> row = Documents.row(doc, Set.of("field0"));
    assertEquals("a", row.get("field0").toString());
    assertFalse(row.containsKey("id"));
  }

  private static Map<String, Object> res(Object... kv) {
    Map<String, Object> m = new HashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  @Test
  void writeStatuses() {
    assertEquals(Status.OK, Documents.writeStatus(res("inserted", 1, "errors", 0),
        Documents.Write.INSERT));
    assertEquals(Status.ERROR, Documents.writeStatus(
        res("inserted", 0, "errors", 1, "first_error", "Duplicate primary key"),
        Documents.Write.INSERT));
    assertEquals(Status.OK, Documents.writeStatus(res("replaced", 1L), Documents.Write.UPDATE));
    assertEquals(Status.OK, Documents.writeStatus(res("unchanged", 1), Documents.Write.UPDATE));
    assertEquals(Status.NOT_FOUND, Documents.writeStatus(res("skipped", 1), Documents.Write.UPDATE));
    assertEquals(Status.OK, Documents.writeStatus(res("deleted", 1), Documents.Write.DELETE));
    assertEquals(Status.NOT_FOUND, Documents.writeStatus(res("skipped", 1), Documents.Write.DELETE));
    assertEquals(Status.UNEXPECTED_STATE, Documents.writeStatus(null, Documents.Write.DELETE));
    assertEquals(Status.UNEXPECTED_STATE, Documents.writeStatus(res(), Documents.Write.UPDATE));
  }

  @Test
  void alreadyExists() {
    assertTrue(RethinkDBClient.isAlreadyExists(
        new com.rethinkdb.gen.exc.ReqlOpFailedError("Database `ycsb` already exists.")));
    assertFalse(RethinkDBClient.isAlreadyExists(
        new com.rethinkdb.gen.exc.ReqlOpFailedError("Cannot create table")));
  }
}
