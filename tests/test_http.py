"""r.http through the official driver, against local HTTP servers (http.server in a
thread on 127.0.0.1; never the internet): GET/POST/params/headers/JSON/binary,
redirects, timeouts, retries and pagination."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlNonExistenceError, ReqlQueryLogicError


class Handler(BaseHTTPRequestHandler):
    """Routes by path; counts hits per path (for the retry test)."""

    hits = {}

    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="application/json", extra=()):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def echo(self, body=""):
        url = urlparse(self.path)
        self.reply(200, json.dumps({
            "method": self.command,
            "path": url.path,
            "query": parse_qs(url.query),
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        }))

    def do_GET(self):
        url = urlparse(self.path)
        Handler.hits[url.path] = Handler.hits.get(url.path, 0) + 1
        if url.path == "/text":
            self.reply(200, "hello", "text/plain")
        elif url.path == "/bin":
            self.reply(200, bytes([0, 1, 2, 255]), "application/octet-stream")
        elif url.path == "/jsonp":
            self.reply(200, 'cb({"x": 1});', "text/javascript")
        elif url.path == "/bad-json":
            self.reply(200, "{nope", "application/json")
        elif url.path == "/redirect":
            self.reply(302, "", "text/plain", [("Location", "/text")])
        elif url.path == "/redirect2":
            self.reply(302, "", "text/plain", [("Location", "/redirect")])
        elif url.path == "/missing":
            self.reply(404, "not here", "text/plain")
        elif url.path == "/slow":
            time.sleep(2)
            self.reply(200, "late", "text/plain")
        elif url.path.startswith("/flaky"):
            if Handler.hits[url.path] < 3:
                self.reply(503, "busy", "text/plain")
            else:
                self.reply(200, "ok", "text/plain")
        elif url.path == "/pages":
            page = int(parse_qs(url.query).get("page", ["1"])[0])
            extra = []
            if page < 3:
                host = self.headers["Host"]
                extra.append(("Link", '<http://%s/pages?page=%d>; rel="next"' % (host, page + 1)))
            self.reply(200, json.dumps([page * 10, page * 10 + 1]), extra=extra)
        else:
            self.echo()

    def do_HEAD(self):
        self.reply(200, "")

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n).decode()

    def do_POST(self):
        self.echo(self.read_body())

    def do_PUT(self):
        self.echo(self.read_body())

    def do_PATCH(self):
        self.echo(self.read_body())

    def do_DELETE(self):
        self.echo(self.read_body())


@pytest.fixture(scope="module")
def web():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_get_json_and_params(conn, web):
    res = r.http(web + "/echo", params={"a": 1, "b": "x y"},
                 header={"X-Test": "yes"}).run(conn)
    assert res["method"] == "GET"
    assert res["path"] == "/echo"
    assert res["query"] == {"a": ["1"], "b": ["x y"]}
    assert res["headers"]["x-test"] == "yes"


def test_header_as_array(conn, web):
    res = r.http(web + "/echo", header=["X-One: 1", "X-Two: 2"]).run(conn)
    assert res["headers"]["x-one"] == "1" and res["headers"]["x-two"] == "2"


def test_text_binary_jsonp_formats(conn, web):
    assert r.http(web + "/text").run(conn) == "hello"
    assert r.http(web + "/bin").run(conn) == bytes([0, 1, 2, 255])
    assert r.http(web + "/jsonp").run(conn) == {"x": 1}
    assert r.http(web + "/text", result_format="binary").run(conn) == b"hello"
    assert r.http(web + "/echo", result_format="text").run(conn).startswith("{")
    with pytest.raises(ReqlNonExistenceError, match="failed to parse JSON response"):
        r.http(web + "/bad-json").run(conn)
    with pytest.raises(ReqlQueryLogicError, match="is not recognized"):
        r.http(web + "/text", result_format="xml").run(conn)


def test_post_put_patch_delete_head(conn, web):
    res = r.http(web + "/f", method="POST", data={"k": "v", "n": 2}).run(conn)
    assert res["body"] == "k=v&n=2"
    assert res["headers"]["content-type"] == "application/x-www-form-urlencoded"
    res = r.http(web + "/s", method="POST", data="raw text").run(conn)
    assert res["body"] == "raw text"
    for method in ("PUT", "PATCH", "DELETE"):
        res = r.http(web + "/j", method=method, data={"a": [1, 2]}).run(conn)
        assert res["method"] == method
        assert json.loads(res["body"]) == {"a": [1, 2]}
        assert res["headers"]["content-type"] == "application/json"
    assert r.http(web + "/h", method="HEAD").run(conn) is None
    with pytest.raises(ReqlQueryLogicError, match="`data` should only be specified"):
        r.http(web + "/g", data={"a": 1}).run(conn)


def test_basic_auth(conn, web):
    res = r.http(web + "/a", auth={"user": "u", "pass": "p"}).run(conn)
    assert res["headers"]["authorization"] == "Basic dTpw"


def test_redirects(conn, web):
    assert r.http(web + "/redirect").run(conn) == "hello"
    assert r.http(web + "/redirect2", redirects=2).run(conn) == "hello"
    with pytest.raises(ReqlNonExistenceError, match="Number of redirects hit maximum amount"):
        r.http(web + "/redirect2").run(conn)
    with pytest.raises(ReqlNonExistenceError, match="status code 302"):
        r.http(web + "/redirect", redirects=0).run(conn)


def test_errors_are_non_existence_so_default_works(conn, web):
    with pytest.raises(ReqlNonExistenceError, match="status code 404"):
        r.http(web + "/missing").run(conn)
    assert r.http(web + "/missing").default("fallback").run(conn) == "fallback"


def test_timeout(conn, web):
    start = time.time()
    with pytest.raises(ReqlNonExistenceError, match="timed out after 0.300 seconds"):
        r.http(web + "/slow", timeout=0.3).run(conn)
    assert time.time() - start < 1.9


def test_attempts(conn, web):
    assert r.http(web + "/flaky-a", attempts=3).run(conn) == "ok"
    with pytest.raises(ReqlNonExistenceError, match="status code 503"):
        r.http(web + "/flaky-b", attempts=1).run(conn)
    with pytest.raises(ReqlNonExistenceError, match="no attempts allowed"):
        r.http(web + "/text", attempts=0).run(conn)


def test_pagination(conn, web):
    assert list(r.http(web + "/pages", page="link-next", page_limit=-1).run(conn)) == \
        [10, 11, 20, 21, 30, 31]
    assert list(r.http(web + "/pages", page="link-next", page_limit=2).run(conn)) == \
        [10, 11, 20, 21]
    fn = lambda info: {"params": {"page": info["params"]["page"].add(1)}}
    got = r.http(web + "/pages", params={"page": 1}, page=fn, page_limit=3).run(conn)
    assert list(got) == [10, 11, 20, 21, 30, 31]
    assert r.http(web + "/pages", page="link-next", page_limit=-1).count().run(conn) == 6
    with pytest.raises(ReqlQueryLogicError, match="without specifying `page_limit`"):
        r.http(web + "/pages", page="link-next").run(conn)


def test_http_is_not_deterministic(conn, web):
    if "test" not in r.db_list().run(conn):
        r.db_create("test").run(conn)
    r.db("test").table_create("http_det").run(conn)
    try:
        r.table("http_det").insert({"id": 1}).run(conn)
        with pytest.raises(ReqlQueryLogicError, match="deterministic"):
            r.table("http_det").get(1).update({"x": r.http(web + "/text")}).run(conn)
        res = r.table("http_det").get(1).update(
            {"x": r.http(web + "/text")}, non_atomic=True).run(conn)
        assert res["replaced"] == 1
    finally:
        r.db("test").table_drop("http_det").run(conn)


def test_public_only_refuses_private_addresses(make_server, web):
    # `--reql-http-public-only` (against server-side request forgery): every address
    # r.http resolves to is checked, names included; nothing reaches the local server.
    s = make_server(extra=["--reql-http-public-only"])
    c = s.connect()
    port = web.rsplit(":", 1)[1]
    hits = sum(Handler.hits.values())
    for url in [web + "/text", "http://localhost:%s/text" % port,
                "http://[::1]:%s/text" % port, "http://[::ffff:127.0.0.1]:%s/text" % port,
                "http://0.0.0.0:%s/text" % port]:
        with pytest.raises(ReqlNonExistenceError) as e:
            r.http(url).run(c)
        assert "not public" in str(e.value) or "connect" in str(e.value), (url, str(e.value))
    assert r.http(web + "/text").default("refused").run(c) == "refused"
    assert sum(Handler.hits.values()) == hits
    c.close()


def test_slow_requests_do_not_hold_up_other_queries(make_server, web):
    """`r.http` waits on an evaluation thread for the remote server; more such waits
    than the server has evaluation threads (four per core) must not keep its other
    queries waiting behind them (`reql::blocking`, `server::exec`)."""
    s = make_server()
    conn = s.connect()
    r.db("test").table_create("t").run(conn)
    r.table("t").insert([{"id": i} for i in range(3)]).run(conn)
    done, lock = [], threading.Lock()

    def fetch(k, c):
        r.http(web + "/slow").run(c)
        with lock:
            done.append(k)

    fetchers = [threading.Thread(target=fetch, args=(k, s.connect()), daemon=True)
                for k in range(24)]
    for f in fetchers:
        f.start()
    time.sleep(0.5)  # let them reach the evaluation threads (not a timing assertion)
    assert r.table("t").count().run(conn) == 3
    assert r.table("t").filter(r.row["id"] > 0).count().run(conn) == 2
    with lock:
        assert done == [], "answered only after slow requests ended"
    for f in fetchers:
        f.join(timeout=60)
    assert len(done) == 24
