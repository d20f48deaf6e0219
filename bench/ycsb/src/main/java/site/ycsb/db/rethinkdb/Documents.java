package site.ycsb.db.rethinkdb;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

import site.ycsb.ByteIterator;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/** Converting between YCSB's field maps and documents, and write results to statuses. */
final class Documents {
  private Documents() {
  }

  /** The document of a record: its key under {@code id} and each field as a string. */
  static Map<String, Object> toDocument(String key, Map<String, ByteIterator> values) {
    Map<String, Object> doc = new LinkedHashMap<>(values.size() * 2 + 2);
    doc.put(Queries.PRIMARY_KEY, key);
    doc.putAll(toFields(values));
    return doc;
  }

  /** The fields of an update, each as a string (the primary key is never among them). */
  static Map<String, Object> toFields(Map<String, ByteIterator> values) {
    Map<String, Object> fields = new LinkedHashMap<>(values.size() * 2);
    for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
      if (!Queries.PRIMARY_KEY.equals(e.getKey())) {
        fields.put(e.getKey(), e.getValue().toString());
      }
    }
    return fields;
  }

  /**
   * Puts the fields of a document into YCSB's result: the requested {@code fields}
   * (null: all but the primary key); a missing field is left out, as other bindings do.
   */
  static void fromDocument(Map<?, ?> doc, Set<String> fields, Map<String, ByteIterator> result) {
    if (fields == null) {
      for (Map.Entry<?, ?> e : doc.entrySet()) {
        String name = String.valueOf(e.getKey());
        if (!Queries.PRIMARY_KEY.equals(name)) {
          result.put(name, new StringByteIterator(asString(e.getValue())));
        }
      }
    } else {
      for (String name : fields) {
        if (doc.containsKey(name)) {
          result.put(name, new StringByteIterator(asString(doc.get(name))));
        }
      }
    }
  }

  /** A scan row as YCSB wants it. */
  static HashMap<String, ByteIterator> row(Map<?, ?> doc, Set<String> fields) {
    HashMap<String, ByteIterator> row = new HashMap<>();
    fromDocument(doc, fields, row);
    return row;
  }

  private static String asString(Object v) {
    return v == null ? "" : v.toString();
  }

  /** What kind of write a result belongs to. */
  enum Write { INSERT, UPDATE, DELETE }

  /**
   * The status of a write from its result object ({@code inserted}, {@code replaced},
   * {@code unchanged}, {@code skipped}, {@code deleted}, {@code errors}).
   */
  static Status writeStatus(Object result, Write kind) {
    if (!(result instanceof Map)) {
      return Status.UNEXPECTED_STATE;
    }
    Map<?, ?> m = (Map<?, ?>) result;
    if (count(m, "errors") > 0) {
      return Status.ERROR;
    }
    switch (kind) {
    case INSERT:
      return count(m, "inserted") + count(m, "replaced") + count(m, "unchanged") > 0
          ? Status.OK : Status.UNEXPECTED_STATE;
    case UPDATE:
      if (count(m, "skipped") > 0) {
        return Status.NOT_FOUND;
      }
      return count(m, "replaced") + count(m, "unchanged") > 0 ? Status.OK : Status.UNEXPECTED_STATE;
    case DELETE:
      if (count(m, "deleted") > 0) {
        return Status.OK;
      }
      return count(m, "skipped") > 0 ? Status.NOT_FOUND : Status.UNEXPECTED_STATE;
    default:
      return Status.UNEXPECTED_STATE;
    }
  }

  private static long count(Map<?, ?> m, String name) {
    Object v = m.get(name);
    return v instanceof Number ? ((Number) v).longValue() : 0L;
  }
}
