"""`r.js` runs in a sandbox: no host access (no modules, files, processes or network),
and its time, memory and stack limits hold: a runaway script fails its query with a
ReqlQueryLogicError and the server keeps serving everyone."""
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlQueryLogicError

from conftest import assert_serving
from reqlwire import rss_kib


def test_no_host_objects(conn):
    names = ["require", "process", "std", "os", "fetch", "XMLHttpRequest", "WebSocket",
             "Deno", "Bun", "module", "exports", "__filename", "scriptArgs", "print"]
    src = "[" + ",".join("typeof %s" % n for n in names) + "].join(',')"
    assert r.js(src).run(conn) == ",".join(["undefined"] * len(names))


@pytest.mark.parametrize("src", [
    "import('os')",
    "import('std').then(s => s.loadFile('/etc/passwd'))",
])
def test_no_module_loading(conn, src):
    # No module loader: the import stays a pending promise (an empty object to ReQL) and
    # nothing it would have read comes back.
    assert r.js(src).run(conn) == {}


def test_timeout_holds(server, conn):
    started = time.time()
    with pytest.raises(ReqlQueryLogicError, match="timed out"):
        r.js("while (true) {}", timeout=0.5).run(conn)
    assert time.time() - started < 5
    assert_serving(server)


def test_memory_limit_holds(server, conn):
    before = rss_kib(server.proc.pid)
    with pytest.raises(ReqlQueryLogicError):
        r.js("var a = []; while (true) { a.push(new Array(1e6).fill(1.5)); }", timeout=60).run(conn)
    # The script's heap is capped well below what it asked for, and given back.
    assert rss_kib(server.proc.pid) - before < 512 * 1024
    assert_serving(server)


def test_stack_limit_holds(server, conn):
    with pytest.raises(ReqlQueryLogicError):
        r.js("function f(n) { return f(n + 1) + 1; } f(0)").run(conn)
    assert_serving(server)


def test_functions_still_work(conn):
    assert list(r.range(3).map(r.js("(function (x) { return x * 2; })")).run(conn)) == [0, 2, 4]
