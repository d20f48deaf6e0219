"""Connection slots: a client that never finishes its handshake is dropped after
`--handshake-timeout-secs`, and a connection over `--max-connections` is told why before
it is closed (it used to be closed without a word, and silent sockets held every slot)."""
import socket
import struct
import tempfile
import time

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlDriverError

from conftest import Server, assert_serving
from reqlwire import V1_0_MAGIC


@pytest.fixture(scope="module")
def capped():
    with tempfile.TemporaryDirectory() as d:
        s = Server(d, extra=["--max-connections", "3", "--handshake-timeout-secs", "1"]).start()
        yield s
        s.stop()


def silent(port, send=b""):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if send:
        s.sendall(send)
    return s


def closed_by_server(sock, within):
    sock.settimeout(within)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


def test_silent_sockets_are_dropped_and_free_their_slots(capped):
    time.sleep(0.5)  # the start-up probe's connection gives its slot back
    # Slots held by: nothing sent, only the magic number, half a handshake.
    socks = [silent(capped.port), silent(capped.port, struct.pack("<I", V1_0_MAGIC)),
             silent(capped.port, struct.pack("<I", V1_0_MAGIC) + b'{"protocol_version"')]
    time.sleep(0.2)
    # Over the cap: an answer, not a silent close.
    with pytest.raises(ReqlDriverError, match="Too many open connections"):
        r.connect("127.0.0.1", capped.port, timeout=5)
    started = time.time()
    for s in socks:
        assert closed_by_server(s, within=5)
        s.close()
    assert time.time() - started < 5
    # The slots are free again: the admin gets in.
    assert_serving(capped)


def test_a_slow_but_finished_handshake_is_served(capped):
    c = r.connect("127.0.0.1", capped.port, timeout=5)
    time.sleep(1.5)  # longer than the handshake timeout, after the handshake
    assert r.expr(1).run(c) == 1
    c.close()
