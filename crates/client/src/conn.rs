//! One pipelined connection: the V1_0 handshake, then a writer task and a
//! reader task around the socket.
//!
//! Invariants: every query gets a fresh token (CONTINUE/STOP reuse the
//! query's); a waiter is registered under its token *before* the frame is
//! queued, so a fast answer is never lost; when the socket fails or closes,
//! every waiter is answered with [`Error::Closed`] and later queries fail at
//! once instead of hanging.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use parking_lot::Mutex;
use proto::ql2::{QueryType, ResponseType, Version};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::scram::{random_nonce, ScramClient};
use crate::{Error, Response};

/// Longest handshake message accepted from the server, NUL included.
const MAX_HANDSHAKE_MESSAGE: usize = 64 * 1024;
/// Frames queued for the writer before `query` waits.
const WRITE_QUEUE: usize = 4096;
/// The writer coalesces queued frames into one write up to this many bytes.
const WRITE_COALESCE: usize = 256 * 1024;

/// Where and as whom to connect.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Server host name or address.
    pub host: String,
    /// Driver port.
    pub port: u16,
    /// User name (RethinkDB's default is `admin`).
    pub user: String,
    /// Password (RethinkDB's default is empty).
    pub password: String,
    /// Bound on TCP connect plus handshake.
    pub connect_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 28015,
            user: "admin".into(),
            password: String::new(),
            connect_timeout: Duration::from_secs(20),
        }
    }
}

type Waiter = oneshot::Sender<Result<Response, Error>>;

/// State shared with the reader and writer tasks.
#[derive(Default)]
struct Shared {
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    waiters: HashMap<u64, Waiter>,
    /// Why the connection is closed, once it is.
    closed: Option<String>,
}

impl Shared {
    /// Registers a waiter for `token`, unless the connection is closed.
    fn register(&self, token: u64) -> Result<oneshot::Receiver<Result<Response, Error>>, Error> {
        let (tx, rx) = oneshot::channel();
        let mut p = self.pending.lock();
        if let Some(reason) = &p.closed {
            return Err(Error::Closed(reason.clone()));
        }
        p.waiters.insert(token, tx);
        Ok(rx)
    }

    fn unregister(&self, token: u64) {
        self.pending.lock().waiters.remove(&token);
    }

    fn dispatch(&self, token: u64, result: Result<Response, Error>) {
        let waiter = self.pending.lock().waiters.remove(&token);
        if let Some(w) = waiter {
            // The caller may have given up (timeout); that is fine.
            let _ = w.send(result);
        }
    }

    /// Marks the connection closed and fails every waiter (first reason wins).
    fn close(&self, reason: String) {
        let waiters = {
            let mut p = self.pending.lock();
            if p.closed.is_none() {
                p.closed = Some(reason);
            }
            std::mem::take(&mut p.waiters)
        };
        let reason = self.closed_reason().unwrap_or_default();
        for (_, w) in waiters {
            let _ = w.send(Err(Error::Closed(reason.clone())));
        }
    }

    fn closed_reason(&self) -> Option<String> {
        self.pending.lock().closed.clone()
    }
}

struct Inner {
    tx: mpsc::Sender<Vec<u8>>,
    shared: Arc<Shared>,
    next_token: AtomicU64,
    reader: JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The writer ends by itself when `tx` is dropped (and then shuts the
        // socket down); the reader would wait for the server, so stop it.
        self.reader.abort();
    }
}

