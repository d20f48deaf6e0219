package site.ycsb.db.rethinkdb;

import java.util.Locale;
import java.util.Properties;

import site.ycsb.DBException;

/**
 * The binding's settings, read from YCSB's properties ({@code -p name=value} or a
 * {@code -P} file).
 *
 * <table>
 *   <caption>Properties</caption>
 *   <tr><th>property</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>rethinkdb.host</td><td>127.0.0.1</td><td>server address</td></tr>
 *   <tr><td>rethinkdb.port</td><td>28015</td><td>driver port</td></tr>
 *   <tr><td>rethinkdb.db</td><td>ycsb</td><td>database, created if missing</td></tr>
 *   <tr><td>rethinkdb.table</td><td>YCSB's {@code table} (usertable)</td>
 *       <td>table, created if missing; overrides the table YCSB names</td></tr>
 *   <tr><td>rethinkdb.durability</td><td>hard</td><td>durability of writes: hard or soft</td></tr>
 *   <tr><td>rethinkdb.read_mode</td><td>single</td>
 *       <td>read_mode of reads and scans: single, majority or outdated</td></tr>
 *   <tr><td>rethinkdb.user</td><td>admin</td><td>user</td></tr>
 *   <tr><td>rethinkdb.password</td><td>(empty)</td><td>password</td></tr>
 *   <tr><td>rethinkdb.timeout</td><td>20</td><td>connect timeout in seconds</td></tr>
 * </table>
 */
public final class RethinkDBConfig {
  public static final String HOST = "rethinkdb.host";
  public static final String PORT = "rethinkdb.port";
  public static final String DB = "rethinkdb.db";
  public static final String TABLE = "rethinkdb.table";
  public static final String DURABILITY = "rethinkdb.durability";
  public static final String READ_MODE = "rethinkdb.read_mode";
  public static final String USER = "rethinkdb.user";
  public static final String PASSWORD = "rethinkdb.password";
  public static final String TIMEOUT = "rethinkdb.timeout";

  /** YCSB's own table property (CoreWorkload.TABLENAME_PROPERTY). */
  static final String YCSB_TABLE = "table";
  static final String YCSB_TABLE_DEFAULT = "usertable";

  private final String host;
  private final int port;
  private final String db;
  private final String table;
  private final boolean tableOverridden;
  private final String durability;
  private final String readMode;
  private final String user;
  private final String password;
  private final long timeoutSeconds;

  private RethinkDBConfig(String host, int port, String db, String table, boolean tableOverridden,
                          String durability, String readMode, String user, String password,
                          long timeoutSeconds) {
    this.host = host;
    this.port = port;
    this.db = db;
    this.table = table;
    this.tableOverridden = tableOverridden;
    this.durability = durability;
    this.readMode = readMode;
    this.user = user;
    this.password = password;
    this.timeoutSeconds = timeoutSeconds;
  }

  /** Reads and checks the settings; a bad value is a {@link DBException} naming the property. */
  public static RethinkDBConfig fromProperties(Properties p) throws DBException {
    String host = nonEmpty(p, HOST, "127.0.0.1");
    int port = intIn(p, PORT, 28015, 1, 65535);
    String db = nonEmpty(p, DB, "ycsb");
    String explicitTable = p.getProperty(TABLE);
    boolean overridden = explicitTable != null && !explicitTable.trim().isEmpty();
    String table = overridden ? explicitTable.trim() : nonEmpty(p, YCSB_TABLE, YCSB_TABLE_DEFAULT);
    String durability = oneOf(p, DURABILITY, "hard", "hard", "soft");
    String readMode = oneOf(p, READ_MODE, "single", "single", "majority", "outdated");
    String user = nonEmpty(p, USER, "admin");
    String password = p.getProperty(PASSWORD, "");
    long timeout = intIn(p, TIMEOUT, 20, 1, 3600);
    return new RethinkDBConfig(host, port, db, table, overridden, durability, readMode, user,
        password, timeout);
  }

  private static String nonEmpty(Properties p, String name, String dflt) throws DBException {
    String v = p.getProperty(name);
    if (v == null) {
      return dflt;
    }
    v = v.trim();
    if (v.isEmpty()) {
      throw new DBException(name + " must not be empty");
    }
    return v;
  }

  private static int intIn(Properties p, String name, int dflt, int lo, int hi) throws DBException {
    String v = p.getProperty(name);
    if (v == null) {
      return dflt;
    }
    int n;
    try {
      n = Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw new DBException(name + " must be an integer, got '" + v + "'");
    }
    if (n < lo || n > hi) {
      throw new DBException(name + " must be in " + lo + ".." + hi + ", got " + n);
    }
    return n;
  }

  private static String oneOf(Properties p, String name, String dflt, String... allowed)
      throws DBException {
    String v = p.getProperty(name);
    if (v == null) {
      return dflt;
    }
    String norm = v.trim().toLowerCase(Locale.ROOT);
    for (String a : allowed) {
      if (a.equals(norm)) {
        return a;
      }
    }
    throw new DBException(name + " must be one of " + String.join(", ", allowed) + ", got '" + v
        + "'");
  }

  public String host() {
    return host;
  }

  public int port() {
    return port;
  }

  public String db() {
    return db;
  }

  /** The table created in init: rethinkdb.table, else YCSB's {@code table}. */
  public String table() {
    return table;
  }

  /** The table an operation runs on, given the table YCSB passes to it. */
  public String tableFor(String ycsbTable) {
    if (tableOverridden || ycsbTable == null || ycsbTable.isEmpty()) {
      return table;
    }
    return ycsbTable;
  }

  public String durability() {
    return durability;
  }

  public String readMode() {
    return readMode;
  }

  public String user() {
    return user;
  }

  public String password() {
    return password;
  }

  public long timeoutSeconds() {
    return timeoutSeconds;
  }

  @Override
  public String toString() {
    return "rethinkdb://" + user + "@" + host + ":" + port + "/" + db + "." + table
        + " durability=" + durability + " read_mode=" + readMode;
  }
}
