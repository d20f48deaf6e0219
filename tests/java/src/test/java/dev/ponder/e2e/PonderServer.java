package dev.ponder.e2e;

import com.rethinkdb.net.Connection;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static com.rethinkdb.RethinkDB.r;

/**
 * A scratch Ponder server for the Java end-to-end tests, started like the Python and Node
 * ones (tests/conftest.py, tests/js/ponder.js): free driver and HTTP ports, a temporary
 * data directory, the binary named by PONDER_BIN (default target/release/ponder under the
 * repository root). {@link #stop()} ends it and removes its data; {@link #kill()} kills it
 * at once, as a crash would.
 */
public final class PonderServer implements AutoCloseable {
    public final int port;
    public final Process proc;
    private final Path dir;
    private final Path log;

    private PonderServer(int port, Process proc, Path dir, Path log) {
        this.port = port;
        this.proc = proc;
        this.dir = dir;
        this.log = log;
    }

    /** The repository root: the nearest directory above the working directory with Cargo.toml. */
    static Path repositoryRoot() {
        Path p = Paths.get("").toAbsolutePath();
        for (Path q = p; q != null; q = q.getParent()) {
            if (Files.exists(q.resolve("Cargo.toml")) && Files.isDirectory(q.resolve("tests"))) {
                return q;
            }
        }
        return p;
    }

    static Path binary() {
        String env = System.getenv("PONDER_BIN");
        if (env != null && !env.isEmpty()) {
            return Paths.get(env);
        }
        return repositoryRoot().resolve(Paths.get("target", "release", "ponder"));
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket()) {
            s.bind(new InetSocketAddress("127.0.0.1", 0));
            return s.getLocalPort();
        }
    }

    public static PonderServer start() throws Exception {
        Path bin = binary();
        if (!Files.isExecutable(bin)) {
            throw new IllegalStateException("ponder binary not found at " + bin + " (set PONDER_BIN)");
        }
        Path dir = Files.createTempDirectory("ponder-java-");
        Path log = Files.createTempFile("ponder-java-", ".log");
        int port = freePort();
        int httpPort = freePort();
        Process proc = new ProcessBuilder(List.of(bin.toString(), "serve",
                "--directory", dir.resolve("data").toString(),
                "--driver-port", Integer.toString(port),
                "--http-port", Integer.toString(httpPort)))
                .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                .redirectError(log.toFile())
                .start();
        PonderServer server = new PonderServer(port, proc, dir, log);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            if (!proc.isAlive()) {
                String err = Files.readString(log, StandardCharsets.UTF_8);
                server.cleanup();
                throw new IllegalStateException("ponder exited: " + err);
            }
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", port), 1000);
                return server;
            } catch (IOException notYet) {
                // not listening yet
            }
            if (System.nanoTime() > deadline) {
                proc.destroyForcibly().waitFor();
                server.cleanup();
                throw new IllegalStateException("ponder did not start listening");
            }
            Thread.sleep(50);
        }
    }

    /** A connection as `admin` (no password). */
    public Connection connect() {
        return r.connection().hostname("127.0.0.1").port(port).timeout(10_000L).connect();
    }

    public Connection connect(String user, String password) {
        return r.connection().hostname("127.0.0.1").port(port).timeout(10_000L)
                .user(user, password).connect();
    }

    /** Kills the server at once (SIGKILL). */
    public void kill() throws InterruptedException {
        proc.destroyForcibly().waitFor();
    }

    /** Stops the server (SIGTERM, then SIGKILL after 10 s) and removes its data. */
    public void stop() throws InterruptedException {
        if (proc.isAlive()) {
            proc.destroy();
            if (!proc.waitFor(10, TimeUnit.SECONDS)) {
                proc.destroyForcibly().waitFor();
            }
        }
        cleanup();
    }

    @Override
    public void close() throws InterruptedException {
        stop();
    }

    private void cleanup() {
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // best effort
        }
        log.toFile().delete();
    }
}
