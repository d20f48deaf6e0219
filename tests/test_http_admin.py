"""The HTTP admin port: RethinkDB's `/ajax/reql` query endpoint (byte framing, cursors,
changefeeds, its 400 answers and in-band errors, connection expiry), the console's
files (traversal attempts, 404s, security headers), Ponder's login (required when admin
has a password; the user's permissions apply) and `/metrics` (Prometheus text).

Everything goes through raw HTTP (`http.client`, raw sockets); results are cross-checked
with the official Python driver."""
import http.client
import json
import os
import re
import socket
import ssl
import struct
import tempfile
import time
import urllib.parse

import pytest
from rethinkdb import r

from conftest import self_signed_cert
from rethinkdb.ast import ReQLEncoder
from rethinkdb.errors import ReqlPermissionError

START, CONTINUE, STOP, NOREPLY_WAIT = 1, 2, 3, 4
SUCCESS_ATOM, SUCCESS_SEQUENCE, SUCCESS_PARTIAL = 1, 2, 3
CLIENT_ERROR, RUNTIME_ERROR = 16, 18
PERMISSION_ERROR, OP_INDETERMINATE = 6000000, 4200000


class Http:
    """One keep-alive HTTP connection to a server's admin port."""

    def __init__(self, port, headers=None, tls_context=None):
        if tls_context is None:
            self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        else:
            self.c = http.client.HTTPSConnection("127.0.0.1", port, timeout=30,
                                                 context=tls_context)
        self.headers = dict(headers or {})

    def request(self, method, path, body=None, headers=None):
        h = dict(self.headers)
        h.update(headers or {})
        self.c.request(method, path, body=body, headers=h)
        resp = self.c.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data

    def open(self):
        status, headers, body = self.request("POST", "/ajax/reql/open-new-connection")
        assert status == 200, (status, body)
        assert headers["content-type"] == "text/plain"
        return body.decode()

    def raw_query(self, conn_id, body):
        return self.request("POST", "/ajax/reql/?conn_id=" + urllib.parse.quote(conn_id), body)

    def query(self, conn_id, token, query):
        """Sends `query` (a list, JSON-encoded here) on `token`; returns the decoded
        response after checking the framing."""
        status, headers, body = self.raw_query(
            conn_id, struct.pack("<Q", token) + encode(query))
        assert status == 200, (status, body)
        assert headers["content-type"] == "application/octet-stream"
        return decode(body, token)

    def close(self, conn_id):
        return self.request("POST", "/ajax/reql/close-connection?conn_id="
                            + urllib.parse.quote(conn_id))


def encode(query):
    """A query as the driver serialises it."""
    return ReQLEncoder().encode(query).encode()


def decode(body, token):
    """Checks RethinkDB's framing (token u64 LE, length u32 LE, JSON) and decodes."""
    got_token, length = struct.unpack("<QI", body[:12])
    assert got_token == token
    assert length == len(body) - 12
    return json.loads(body[12:])


def start(term, **optargs):
    return [START, term.build(), optargs]


def fresh_table(conn, name):
    if name in r.db("test").table_list().run(conn):
        r.db("test").table_drop(name).run(conn)
    r.db("test").table_create(name).run(conn)
    return r.db("test").table(name)


def test_open_query_continue_stop_and_close(server, conn):
    t = fresh_table(conn, "http_cursor")
    t.insert([{"id": i} for i in range(10)]).run(conn)
    h = Http(server.http_port)
    cid = h.open()
    assert len(cid) == 24 and cid.endswith("==")  # 16 random bytes, base64
    first = h.query(cid, 1, start(t.order_by(index="id"), max_batch_rows=4))
    assert first["t"] == SUCCESS_PARTIAL
    rows = first["r"]
    # RethinkDB adds the query's duration as its profile over HTTP.
    assert list(first["p"][0]) == ["duration(ms)"]
    while True:
        more = h.query(cid, 1, [CONTINUE])
        rows += more["r"]
        if more["t"] == SUCCESS_SEQUENCE:
            break
        assert more["t"] == SUCCESS_PARTIAL
    assert rows == list(t.order_by(index="id").run(conn))
    # A token whose cursor is gone.
    gone = h.query(cid, 1, [CONTINUE])
    assert gone["t"] == CLIENT_ERROR and gone["r"] == ["Token 1 not in stream cache."]
    # STOP ends a cursor.
    assert h.query(cid, 2, start(t, max_batch_rows=2))["t"] == SUCCESS_PARTIAL
    stopped = h.query(cid, 2, [STOP])
    assert stopped["t"] == SUCCESS_SEQUENCE and stopped["r"] == []
    assert h.query(cid, 3, [NOREPLY_WAIT])["t"] == 4
    # Closing answers 200 with no body; the id is then unknown (in-band, as RethinkDB).
    status, _, body = h.close(cid)
    assert (status, body) == (200, b"")
    after = h.query(cid, 4, start(r.expr(1)))
    assert after == {"t": CLIENT_ERROR, "r": ["This HTTP connection is not open."], "b": []}


