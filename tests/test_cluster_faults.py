"""A replicated table under SIGSTOP and network partitions (issue #13): three `ponder`
processes, `ponder-lincheck` recording reads, writes and compare-and-set of six clients
on four keys of a 3-replica table (`read_mode` majority, hard durability) while faults
are injected; the history must be linearizable and no acknowledged write may be lost.

- SIGSTOP (loopback, no privileges): the shard's primary is paused (the others elect a
  leader and writes go on through them), resumed (it rejoins as a follower), then a
  non-primary is paused and resumed.
- Partitions (network namespaces, `tests/faults`; skipped with the reason without root
  or iproute2): the primary is isolated (a minority): writes go on through the majority,
  the isolated server answers writes and majority reads with RethinkDB's errors and never
  with stale data; then every server is cut from every other (no majority anywhere): no
  write is acknowledged; after each heal every server accepts writes again and the time
  it took is printed.

CI runs one fault of each kind (about 50 s for both tests). The long form sets
PONDER_FAULTS_SECONDS (e.g. 300): faults follow each other until then, chosen at random
(seeded by PONDER_FAULTS_SEED), and the figures are printed (`pytest -s`)."""
import os
import random
import re
import signal
import subprocess
import threading
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlOpFailedError, ReqlOpIndeterminateError

from test_cluster_join import wait_for, names, dirs, procs  # noqa: F401 (fixtures)
from test_cluster_lincheck import lincheck_binary
from test_cluster_replicated import three_servers
from faults import start_ponder
from faults.fixtures import make_net  # noqa: F401 (fixture)

pytestmark = pytest.mark.single_server('starts its own clusters')

