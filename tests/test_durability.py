"""Durability: acknowledged hard-durability writes survive SIGKILL, soft writes survive it
after `sync()`, and everything survives a graceful restart."""
import threading
import time

import pytest
from rethinkdb import r

from conftest import assert_serving

pytestmark = pytest.mark.single_server(
    'durability of one process across SIGKILL and restarts (its own servers)')


def doc_for(w, i):
    return {"id": "w%d-%04d" % (w, i), "w": w, "i": i, "body": "x" * (i % 50),
            "nested": {"k": [w, i, {"z": i % 7 == 0}]}}


def test_acknowledged_writes_survive_kill9(make_server):
    s = make_server()
    c = s.connect()
    r.db("test").table_create("dur").run(c)
    c.close()

    n_threads, per_thread = 4, 500            # 2,000 documents at most
    acked = [[] for _ in range(n_threads)]
    failures = [0] * n_threads
    stop = threading.Event()

    def writer(w):
        try:
            conn = s.connect(timeout=10)
        except Exception:  # noqa: BLE001 - server may already be gone
            return
        deadline = time.time() + 20
        for i in range(per_thread):
            if stop.is_set() or time.time() > deadline:
                break
            d = doc_for(w, i)
            try:
                res = r.table("dur").insert(d).run(conn)
            except Exception:  # noqa: BLE001 - the server was killed mid-write
                failures[w] += 1
                break
            assert res["inserted"] == 1, res
            acked[w].append(d["id"])
        try:
            conn.close(noreply_wait=False)
        except Exception:  # noqa: BLE001
            pass

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(n_threads)]
    for t in threads:
        t.start()
    # Kill once half of the writes is acknowledged (so more are in flight), or
    # after at most ~1.5 s.
    began = time.time()
    while time.time() - began < 1.5 and sum(len(a) for a in acked) < 1000:
        time.sleep(0.01)
    s.kill9()
    killed_at = sum(len(a) for a in acked)
    print("acknowledged at kill:", killed_at, "after", round(time.time() - began, 3), "s")
    stop.set()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    acked_ids = {i for a in acked for i in a}
    assert len(acked_ids) >= 1, "nothing was acknowledged before the kill"
    assert killed_at < n_threads * per_thread, "load finished before the kill"

    s2 = make_server(directory=s.directory)
    c = s2.connect()
    try:
        present = {d["id"]: d for d in r.table("dur").run(c)}
        missing = sorted(acked_ids - set(present))
        assert missing == [], "%d acknowledged writes lost, e.g. %r" % (len(missing),
                                                                          missing[:5])
        for w in range(n_threads):
            for i, key in enumerate(acked[w]):
                assert present[key] == doc_for(w, i)
        # Anything else present (committed but unacknowledged) is intact too.
        for key, d in present.items():
            assert d == doc_for(d["w"], d["i"]) and key == d["id"]
        assert r.table("dur").count().run(c) == len(present)
        # The restarted server takes writes.
        assert r.table("dur").insert({"id": "after"}).run(c)["inserted"] == 1
    finally:
        c.close()


def test_soft_writes_then_sync_survive_kill9(make_server):
    s = make_server()
    c = s.connect()
    r.db("test").table_create("soft").run(c)
    for start in range(0, 500, 100):
        res = r.table("soft").insert([{"id": i, "v": "s%d" % i} for i in range(start, start + 100)],
                                     durability="soft").run(c)
        assert res["inserted"] == 100
    for i in range(500, 550):
        res = r.table("soft").insert({"id": i, "v": "s%d" % i}).run(c, durability="soft")
        assert res["inserted"] == 1
    res = r.table("soft").get(0).update({"u": True}, durability="soft").run(c)
    assert res["replaced"] == 1
    assert r.table("soft").sync().run(c) == {"synced": 1}
    c.close()
    s.kill9()

    s2 = make_server(directory=s.directory)
    c = s2.connect()
    try:
        assert r.table("soft").count().run(c) == 550
        docs = {d["id"]: d for d in r.table("soft").run(c)}
        assert docs[0] == {"id": 0, "v": "s0", "u": True}
        for i in range(1, 550):
            assert docs[i] == {"id": i, "v": "s%d" % i}
    finally:
        c.close()


