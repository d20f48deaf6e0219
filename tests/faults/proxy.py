"""`Proxy`: a fault-injecting TCP proxy for loopback-only setups. It forwards a local
port to a target and can `block()` (reset existing connections and new ones), `hold()`
(stop forwarding without closing anything, like a partition TCP has not noticed yet),
`release()` (forward again, held bytes included) and `delay()` every chunk it forwards.

It runs an asyncio loop on its own daemon thread; the control methods are thread-safe
and return once the change is in effect. Invariants: memory is bounded (per direction
one read of at most `chunk` bytes plus a queue of `queue` chunks; while held nothing is
read, so the kernel's buffers and TCP flow control hold the rest); bytes are delivered
in order and never dropped except by `block()`; `close()` resets every connection and
stops the thread.
"""
import asyncio
import random
import socket
import struct
import threading
import time

BOTH, UP, DOWN = "both", "up", "down"  # UP: client -> target, DOWN: target -> client


def _reset(writer):
    """Closes a stream with a TCP RST (SO_LINGER 0), as a dropped connection looks."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


class _Conn:
    def __init__(self, client):
        self.client, self.upstream, self.tasks = client, None, []

    def reset(self):
        for t in self.tasks:
            t.cancel()
        _reset(self.client)
        _reset(self.upstream)


class Proxy:
    """`Proxy(target_host, target_port).start()`; connect to `proxy.port` (on
    `listen_host`, 127.0.0.1 by default) instead of the target."""

    def __init__(self, target_host, target_port, listen_host="127.0.0.1", listen_port=0,
                 chunk=65536, queue=16):
        self.target = (target_host, target_port)
        self.listen = (listen_host, listen_port)
        self.chunk, self.queue = chunk, queue
        self.port = None
        self.accepted = 0
        self._conns = set()
        self._blocked = False
        self._delay = (0.0, 0.0)
        self._loop = asyncio.new_event_loop()
        self._flow = {}
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="faults-proxy")
        self._server = None

    # -- control (any thread) -------------------------------------------------------
    def start(self):
        self._thread.start()
        self._call(self._start())
        return self

    @property
    def address(self):
        return (self.listen[0], self.port)

    def block(self):
        """Resets every open connection and every new one until `release()`."""
        self._call(self._block())

    def hold(self, direction=BOTH):
        """Stops forwarding bytes (both ways, or only UP = client->target or DOWN =
        target->client) without closing anything; new connections are accepted but
        not forwarded. `release()` delivers what was held."""
        self._call(self._set_flow(direction, False))

    def release(self):
        """Undoes `block()` and `hold()`: everything flows again."""
        self._call(self._release())

    def delay(self, ms, jitter=0):
        """Delays every chunk forwarded from now on by ms (+- jitter) milliseconds,
        keeping byte order; `delay(0)` stops it."""
        self._delay = (ms / 1000.0, jitter / 1000.0)

    @property
    def connections(self):
        return len(self._conns)

    def close(self):
        if not self._thread.is_alive():
            return
        try:
            self._call(self._close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
        return False

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    # -- on the loop ----------------------------------------------------------------
    async def _start(self):
        self._flow = {UP: asyncio.Event(), DOWN: asyncio.Event()}
        for e in self._flow.values():
            e.set()
        self._server = await asyncio.start_server(self._serve, *self.listen)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _block(self):
        self._blocked = True
        for c in list(self._conns):
            c.reset()
        self._conns.clear()

    async def _set_flow(self, direction, on):
        for d in ((UP, DOWN) if direction == BOTH else (direction,)):
            (self._flow[d].set if on else self._flow[d].clear)()

    async def _release(self):
        self._blocked = False
        await self._set_flow(BOTH, True)

    async def _close(self):
        if self._server is not None:
            self._server.close()
        await self._block()
        # Connections still waiting for a release end too, so no task outlives the loop.
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in others:
            t.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    async def _serve(self, reader, writer):
        self.accepted += 1
        if self._blocked:
            _reset(writer)
            return
        conn = _Conn(writer)
        self._conns.add(conn)
        try:
            # A held proxy does not even dial the target until released.
            await self._flow[UP].wait()
            await self._flow[DOWN].wait()
            if self._blocked or conn not in self._conns:
                return
            up_reader, conn.upstream = await asyncio.open_connection(*self.target)
        except (OSError, asyncio.CancelledError):
            conn.reset()
            self._conns.discard(conn)
            return
        conn.tasks = [asyncio.ensure_future(self._pump(conn, reader, conn.upstream, UP)),
                      asyncio.ensure_future(self._pump(conn, up_reader, writer, DOWN))]
        await asyncio.gather(*conn.tasks, return_exceptions=True)
        self._conns.discard(conn)
        for w in (writer, conn.upstream):
            w.close()

    async def _pump(self, conn, reader, writer, direction):
        flow = self._flow[direction]
        q = asyncio.Queue(self.queue)

        async def sender():
            while True:
                due, data = await q.get()
                if due > time.monotonic():
                    await asyncio.sleep(due - time.monotonic())
                await flow.wait()
                if data is None:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        send = asyncio.ensure_future(sender())
        last_due = 0.0
        try:
            while True:
                await flow.wait()
                data = await reader.read(self.chunk)
                ms, jitter = self._delay
                due = time.monotonic() + max(0.0, ms + random.uniform(-jitter, jitter))
                last_due = max(last_due, due)  # never reorder bytes
                await q.put((last_due, data or None))
                if not data:
                    break
            await send
        except OSError:
            conn.reset()  # one side failed: the other sees a reset too, as with a router
            raise
        finally:
            if not send.done():
                send.cancel()