/// A pipelined connection to a RethinkDB-protocol server.
///
/// Cheap to clone: clones share the socket, so many tasks can have queries in
/// flight on one connection at once; answers are matched to queries by token.
/// The socket closes when the last clone is dropped.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("closed", &self.inner.shared.closed_reason())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects to `host:port` as `admin` with the empty password.
    pub async fn connect(host: &str, port: u16) -> Result<Self, Error> {
        Self::connect_with(&ConnectOptions {
            host: host.to_owned(),
            port,
            ..ConnectOptions::default()
        })
        .await
    }

    /// Connects and authenticates with `opts`.
    pub async fn connect_with(opts: &ConnectOptions) -> Result<Self, Error> {
        let fut = async {
            let mut stream = TcpStream::connect((opts.host.as_str(), opts.port)).await?;
            stream.set_nodelay(true)?;
            let leftover = handshake(&mut stream, &opts.user, &opts.password).await?;
            Ok::<_, Error>((stream, leftover))
        };
        let (stream, leftover) = tokio::time::timeout(opts.connect_timeout, fut)
            .await
            .map_err(|_| Error::Timeout)??;
        let (rd, wr) = stream.into_split();
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        tokio::spawn(writer(wr, rx, shared.clone()));
        let reader = tokio::spawn(reader(rd, leftover, shared.clone()));
        Ok(Self {
            inner: Arc::new(Inner {
                tx,
                shared,
                next_token: AtomicU64::new(1),
                reader,
            }),
        })
    }

    /// Whether the connection has failed or been closed by the server.
    pub fn is_closed(&self) -> bool {
        self.inner.shared.closed_reason().is_some()
    }

    /// Number of queries waiting for an answer.
    pub fn in_flight(&self) -> usize {
        self.inner.shared.pending.lock().waiters.len()
    }

    fn next_token(&self) -> u64 {
        self.inner.next_token.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends `[type, ...]` on `token` and waits for its answer.
    async fn roundtrip(&self, token: u64, query: &Value) -> Result<Response, Error> {
        let frame = encode_frame(token, query)?;
        let rx = self.inner.shared.register(token)?;
        if self.inner.tx.send(frame).await.is_err() {
            self.inner.shared.unregister(token);
            return Err(Error::Closed(
                self.inner
                    .shared
                    .closed_reason()
                    .unwrap_or_else(|| "writer stopped".into()),
            ));
        }
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(Error::Closed(
                self.inner
                    .shared
                    .closed_reason()
                    .unwrap_or_else(|| "connection dropped".into()),
            )),
        }
    }

    /// Runs a START query and returns its first response, which may be an
    /// error response (see [`Response::error`]) or a partial one (fetch the
    /// rest with [`Connection::continue_query`], or use
    /// [`Connection::run_all`]). `Err` is only for transport and protocol
    /// failures.
    ///
    /// `term` is the term tree in JSON form (see [`crate::term`]); `optargs`
    /// are the global optargs (`{"durability": "soft"}`, `{"db": [14,
    /// ["test"]]}`…) as an object, or `Null` for none. Do not pass
    /// `noreply: true` here (no answer would come): use
    /// [`Connection::query_noreply`].
    pub async fn query(&self, term: Value, optargs: Value) -> Result<Response, Error> {
        let token = self.next_token();
        let q = start_query(term, optargs)?;
        self.roundtrip(token, &q).await
    }

    /// Runs a START query with `noreply: true`: returns once it is queued for
    /// the socket. Use [`Connection::noreply_wait`] to wait for its effects.
    pub async fn query_noreply(&self, term: Value, optargs: Value) -> Result<(), Error> {
        let token = self.next_token();
        let mut q = start_query(term, optargs)?;
        if let Some(o) = q.get_mut(2).and_then(Value::as_object_mut) {
            o.insert("noreply".into(), Value::Bool(true));
        }
        let frame = encode_frame(token, &q)?;
        self.inner
            .tx
            .send(frame)
            .await
            .map_err(|_| Error::Closed("writer stopped".into()))
    }

    /// Asks for the next batch of a partial result on `token`.
    pub async fn continue_query(&self, token: u64) -> Result<Response, Error> {
        self.roundtrip(token, &json!([QueryType::CONTINUE.as_i64()]))
            .await
    }

    /// Closes the cursor on `token`.
    pub async fn stop(&self, token: u64) -> Result<Response, Error> {
        self.roundtrip(token, &json!([QueryType::STOP.as_i64()]))
            .await
    }

    /// Waits until every earlier `noreply` query has been processed.
    pub async fn noreply_wait(&self) -> Result<(), Error> {
        let token = self.next_token();
        let r = self
            .roundtrip(token, &json!([QueryType::NOREPLY_WAIT.as_i64()]))
            .await?
            .into_result()?;
        if r.kind == ResponseType::WAIT_COMPLETE {
            Ok(())
        } else {
            Err(Error::Protocol(format!(
                "NOREPLY_WAIT answered with {}",
                r.kind
            )))
        }
    }

    /// The server's SERVER_INFO answer (`{"id", "name", "proxy"}`).
    pub async fn server_info(&self) -> Result<Value, Error> {
        let token = self.next_token();
        let r = self
            .roundtrip(token, &json!([QueryType::SERVER_INFO.as_i64()]))
            .await?
            .into_result()?;
        r.items
            .into_iter()
            .next()
            .ok_or_else(|| Error::Protocol("empty SERVER_INFO response".into()))
    }

    /// Runs a query and collects its whole result: CONTINUE is sent until the
    /// stream ends, and the items of every batch are concatenated. An atom
    /// result gives a one-item list (an array atom is *not* flattened). Error
    /// responses become [`Error::Reql`]. Never use it on a changefeed.
    pub async fn run_all(&self, term: Value, optargs: Value) -> Result<Vec<Value>, Error> {
        let token = self.next_token();
        let q = start_query(term, optargs)?;
        let mut r = self.roundtrip(token, &q).await?.into_result()?;
        let mut out = std::mem::take(&mut r.items);
        while r.is_partial() {
            r = self.continue_query(token).await?.into_result()?;
            out.append(&mut r.items);
        }
        Ok(out)
    }

    /// Runs a query and returns its value: the atom, or the whole sequence
    /// (collected as by [`Connection::run_all`]) as an array. Error responses
    /// become [`Error::Reql`].
    pub async fn run(&self, term: Value, optargs: Value) -> Result<Value, Error> {
        let token = self.next_token();
        let q = start_query(term, optargs)?;
        let mut r = self.roundtrip(token, &q).await?.into_result()?;
        match r.kind {
            ResponseType::SUCCESS_ATOM | ResponseType::SERVER_INFO => {
                Ok(r.items.into_iter().next().unwrap_or(Value::Null))
            }
            _ => {
                let mut out = std::mem::take(&mut r.items);
                while r.is_partial() {
                    r = self.continue_query(token).await?.into_result()?;
                    out.append(&mut r.items);
                }
                Ok(Value::Array(out))
            }
        }
    }
}