def test_table_durability_soft_then_sync_survives_kill9(make_server):
    s = make_server()
    c = s.connect()
    r.db("test").table_create("softtab", durability="soft").run(c)
    res = r.table("softtab").insert([{"id": i} for i in range(300)]).run(c)
    assert res["inserted"] == 300
    assert r.table("softtab").sync().run(c) == {"synced": 1}
    c.close()
    s.kill9()
    s2 = make_server(directory=s.directory)
    c = s2.connect()
    try:
        assert sorted(r.table("softtab")["id"].run(c)) == list(range(300))
    finally:
        c.close()


def test_restart_persistence(make_server):
    s = make_server()
    c = s.connect()
    assert "test" in r.db_list().run(c)
    assert r.db_create("app").run(c)["dbs_created"] == 1
    assert r.db("app").table_create("users").run(c)["tables_created"] == 1
    r.db("app").table_create("posts", primary_key="slug").run(c)
    r.db("test").table_create("t").run(c)
    r.db("app").table("users").insert([{"id": i, "name": "u%d" % i, "age": 20 + i}
                                       for i in range(50)]).run(c)
    r.db("app").table("posts").insert({"slug": "hello", "tags": ["a", "b"]}).run(c)
    r.db("app").table("users").get(3).update({"name": "three"}).run(c)
    r.db("app").table("users").get(49).delete().run(c)
    r.table("t").insert({"id": "k", "v": 1.5}).run(c)
    idle = s.connect()                           # a client still connected at shutdown
    c.close()
    began = time.time()
    s.stop()                                     # SIGTERM
    assert s.proc.returncode == 0, s.proc.returncode
    assert time.time() - began < 5
    idle.close(noreply_wait=False)

    s2 = make_server(directory=s.directory)
    c = s2.connect()
    try:
        assert set(r.db_list().run(c)) >= {"test", "app"}
        assert sorted(r.db("app").table_list().run(c)) == ["posts", "users"]
        assert r.db("test").table_list().run(c) == ["t"]
        assert r.db("app").table("users").count().run(c) == 49
        assert r.db("app").table("users").get(3).run(c) == {"id": 3, "name": "three",
                                                             "age": 23}
        assert r.db("app").table("users").get(49).run(c) is None
        assert r.db("app").table("posts").get("hello").run(c) == {"slug": "hello",
                                                                 "tags": ["a", "b"]}
        assert r.db("app").table("posts").info()["primary_key"].run(c) == "slug"
        adults = r.db("app").table("users").filter(r.row["age"].ge(60)).count().run(c)
        assert adults == 9                      # ids 40..48 (49 was deleted)
        assert r.table("t").get("k").run(c) == {"id": "k", "v": 1.5}
    finally:
        c.close()
    assert_serving(s2)


def test_db_list_contains_test_on_first_start(make_server):
    s = make_server()
    c = s.connect()
    try:
        dbs = r.db_list().run(c)
        assert "test" in dbs and "app" not in dbs
        assert r.db("test").table_list().run(c) == []
    finally:
        c.close()


def test_catalog_changes_survive_kill9(make_server):
    """Acknowledged db/table creation, drops and a write survive an immediate SIGKILL."""
    s = make_server()
    c = s.connect()
    r.db_create("k9").run(c)
    r.db("k9").table_create("a").run(c)
    r.db("k9").table_create("b", primary_key="name").run(c)
    r.db("k9").table_create("gone").run(c)
    r.db("k9").table_drop("gone").run(c)
    r.db("k9").table("b").insert({"name": "n", "v": [1, 2]}).run(c)
    s.kill9()
    c.close(noreply_wait=False)

    s2 = make_server(directory=s.directory)
    c = s2.connect()
    try:
        assert "k9" in r.db_list().run(c)
        assert sorted(r.db("k9").table_list().run(c)) == ["a", "b"]
        assert r.db("k9").table("b").get("n").run(c) == {"name": "n", "v": [1, 2]}
        assert r.db("k9").table("a").count().run(c) == 0
        r.db("k9").table("a").insert({"id": 1}).run(c)
        assert r.db("k9").table("a").get(1).run(c) == {"id": 1}
    finally:
        c.close()


# --- issue 6: format version, soft-flush bound, full disk -------------------------------

import os
import shutil
import subprocess
import tempfile

import pytest
from rethinkdb.errors import ReqlOpFailedError

from conftest import BINARY, ROOT, free_port


def put_key_helper():
    """The `put_key` test helper (crates/storage/examples/put_key.rs), built if needed."""
    explicit = os.environ.get("PONDER_PUT_KEY")
    if explicit:
        return explicit
    for profile in ("release", "debug"):
        p = os.path.join(ROOT, "target", profile, "examples", "put_key")
        if os.path.exists(p):
            return p
    if shutil.which("cargo") is None:
        pytest.skip("put_key helper not built and cargo not found")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "storage", "--example",
                    "put_key"], cwd=ROOT, check=True)
    return os.path.join(ROOT, "target", "release", "examples", "put_key")


