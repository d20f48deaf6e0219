"""Interrupting queries: a client that disconnects, STOP, and deleting a
`rethinkdb.jobs` row end the query promptly, even a pure scan that calls no function
(the evaluation thread is freed, not left scanning to the end); `jobs` lists a query
for as long as its cursor is open, and deleting that row ends that query only."""
import os
import socket
import struct
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlDriverError

from reqlwire import (CLIENT_ERROR, RUNTIME_ERROR, SUCCESS_ATOM, SUCCESS_PARTIAL,
                      SUCCESS_SEQUENCE, RawConn, term)

N = 200_000
# A union of this many full scans and a count: several seconds of scanning that never
# calls a function, so before scans checked for interruption nothing stopped it.
SCANS = 40
OP_INDETERMINATE = 4200000
TERMINATED = "Query terminated by the `rethinkdb.jobs` table."


@pytest.fixture(scope="module")
def big(server):
    c = server.connect()
    r.table_create("big").run(c)
    r.table("big").insert(
        r.range(N).map({"id": r.row, "v": r.row.mul(7919).mod(N)}),
        durability="soft").run(c, array_limit=N + 1)
    c.close()
    return server


def slow_scan():
    return r.table("big").union(*[r.table("big")] * (SCANS - 1)).count()


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields 14 and 15 of stat(5) (utime, stime); the list starts at field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_share(pid, window=0.4):
    """The server's CPU use over `window` seconds, in cores."""
    before = cpu_seconds(pid)
    time.sleep(window)
    return (cpu_seconds(pid) - before) / window


def eventually(check, timeout):
    deadline = time.time() + timeout
    while True:
        if check():
            return True
        if time.time() > deadline:
            return False
        time.sleep(0.05)


def jobs_of(c, port):
    """The query jobs of the client connected from local `port`."""
    return [j for j in r.db("rethinkdb").table("jobs").run(c)
            if j["type"] == "query" and j["info"]["client_port"] == port]


def wait_for_job(c, port, prefix):
    """The job of `port` whose printed query starts with `prefix`, once it is listed."""
    found = []

    def listed():
        found[:] = [j for j in jobs_of(c, port) if j["info"]["query"].startswith(prefix)]
        return bool(found)

    assert eventually(listed, 5), "query never listed in rethinkdb.jobs"
    return found[0]


def assert_freed(server, admin, port):
    """The client's queries leave `jobs` and the server's CPU use falls to idle within
    about a second (a scan left running would keep a core busy for seconds)."""
    assert eventually(lambda: not jobs_of(admin, port), 1.5), jobs_of(admin, port)
    assert eventually(lambda: cpu_share(server.proc.pid) < 0.25, 1.5), \
        "the server is still busy after the query was interrupted"


def test_disconnect_ends_a_running_scan(big):
    admin = big.connect()
    raw = RawConn(big.port)
    port = raw.sock.getsockname()[1]
    raw.start(1, term(slow_scan()))
    wait_for_job(admin, port, "[43,")
    assert cpu_share(big.proc.pid) > 0.5  # it is scanning
    raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raw.sock.close()  # abrupt: RST, no STOP
    assert_freed(big, admin, port)
    assert r.table("big").count().run(admin) == N
    admin.close()


def test_stop_ends_a_running_scan(big):
    admin = big.connect()
    raw = RawConn(big.port, timeout=2.5)
    port = raw.sock.getsockname()[1]
    raw.start(1, term(slow_scan()))
    wait_for_job(admin, port, "[43,")
    raw.stop(1)
    # The STOP is answered, and so is the interrupted START: both end the token with an
    # empty SUCCESS_SEQUENCE (RethinkDB's answer to a stopped query), neither waits for
    # the scan to finish.
    for _ in range(2):
        token, resp = raw.recv()
        assert token == 1 and resp["t"] == SUCCESS_SEQUENCE and resp["r"] == [], resp
    assert_freed(big, admin, port)
    resp = raw.query(2, [24, [40, 2]])
    assert resp == {"t": SUCCESS_ATOM, "r": [42]}
    raw.close()
    admin.close()


