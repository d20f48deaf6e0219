"""A replicated table under one-way cuts and under lossy, slow links (issue #13; the
workload, probes and figures of test_cluster_faults.py): three `ponder` processes in
network namespaces (`tests/faults`, root; skipped with the reason otherwise),
`ponder-lincheck` recording six clients' reads, writes and compare-and-set (`majority`
reads, hard durability) through all three while:

- one-way cuts: the primary's outgoing traffic to the followers is dropped (it hears
  them, they cannot hear it), then, healed, the reverse (they hear it, it cannot hear
  them). Either way the followers are a majority that hears itself: a write through each
  of them must be acknowledged within a bounded time, and the cut-off primary must
  never answer a `majority` read with a value older than the majority's newest write.
  (A one-way cut also stalls TCP the other way, since acknowledgements are lost: the
  cut side still receives what was in flight, never anything new.)
- lossy links: every server drops 25 % of what it sends and delays the rest 50 ms
  +- 15 ms (the clients' links included): writes must still be acknowledged through
  every server, however slowly.

After each fault is removed every server must accept a write and read it back from its
own copy within 30 s (the time it took is printed), and the history must be
linearizable with no acknowledged write lost. CI runs each fault once (under a minute
per test); PONDER_FAULTS_SECONDS chains random faults until then (PONDER_FAULTS_SEED)."""
import concurrent.futures
import random
import time

import pytest

from test_cluster_faults import (LONG, SEED, figures, Attempt, all_write_again, assert_refused,
                                 connector, finish_lincheck, ns_cluster, primary_name,
                                 read_probe, start_lincheck, until_written, wait_table)
from faults.fixtures import make_net  # noqa: F401 (fixture)

pytestmark = pytest.mark.single_server('starts its own clusters')


def assert_not_stale(answer, newest):
    """A `majority` read through a server cut off from the majority: the newest value, or
    RethinkDB's refusal, or no answer; never an older value."""
    kind, res = answer
    if kind == "ok":
        assert (res or {}).get("v") == newest, ("stale majority read", res, newest)
    else:
        assert_refused(kind, res, "read")


def test_one_way_cuts_of_the_primary_under_load(make_net, tmp_path):  # noqa: F811
    net, servers = ns_cluster(make_net, tmp_path)
    by_name = {s.name: s for s in servers}
    seconds = LONG or 26
    history = str(tmp_path / "h.jsonl")
    run = start_lincheck([(s.host, s.port) for s in servers], seconds, history)
    began = time.time()
    rng = random.Random(SEED)
    faults, majority_took, heal_took = [], [], []
    value = [0]

    def one_way(outgoing, on_primary=True):
        primary = by_name[primary_name(connector(servers[0]))]
        victim = primary if on_primary else rng.choice([s for s in servers if s is not primary])
        rest = [s for s in servers if s is not victim]
        others = [s.i for s in rest]
        if outgoing:
            net.cut(victim.i, others)  # the others cannot hear it
        else:
            net.cut(others, victim.i)  # it cannot hear the others
        t0 = time.time()
        faults.append("%s %s" % ("outgoing of" if outgoing else "incoming to",
                                 "primary" if victim is primary else "follower"))
        # The others hear each other: writes through each are acknowledged.
        value[0] += 1
        majority_took.append(until_written(connector(rest[0]), value[0], 30))
        until_written(connector(rest[1]), value[0], 30)
        # The cut-off server never answers a majority read with what it held before.
        assert_not_stale(Attempt(connector(victim), read_probe("majority")).result(15), value[0])
        time.sleep(max(0.0, 3 - (time.time() - t0)))
        net.heal()
        value[0] += 1
        heal_took.append(all_write_again(servers, value[0]))

    try:
        wait_table(connector(servers[0]))
        time.sleep(2)
        one_way(outgoing=True)
        time.sleep(1)
        one_way(outgoing=False)
        while LONG and time.time() - began + 40 < seconds:
            time.sleep(rng.uniform(1, 3))
            one_way(rng.random() < 0.5, rng.random() < 0.7)
    finally:
        net.heal()
    ok, fail, info, summary = finish_lincheck(run, history, seconds)
    assert ok > 300, summary
    print("\none-way cuts: %d faults (%s); writes through the others acknowledged %s s "
          "after the cut; every server writing and reading again %s s after the heal; %s" % (
              len(faults), ", ".join("%s x%d" % (f, faults.count(f)) for f in sorted(set(faults))),
              figures(majority_took), figures(heal_took), summary))


def test_lossy_slow_links_under_load(make_net, tmp_path):  # noqa: F811
    net, servers = ns_cluster(make_net, tmp_path)
    seconds = LONG or 26
    history = str(tmp_path / "h.jsonl")
    run = start_lincheck([(s.host, s.port) for s in servers], seconds, history)
    began = time.time()
    rng = random.Random(SEED)
    faults, degraded_took, heal_took = [], [], []
    value = [0]

    def lossy(loss, ms, jitter, hold):
        net.degrade(loss, ms, jitter)
        t0 = time.time()
        faults.append("%d%% loss, %d+-%d ms (%s)" % (loss, ms, jitter, net.delay_backend(0)))
        # Slowly, but every server still gets writes acknowledged (all three tried at
        # once: one after the other they can take most of a minute).
        value[0] += 1
        with concurrent.futures.ThreadPoolExecutor(len(servers)) as pool:
            degraded_took.extend(
                pool.map(lambda s: until_written(connector(s), value[0], 60), servers))
        time.sleep(max(0.0, hold - (time.time() - t0)))
        net.clear_shaping()
        value[0] += 1
        heal_took.append(all_write_again(servers, value[0]))

    try:
        wait_table(connector(servers[0]))
        time.sleep(2)
        lossy(25, 50, 15, 12)
        while LONG and time.time() - began + 60 < seconds:
            time.sleep(rng.uniform(2, 5))
            lossy(rng.choice([20, 25, 30]), 50, rng.choice([10, 25]), rng.uniform(10, 30))
    finally:
        net.clear_shaping()
    ok, fail, info, summary = finish_lincheck(run, history, seconds)
    assert ok > 300, summary
    print("\nlossy links: %d periods (%s); a write through each server acknowledged %s s "
          "into the period; every server writing and reading again %s s after it; "
          "%s" % (
              len(faults), ", ".join(faults), figures(degraded_took), figures(heal_took),
              summary))
