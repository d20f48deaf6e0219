"""`DelayLine`: packet delay without `sch_netem`, for kernels built without it. A tc
filter (last on the egress of a node's `eth0`, after every cut and loss filter) redirects
each packet the node sends to veth `dly`; a thread of the test process reads it from the
peer `dly2` with an AF_PACKET socket and, once its time has come, transmits it on
`eth0` with PACKET_QDISC_BYPASS, which skips the egress filters (so no loop).

Invariants: packets leave in the order they were sent (with jitter, a packet never
overtakes an earlier one); the virtio-net header (PACKET_VNET_HDR) is read and written
with each frame, so TSO/GSO packets and pending checksums pass unchanged; the queue is
bounded (`limit` packets; beyond it packets are dropped, as a full netem queue does);
`stop()` joins the thread and closes both sockets.
"""
import heapq
import os
import random
import select
import socket
import threading
import time

from .nsutil import in_netns

SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_QDISC_BYPASS = 20
PACKET_OUTGOING = 4
ETH_P_ALL = 3


def _open(rx_if, tx_if):
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    rx.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    rx.bind((rx_if, ETH_P_ALL))
    rx.setblocking(False)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    tx.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    tx.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
    tx.bind((tx_if, 0))
    return rx, tx


class DelayLine:
    """Delays what namespace `ns` sends on `tx_if` (redirected to the veth whose peer
    is `rx_if`) by ms +- jitter milliseconds."""

    def __init__(self, ns, ms, jitter=0, rx_if="dly2", tx_if="eth0", limit=10000):
        self.rx, self.tx = in_netns(ns, _open, rx_if, tx_if)
        self.limit = limit
        self.set(ms, jitter)
        self._wake_r, self._wake_w = os.pipe()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True, name="faults-delay")
        self._thread.start()

    def set(self, ms, jitter=0):
        self.delay = (ms / 1000.0, jitter / 1000.0)

    def stop(self):
        self._stop = True
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self.rx.close()
        self.tx.close()

    def _run(self):
        queue, seq, last_due = [], 0, 0.0
        poller = select.poll()
        poller.register(self.rx, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while not self._stop:
            now = time.monotonic()
            while queue and queue[0][0] <= now:
                _, _, frame = heapq.heappop(queue)
                try:
                    self.tx.send(frame)
                except OSError:
                    pass  # the interface went away or refused the frame: a lost packet
            wait = -1 if not queue else max(0, int((queue[0][0] - now) * 1000))
            if not poller.poll(wait):
                continue
            while True:
                try:
                    frame, addr = self.rx.recvfrom(1 << 18)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    return
                if addr[2] == PACKET_OUTGOING or len(queue) >= self.limit:
                    continue
                ms, jitter = self.delay
                due = time.monotonic() + max(0.0, ms + random.uniform(-jitter, jitter))
                last_due = max(last_due, due)
                seq += 1
                heapq.heappush(queue, (last_due, seq, frame))