/// `[START, term, optargs]`, with `optargs` an object (or `Null` for `{}`).
fn start_query(term: Value, optargs: Value) -> Result<Value, Error> {
    let optargs = match optargs {
        Value::Null => Map::new(),
        Value::Object(o) => o,
        other => {
            return Err(Error::Protocol(format!(
                "global optargs must be an object, got {other}"
            )))
        }
    };
    Ok(json!([QueryType::START.as_i64(), term, optargs]))
}

/// `token: u64 LE`, `length: u32 LE`, JSON.
fn encode_frame(token: u64, query: &Value) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&[0u8; 12]);
    serde_json::to_writer(&mut out, query)
        .map_err(|e| Error::Protocol(format!("cannot serialize query: {e}")))?;
    let len = u32::try_from(out.len() - 12)
        .map_err(|_| Error::Protocol("query longer than 4 GiB".into()))?;
    let mut header = &mut out[..12];
    header.put_u64_le(token);
    header.put_u32_le(len);
    Ok(out)
}

async fn writer(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Vec<u8>>, shared: Arc<Shared>) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    while let Some(first) = rx.recv().await {
        buf.clear();
        buf.extend_from_slice(&first);
        while buf.len() < WRITE_COALESCE {
            match rx.try_recv() {
                Ok(f) => buf.extend_from_slice(&f),
                Err(_) => break,
            }
        }
        if let Err(e) = wr.write_all(&buf).await {
            shared.close(format!("write failed: {e}"));
            return;
        }
    }
    let _ = wr.shutdown().await;
}

async fn reader(mut rd: OwnedReadHalf, mut buf: BytesMut, shared: Arc<Shared>) {
    loop {
        loop {
            match proto::frame::decode(&mut buf, u32::MAX as usize) {
                Ok(Some(frame)) => {
                    let r = Response::parse(frame.token, &frame.payload);
                    shared.dispatch(frame.token, r);
                }
                Ok(None) => break,
                Err(e) => {
                    shared.close(format!("bad frame from server: {e}"));
                    return;
                }
            }
        }
        buf.reserve(64 * 1024);
        match rd.read_buf(&mut buf).await {
            Ok(0) => {
                shared.close("connection closed by the server".into());
                return;
            }
            Ok(_) => {}
            Err(e) => {
                shared.close(format!("read failed: {e}"));
                return;
            }
        }
    }
}

