"""Tests of the fault-injecting TCP proxy (`faults.Proxy`) in front of a loopback echo
server, observed by a client: forwarding, block, hold/release, one-way hold, delay,
clean shutdown. No privileges needed."""
import socket
import threading
import time
import types

import pytest

from faults import Proxy
from faults.proxy import DOWN, UP


@pytest.fixture
def echo():
    """A threaded echo server on 127.0.0.1 (port 0): `.port`, `.received` chunks."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    received = []

    def serve(c):
        with c:
            while True:
                try:
                    b = c.recv(65536)
                except OSError:
                    return
                if not b:
                    return
                received.append(b)
                c.sendall(b)

    def accept():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield types.SimpleNamespace(port=srv.getsockname()[1], received=received)
    srv.close()


def client(proxy, timeout=2):
    c = socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c


def roundtrip(c, data=b"hello"):
    c.sendall(data)
    got = b""
    while len(got) < len(data):
        b = c.recv(65536)
        if not b:
            raise ConnectionResetError("closed")
        got += b
    return got


def test_forwards_both_ways_and_large_payloads(echo, make_proxy):
    p = make_proxy("127.0.0.1", echo.port)
    with client(p) as c:
        assert roundtrip(c) == b"hello"
        big = bytes(range(256)) * 4096  # 1 MiB through bounded buffers
        t = threading.Thread(target=c.sendall, args=(big,))
        t.start()
        got = b""
        while len(got) < len(big):
            got += c.recv(1 << 20)
        t.join()
        assert got == big
    assert p.accepted == 1


def test_block_resets_existing_and_new_connections(echo, make_proxy):
    p = make_proxy("127.0.0.1", echo.port)
    c = client(p)
    assert roundtrip(c) == b"hello"
    p.block()
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        roundtrip(c)
    c.close()
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        with client(p) as c2:  # the kernel accepts; the proxy resets at once
            roundtrip(c2)
    p.release()
    with client(p) as c3:
        assert roundtrip(c3) == b"hello"


def test_hold_stalls_without_closing_and_release_delivers(echo, make_proxy):
    p = make_proxy("127.0.0.1", echo.port)
    c = client(p, timeout=0.3)
    assert roundtrip(c) == b"hello"
    p.hold()
    c.sendall(b"held")
    with pytest.raises(socket.timeout):
        c.recv(16)
    late = client(p, timeout=0.3)  # a new connection is accepted but goes nowhere
    late.sendall(b"late")
    with pytest.raises(socket.timeout):
        late.recv(16)
    assert p.connections == 2
    p.release()
    c.settimeout(2)
    late.settimeout(2)
    assert c.recv(16) == b"held"
    assert late.recv(16) == b"late"
    c.close()
    late.close()


def test_one_way_hold(echo, make_proxy):
    p = make_proxy("127.0.0.1", echo.port)
    c = client(p, timeout=0.3)
    assert roundtrip(c) == b"hello"
    p.hold(DOWN)  # requests reach the server, answers do not come back
    c.sendall(b"req")
    with pytest.raises(socket.timeout):
        c.recv(16)
    assert b"req" in echo.received
    p.release()
    c.settimeout(2)
    assert c.recv(16) == b"req"
    p.hold(UP)  # requests do not reach the server
    c.settimeout(0.3)
    c.sendall(b"up?")
    with pytest.raises(socket.timeout):
        c.recv(16)
    assert b"up?" not in echo.received
    p.release()
    c.settimeout(2)
    assert c.recv(16) == b"up?"
    c.close()


def test_delay(echo, make_proxy):
    p = make_proxy("127.0.0.1", echo.port)
    with client(p) as c:
        roundtrip(c)
        p.delay(100)
        t = time.monotonic()
        assert roundtrip(c, b"slow") == b"slow"
        assert time.monotonic() - t >= 0.19  # 100 ms each way
        p.delay(0)
        t = time.monotonic()
        roundtrip(c)
        assert time.monotonic() - t < 0.1


def test_close_resets_clients_and_stops_listening(echo):
    p = Proxy("127.0.0.1", echo.port).start()
    c = client(p)
    assert roundtrip(c) == b"hello"
    p.close()
    assert not p._thread.is_alive()
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        roundtrip(c)
    c.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", p.port), timeout=1)


def test_unreachable_target_resets_the_client(make_proxy):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead_port = s.getsockname()[1]
    s.close()
    p = make_proxy("127.0.0.1", dead_port)
    # The reset may come before connect() has returned on a loaded machine.
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        with client(p) as c:
            roundtrip(c)