def test_answers_are_the_driver_protocols_frames(server, conn):
    h = Http(server.http_port)
    cid = h.open()
    token = 0x0102030405060708
    status, _, body = h.raw_query(
        cid, struct.pack("<Q", token) + encode(start(r.expr({"a": [1, "x"]}))))
    assert status == 200
    assert body[:8] == bytes([8, 7, 6, 5, 4, 3, 2, 1])
    resp = decode(body, token)
    assert resp["t"] == SUCCESS_ATOM and resp["r"] == [{"a": [1, "x"]}]
    assert body[12:].startswith(b'{"t":1,"r":[{"a":[1,"x"]}],"p":[{"duration(ms)":')
    # A query asking for its profile gets the real one.
    prof = h.query(cid, 2, start(r.expr(1), profile=True))
    assert prof["p"][0]["description"] == "Evaluating query."
    # Errors of the query are answered in-band, with the duration too.
    err = h.query(cid, 3, start(r.table("no_such_table")))
    assert err["t"] == RUNTIME_ERROR and "does not exist" in err["r"][0]
    assert "duration(ms)" in err["p"][0]
    # Same result as the driver's.
    assert h.query(cid, 4, start(r.db_list()))["r"] == [r.db_list().run(conn)]
    h.close(cid)


def test_changefeed_over_http(server, conn):
    t = fresh_table(conn, "http_feed")
    h = Http(server.http_port)
    cid = h.open()
    first = h.query(cid, 7, start(t.changes()))
    assert first["t"] == SUCCESS_PARTIAL and first["r"] == [] and first["n"] == [1]
    # No change: RethinkDB answers an empty batch after max_batch_seconds (0.5 s).
    began = time.time()
    empty = h.query(cid, 7, [CONTINUE])
    assert empty["t"] == SUCCESS_PARTIAL and empty["r"] == []
    assert 0.3 < time.time() - began < 5
    t.insert({"id": 1}).run(conn)
    got = []
    deadline = time.time() + 10
    while not got and time.time() < deadline:
        got = h.query(cid, 7, [CONTINUE])["r"]
    assert got == [{"new_val": {"id": 1}, "old_val": None}]
    assert h.query(cid, 7, [STOP])["t"] == SUCCESS_SEQUENCE
    h.close(cid)


def test_conn_id_missing_and_unknown(server):
    h = Http(server.http_port)
    body = struct.pack("<Q", 1) + encode(start(r.expr(1)))
    for path in ("/ajax/reql/", "/ajax/reql/close-connection"):
        status, headers, text = h.request("POST", path, body)
        assert (status, text) == (400, b'Required parameter "conn_id" missing\n')
        assert headers["content-type"] == "application/text"
    resp = decode(h.raw_query("bm9wZQ==", body)[2], 1)
    assert resp == {"t": CLIENT_ERROR, "r": ["This HTTP connection is not open."], "b": []}
    # Opening needs POST, as in RethinkDB: a GET is a query without a conn_id.
    assert h.request("GET", "/ajax/reql/open-new-connection")[0] == 400
    # Closing an unknown id is fine.
    assert h.close("bm9wZQ==")[0] == 200