/// Reads one NUL-terminated JSON message of the handshake.
async fn read_message(stream: &mut TcpStream, buf: &mut BytesMut) -> Result<Value, Error> {
    loop {
        if let Some(nul) = buf.iter().position(|&b| b == 0) {
            let msg = buf.split_to(nul + 1);
            let body = &msg[..nul];
            return serde_json::from_slice(body).map_err(|_| {
                Error::Handshake(format!(
                    "server sent a non-JSON handshake message: {}",
                    String::from_utf8_lossy(body)
                ))
            });
        }
        if buf.len() >= MAX_HANDSHAKE_MESSAGE {
            return Err(Error::Handshake("handshake message too long".into()));
        }
        if stream.read_buf(buf).await? == 0 {
            return Err(Error::Handshake(format!(
                "server closed the connection during the handshake{}",
                if buf.is_empty() {
                    String::new()
                } else {
                    format!(": {}", String::from_utf8_lossy(buf))
                }
            )));
        }
    }
}

/// Checks `success` of a handshake message, turning a refusal into
/// [`Error::Auth`], and returns its `authentication` field when present.
fn check_success(msg: &Value) -> Result<Option<String>, Error> {
    if msg.get("success").and_then(Value::as_bool) != Some(true) {
        return Err(Error::Auth {
            message: msg
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("handshake refused")
                .to_owned(),
            code: msg.get("error_code").and_then(Value::as_i64).unwrap_or(0),
        });
    }
    Ok(msg
        .get("authentication")
        .and_then(Value::as_str)
        .map(str::to_owned))
}

