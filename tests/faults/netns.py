"""`Net`: N network namespaces on one bridge, with partitions, packet loss, delay and
process control, for cluster tests that inject faults between real `ponder` processes.

Topology: a bridge `br0` in its own namespace (`...-br`); node i's namespace (`...-<i>`)
holds `eth0` (address 10.A.B.(i+1)/24), veth-paired with port `p<i>` of the bridge; the
root namespace (where the test runs) holds 10.A.B.254 on a veth to the bridge, so the
test process reaches every node directly. The /24 (from 10.190.0.0-10.249.255.255, else
172.16.0.0/12) is chosen free of every address and route of the root namespace, under a
lock file, so concurrent runs never share one.

Faults are egress filters on each node's `eth0` (tc clsact): a `u32` match on the
destination address redirected (`mirred`) to a veth whose peer is down, which drops the
packet (this works on kernels without the `gact` drop action). A cut from i to j is a
filter on i's `eth0` for j's address, so any shape (asymmetric, non-transitive) works,
and traffic to and from the root namespace is never cut. Loss is a classic-BPF filter
(`ld rand`) with the same redirect; delay is `netem` when the kernel has `sch_netem`,
else a `DelayLine` (a last egress filter hands packets to a thread of this process that
sends them on after the delay).

Invariants: everything lives in namespaces named after this process (see `nsutil`), so
`close()` (also run by the context manager, at interpreter exit, and by the pytest
fixtures) or a later `cleanup_stale()` removes every namespace, bridge and veth and
kills every process inside.
"""
import atexit
import fcntl
import ipaddress
import itertools
import os
import signal
import subprocess
import threading

from .delayline import DelayLine
from .nsutil import NetnsError, cleanup_stale, delete_netns, in_netns, owner_prefix, sh

_runs = itertools.count()
_live = set()
_live_lock = threading.Lock()
LOCK_FILE = "/run/lock/ponder-faults.lock"
BASE_CUT_PREF = 1000
LOSS_PREF = 10
DELAY_PREF = 65000  # after every cut: a delayed packet has passed them all


def _used_networks():
    nets = []
    for cmd in (["ip", "-4", "-o", "addr", "show"], ["ip", "-4", "route", "show", "table", "all"]):
        for line in sh(cmd, check=False).splitlines():
            for word in line.split():
                if word[0].isdigit() and ("/" in word or word.count(".") == 3):
                    try:
                        nets.append(ipaddress.ip_network(word, strict=False))
                    except ValueError:
                        pass
    return nets


