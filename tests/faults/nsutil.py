"""Low-level helpers for the network-namespace harness: running `ip`/`tc`, the naming
scheme that ties every namespace to the process that created it, removal of leftovers
of dead runs, and entering a namespace from a thread of this process.

Invariants: every namespace this package creates is named `pdr-<pid>-<start>-<run>-<x>`,
where `<pid>` and `<start>` (the process start time in clock ticks since boot, base 36)
identify the creating process exactly, even after its pid has been reused; so a
namespace is "stale" iff no live process has that pid and start time, and
`cleanup_stale()` never touches another live run's namespaces. All other interfaces
(bridge, veths) live inside those namespaces, except the root end of one veth per `Net`,
which the kernel destroys together with its peer when the namespace goes.
"""
import ctypes
import os
import re
import shutil
import signal
import subprocess
import threading
import time

PREFIX = "pdr"
NETNS_DIR = "/run/netns"
CLONE_NEWNET = 0x40000000
_NAME = re.compile(r"^%s-(\d+)-([0-9a-z]+)-" % PREFIX)


class NetnsError(RuntimeError):
    """An `ip`/`tc` command failed, or the machine cannot run the harness."""


def sh(argv, check=True, timeout=10):
    """Runs a command (no shell), returning its stdout; raises NetnsError on failure."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise NetnsError("%s: %s" % (" ".join(argv), (p.stderr or p.stdout).strip()))
    return p.stdout


def unavailable():
    """Why this machine cannot run the namespace harness (a string), or None if it can."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (running as uid %d)" % os.geteuid()
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return "`%s` (iproute2) is not installed" % tool
    probe = owner_prefix() + "probe"  # cleaned by cleanup_stale() if we die here
    p = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if p.returncode != 0:
        return "cannot create a network namespace: " + p.stderr.strip()
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _b36(n):
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, d = divmod(n, 36)
        out = digits[d] + out
        if n == 0:
            return out


def start_tag(pid):
    """The start time of process `pid` (base 36), or None if it does not exist."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after it.
    fields = stat[stat.rindex(")") + 2:].split()
    return _b36(int(fields[19]))


def owner_prefix():
    """The name prefix of this process's namespaces: `pdr-<pid>-<start>-`."""
    pid = os.getpid()
    return "%s-%d-%s-" % (PREFIX, pid, start_tag(pid))


def list_netns():
    """Names of all named network namespaces."""
    out = sh(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_pids(name):
    out = sh(["ip", "netns", "pids", name], check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def delete_netns(names):
    """Kills every process inside the namespaces, then deletes them. Best effort: goes
    on past errors so that one stuck namespace does not keep the others alive."""
    for _ in range(50):
        pids = [p for n in names for p in netns_pids(n)]
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
    for n in names:
        if n.endswith("-br"):
            # The kernel dismantles a deleted namespace asynchronously; deleting the veth
            # to the root namespace first removes its root end now.
            subprocess.run(["ip", "-n", n, "link", "del", "h0"], capture_output=True)
        subprocess.run(["ip", "netns", "del", n], capture_output=True)


def cleanup_stale():
    """Removes the namespaces (and with them their bridges, veths and processes) of runs
    whose creating process is gone. Returns the names removed."""
    stale = []
    for name in list_netns():
        m = _NAME.match(name)
        if m and start_tag(int(m.group(1))) != m.group(2):
            stale.append(name)
    if stale:
        delete_netns(stale)
    return stale


_libc = None


def _setns(name):
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns(%s): %s" % (name, os.strerror(e)))
    finally:
        os.close(fd)


def in_netns(name, fn, *args):
    """Calls fn(*args) in a fresh thread that has entered namespace `name` and returns
    its result (or raises its exception). Sockets created there stay in that namespace,
    so the test process can own sockets in any namespace without a subprocess; the
    calling thread's namespace is never changed."""
    box = {}

    def body():
        try:
            _setns(name)
            box["value"] = fn(*args)
        except BaseException as e:  # handed to the caller
            box["error"] = e

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")
