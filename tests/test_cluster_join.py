"""Servers that join each other (`--join`): three real `ponder` processes on loopback
learn each other, answer `server_config`/`server_status` with the same rows, rename a
server through another, notice a killed server within the heartbeat timeout and see it
come back; TLS on the cluster port keeps out a server without a certificate."""
import os
import subprocess
import tempfile
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlAuthError

from conftest import Server, free_port

pytestmark = pytest.mark.single_server('starts its own clusters')

SYS = r.db("rethinkdb")


def start(directory, name, joins=(), extra=()):
    """A server named `name` on a free cluster port, joining `joins` (servers)."""
    port = free_port()
    args = ["--server-name", name, "--cluster-port", str(port)]
    for j in joins:
        args += ["--join", "127.0.0.1:%d" % j.cluster_port]
    s = Server(directory, extra=args + list(extra))
    s.cluster_port = port
    return s.start()


def wait_for(what, check, timeout=10.0):
    """Polls `what()` until `check(value)` holds; fails with the last value."""
    deadline = time.time() + timeout
    while True:
        value = what()
        if check(value):
            return value
        if time.time() > deadline:
            pytest.fail("timed out; last value: %r" % (value,))
        time.sleep(0.1)


def names(conn):
    return sorted(row["name"] for row in SYS.table("server_config").run(conn))


def status_of(conn):
    return {row["name"]: row for row in SYS.table("server_status").run(conn)}


@pytest.fixture
def dirs():
    made = []

    def make():
        made.append(tempfile.TemporaryDirectory())
        return made[-1].name

    yield make
    for d in made:
        d.cleanup()


@pytest.fixture
def procs():
    started = []
    yield started
    for s in started:
        s.stop()


def test_three_servers_join_rename_lose_and_regain_a_server(dirs, procs):
    a = start(dirs(), "alpha")
    procs.append(a)
    b = start(dirs(), "beta", joins=[a])
    procs.append(b)
    c_dir = dirs()
    c = start(c_dir, "gamma", joins=[a])
    procs.append(c)
    conns = {s: s.connect() for s in (a, b, c)}
    everyone = ["alpha", "beta", "gamma"]
    # B learns of C through A (B never named C): every server sees all three.
    for s, conn in conns.items():
        wait_for(lambda: names(conn), lambda n: n == everyone)
    ids = {row["name"]: row["id"] for row in SYS.table("server_config").run(conns[a])}
    for conn in conns.values():
        rows = list(SYS.table("server_config").run(conn))
        assert {row["name"]: row["id"] for row in rows} == ids
        assert all(row["tags"] == ["default"] for row in rows)
        statuses = wait_for(
            lambda: status_of(conn),
            lambda st: all(
                st[n]["network"]["connected_to"] == {m: True for m in everyone if m != n}
                for n in everyone))
        for server, name in ((a, "alpha"), (b, "beta"), (c, "gamma")):
            net = statuses[name]["network"]
            assert net["cluster_port"] == server.cluster_port
            assert net["canonical_addresses"] == [
                {"host": "127.0.0.1", "port": server.cluster_port}]
            assert net["reql_port"] == server.port
            assert statuses[name]["process"]["pid"] == server.proc.pid
    # The server id persists: the same one after a restart (checked for C below).
    c_id = ids["gamma"]

    # Rename C (and retag it) through A: C applies it, everyone sees it.
    res = SYS.table("server_config").get(c_id).update(
        {"name": "gamma2", "tags": ["default", "ssd"]}).run(conns[a])
    assert res["replaced"] == 1, res
    assert SYS.table("server_config").get(c_id)["name"].run(conns[c]) == "gamma2"
    assert conns[c].server()["name"] == "gamma2"
    wait_for(lambda: SYS.table("server_config").get(c_id).run(conns[b]),
             lambda row: row["name"] == "gamma2" and row["tags"] == ["default", "ssd"])
    # Names are unique: RethinkDB's message.
    res = SYS.table("server_config").get(c_id).update({"name": "beta"}).run(conns[a])
    assert res["errors"] == 1
    assert res["first_error"] == (
        "Cannot rename server `gamma2` to `beta` because server `beta` already exists.")
    # Right after the rename the others' views still name the old one (a
    # non_transitive_error for a round); once the views have spread, no issue.
    for conn in conns.values():
        wait_for(lambda: list(SYS.table("current_issues").run(conn)), lambda i: i == [])

    # A short heartbeat, set on A, reaches the others.
    SYS.table("cluster_config").get("heartbeat").update(
        {"heartbeat_timeout_secs": 2}).run(conns[a])
    for conn in conns.values():
        wait_for(lambda: SYS.table("cluster_config").get("heartbeat").run(conn),
                 lambda row: row["heartbeat_timeout_secs"] == 2)

    # kill -9 C: A and B mark it disconnected within the heartbeat timeout.
    conns.pop(c).close()
    c.kill9()
    killed = time.time()
    for conn in conns.values():
        wait_for(lambda: names(conn), lambda n: n == ["alpha", "beta"], timeout=6)
    assert time.time() - killed < 2 + 3, "noticed within the timeout and a round"
    st = status_of(conns[a])
    assert st["alpha"]["network"]["connected_to"] == {"beta": True, "gamma2": False}
    # A disconnected server is no issue in RethinkDB 2.4 (once A's and B's views agree).
    wait_for(lambda: list(SYS.table("current_issues").run(conns[a])), lambda i: i == [])
    # A write for the disconnected server fails: its row is gone.
    res = SYS.table("server_config").insert(
        {"id": c_id, "name": "x", "tags": [], "cache_size_mb": "auto"}).run(conns[a])
    assert res["errors"] == 1

    # C comes back (same directory: same id, its new name kept over the flag).
    c = start(c_dir, "gamma", joins=[a])
    procs.append(c)
    for conn in conns.values():
        wait_for(lambda: names(conn), lambda n: n == ["alpha", "beta", "gamma2"])
    assert SYS.table("server_config").get(c_id)["name"].run(conns[b]) == "gamma2"
    wait_for(lambda: status_of(conns[b])["beta"]["network"]["connected_to"],
             lambda ct: ct == {"alpha": True, "gamma2": True})
    for conn in conns.values():
        conn.close()