/// Runs the V1_0 handshake; returns bytes read past its end.
async fn handshake(stream: &mut TcpStream, user: &str, password: &str) -> Result<BytesMut, Error> {
    let scram = ScramClient::new(user, password, &random_nonce());
    let first = json!({
        "protocol_version": 0,
        "authentication_method": "SCRAM-SHA-256",
        "authentication": scram.client_first(),
    });
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&(Version::V1_0.as_i64() as u32).to_le_bytes());
    serde_json::to_writer(&mut out, &first).map_err(|e| Error::Handshake(e.to_string()))?;
    out.push(0);
    stream.write_all(&out).await?;

    let mut buf = BytesMut::with_capacity(4096);
    let greeting = read_message(stream, &mut buf).await?;
    check_success(&greeting)?;
    let min = greeting.get("min_protocol_version").and_then(Value::as_i64);
    let max = greeting.get("max_protocol_version").and_then(Value::as_i64);
    if min.is_some_and(|m| m > 0) || max.is_some_and(|m| m < 0) {
        return Err(Error::Handshake(format!(
            "server does not speak protocol version 0: {greeting}"
        )));
    }

    let server_first = read_message(stream, &mut buf).await?;
    let server_first = check_success(&server_first)?
        .ok_or_else(|| Error::Handshake("server-first lacks authentication".into()))?;
    let (client_final, verifier) = scram.handle_server_first(&server_first)?;
    let mut out = serde_json::to_vec(&json!({ "authentication": client_final }))
        .map_err(|e| Error::Handshake(e.to_string()))?;
    out.push(0);
    stream.write_all(&out).await?;

    let server_final = read_message(stream, &mut buf).await?;
    let server_final = check_success(&server_final)?
        .ok_or_else(|| Error::Handshake("server-final lacks authentication".into()))?;
    verifier.verify_server_final(&server_final)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_layout() {
        let f = encode_frame(0x0102, &json!([1, 2])).unwrap();
        assert_eq!(&f[..8], &0x0102u64.to_le_bytes());
        assert_eq!(&f[8..12], &5u32.to_le_bytes());
        assert_eq!(&f[12..], b"[1,2]");
    }

    /// An in-process server: the real `proto` handshake, then a scripted
    /// query loop. Numbers are held until 8 have arrived and then answered in
    /// reverse order (to prove token matching); `"stream"` answers a partial
    /// batch `[1, 2]` then `[3]` on CONTINUE; `"close"` closes the socket.
    async fn fake_server(password: &str) -> u16 {
        use proto::handshake::{Handshake, OsRandom, ScramCredentials, Step};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut users = HashMap::new();
        users.insert(
            "admin".to_string(),
            ScramCredentials::derive(password, b"0123456789abcdef", 4096),
        );
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = BytesMut::new();
            let mut hs = Handshake::new(OsRandom);
            loop {
                match hs.feed(&mut buf, &users).unwrap() {
                    Step::NeedMore => {
                        if s.read_buf(&mut buf).await.unwrap() == 0 {
                            return;
                        }
                    }
                    Step::Send(b) => s.write_all(&b).await.unwrap(),
                    Step::Done { reply, .. } => {
                        s.write_all(&reply).await.unwrap();
                        break;
                    }
                    Step::Reject { reply, .. } => {
                        s.write_all(&reply).await.unwrap();
                        return;
                    }
                }
            }
            let mut held = Vec::new();
            loop {
                while let Some(f) = proto::frame::decode(&mut buf, 1 << 20).unwrap() {
                    let q: Value = serde_json::from_slice(&f.payload).unwrap();
                    let reply = match (q[0].as_i64(), &q[1]) {
                        (Some(1), Value::Number(_)) => {
                            held.push((f.token, q[1].clone()));
                            if held.len() == 8 {
                                let mut out = Vec::new();
                                for (t, v) in held.drain(..).rev() {
                                    out.extend(
                                        encode_frame(t, &json!({"t": 1, "r": [v]})).unwrap(),
                                    );
                                }
                                s.write_all(&out).await.unwrap();
                            }
                            continue;
                        }
                        (Some(1), Value::String(x)) if x == "stream" => {
                            json!({"t": 3, "r": [1, 2]})
                        }
                        (Some(1), Value::String(x)) if x == "close" => return,
                        (Some(2), _) => json!({"t": 2, "r": [3]}),
                        _ => json!({"t": 18, "e": 3000000, "r": ["bad"], "b": []}),
                    };
                    s.write_all(&encode_frame(f.token, &reply).unwrap())
                        .await
                        .unwrap();
                }
                if s.read_buf(&mut buf).await.unwrap() == 0 {
                    return;
                }
            }
        });
        port
    }

    #[tokio::test]
    async fn handshake_and_pipelining_against_proto_server() {
        let port = fake_server("").await;
        let conn = Connection::connect("127.0.0.1", port).await.unwrap();
        let mut tasks = Vec::new();
        for i in 0..8 {
            let c = conn.clone();
            tasks.push(tokio::spawn(
                async move { c.query(json!(i), Value::Null).await },
            ));
        }
        for (i, t) in tasks.into_iter().enumerate() {
            let r = t.await.unwrap().unwrap();
            assert_eq!(r.kind, ResponseType::SUCCESS_ATOM);
            assert_eq!(r.items, vec![json!(i)]);
        }
        assert_eq!(conn.in_flight(), 0);

        assert_eq!(
            conn.run_all(json!("stream"), Value::Null).await.unwrap(),
            vec![json!(1), json!(2), json!(3)]
        );
        let err = conn.run(json!(null), Value::Null).await.unwrap_err();
        assert!(
            matches!(err, Error::Reql(ref e) if e.message == "bad"),
            "{err}"
        );

        let c2 = conn.clone();
        let waiting = tokio::spawn(async move { c2.query(json!(100), Value::Null).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        conn.query_noreply(json!("close"), Value::Null)
            .await
            .unwrap();
        assert!(matches!(waiting.await.unwrap(), Err(Error::Closed(_))));
        assert!(conn.is_closed());
        assert!(matches!(
            conn.query(json!(1), Value::Null).await,
            Err(Error::Closed(_))
        ));
    }

    #[tokio::test]
    async fn wrong_password_is_refused() {
        let port = fake_server("secret").await;
        let err = Connection::connect("127.0.0.1", port).await.unwrap_err();
        assert!(matches!(err, Error::Auth { code: 12, .. }), "{err}");
        let port = fake_server("secret").await;
        let opts = ConnectOptions {
            port,
            password: "secret".into(),
            ..ConnectOptions::default()
        };
        Connection::connect_with(&opts).await.unwrap();
    }

    #[test]
    fn start_query_shapes() {
        assert_eq!(
            start_query(json!([59, []]), Value::Null).unwrap(),
            json!([1, [59, []], {}])
        );
        assert!(start_query(json!(1), json!([1])).is_err());
    }
}
