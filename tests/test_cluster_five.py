"""A 5-replica table on five `ponder` processes (issue #13: 5-server groups, a minority
of two). `ponder-lincheck` records reads, writes and compare-and-set of six clients
(`read_mode` majority, hard durability) through all five servers while:

1. the shard's primary and a follower are killed together (kill -9): the three left are
   a majority, so a write through one of them is acknowledged within seconds;
2. a third server is killed: two of five are no quorum, so a write and a `majority`
   read through a survivor get RethinkDB's errors (or no answer), never an
   acknowledgement or a stale value;
3. the third comes back (a quorum again: writes acknowledged), then the first two:
   each accepts a write and its own copy catches up.

The history must be linearizable with no acknowledged write lost. CI runs the cycle
once (about 40 s); PONDER_FAULTS_SECONDS (the long form of test_cluster_faults.py)
repeats it until then with victims chosen at random (PONDER_FAULTS_SEED), printing the
figures with `pytest -s`."""
import os
import random
import time

import pytest
from rethinkdb import r

from test_cluster_join import start, wait_for, names, dirs, procs  # noqa: F401 (fixtures)
from test_cluster_replicated import connect_or_none
from test_cluster_faults import (LONG, SEED, assert_refused, attempt, connector,
                                 finish_lincheck, primary_name, read_probe, start_lincheck,
                                 until_written, wait_table, write_probe)

pytestmark = pytest.mark.single_server('starts its own clusters')

NAMES = ["alpha", "beta", "gamma", "delta", "epsilon"]


def five_servers(dirs, procs):
    """alpha alone, the others joining it; once every server sees all five and has the
    catalog: the servers by name."""
    first = start(dirs(), NAMES[0])
    procs.append(first)
    servers = {NAMES[0]: first}
    for name in NAMES[1:]:
        servers[name] = start(dirs(), name, joins=[first])
        procs.append(servers[name])
    for s in servers.values():
        conn = wait_for(lambda: connect_or_none(s), lambda c: c is not None, timeout=30)
        wait_for(lambda: names(conn), lambda n: n == sorted(NAMES), timeout=30)
        wait_for(lambda: r.db_list().run(conn), lambda dbs: "test" in dbs, timeout=30)
        conn.close()
    return servers


def test_five_replicas_survive_a_minority_of_two_and_refuse_without_a_quorum(dirs, procs):  # noqa: F811,E501
    servers = five_servers(dirs, procs)
    seconds = LONG or 30
    history = os.path.join(dirs(), "h.jsonl")
    run = start_lincheck([("127.0.0.1", s.port) for s in servers.values()], seconds,
                         history, replicas=5)
    rng = random.Random(SEED)
    began = time.time()
    cycles, took, back = 0, [], []
    wait_table(connector(servers["alpha"]))
    while cycles == 0 or (LONG and time.time() - began + 25 < seconds):
        time.sleep(2)
        cycles += 1
        up = [n for n in NAMES if servers[n].proc.poll() is None]
        assert len(up) == 5, up
        primary = primary_name(connector(servers[rng.choice(NAMES)]))
        # A minority of two: the primary and a follower.
        follower = rng.choice([n for n in NAMES if n != primary])
        for n in (primary, follower):
            servers[n].kill9()
        left = [n for n in NAMES if n not in (primary, follower)]
        took.append(until_written(connector(servers[left[0]]), cycles, 20))
        kind, res = attempt(connector(servers[left[1]]), read_probe("majority"), 10)
        assert kind == "ok" and res["v"] == cycles, (kind, res)
        # A third lost: two of five are no quorum. Nothing is acknowledged and no stale
        # value is read through either survivor.
        third = rng.choice(left)
        servers[third].kill9()
        two = [n for n in left if n != third]
        kind, res = attempt(connector(servers[two[0]]), write_probe(-cycles), 8)
        assert_refused(kind, res, "write")
        kind, res = attempt(connector(servers[two[1]]), read_probe("majority"), 8)
        assert_refused(kind, res, "read")
        # The third comes back: a quorum again.
        t0 = time.time()
        servers[third].start()
        until_written(connector(servers[two[1]]), 100 + cycles, 30)
        back.append(time.time() - t0)
        # Then the first two: each accepts a write and its own copy catches up.
        for n in (primary, follower):
            servers[n].start()
        for n in (primary, follower):
            until_written(connector(servers[n]), 200 + cycles, 30)
            wait_for(lambda: attempt(connector(servers[n]), read_probe("outdated"), 10),
                     lambda x: x[0] == "ok" and (x[1] or {}).get("v") == 200 + cycles,
                     timeout=30)
    ok, fail, info, summary = finish_lincheck(run, history, seconds)
    assert ok > 300, summary
    print("\nfive servers: %d cycles; writes acknowledged %s s after the minority of two "
          "was killed; %s s after the third came back; %s"
          % (cycles, "/".join("%.2f" % t for t in took),
             "/".join("%.2f" % t for t in back), summary))