def test_deleting_a_running_job_interrupts_that_query_only(big):
    admin = big.connect()
    raw = RawConn(big.port, timeout=2.5)
    port = raw.sock.getsockname()[1]
    # An open cursor on the same connection, which must survive.
    raw.start(2, term(r.table("big")), {"max_batch_rows": 5})
    token, resp = raw.recv()
    assert token == 2 and resp["t"] == SUCCESS_PARTIAL and len(resp["r"]) == 5
    raw.start(1, term(slow_scan()))
    job = wait_for_job(admin, port, "[43,")
    res = r.db("rethinkdb").table("jobs").get(job["id"]).delete().run(admin)
    assert res["deleted"] == 1
    token, resp = raw.recv()
    assert token == 1 and resp["t"] == RUNTIME_ERROR, resp
    assert resp["r"] == [TERMINATED] and resp["e"] == OP_INDETERMINATE, resp
    raw.cont(2)
    token, resp = raw.recv()
    assert token == 2 and resp["t"] == SUCCESS_PARTIAL and len(resp["r"]) == 5, resp
    raw.stop(2)
    token, resp = raw.recv()
    assert token == 2 and resp["t"] == SUCCESS_SEQUENCE
    assert_freed(big, admin, port)
    raw.close()
    admin.close()


def test_jobs_lists_open_cursors_and_deleting_one_ends_it(big):
    a = big.connect()
    admin = big.connect()
    port = a._instance._socket._socket.getsockname()[1]
    keep = r.table("big").run(a, max_batch_rows=5)
    kill = r.table("big").limit(1000).run(a, max_batch_rows=5)
    time.sleep(0.3)
    jobs = jobs_of(admin, port)
    assert len(jobs) == 2, jobs
    server_name = admin.server()["name"]  # the server the client talks to
    for j in jobs:
        assert j["type"] == "query"
        assert j["id"][0] == "query" and len(j["id"]) == 2 and len(j["id"][1]) == 36
        assert j["duration_sec"] >= 0.25
        assert j["servers"] == [server_name]
        assert j["info"]["client_address"] == "127.0.0.1"
        assert j["info"]["client_port"] == port
        assert isinstance(j["info"]["query"], str)
    victim = [j for j in jobs if j["info"]["query"].startswith("[71,")]
    assert len(victim) == 1, jobs
    # The durations grow while the cursors stay open.
    time.sleep(0.2)
    later = {tuple(j["id"]): j["duration_sec"] for j in jobs_of(admin, port)}
    assert all(later[tuple(j["id"])] > j["duration_sec"] for j in jobs)

    res = r.db("rethinkdb").table("jobs").get(victim[0]["id"]).delete().run(admin)
    assert res["deleted"] == 1
    left = jobs_of(admin, port)
    assert [j["id"] for j in left] == [j["id"] for j in jobs if j not in victim]
    # The killed cursor ends at its next CONTINUE with RethinkDB's answer for a
    # terminated cursor (its cache entry is gone: "duplicate token").
    with pytest.raises(ReqlDriverError, match="ERROR: duplicate token"):
        for _ in range(1000):
            next(kill)
    # The other cursor, and the connection, go on.
    assert len([next(keep) for _ in range(50)]) == 50
    assert r.expr(1).run(a) == 1
    keep.close()
    assert eventually(lambda: not jobs_of(admin, port), 2)
    a.close()
    admin.close()


def test_deleting_the_job_of_a_waiting_changefeed_ends_it(big):
    admin = big.connect()
    raw = RawConn(big.port, timeout=2.5)
    port = raw.sock.getsockname()[1]
    raw.start(1, term(r.table("big").changes()))
    token, resp = raw.recv()
    assert token == 1 and resp["t"] == SUCCESS_PARTIAL
    raw.cont(1)  # waits for a change
    time.sleep(0.2)
    job = wait_for_job(admin, port, "[152,")
    r.db("rethinkdb").table("jobs").get(job["id"]).delete().run(admin)
    token, resp = raw.recv()
    assert token == 1 and resp["t"] == RUNTIME_ERROR, resp
    assert resp["r"] == [TERMINATED] and resp["e"] == OP_INDETERMINATE, resp
    assert not jobs_of(admin, port)
    resp = raw.query(2, [24, [40, 2]])
    assert resp == {"t": SUCCESS_ATOM, "r": [42]}
    raw.close()
    admin.close()


def test_continue_after_stop_is_refused(big):
    """A stopped cursor is forgotten (its job too), as in RethinkDB."""
    admin = big.connect()
    raw = RawConn(big.port, timeout=2.5)
    port = raw.sock.getsockname()[1]
    raw.start(1, term(r.table("big")), {"max_batch_rows": 5})
    token, resp = raw.recv()
    assert resp["t"] == SUCCESS_PARTIAL
    assert len(jobs_of(admin, port)) == 1
    raw.stop(1)
    token, resp = raw.recv()
    assert token == 1 and resp["t"] == SUCCESS_SEQUENCE
    assert eventually(lambda: not jobs_of(admin, port), 1)
    raw.cont(1)
    token, resp = raw.recv()
    assert resp["t"] == CLIENT_ERROR and resp["r"] == ["Token 1 not in stream cache."]
    raw.close()
    admin.close()