def test_duplicate_names_tags_and_canonical_addresses(dirs, procs):
    a = start(dirs(), "twin", extra=["--server-tag", "ssd", "--server-tag", "fast"])
    procs.append(a)
    b = start(dirs(), "twin", joins=[a], extra=["--canonical-address", "localhost"])
    procs.append(b)
    conn = b.connect()
    wait_for(lambda: names(conn), lambda n: n == ["twin", "twin"])
    tags = sorted(row["tags"] for row in SYS.table("server_config").run(conn))
    assert tags == [["default"], ["fast", "ssd"]]  # a set: sorted, as in RethinkDB
    addresses = [row["network"]["canonical_addresses"]
                 for row in SYS.table("server_status").run(conn)]
    assert [{"host": "localhost", "port": b.cluster_port}] in addresses
    # Both keep their name (RethinkDB renames neither): an issue until one is renamed.
    issues = list(SYS.table("current_issues").run(conn))
    assert [i["type"] for i in issues] == ["server_name_collision"]
    assert issues[0]["critical"] is True
    assert issues[0]["info"]["name"] == "twin"
    assert sorted(issues[0]["info"]["ids"]) == sorted(
        row["id"] for row in SYS.table("server_config").run(conn))
    assert issues[0]["description"].startswith("The following servers are all named 'twin': ")
    conn.close()


def test_a_server_of_another_cluster_is_refused(dirs, procs):
    a = start(dirs(), "one")
    procs.append(a)
    # X created its own cluster id alone; joining A later is refused by the hello.
    x_dir = dirs()
    x = start(x_dir, "other")
    with x.connect() as c:  # started (its identity written)
        assert names(c) == ["other"]
    x.stop()
    x = start(x_dir, "other", joins=[a])
    procs.append(x)
    time.sleep(1.5)
    conn = a.connect()
    assert names(conn) == ["one"]
    conn.close()


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_certs(d, servers):
    """A cluster CA and a certificate per server, as docs/clustering.md says."""
    openssl("req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "1", "-subj", "/CN=test cluster CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("basicConstraints = critical, CA:FALSE\n"
                "keyUsage = critical, digitalSignature\n"
                "extendedKeyUsage = serverAuth, clientAuth\n")
    for s in servers:
        openssl("req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:prime256v1", "-keyout", s + ".key", "-out", s + ".csr",
                "-subj", "/CN=" + s, cwd=d)
        openssl("x509", "-req", "-in", s + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", s + ".crt", "-days", "1",
                "-extfile", "server.ext", cwd=d)


def tls_flags(d, s):
    return ["--cluster-tls-key", os.path.join(d, s + ".key"),
            "--cluster-tls-cert", os.path.join(d, s + ".crt"),
            "--cluster-tls-ca", os.path.join(d, "ca.crt")]


def test_cluster_tls_admits_certified_servers_only(dirs, procs):
    certs = dirs()
    make_certs(certs, ["s1", "s2"])
    a = start(dirs(), "s1", extra=tls_flags(certs, "s1"))
    procs.append(a)
    b = start(dirs(), "s2", joins=[a], extra=tls_flags(certs, "s2"))
    procs.append(b)
    # Without the flags: no TLS, so it cannot even learn the cluster id, nor receive
    # the cluster's catalog: it knows no user, and refuses every login.
    plain = start(dirs(), "intruder", joins=[a])
    procs.append(plain)
    conn_a, conn_b = a.connect(), b.connect()
    wait_for(lambda: names(conn_b), lambda n: n == ["s1", "s2"])
    wait_for(lambda: names(conn_a), lambda n: n == ["s1", "s2"])
    time.sleep(1)
    assert names(conn_a) == ["s1", "s2"]
    with pytest.raises(ReqlAuthError, match="Unknown user"):
        plain.connect()
    # Raft travels over the same TLS connections: a table replicated on both servers.
    wait_for(lambda: r.db_list().run(conn_b), lambda dbs: "test" in dbs, timeout=20)
    r.db("test").table_create("both", replicas=2).run(conn_b)
    wait_for(lambda: r.db("test").table_list().run(conn_a), lambda t: t == ["both"])
    r.db("test").table("both").wait(timeout=30).run(conn_a)
    assert r.db("test").table("both").insert({"id": 1}).run(conn_a)["inserted"] == 1
    wait_for(lambda: r.db("test").table("both", read_mode="outdated").get(1).run(conn_b),
             lambda doc: doc == {"id": 1})
    for conn in (conn_a, conn_b):
        conn.close()


def test_cluster_tls_needs_all_three_flags(dirs):
    certs = dirs()
    make_certs(certs, ["s1"])
    s = Server(dirs(), extra=["--cluster-port", str(free_port()),
                              "--cluster-tls-cert", os.path.join(certs, "s1.crt")])
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "missing: --cluster-tls-key, --cluster-tls-ca" in str(e.value)
