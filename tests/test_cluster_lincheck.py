"""Linearizability of a replicated table under a crash (issue #13's short form): three
`ponder` processes, `ponder-lincheck` recording reads, writes and compare-and-set of
six clients on four keys of a 3-replica table (`read_mode` majority, hard durability)
while the shard's primary is killed with SIGKILL and restarted (once in 15 s; every
~10 s of a longer run with PONDER_LINCHECK_SECONDS); the history must be
linearizable and no acknowledged write may be lost. The long form is run by hand
(docs/clustering.md, "Checking linearizability")."""
import os
import subprocess
import time

import pytest
from rethinkdb import r

from test_cluster_join import wait_for, dirs, procs  # noqa: F401 (fixtures)
from test_cluster_replicated import three_servers

import conftest

pytestmark = pytest.mark.single_server('starts its own clusters')


# How long the clients run: 15 s in CI; the long form sets PONDER_LINCHECK_SECONDS.
SECONDS = int(os.environ.get("PONDER_LINCHECK_SECONDS", "15"))


def lincheck_binary():
    """`ponder-lincheck` beside the server binary (both built by `cargo test`)."""
    path = os.path.join(os.path.dirname(os.path.abspath(conftest.BINARY)), "ponder-lincheck")
    assert os.path.exists(path), "build it first: cargo build --release -p lincheck"
    return path


def start_lincheck(servers, history, seconds):
    """`ponder-lincheck run`: six clients on four keys of a 3-replica table over
    `servers` for `seconds` (a long run: a key per 40 s, so that no key's history
    outgrows the checker), recording to `history`."""
    keys = max(4, seconds // 40)
    return subprocess.Popen(
        [lincheck_binary(), "run"]
        + sum((["--addr", "127.0.0.1:%d" % s.port] for s in servers), [])
        + ["--clients", "6", "--keys", str(keys), "--ops", "100000000",
           "--duration", str(seconds),
           "--op-timeout", "3", "--replicas", "3", "--out", history],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def check_history(run, history, seconds, at_least):
    """Waits for `run`, checks its history (linearizable, nothing acknowledged lost,
    at least `at_least` operations ok) and returns the figures' line."""
    out, _ = run.communicate(timeout=seconds + 120)
    assert run.returncode == 0, out.decode()
    check = subprocess.run([lincheck_binary(), "check", "--max-cache-mb", "4096", history],
                           capture_output=True, timeout=600)
    report = check.stdout.decode() + check.stderr.decode()
    assert check.returncode == 0, report
    assert "OK: linearizable, no acknowledged write lost" in report, report
    recorded = out.decode()
    assert "recorded" in recorded, recorded
    ok = int(recorded.split("operations: ")[1].split(" ok")[0])
    assert ok > at_least, recorded
    return recorded.strip().splitlines()[-1] + " " + report.strip().splitlines()[-1]


def test_a_replicated_table_stays_linearizable_when_its_primary_is_killed(dirs, procs):  # noqa: F811
    (a, b, c), conns = three_servers(dirs, procs)
    servers = {"alpha": a, "beta": b, "gamma": c}
    conn = conns[b]
    history = os.path.join(dirs(), "h.jsonl")
    run = start_lincheck((a, b, c), history, SECONDS)
    # Once the clients run (the table exists and is ready everywhere), kill its primary.
    wait_for(lambda: "lincheck" in r.db("test").table_list().run(conn), lambda x: x,
             timeout=30)
    r.db("test").table("lincheck").wait(timeout=30).run(conn)
    began = time.time()
    kills = 0
    # Each cycle: 3 s of load, kill -9 of the current primary, 4 s without it, restart.
    while time.time() - began + 12 < SECONDS or kills == 0:
        time.sleep(3)
        primary = wait_for(
            lambda: r.db("test").table("lincheck").status().run(conn)["shards"][0]
            ["primary_replicas"],
            lambda p: len(p) == 1, timeout=30)[0]
        victim = servers[primary]
        victim.kill9()
        kills += 1
        time.sleep(4)
        victim.start()
        if victim is b:
            conn = b.connect()
    # Enough happened to mean something: operations before, during and after the kill.
    line = check_history(run, history, SECONDS, at_least=500)
    print("%d kills;" % kills, line)