def test_cross_site_posts_are_refused(server):
    # A page on another site can make the browser POST here (a form needs no
    # preflight); browsers say so in Origin, and such requests are refused before a
    # connection is opened or a query runs, even while no login is required.
    h = Http(server.http_port)
    for origin in ("http://evil.example", "null", "http://127.0.0.1:1"):
        status, _, text = h.request("POST", "/ajax/reql/open-new-connection",
                                    headers={"Origin": origin})
        assert (status, text) == (403, b"Cross-origin requests are refused.\n"), origin
    same = "http://127.0.0.1:%d" % server.http_port
    status, _, _ = h.request("POST", "/ajax/reql/open-new-connection", headers={"Origin": same})
    assert status == 200
    assert h.open()  # no Origin: a driver or a script


def test_truncated_and_malformed_bodies(server):
    h = Http(server.http_port)
    cid = h.open()
    for short in (b"", b"\x01\x02\x03\x04\x05\x06\x07"):
        status, headers, text = h.raw_query(cid, short)
        assert (status, text) == (400, b"Client is buggy (request too small).")
        assert headers["content-type"] == "application/text"
    # A token and nothing else, or broken JSON: answered in-band.
    for body in (struct.pack("<Q", 9), struct.pack("<Q", 9) + b"[1,[2,[1]"):
        status, _, data = h.raw_query(cid, body)
        assert status == 200
        resp = decode(data, 9)
        assert resp["t"] == CLIENT_ERROR and resp["r"]
    h.close(cid)


def test_noreply_is_refused(server, conn):
    t = fresh_table(conn, "http_noreply")
    h = Http(server.http_port)
    cid = h.open()
    body = struct.pack("<Q", 1) + encode(start(t.insert({"id": 1}), noreply=True))
    status, headers, text = h.raw_query(cid, body)
    assert (status, text) == (400, b"noreply queries are not supported over HTTP\n")
    assert headers["content-type"] == "application/text"
    assert t.count().run(conn) == 0
    h.close(cid)


def test_idle_connections_expire(make_server):
    s = make_server(extra=["--http-conn-timeout-secs", "1"])
    h = Http(s.http_port)
    idle = h.open()
    assert h.query(idle, 1, start(r.expr(1)))["r"] == [1]
    # A query still running when its connection expires is interrupted with
    # RethinkDB's message.
    busy = h.open()
    began = time.time()
    resp = h.query(busy, 1, start(r.range(10 ** 12).count()))
    assert resp["t"] == RUNTIME_ERROR and resp["e"] == OP_INDETERMINATE
    assert resp["r"] == ["HTTP ReQL query timed out after 1 seconds."]
    assert time.time() - began < 10
    time.sleep(1.5)
    gone = h.query(idle, 2, start(r.expr(1)))
    assert gone["r"] == ["This HTTP connection is not open."]


def test_a_body_over_the_limit_is_refused(server):
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:
        s.sendall(b"POST /ajax/reql/?conn_id=x HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: 100000000\r\n\r\n" + b"\0" * 1000)
        head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 413"), head
    assert b"Request body too large" in head or b"content-length" in head.lower()


