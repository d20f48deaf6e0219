"""A minimal raw-socket client for RethinkDB's V1_0 wire protocol, used by the
end-to-end tests that need to control exactly what goes over the socket.

The handshake reuses the official driver's `HandshakeV1_0` (SCRAM-SHA-256); frames are
`token: u64 LE` + `length: u32 LE` + JSON, in both directions."""
import base64
import hashlib
import hmac
import json
import os
import socket
import struct
import time

from rethinkdb.handshake import HandshakeV1_0

# Query types (ql2.proto Query.QueryType).
START, CONTINUE, STOP, NOREPLY_WAIT, SERVER_INFO = 1, 2, 3, 4, 5
# Response types (ql2.proto Response.ResponseType).
SUCCESS_ATOM, SUCCESS_SEQUENCE, SUCCESS_PARTIAL = 1, 2, 3
WAIT_COMPLETE, SERVER_INFO_RESPONSE = 4, 5
CLIENT_ERROR, COMPILE_ERROR, RUNTIME_ERROR = 16, 17, 18

V1_0_MAGIC = 0x34C2BDC3


def read_until_null(sock, limit=1 << 20):
    """Reads one NUL-terminated handshake message (without the NUL)."""
    out = bytearray()
    while True:
        b = sock.recv(1)
        if not b:
            raise ConnectionError("connection closed during handshake (got %r)" % bytes(out))
        if b == b"\0":
            return bytes(out)
        out += b
        if len(out) > limit:
            raise ValueError("handshake message too long")


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def read_all_until_close(sock, timeout=10.0, limit=1 << 20):
    """Reads everything until the peer closes (or `timeout`); returns (bytes, closed)."""
    sock.settimeout(timeout)
    out = bytearray()
    deadline = time.time() + timeout
    while time.time() < deadline and len(out) < limit:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return bytes(out), False
        except ConnectionResetError:
            return bytes(out), True
        if not chunk:
            return bytes(out), True
        out += chunk
    return bytes(out), False


class RawConn:
    """One authenticated connection speaking raw frames."""

    def __init__(self, port, user="admin", password="", timeout=30.0):
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        hs = HandshakeV1_0(json.JSONDecoder(), json.JSONEncoder(), "127.0.0.1", port,
                           user, password)
        response = None
        while True:
            request = hs.next_message(response)
            if request is None:
                break
            if request != "":
                self.sock.sendall(request)
            response = read_until_null(self.sock)
        self._buf = bytearray()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send_frame(self, token, payload):
        """Sends one frame; `payload` is bytes (sent as is) or a JSON-able value."""
        if not isinstance(payload, (bytes, bytearray)):
            payload = json.dumps(payload).encode()
        self.sock.sendall(struct.pack("<QL", token, len(payload)) + payload)

    def start(self, token, term, optargs=None):
        q = [START, term]
        if optargs is not None:
            q.append(optargs)
        self.send_frame(token, q)

    def cont(self, token):
        self.send_frame(token, [CONTINUE])

    def stop(self, token):
        self.send_frame(token, [STOP])

    def recv(self):
        """Reads one response frame: (token, decoded JSON)."""
        header = recv_exact(self.sock, 12)
        token, length = struct.unpack("<QL", header)
        body = recv_exact(self.sock, length)
        return token, json.loads(body.decode("utf-8"))

    def query(self, token, term, optargs=None):
        self.start(token, term, optargs)
        t, resp = self.recv()
        assert t == token, (t, token, resp)
        return resp

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def scram_first(sock, user="admin", magic=V1_0_MAGIC):
    """Sends the magic and client-first message; returns (client_nonce, client_first_bare,
    server_first_message) after reading the server's two replies."""
    nonce = base64.standard_b64encode(os.urandom(18)).decode()
    first_bare = "n=%s,r=%s" % (user, nonce)
    msg = json.dumps({"protocol_version": 0, "authentication_method": "SCRAM-SHA-256",
                      "authentication": "n,," + first_bare}).encode()
    sock.sendall(struct.pack("<L", magic) + msg + b"\0")
    hello = json.loads(read_until_null(sock))
    assert hello["success"] is True, hello
    server_first = json.loads(read_until_null(sock))
    return nonce, first_bare, server_first


def scram_final(first_bare, server_first_msg, password):
    """The client-final message and the expected server signature (RFC 5802)."""
    attrs = dict(kv.split("=", 1) for kv in server_first_msg.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    without_proof = "c=biws,r=" + attrs["r"]
    auth_message = ",".join((first_bare, server_first_msg, without_proof)).encode()
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    client_sig = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, client_sig))
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    server_sig = hmac.new(server_key, auth_message, hashlib.sha256).digest()
    return without_proof + ",p=" + base64.b64encode(proof).decode(), server_sig


def rss_kib(pid):
    """Resident set size of a process in KiB, from /proc/<pid>/status."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


def term(query):
    """A driver query (e.g. `r.range(10).count()`) as its plain JSON term tree."""
    from rethinkdb.ast import ReQLEncoder
    return json.loads(ReQLEncoder().encode(query))
