package dev.ponder.e2e;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.rethinkdb.ast.ReqlAst;
import com.rethinkdb.gen.exc.ReqlError;
import com.rethinkdb.model.Backtrace;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.List;
import java.util.Map;

/**
 * The term a server error blames. The Java driver gives the query ({@link ReqlError#getTerm()})
 * and the server's backtrace ({@link ReqlError#getBacktrace()}, null when empty) but, unlike
 * the Python and JavaScript drivers, does not print the query with carets under the blamed
 * term; this follows the backtrace's frames (argument positions and optional-argument names)
 * down the query, as those drivers' printers do, and gives the blamed term as its wire JSON.
 */
final class Blame {
    private static final ObjectMapper JSON = new ObjectMapper();

    private Blame() {
    }

    /** The frames of the error's backtrace ([] when the whole query is blamed). */
    static List<Object> frames(ReqlError e) {
        Backtrace bt = e.getBacktrace();
        return bt == null ? List.of() : bt.getRaw();
    }

    /** The blamed term, as the JSON the driver sent for it. */
    static String blamed(ReqlError e) {
        ReqlAst term = e.getTerm();
        if (term == null) {
            throw new AssertionError("error carries no query: " + e);
        }
        for (Object frame : frames(e)) {
            if (frame instanceof Number) {
                List<?> args = (List<?>) field(term, "args");
                term = (ReqlAst) args.get(((Number) frame).intValue());
            } else {
                Map<?, ?> optargs = (Map<?, ?>) field(term, "optargs");
                term = (ReqlAst) optargs.get(frame);
            }
            if (term == null) {
                throw new AssertionError("backtrace " + frames(e) + " leaves the query " + json(e.getTerm()));
            }
        }
        return json(term);
    }

    /** A term as the JSON the driver sends for it. */
    static String json(ReqlAst term) {
        try {
            Method build = ReqlAst.class.getDeclaredMethod("build");
            build.setAccessible(true);
            return JSON.writeValueAsString(build.invoke(term));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static Object field(ReqlAst term, String name) {
        try {
            Field f = ReqlAst.class.getDeclaredField(name);
            f.setAccessible(true);
            return f.get(term);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }
}