# 0: the short form (one fault of each kind); otherwise the long form's length in seconds.
LONG = int(os.environ.get("PONDER_FAULTS_SECONDS", "0"))
SEED = int(os.environ.get("PONDER_FAULTS_SEED", "1"))
# Keys of the workload: more in a long run, so that each key's history stays small enough
# to check (about 40,000 operations on one key exhaust the checker's default budget).
KEYS = max(4, LONG // 40)
TABLE = r.db("test").table("lincheck")
# The key the probes write (the workload's are k0, k1, ..., so its history is not disturbed).
PROBE = "probe"
# RethinkDB 2.4's texts for an operation a primary cut off from its quorum refuses
# (`Cannot perform write: primary replica for shard ["", +inf) not available`, "... The
# primary replica isn't connected to a quorum of replicas. The write was not performed.",
# "... lost contact with primary replica", "... The write may or may not have been
# performed.").
REFUSAL = re.compile(r"^Cannot perform (read|write): (primary replica for shard \[.*\) not "
                     r"available|The primary replica isn't connected to a quorum of replicas|"
                     r"lost contact with primary replica|The primary replica lost contact "
                     r"with the secondary replicas)")


def start_lincheck(addrs, seconds, history, replicas=3):
    """`ponder-lincheck run` against every address, for `seconds`, on a table of
    `replicas` replicas."""
    return subprocess.Popen(
        [lincheck_binary(), "run"]
        + sum((["--addr", "%s:%d" % a] for a in addrs), [])
        + ["--clients", "6", "--keys", str(KEYS), "--ops", "100000000", "--duration", str(seconds),
           "--op-timeout", "3", "--replicas", str(replicas), "--seed", str(SEED), "--out", history],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finish_lincheck(run, history, seconds):
    """Waits for the run, checks its history; returns (ok, fail, info, summary)."""
    out, _ = run.communicate(timeout=seconds + 180)
    recorded = out.decode()
    assert run.returncode == 0, recorded
    # A long run's keys carry tens of thousands of operations each: a larger memoization
    # cache than the default 512 MiB (they then check in about a second each).
    budget = ["--max-cache-mb", "4096"] if LONG else []
    check = subprocess.run([lincheck_binary(), "check", history] + budget,
                           capture_output=True, timeout=600)
    report = check.stdout.decode() + check.stderr.decode()
    assert check.returncode == 0, report
    assert "OK: linearizable, no acknowledged write lost" in report, report
    m = re.search(r"recorded (\d+) operations: (\d+) ok, (\d+) fail, (\d+) info", recorded)
    assert m, recorded
    total, ok, fail, info = map(int, m.groups())
    return ok, fail, info, "%d operations: %d ok, %d fail, %d info; %s" % (
        total, ok, fail, info, report.strip().splitlines()[-1])


class Attempt:
    """`query` run on a new connection from `connect()`, on a thread of its own;
    `result(timeout)`: ("ok", value), ("error", exception) or ("timeout", None) when no
    answer came within `timeout` s of the start. A query that does not answer is
    abandoned (its thread is a daemon; its connection is never reused)."""

    def __init__(self, connect, query):
        self.began = time.time()
        self.answer = []
        self.thread = threading.Thread(target=self.body, args=(connect, query), daemon=True)
        self.thread.start()

    def body(self, connect, query):
        try:
            conn = connect()
            self.answer.append(("ok", query.run(conn)))
        except Exception as e:  # noqa: BLE001 (any failure is the answer)
            self.answer.append(("error", e))

    def result(self, timeout):
        self.thread.join(max(0.0, self.began + timeout - time.time()))
        return self.answer[0] if self.answer else ("timeout", None)


def attempt(connect, query, timeout):
    """Runs `query` as an `Attempt` and waits for its result."""
    return Attempt(connect, query).result(timeout)


def write_probe(value, durability="hard"):
    return TABLE.insert({"id": PROBE, "v": value}, conflict="replace", durability=durability)


def read_probe(mode):
    return r.db("test").table("lincheck", read_mode=mode).get(PROBE)


def until_written(connect, value, timeout):
    """Retries writing the probe through `connect()` until acknowledged; returns the
    seconds it took."""
    began = time.time()
    while True:
        kind, res = attempt(connect, write_probe(value), 12)
        if kind == "ok" and res.get("errors", 0) == 0:
            return time.time() - began
        assert time.time() - began < timeout, (kind, res)
        time.sleep(0.2)


def assert_refused(kind, res, op):
    """An operation on a server without a quorum: RethinkDB's error, or no answer."""
    if kind == "timeout":
        return
    assert kind == "error", ("acknowledged without a quorum", op, res)
    assert isinstance(res, (ReqlOpFailedError, ReqlOpIndeterminateError)), (op, type(res), res)
    assert REFUSAL.match(res.message), (op, res.message)
    if isinstance(res, ReqlOpIndeterminateError):
        assert op == "write", res  # reads are never indeterminate
    assert res.message.startswith("Cannot perform %s" % op), res.message


def described(answer):
    kind, res = answer
    return kind if kind != "error" else "%s: %s" % (type(res).__name__, res.message)


def primary_name(connect):
    """The name of the lincheck table's primary, as a server with a quorum sees it."""
    return wait_for(
        lambda: attempt(connect, TABLE.status(), 10),
        lambda a: a[0] == "ok" and len(a[1]["shards"][0]["primary_replicas"]) == 1,
        timeout=30)[1]["shards"][0]["primary_replicas"][0]


def wait_table(connect):
    """Waits until the workload's table exists and is ready (through `connect()`)."""
    wait_for(lambda: attempt(connect, r.db("test").table_list(), 10),
             lambda a: a[0] == "ok" and "lincheck" in a[1], timeout=40)
    wait_for(lambda: attempt(connect, TABLE.wait(timeout=20), 25),
             lambda a: a[0] == "ok", timeout=40)


def figures(xs):
    """Seconds for the printed figures: each of a few, else the median and the range."""
    if len(xs) <= 12:
        return "/".join("%.2f" % x for x in xs) or "-"
    xs = sorted(xs)
    return "median %.2f (%.2f-%.2f)" % (xs[len(xs) // 2], xs[0], xs[-1])


def connector(s):
    """Connects to server `s` (for `attempt`, `until_written`, ...)."""
    return lambda: s.connect(timeout=5)


def all_write_again(servers, value, timeout=30):
    """Each server accepts a write of the probe (`value`), then each one's own copy
    (`outdated`) holds it: every server writes and reads again. Returns the seconds."""
    began = time.time()
    for s in servers:
        until_written(connector(s), value, timeout)
    for s in servers:
        wait_for(lambda: attempt(connector(s), read_probe("outdated"), 10),
                 lambda x: x[0] == "ok" and (x[1] or {}).get("v") == value, timeout=timeout)
    return time.time() - began


def ns_cluster(make_net, tmp_path, n=3):
    """n `ponder` servers (node0, node1, ...) in the namespaces of a new `Net`, the others
    joined to node0; once each sees all of them and has the catalog: (net, servers)."""
    net = make_net(n)
    servers = [start_ponder(net, i, str(tmp_path / str(i)),
                            extra=[] if i == 0 else ["--join", "%s:29015" % net.addr(0)])
               for i in range(n)]
    conn = servers[0].connect(timeout=5)
    wait_for(lambda: names(conn), lambda got: got == [s.name for s in servers], timeout=20)
    for s in servers:
        # A joiner busy receiving the catalog on a loaded machine can miss the driver's
        # 5 s handshake: asked again (none of the test's faults are on yet).
        wait_for(lambda: attempt(connector(s), r.db_list(), 10),
                 lambda a: a[0] == "ok" and "test" in a[1], timeout=30)
    conn.close()
    return net, servers


# -- SIGSTOP -------------------------------------------------------------------------


def test_sigstop_of_the_primary_and_of_a_follower_under_load(dirs, procs):  # noqa: F811
    (a, b, c), _ = three_servers(dirs, procs)
    servers = {"alpha": a, "beta": b, "gamma": c}
    seconds = LONG or 16
    history = os.path.join(dirs(), "h.jsonl")
    run = start_lincheck([("127.0.0.1", s.port) for s in (a, b, c)], seconds, history)
    began = time.time()
    rng = random.Random(SEED)
    pauses, took = [], []
    try:
        wait_table(lambda: a.connect(timeout=5))
        # Each cycle: 2 s of load, SIGSTOP of the primary (short form: the primary, then a
        # follower; long form: the primary 60 % of the time), 3 s paused, SIGCONT, rejoin.
        while len(pauses) < 2 or (LONG and time.time() - began + 12 < seconds):
            time.sleep(2)
            asked = (a, b, c)[len(pauses) % 3]
            primary = primary_name(lambda: asked.connect(timeout=5))
            followers = sorted(n for n in servers if n != primary)
            on_primary = len(pauses) == 0 if not LONG else rng.random() < 0.6
            victim = servers[primary if on_primary else rng.choice(followers)]
            other = [s for s in (a, b, c) if s is not victim][0]
            os.kill(victim.proc.pid, signal.SIGSTOP)
            t0 = time.time()
            pauses.append("primary" if on_primary else "follower")
            # The others go on: a write through one of them is acknowledged.
            took.append(until_written(lambda: other.connect(timeout=5), len(pauses), 20))
            time.sleep(max(0.0, 3 - (time.time() - t0)))
            os.kill(victim.proc.pid, signal.SIGCONT)
            # The resumed server rejoins: a write through it is acknowledged, and its own
            # copy holds the value once it has caught up.
            until_written(lambda: victim.connect(timeout=5), -len(pauses), 20)
            wait_for(lambda: attempt(lambda: victim.connect(timeout=5),
                                     read_probe("outdated"), 10),
                     lambda x: x[0] == "ok" and (x[1] or {}).get("v") == -len(pauses),
                     timeout=20)
    finally:
        for s in (a, b, c):
            if s.proc.poll() is None:
                os.kill(s.proc.pid, signal.SIGCONT)  # whatever happened
    ok, fail, info, summary = finish_lincheck(run, history, seconds)
    assert ok > 500, summary
    print("\nSIGSTOP: %d pauses (%s); writes through the others acknowledged %s s after "
          "the pause; %s" % (len(pauses), ", ".join(pauses),
                             "/".join("%.2f" % t for t in took), summary))


# -- partitions ----------------------------------------------------------------------


def test_partitions_of_a_minority_and_of_everyone_under_load(make_net, tmp_path):  # noqa: F811
    net, servers = ns_cluster(make_net, tmp_path)
    by_name = {s.name: s for s in servers}
    seconds = LONG or 26
    history = str(tmp_path / "h.jsonl")
    run = start_lincheck([(s.host, s.port) for s in servers], seconds, history)
    began = time.time()
    rng = random.Random(SEED)
    faults, majority_took, heal_took = [], [], []
    value = [0]

    def next_value():
        value[0] += 1
        return value[0]

    def minority(victim_is_primary=True):
        primary = by_name[primary_name(connector(servers[0]))]
        victim = primary if victim_is_primary else \
            rng.choice([s for s in servers if s is not primary])
        rest = [s for s in servers if s is not victim]
        net.isolate(victim.i)
        t0 = time.time()
        faults.append("isolate " + ("primary" if victim is primary else "follower"))
        # A write through the isolated server runs meanwhile (it may wait for the deadline).
        write = Attempt(connector(victim), write_probe(-value[0] - 1000))
        # The majority side goes on: a write through each of its servers is acknowledged.
        v = next_value()
        majority_took.append(until_written(connector(rest[0]), v, 25))
        until_written(connector(rest[1]), v, 25)
        # Now the isolated server's copy is stale: a majority read there must not answer.
        read = Attempt(connector(victim), read_probe("majority"))
        wrote, read = write.result(15), read.result(15)
        # Writes through it fail with RethinkDB's errors (or do not answer).
        assert_refused(*read, "read")
        assert_refused(*wrote, "write")
        if victim is primary and faults.count("isolate primary") == 1:
            print("\nisolated primary: write -> %s; majority read -> %s" % (
                described(wrote), described(read)))
        time.sleep(max(0.0, 2 - (time.time() - t0)))
        net.heal()
        t1 = time.time()
        # Healed: the isolated server accepts writes again and reads the latest value.
        v = next_value()
        until_written(connector(victim), v, 30)
        wait_for(lambda: attempt(connector(victim), read_probe("majority"), 10),
                 lambda x: x[0] == "ok" and (x[1] or {}).get("v") == v, timeout=20)
        heal_took.append(time.time() - t1)

    def everyone():
        net.partition([[0], [1], [2]])
        faults.append("split all")
        t0 = time.time()
        # No side has a majority: nothing is acknowledged anywhere (the workload's
        # writes meanwhile are checked by the history: none acknowledged may be lost).
        time.sleep(1.5)  # past the leader's lease
        writes = [Attempt(connector(s), write_probe(-next_value())) for s in servers]
        reads = [Attempt(connector(s), read_probe("majority")) for s in servers]
        refusals = [w.result(15) for w in writes]
        for kind, res in refusals:
            assert_refused(kind, res, "write")
        for a in reads:
            assert_refused(*a.result(15), "read")
        if faults.count("split all") == 1:
            print("\nsplit: writes -> %s" % "; ".join(described(x) for x in refusals))
        time.sleep(max(0.0, 3 - (time.time() - t0)))
        net.heal()
        t1 = time.time()
        all_write_again(servers, next_value())
        heal_took.append(time.time() - t1)

    try:
        wait_table(connector(servers[0]))
        time.sleep(2)
        minority(True)
        time.sleep(2)
        everyone()
        while LONG and time.time() - began + 20 < seconds:
            time.sleep(rng.uniform(1, 3))
            rng.choice([lambda: minority(True), lambda: minority(False), everyone])()
    finally:
        net.heal()
    ok, fail, info, summary = finish_lincheck(run, history, seconds)
    assert ok > 300, summary
    print("\npartitions: %d faults (%s); majority side's first write %s s after the cut; "
          "every server writing again %s s after the heal; %s" % (
              len(faults), ", ".join("%s x%d" % (f, faults.count(f)) for f in sorted(set(faults))),
              "/".join("%.2f" % t for t in majority_took),
              "/".join("%.2f" % t for t in heal_took), summary))


if __name__ == "__main__":
    pytest.main([__file__, "-s"])
