"""Authentication: --initial-password, wrong password, unknown user, bad SCRAM proof."""
import base64
import json
import socket

import pytest
from rethinkdb import r
from rethinkdb.errors import ReqlAuthError

from conftest import assert_serving
from reqlwire import read_until_null, scram_final, scram_first


@pytest.fixture(scope="module")
def secured():
    import tempfile
    from conftest import Server
    with tempfile.TemporaryDirectory() as d:
        s = Server(d, extra=["--initial-password", "secret"]).start()
        yield s
        s.stop()


def test_wrong_password_is_rejected(secured):
    with pytest.raises(ReqlAuthError) as e:
        secured.connect(password="wrong", timeout=10)
    assert "Wrong password" in str(e.value)


def test_empty_password_is_rejected_when_one_is_set(secured):
    with pytest.raises(ReqlAuthError) as e:
        secured.connect(timeout=10)
    assert "Wrong password" in str(e.value)


def test_right_password_works(secured):
    c = secured.connect(password="secret", timeout=10)
    try:
        assert r.expr([1, 2, 3]).count().run(c) == 3
        assert "test" in r.db_list().run(c)
    finally:
        c.close()
    assert_serving(secured, password="secret")


def test_unknown_user_is_rejected(secured):
    with pytest.raises(ReqlAuthError) as e:
        secured.connect(user="nobody", password="secret", timeout=10)
    assert "Unknown user" in str(e.value)


def test_raw_scram_success_and_server_signature(secured):
    """The full exchange by hand: the server's final message proves it knows the key."""
    s = socket.create_connection(("127.0.0.1", secured.port), timeout=10)
    try:
        nonce, first_bare, server_first = scram_first(s)
        assert server_first["success"] is True
        attrs = dict(kv.split("=", 1) for kv in server_first["authentication"].split(","))
        assert attrs["r"].startswith(nonce) and len(attrs["r"]) > len(nonce)
        assert int(attrs["i"]) >= 1 and base64.b64decode(attrs["s"])
        final, server_sig = scram_final(first_bare, server_first["authentication"], "secret")
        s.sendall(json.dumps({"authentication": final}).encode() + b"\0")
        reply = json.loads(read_until_null(s))
        assert reply["success"] is True, reply
        assert reply["authentication"] == "v=" + base64.b64encode(server_sig).decode()
    finally:
        s.close()


def test_raw_bad_scram_proof(secured):
    s = socket.create_connection(("127.0.0.1", secured.port), timeout=10)
    try:
        _, first_bare, server_first = scram_first(s)
        final, _ = scram_final(first_bare, server_first["authentication"], "not-the-password")
        s.sendall(json.dumps({"authentication": final}).encode() + b"\0")
        reply = json.loads(read_until_null(s))
        assert reply["success"] is False
        assert reply["error_code"] == 12
        assert reply["error"] == "Wrong password"
        # The server closes the connection after rejecting.
        s.settimeout(5)
        assert s.recv(1) == b""
    finally:
        s.close()
    assert_serving(secured, password="secret")


def test_raw_bad_scram_proof_default_admin(server):
    """Also with the passwordless admin of a default server."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        _, first_bare, server_first = scram_first(s)
        final, _ = scram_final(first_bare, server_first["authentication"], "x")
        s.sendall(json.dumps({"authentication": final}).encode() + b"\0")
        reply = json.loads(read_until_null(s))
        assert reply == {"success": False, "error": "Wrong password", "error_code": 12}
    finally:
        s.close()
    assert_serving(server)


def test_raw_unknown_user(secured):
    """Like RethinkDB, an unknown user gets a server-first message (with a made-up salt,
    so user names cannot be probed) and is rejected at the final message."""
    s = socket.create_connection(("127.0.0.1", secured.port), timeout=10)
    try:
        _, first_bare, server_first = scram_first(s, user="ghost")
        assert server_first["success"] is True
        final, _ = scram_final(first_bare, server_first["authentication"], "secret")
        s.sendall(json.dumps({"authentication": final}).encode() + b"\0")
        reply = json.loads(read_until_null(s))
        assert reply == {"success": False, "error": "Unknown user", "error_code": 17}
    finally:
        s.close()
    assert_serving(secured, password="secret")