def test_paths_outside_the_assets_are_not_served(server):
    h = Http(server.http_port)
    status, headers, body = h.request("GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    # The console (web/dist, committed) is embedded: its page, script and styles.
    assert b'src="app.js"' in body
    status, headers, _ = h.request("GET", "/app.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    status, headers, _ = h.request("GET", "/app.css")
    assert status == 200 and headers["content-type"].startswith("text/css")
    for path in ("/../../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
                 "/js%2f..%2f..%2fetc%2fpasswd", "//etc/passwd", "/.git/config",
                 "/index.html/../../etc/passwd", "/..%5c..%5cetc%5cpasswd",
                 "/nope.html", "/ajax/nope", "/ajax"):
        status, _, body = h.request("GET", path)
        assert status == 404, path
        assert b"root:" not in body
    assert h.request("POST", "/")[0] == 405
    assert h.request("DELETE", "/metrics")[0] == 405


def test_web_static_directory(make_server):
    with tempfile.TemporaryDirectory() as d:
        root = os.path.join(d, "www")
        os.mkdir(root)
        with open(os.path.join(root, "index.html"), "w") as f:
            f.write("STATIC-OK")
        with open(os.path.join(root, "app.js"), "w") as f:
            f.write("var x;")
        with open(os.path.join(d, "secret"), "w") as f:
            f.write("SECRET")
        os.symlink(os.path.join(d, "secret"), os.path.join(root, "link"))
        s = make_server(extra=["--web-static-directory", root])
        h = Http(s.http_port)
        assert h.request("GET", "/")[2] == b"STATIC-OK"
        status, headers, body = h.request("GET", "/app.js")
        assert status == 200 and headers["content-type"].startswith("text/javascript")
        for path in ("/../secret", "/%2e%2e/secret", "/link", "/missing"):
            status, _, body = h.request("GET", path)
            assert status == 404 and b"SECRET" not in body, path


def test_security_headers_on_every_answer(server):
    h = Http(server.http_port)
    for method, path in (("GET", "/"), ("GET", "/nope"), ("GET", "/metrics"),
                         ("POST", "/ajax/reql/open-new-connection"), ("POST", "/ajax/reql/"),
                         ("GET", "/ajax/session")):
        _, headers, _ = h.request(method, path)
        assert headers["x-content-type-options"] == "nosniff", path
        assert headers["x-frame-options"] == "DENY", path
        assert "default-src 'self'" in headers["content-security-policy"], path
        assert "frame-ancestors 'none'" in headers["content-security-policy"], path
        assert headers["referrer-policy"] == "no-referrer", path
        if path.startswith("/ajax") or path == "/metrics":
            assert headers["cache-control"] == "no-store", path


def parse_prometheus(text):
    """The samples of a Prometheus text exposition, as {(name, labels): value}; fails
    on any line that is not a comment or a well-formed sample."""
    samples = {}
    types = {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped")
            types[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        m = line_re.match(line)
        assert m, "not a sample: %r" % line
        labels = tuple(sorted(label_re.findall(m.group(3) or "")))
        samples[(m.group(1), labels)] = float(m.group(4))
    for (name, _) in samples:
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or base in types, name
    return samples


def test_metrics_parse_and_move(server, conn):
    t = fresh_table(conn, "http_metrics")
    h = Http(server.http_port)

    def scrape():
        status, headers, body = h.request("GET", "/metrics")
        assert status == 200
        assert headers["content-type"].startswith("text/plain; version=0.0.4")
        return parse_prometheus(body.decode())

    key = (("db", "test"), ("table", "http_metrics"))
    before = scrape()
    assert before[("ponder_build_info", (("version", "0.1.0"),))] == 1
    assert before[("ponder_table_documents_written_total", key)] == 0
    t.insert([{"id": i} for i in range(5)]).run(conn)
    list(t.run(conn))
    cursor = t.run(conn, max_batch_rows=1)
    feed = t.changes().run(conn)
    after = scrape()
    assert after[("ponder_queries_total", ())] >= before[("ponder_queries_total", ())] + 4
    assert after[("ponder_table_documents_written_total", key)] == 5
    assert after[("ponder_table_documents_read_total", key)] >= 5
    assert after[("ponder_cursors_open", ())] >= 2
    assert after[("ponder_changefeeds_open", ())] >= 1
    assert after[("ponder_client_connections", ())] >= 1
    count = ("ponder_query_duration_seconds_count", ())
    assert after[count] >= before[count] + 4
    assert after[("ponder_query_duration_seconds_bucket", (("le", "+Inf"),))] == after[count]
    assert after[("ponder_storage_bytes", ())] > 0
    assert after[("ponder_disk_free_bytes", ())] > 0
    cursor.close()
    feed.close()


def test_login_required_when_admin_has_a_password(make_server):
    s = make_server(extra=["--initial-password", "s3cret"])
    admin = s.connect(password="s3cret")
    r.db_create("hp").run(admin)
    r.db("hp").table_create("t").run(admin)
    r.db("hp").table("t").insert({"id": 1}).run(admin)
    r.db("rethinkdb").table("users").insert({"id": "erin", "password": "pw"}).run(admin)
    r.db("hp").grant("erin", {"read": True}).run(admin)

    anon = Http(s.http_port)
    status, _, _ = anon.request("POST", "/ajax/reql/open-new-connection")
    assert status == 401
    info = json.loads(anon.request("GET", "/ajax/session")[2])
    assert info == {"login_required": True, "user": None, "token": None}
    assert anon.request("GET", "/metrics")[0] == 401
    # The login is JSON only (a cross-site form cannot send it).
    status, _, _ = anon.request("POST", "/ajax/login", "user=admin&password=s3cret",
                                {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 415
    status, _, _ = anon.request("POST", "/ajax/login",
                                json.dumps({"user": "admin", "password": "wrong"}),
                                {"Content-Type": "application/json"})
    assert status == 401

    def login(user, password):
        h = Http(s.http_port)
        status, headers, body = h.request("POST", "/ajax/login",
                                          json.dumps({"user": user, "password": password}),
                                          {"Content-Type": "application/json"})
        assert status == 200, body
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        h.headers["Cookie"] = cookie.split(";")[0]
        return h, json.loads(body)["token"]

    h, token = login("admin", "s3cret")
    # Without the CSRF token, state-changing requests are refused.
    assert h.request("POST", "/ajax/reql/open-new-connection")[0] == 403
    h.headers["X-Ponder-Token"] = token
    cid = h.open()
    assert h.query(cid, 1, start(r.db("hp").table("t").count()))["r"] == [1]
    assert json.loads(h.request("GET", "/ajax/session")[2])["user"] == "admin"
    assert h.request("GET", "/metrics")[0] == 200
    basic = Http(s.http_port, {"Authorization": "Basic YWRtaW46czNjcmV0"})  # admin:s3cret
    assert basic.request("GET", "/metrics")[0] == 200

    # A non-admin user's permissions apply, as through the driver.
    e, etoken = login("erin", "pw")
    e.headers["X-Ponder-Token"] = etoken
    ecid = e.open()
    t = r.db("hp").table("t")
    assert e.query(ecid, 1, start(t.get(1)))["r"] == [{"id": 1}]
    refused = e.query(ecid, 2, start(t.insert({"id": 2})))
    assert refused["t"] == RUNTIME_ERROR and refused["e"] == PERMISSION_ERROR
    driver = s.connect(user="erin", password="pw")
    with pytest.raises(ReqlPermissionError) as err:
        t.insert({"id": 2}).run(driver)
    driver.close()
    assert refused["r"] == [err.value.message]
    # Another user's connection id is not theirs to use.
    assert e.query(cid, 3, start(r.expr(1)))["r"] == ["This HTTP connection is not open."]
    assert e.request("GET", "/metrics")[0] == 401

    # Logging out ends the session.
    assert h.request("POST", "/ajax/logout")[0] == 200
    assert h.request("POST", "/ajax/reql/open-new-connection")[0] == 401
    admin.close()


def test_connections_per_client_are_bounded(make_server):
    s = make_server(extra=["--http-max-conns-per-client", "3"])
    h = Http(s.http_port)
    ids = [h.open() for _ in range(3)]
    status, _, body = h.request("POST", "/ajax/reql/open-new-connection")
    assert status == 429 and b"Too many open HTTP ReQL connections" in body
    h.close(ids[0])
    h.open()


def test_slow_headers_are_cut_off(make_server):
    s = make_server(extra=["--http-header-timeout-secs", "1"])
    with socket.create_connection(("127.0.0.1", s.http_port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        began = time.time()
        data = sock.recv(4096)
        # Closed (or answered 408) well before our 10 s timeout.
        assert data == b"" or data.startswith(b"HTTP/1.1 408"), data
        assert time.time() - began < 6
    # The server still serves.
    assert Http(s.http_port).request("GET", "/")[0] == 200


def test_no_http_admin_and_tls(make_server):
    s = make_server(extra=["--no-http-admin"])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.http_port), timeout=5).close()
    with tempfile.TemporaryDirectory() as d:
        key, cert = self_signed_cert(d)
        s = make_server(extra=["--http-tls-key", key, "--http-tls-cert", cert])
        ctx = ssl.create_default_context(cafile=cert)
        h = Http(s.http_port, tls_context=ctx)
        cid = h.open()
        assert h.query(cid, 1, start(r.expr(41).add(1)))["r"] == [42]