def test_newer_format_version_is_refused_at_startup():
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([put_key_helper(), os.path.join(d, "data"), "catalog", "format", "2"],
                       check=True)
        p = subprocess.run([BINARY, "serve", "--directory", d,
                            "--driver-port", str(free_port()), "--no-http-admin"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode != 0
        assert ("data directory has format version 2, this build supports 1; "
                "refusing to start") in p.stderr, p.stderr
        # The directory was not touched: still refused the second time.
        p2 = subprocess.run([BINARY, "serve", "--directory", d,
                             "--driver-port", str(free_port()), "--no-http-admin"],
                            capture_output=True, text=True, timeout=30)
        assert p2.returncode != 0 and "format version 2" in p2.stderr


def test_soft_writes_survive_kill9_after_the_flush_bound(make_server):
    """Soft writes without sync() survive SIGKILL once the flush bound has passed.
    (A SIGKILL alone cannot tell the page cache from the disk; the Rust test
    store::commit::tests::soft_writes_are_flushed_within_the_bound checks the fsync.)"""
    s = make_server(extra=["--soft-flush-ms", "150"])
    c = s.connect()
    r.db("test").table_create("softk").run(c)
    for i in range(200):
        r.table("softk").insert({"id": i, "v": "x" * 1000}).run(c, durability="soft")
    r.table("softk").get(7).update({"u": 1}).run(c, durability="soft")
    r.table("softk").get(8).delete().run(c, durability="soft")
    time.sleep(0.5)                              # > 150 ms
    s.kill9()
    c.close(noreply_wait=False)
    s2 = make_server(directory=s.directory)
    c = s2.connect()
    try:
        ids = sorted(r.table("softk")["id"].run(c))
        assert ids == [i for i in range(200) if i != 8]
        assert r.table("softk").get(7)["u"].run(c) == 1
    finally:
        c.close()


@pytest.fixture
def small_fs():
    """A 64 MiB tmpfs (root only), unmounted afterwards."""
    d = tempfile.mkdtemp(prefix="ponder-fulldisk-")
    ok = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", d],
        stderr=subprocess.DEVNULL).returncode == 0
    if not ok:
        os.rmdir(d)
        pytest.skip("cannot mount a tmpfs (needs root)")
    yield d
    subprocess.run(["umount", "-l", d])
    os.rmdir(d)


def fill(path, limit):
    """Writes zeros to `path` until the file system is full or `limit` bytes are written."""
    n = 0
    with open(path, "wb", buffering=0) as f:
        chunk = b"\0" * (1 << 16)
        while n < limit:
            try:
                n += f.write(chunk[:min(len(chunk), limit - n)])
            except OSError:
                break
    return n


def test_full_disk_refuses_writes_reads_go_on_and_writes_resume(small_fs, make_server):
    s = make_server(directory=small_fs, extra=["--min-free-disk-mb", "8", "--cache-size", "16"])
    c = s.connect()
    r.db("test").table_create("full").run(c)
    r.table("full").insert([{"id": i, "v": i} for i in range(100)]).run(c)
    st = os.statvfs(small_fs)
    fill(os.path.join(small_fs, "filler"), st.f_bavail * st.f_frsize - (10 << 20))
    body = os.urandom(30_000).hex()               # 60 KB, incompressible
    err, raised = None, None
    for i in range(1000):
        try:
            res = r.table("full").insert({"id": "big%d" % i, "body": body}).run(c)
        except ReqlOpFailedError as e:
            err, raised = str(e), True
            break
        if res.get("errors"):
            err, raised = res["first_error"], False
            break
    assert err is not None, "a full disk never refused a write"
    assert "disk full" in err, err
    print("refused with:", err, "(as %s)" % ("an exception" if raised else "first_error"))
    # Reads go on.
    assert r.table("full").count().run(c) >= 100
    assert r.table("full").get(42).run(c) == {"id": 42, "v": 42}
    assert len(list(r.table("full").limit(5).run(c))) == 5
    # Space returns: writes resume without a restart, hard durability included.
    os.remove(os.path.join(small_fs, "filler"))
    res = r.table("full").insert({"id": "after", "body": body}).run(c, durability="hard")
    assert res["inserted"] == 1, res
    assert r.table("full").get("after")["id"].run(c) == "after"
    c.close()
    assert_serving(s)