class Net:
    """`Net(n)` creates n namespaces on one bridge; use it as a context manager (or call
    `close()`). Nodes are numbered 0..n-1; `addr(i)` is node i's address."""

    def __init__(self, n, clean_stale=True):
        if n < 1 or n > 200:
            raise ValueError("a Net has 1 to 200 nodes")
        if clean_stale:
            cleanup_stale()
        self.n = n
        self.run_id = next(_runs)
        base = owner_prefix() + str(self.run_id)
        self.bridge_ns = base + "-br"
        self.names = ["%s-%d" % (base, i) for i in range(n)]
        self.procs = []
        self.cuts = {}  # (src, dst) -> tc filter preference on src's eth0
        self._shaping = {}  # node -> {"loss": pct, "delay": (backend, DelayLine or None)}
        self.closed = False
        self.owner_pid = os.getpid()
        with _live_lock:
            _live.add(self)
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # -- construction ---------------------------------------------------------------
    def _build(self):
        sh(["ip", "netns", "add", self.bridge_ns])
        for name in self.names:
            sh(["ip", "netns", "add", name])
        b = self.bridge_ns
        sh(["ip", "-n", b, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", b, "link", "set", "br0", "up"])
        for i, name in enumerate(self.names):
            port = "p%d" % i
            sh(["ip", "-n", b, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                "netns", name])
            sh(["ip", "-n", b, "link", "set", port, "master", "br0", "up"])
            sh(["ip", "-n", name, "link", "set", "lo", "up"])
            # The drop target: a veth whose peer stays down discards what it is sent.
            sh(["ip", "-n", name, "link", "add", "sink", "type", "veth", "peer", "name", "sinkp"])
            sh(["ip", "-n", name, "link", "set", "sink", "up"])
            sh(["tc", "-n", name, "qdisc", "add", "dev", "eth0", "clsact"])
        os.makedirs(os.path.dirname(LOCK_FILE), exist_ok=True)
        with open(LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.network = self._pick_network()
            hosts = list(self.network.hosts())
            self.root_addr = str(hosts[-1])
            self.addrs = [str(hosts[i]) for i in range(self.n)]
            root_if = "pdr%d-%d-%d" % tuple(self.network.network_address.packed[:3])
            sh(["ip", "link", "add", root_if, "type", "veth", "peer", "name", "h0", "netns", b])
            self.root_if = root_if  # set only once it is ours (close() deletes it)
            sh(["ip", "addr", "add", "%s/24" % self.root_addr, "dev", self.root_if])
            sh(["ip", "link", "set", self.root_if, "up"])
        sh(["ip", "-n", b, "link", "set", "h0", "master", "br0", "up"])
        for i, name in enumerate(self.names):
            sh(["ip", "-n", name, "addr", "add", "%s/24" % self.addrs[i], "dev", "eth0"])
            sh(["ip", "-n", name, "link", "set", "eth0", "up"])

    def _pick_network(self):
        used = [u for u in _used_networks() if u.prefixlen > 0]
        for first, seconds in ((10, range(190, 250)), (172, range(16, 32))):
            size = len(seconds) * 256
            start = (os.getpid() * 7 + self.run_id * 131) % size
            for k in range(size):
                c = (start + k) % size
                net = ipaddress.ip_network("%d.%d.%d.0/24" % (first, seconds[c // 256], c % 256))
                if not any(net.overlaps(u) for u in used):
                    return net
        raise NetnsError("no free /24 in 10.190.0.0-10.249.255.255 or 172.16.0.0/12")

    # -- addresses and processes ----------------------------------------------------
    def addr(self, i):
        return self.addrs[i]

    def ns(self, i):
        """The namespace name of node i (for `ip netns exec` by hand)."""
        return self.names[i]

    def exec_argv(self, i, argv):
        return ["ip", "netns", "exec", self.names[i]] + list(argv)

    def spawn(self, i, argv, **popen_kw):
        """Starts argv inside node i's namespace; returns its Popen (the process itself:
        `ip netns exec` execs it). Killed by `close()`."""
        popen_kw.setdefault("start_new_session", True)
        p = subprocess.Popen(self.exec_argv(i, argv), **popen_kw)
        self.procs.append(p)
        return p

    def run(self, i, argv, timeout=30, **kw):
        """Runs argv to completion inside node i's namespace (subprocess.run)."""
        kw.setdefault("capture_output", True)
        return subprocess.run(self.exec_argv(i, argv), timeout=timeout, **kw)

    def call_in(self, i, fn, *args):
        """Calls fn(*args) on a thread inside node i's namespace (see `in_netns`): e.g.
        `net.call_in(0, socket.create_connection, (net.addr(1), port), 0.5)` opens a
        socket from node 0 without a subprocess."""
        return in_netns(self.names[i], fn, *args)

    @staticmethod
    def kill9(proc):
        """SIGKILL, then reap."""
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    @staticmethod
    def pause(proc):
        os.kill(proc.pid, signal.SIGSTOP)

    @staticmethod
    def resume(proc):
        os.kill(proc.pid, signal.SIGCONT)

    # -- partitions -----------------------------------------------------------------
    def cut(self, src, dst):
        """Drops every IPv4 packet node(s) `src` send to node(s) `dst` (one way only);
        adds to the cuts in place. Either argument is a node or a list of nodes."""
        for s in _nodes(src):
            for d in _nodes(dst):
                if s == d or (s, d) in self.cuts:
                    continue
                used = set(self.cuts.values())
                pref = next(p for p in range(BASE_CUT_PREF, DELAY_PREF) if p not in used)
                sh(["tc", "-n", self.names[s], "filter", "add", "dev", "eth0", "egress",
                    "protocol", "ip", "pref", str(pref), "u32", "match", "ip", "dst",
                    self.addrs[d] + "/32", "action", "mirred", "egress", "redirect",
                    "dev", "sink"])
                self.cuts[(s, d)] = pref

    def uncut(self, src, dst):
        """Removes the cuts from `src` to `dst` (one way)."""
        for s in _nodes(src):
            for d in _nodes(dst):
                pref = self.cuts.pop((s, d), None)
                if pref is not None:
                    sh(["tc", "-n", self.names[s], "filter", "del", "dev", "eth0", "egress",
                        "pref", str(pref)])

    def partition(self, groups, one_way=False):
        """Heals, then cuts every pair of nodes in different groups: both ways, or with
        `one_way=True` only from each group to the groups after it (so
        `partition([[0], [1, 2]], one_way=True)` drops 0->1 and 0->2 but not 1->0).
        Nodes in no group stay connected to everyone."""
        seen = [i for g in groups for i in g]
        if len(seen) != len(set(seen)) or any(i < 0 or i >= self.n for i in seen):
            raise ValueError("groups must be disjoint lists of nodes 0..%d" % (self.n - 1))
        self.heal()
        for a, ga in enumerate(groups):
            for b, gb in enumerate(groups):
                if a < b or (a > b and not one_way):
                    self.cut(ga, gb)

    def isolate(self, i):
        """Cuts node i from every other node, both ways (the test process still reaches it)."""
        self.partition([[i], [j for j in range(self.n) if j != i]])

    def heal(self):
        """Removes every cut (delay and loss stay: see `clear_shaping`)."""
        for s, d in list(self.cuts):
            self.uncut(s, d)

    # -- delay and loss -------------------------------------------------------------
    def loss(self, i, pct):
        """Drops `pct` percent of the packets node i sends (to anyone, the test process
        included), at random; `loss(i, 0)` stops it."""
        if not 0 <= pct <= 100:
            raise ValueError("pct is a percentage")
        if self._shaping.get(i, {}).get("loss"):
            sh(["tc", "-n", self.names[i], "filter", "del", "dev", "eth0", "egress", "pref",
                str(LOSS_PREF)])
        self._shaping.setdefault(i, {})["loss"] = pct
        if pct > 0:
            # classic BPF: A = random u32; keep the packet if A >= threshold.
            threshold = min(int(pct / 100 * 2**32), 2**32 - 1)
            code = "4,32 0 0 4294963256,53 1 0 %d,6 0 0 4294967295,6 0 0 0" % threshold
            sh(["tc", "-n", self.names[i], "filter", "add", "dev", "eth0", "egress", "pref",
                str(LOSS_PREF), "bpf", "bytecode", code, "action", "mirred", "egress",
                "redirect", "dev", "sink"])

    def delay(self, i, ms, jitter=0, backend=None):
        """Delays every packet node i sends by ms (+- jitter) milliseconds, so round
        trips between i and anyone grow by ms; `delay(i, 0)` stops it. With netem when
        the kernel has `sch_netem`, else (or with backend="userspace") with a
        `DelayLine` thread of this process; `delay_backend(i)` says which."""
        state = self._shaping.setdefault(i, {})
        current = state.get("delay")
        if ms <= 0:
            if current is not None:
                self._undelay(i, current)
            return
        if current is not None and (backend is None or backend == current[0]):
            if current[0] == "userspace":
                current[1].set(ms, jitter)
                return
        elif current is not None:
            self._undelay(i, current)
        name = self.names[i]
        if backend != "userspace":
            try:
                sh(["tc", "-n", name, "qdisc", "replace", "dev", "eth0", "root", "netem",
                    "delay", "%gms" % ms, "%gms" % jitter])
                state["delay"] = ("netem", None)
                return
            except NetnsError:
                if backend == "netem":
                    raise
        if sh(["ip", "-n", name, "link", "show", "dly"], check=False) == "":
            sh(["ip", "-n", name, "link", "add", "dly", "type", "veth", "peer", "name", "dly2"])
            sh(["ip", "-n", name, "link", "set", "dly", "up"])
            sh(["ip", "-n", name, "link", "set", "dly2", "up"])
        line = DelayLine(name, ms, jitter)
        state["delay"] = ("userspace", line)
        sh(["tc", "-n", name, "filter", "add", "dev", "eth0", "egress", "protocol", "all",
            "pref", str(DELAY_PREF), "u32", "match", "u32", "0", "0", "action", "mirred",
            "egress", "redirect", "dev", "dly"])

    def delay_backend(self, i):
        """How node i is being delayed: "netem", "userspace", or None (not delayed)."""
        current = self._shaping.get(i, {}).get("delay")
        return current and current[0]

    def _undelay(self, i, current):
        kind, line = current
        if kind == "netem":
            sh(["tc", "-n", self.names[i], "qdisc", "del", "dev", "eth0", "root"], check=False)
        else:
            sh(["tc", "-n", self.names[i], "filter", "del", "dev", "eth0", "egress", "pref",
                str(DELAY_PREF)], check=False)
            line.stop()
        self._shaping[i].pop("delay", None)

    def degrade(self, loss=0, ms=0, jitter=0, nodes=None):
        """Loss (`loss` %) and delay (`ms` +- `jitter`) on what each of `nodes` (all when
        None) sends: on every link between them, and to and from the test process."""
        for i in (range(self.n) if nodes is None else _nodes(nodes)):
            self.loss(i, loss)
            self.delay(i, ms, jitter)

    def clear_shaping(self, i=None):
        """Removes delay and loss from node i (all nodes when None)."""
        for j in (range(self.n) if i is None else [i]):
            self.loss(j, 0)
            self.delay(j, 0)

    # -- cleanup --------------------------------------------------------------------
    def close(self):
        """Kills every process started here or still inside the namespaces, and deletes
        the namespaces (with them the bridge and every veth). Idempotent."""
        if self.closed:
            return
        self.closed = True
        for state in self._shaping.values():
            kind, line = state.get("delay") or (None, None)
            if kind == "userspace":
                line.stop()
        for p in self.procs:
            try:
                if p.poll() is None:
                    p.kill()  # SIGKILL ends stopped processes too
                p.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        delete_netns(self.names + [self.bridge_ns])
        if getattr(self, "root_if", None):
            subprocess.run(["ip", "link", "del", self.root_if], capture_output=True)
        with _live_lock:
            _live.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _nodes(x):
    return [x] if isinstance(x, int) else list(x)


@atexit.register
def _close_all():
    with _live_lock:
        # a forked child that exits normally must not tear down its parent's networks
        nets = [n for n in _live if n.owner_pid == os.getpid()]
    for net in nets:
        net.close()
