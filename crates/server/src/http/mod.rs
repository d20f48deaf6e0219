//! The HTTP admin port (`--http-port`, default 8080): the web console's files,
//! RethinkDB's query endpoint `/ajax/reql`, Prometheus' `/metrics`, and Ponder's login.
//! A thin shell over hyper 1 (HTTP/1.1, optionally behind rustls): the pure parts are
//! `ajax` (framing and RethinkDB's answers), `conns` (the connection table and its
//! expiry), `assets` (path sanitising), `login` (sessions, cookies, tokens) and
//! `metrics` (the exposition format).
//!
//! Queries run through the driver port's path: each `/ajax/reql` connection owns a
//! `Session` (as a driver connection does) whose answers are matched to the waiting
//! HTTP requests by token (`AjaxConn`). The session's user is the HTTP caller's: `admin`
//! while `admin` has no password (RethinkDB's behaviour), else the logged-in user,
//! whose permissions apply as on the driver port.
//!
//! Rules every request meets (a request breaking one gets a 4xx, never a panic):
//! - at most `max_connections` sockets (more are answered 503 and closed); headers
//!   within `header_timeout` (slowloris; idle keep-alive sockets close then too),
//!   bodies within `body_timeout` and `max_body_bytes` (413);
//! - while `admin` has a password, `/ajax/reql/*` and `/ajax/logout` need the session
//!   cookie (401 without) and the `X-Ponder-Token` header echoing the session's CSRF
//!   token (403 without); `/metrics` needs `admin`'s session or basic auth;
//! - every answer carries `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY`,
//!   a restrictive `Content-Security-Policy`, `Referrer-Policy: no-referrer`, and
//!   `Cache-Control: no-store` except for the console's files.

mod ajax;
mod assets;
mod conns;
mod login;
mod metrics;

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use cluster::auth::ADMIN;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use proto::handshake::{NonceSource, OsRandom};
use reql::{compile_query, CompiledQuery};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

use crate::config::HttpOptions;
use crate::conn::Stop;
use crate::outbox::Outbox;
use crate::principal::Principal;
use crate::session::{parse_error_frame, Session};
use crate::state::ServerState;
use crate::{tls, Error};

type Resp = Response<Full<Bytes>>;

/// An answer refusing a request before it is handled (boxed: it is the rare path).
type Refusal = Box<Resp>;

/// The HTTP admin of one server: its accept loop, stopped with the server's `Stop`.
pub struct HttpAdmin {
    local_addr: SocketAddr,
    accept: JoinHandle<()>,
    tls: bool,
}

impl HttpAdmin {
    /// Serves `listener` until `stop`. Fails when the TLS files or the static
    /// directory cannot be used.
    pub fn start(
        listener: TcpListener,
        state: Arc<ServerState>,
        opts: HttpOptions,
        data_dir: PathBuf,
        stop: Stop,
    ) -> Result<HttpAdmin, Error> {
        let local_addr = listener.local_addr().map_err(|source| Error::Listen {
            addr: "the given HTTP listener".into(),
            source,
        })?;
        let tls = match &opts.tls {
            Some(f) => Some(tls::acceptor(&f.cert, &f.key).map_err(Error::Tls)?),
            None => None,
        };
        let assets = assets::Assets::new(opts.static_dir.as_deref()).map_err(Error::Argument)?;
        let app = Arc::new(App {
            conns: Mutex::new(conns::ConnTable::new(
                opts.conn_timeout,
                opts.max_connections.saturating_mul(8).max(64),
                opts.max_conns_per_client,
            )),
            logins: Mutex::new(login::Logins::default()),
            secure: tls.is_some(),
            state,
            opts,
            assets,
            data_dir,
        });
        let secure = tls.is_some();
        let accept = tokio::spawn(accept_loop(listener, app, tls, stop));
        Ok(HttpAdmin {
            local_addr,
            accept,
            tls: secure,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Whether it serves TLS.
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// Waits for the accept loop to end (after `stop`).
    pub async fn join(self) -> Result<(), tokio::task::JoinError> {
        self.accept.await
    }
}

/// What every request handler shares.
struct App {
    state: Arc<ServerState>,
    opts: HttpOptions,
    assets: assets::Assets,
    conns: Mutex<conns::ConnTable<Arc<AjaxConn>>>,
    logins: Mutex<login::Logins>,
    /// Served over TLS: cookies get `Secure`.
    secure: bool,
    /// The engine's directory, for `/metrics`' disk figures.
    data_dir: PathBuf,
}

impl App {
    /// Ends the connections idle for longer than the timeout.
    fn expire(&self) {
        let gone = self.conns.lock().expire(Instant::now());
        let msg = ajax::expired_message(self.opts.conn_timeout.as_secs());
        for c in gone {
            c.end(&msg);
        }
    }

    /// Whether requests must come from a logged-in browser (`admin` has a password).
    fn login_required(&self) -> bool {
        self.state.cluster.users().has_password(ADMIN)
    }

    /// The login of the request's session cookie, if any.
    fn login_of(&self, req: &Parts) -> Option<login::Login> {
        let cookie = header_str(req, header::COOKIE.as_str())
            .and_then(|h| login::cookie_value(h, login::COOKIE))?;
        let l = self.logins.lock().get(cookie, Instant::now())?;
        // A user deleted since logging in is logged out.
        self.state.cluster.users().exists(&l.user).then_some(l)
    }

    /// The user a state-changing request runs as, or the answer refusing it.
    fn caller(&self, req: &Parts) -> Result<String, Refusal> {
        if !self.login_required() {
            return Ok(ADMIN.to_string());
        }
        let Some(l) = self.login_of(req) else {
            return Err(Box::new(text(
                StatusCode::UNAUTHORIZED,
                "Login required: the admin user has a password (POST /ajax/login).\n",
            )));
        };
        if !login::token_matches(&l, header_str(req, login::TOKEN_HEADER)) {
            return Err(Box::new(text(
                StatusCode::FORBIDDEN,
                "Missing or wrong X-Ponder-Token header (GET /ajax/session gives it).\n",
            )));
        }
        Ok(l.user)
    }
}

/// One `/ajax/reql` connection: a session (as a driver connection has) and the HTTP
/// requests waiting for its answers, by token.
struct AjaxConn {
    session: Arc<Session>,
    user: String,
    /// Requests waiting for an answer on each token, oldest first.
    waiters: Mutex<HashMap<u64, VecDeque<oneshot::Sender<Vec<u8>>>>>,
    /// Why the connection ended, once it has (then no request may wait on it).
    ended: Mutex<Option<String>>,
    /// The task handing the session's answers to the waiting requests.
    demux: Mutex<Option<JoinHandle<()>>>,
    state: Arc<ServerState>,
}

impl AjaxConn {
    /// Opens a connection for `user` (counted as a client connection, as RethinkDB
    /// counts its HTTP connections).
    fn open(state: &Arc<ServerState>, user: &str, peer: String) -> Arc<AjaxConn> {
        let (out, mut answers) = Outbox::new();
        let who = Principal::new(&state.cluster, user, peer);
        let conn = Arc::new(AjaxConn {
            session: Session::new_http(state.clone(), out, who),
            user: user.to_string(),
            waiters: Mutex::new(HashMap::new()),
            ended: Mutex::new(None),
            demux: Mutex::new(None),
            state: state.clone(),
        });
        state.cluster.note_connection(true);
        let weak = Arc::downgrade(&conn);
        let demux = tokio::spawn(async move {
            while let Some(mut out) = answers.recv().await {
                let frame = std::mem::take(&mut out.frame);
                drop(out);
                match weak.upgrade() {
                    Some(c) => c.deliver(frame),
                    None => break,
                }
            }
        });
        *conn.demux.lock() = Some(demux);
        conn
    }

    /// Hands an answer to the oldest request waiting on its token (an answer nobody
    /// waits for, as after a timed-out request, is dropped).
    fn deliver(&self, frame: Vec<u8>) {
        let Some((token, _)) = ajax::split_request(&frame) else {
            return;
        };
        let waiter = {
            let mut w = self.waiters.lock();
            let tx = w.get_mut(&token).and_then(VecDeque::pop_front);
            if w.get(&token).is_some_and(VecDeque::is_empty) {
                w.remove(&token);
            }
            tx
        };
        if let Some(tx) = waiter {
            let _ = tx.send(frame);
        }
    }

    /// Runs one query and returns its answer, and whether the session produced it
    /// (false: the connection ended while it waited).
    async fn run(&self, token: u64, q: CompiledQuery, payload: Bytes) -> (Vec<u8>, bool) {
        let (tx, rx) = oneshot::channel();
        {
            let ended = self.ended.lock();
            if let Some(why) = ended.as_deref() {
                return (ajax::interrupted(token, why), false);
            }
            self.waiters.lock().entry(token).or_default().push_back(tx);
        }
        self.session.handle_query(token, q, payload).await;
        match rx.await {
            Ok(frame) => (frame, true),
            Err(_) => {
                let why = self.ended.lock().clone();
                let why = why.as_deref().unwrap_or(ajax::TERMINATED);
                (ajax::interrupted(token, why), false)
            }
        }
    }

    /// Ends the connection: waiting requests are answered with `why` (RethinkDB's
    /// in-band error), then its queries are interrupted and its cursors dropped.
    fn end(&self, why: &str) {
        let waiting = {
            let mut ended = self.ended.lock();
            if ended.is_some() {
                return;
            }
            *ended = Some(why.to_string());
            std::mem::take(&mut *self.waiters.lock())
        };
        for (token, q) in waiting {
            for tx in q {
                let _ = tx.send(ajax::interrupted(token, why));
            }
        }
        self.session.close();
        if let Some(t) = self.demux.lock().take() {
            t.abort();
        }
        self.state.cluster.note_connection(false);
    }
}

/// How often idle connections are looked for.
fn expiry_tick(timeout: Duration) -> Duration {
    (timeout / 4).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// Accepts HTTP connections until the server stops, then ends every `/ajax/reql`
/// connection and waits (briefly) for the sockets to close.
async fn accept_loop(
    listener: TcpListener,
    app: Arc<App>,
    tls: Option<TlsAcceptor>,
    mut stop: Stop,
) {
    let slots = Arc::new(Semaphore::new(app.opts.max_connections));
    let mut sockets = JoinSet::new();
    let mut tick = tokio::time::interval(expiry_tick(app.opts.conn_timeout));
    loop {
        tokio::select! {
            () = stop.wait() => break,
            Some(_) = sockets.join_next(), if !sockets.is_empty() => {}
            _ = tick.tick() => app.expire(),
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(_) => {
                        // Out of file descriptors and the like: back off rather than spin.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    refuse(stream, tls.is_some());
                    continue;
                };
                let app = app.clone();
                let tls = tls.clone();
                let stop = stop.clone();
                sockets.spawn(async move {
                    serve_socket(stream, peer, app, tls, stop).await;
                    drop(permit);
                });
            }
        }
    }
    drop(listener);
    let open = app.conns.lock().drain();
    for c in open {
        c.end(ajax::SHUTTING_DOWN);
    }
    let drained = tokio::time::timeout(Duration::from_secs(3), async {
        while sockets.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        sockets.abort_all();
    }
}

/// Answers a socket over the cap with 503 (plain HTTP only) and closes it.
fn refuse(mut stream: TcpStream, tls: bool) {
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            if !tls {
                let body = "Too many open HTTP connections.\n";
                let msg = format!(
                    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(msg.as_bytes()).await;
            }
            let _ = stream.shutdown().await;
        })
        .await;
    });
}

/// Serves one socket (after the TLS handshake, when configured).
async fn serve_socket(
    stream: TcpStream,
    peer: SocketAddr,
    app: Arc<App>,
    tls: Option<TlsAcceptor>,
    mut stop: Stop,
) {
    let _ = stream.set_nodelay(true);
    match tls {
        None => serve_io(stream, peer, app, stop).await,
        Some(acceptor) => {
            let deadline = app.opts.header_timeout;
            let accepted = tokio::select! {
                s = tokio::time::timeout(deadline, acceptor.accept(stream)) => s.ok().and_then(Result::ok),
                () = stop.wait() => None,
            };
            if let Some(s) = accepted {
                serve_io(s, peer, app, stop).await;
            }
        }
    }
}

/// Runs hyper's HTTP/1.1 connection over `io` until it closes or the server stops.
async fn serve_io<I>(io: I, peer: SocketAddr, app: Arc<App>, mut stop: Stop)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let header_timeout = app.opts.header_timeout;
    let svc = hyper::service::service_fn(move |req| {
        let app = app.clone();
        async move { Ok::<_, Infallible>(respond(&app, peer, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            () = stop.wait(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Routes a request and adds the headers every answer carries.
async fn respond(app: &Arc<App>, peer: SocketAddr, req: Request<Incoming>) -> Resp {
    let path = req.uri().path().to_string();
    let is_asset = !(path == "/metrics" || path == "/ajax" || path.starts_with("/ajax/"));
    // The body is read (within its limits) before anything is answered, so that an
    // early answer never leaves a body unread and the socket can be kept alive.
    let limit = if ajax::route(&path, true).is_some() {
        app.opts.max_body_bytes
    } else {
        SMALL_BODY_BYTES
    };
    let (parts, body) = req.into_parts();
    let mut resp = match read_body(app, &parts, body, limit).await {
        Ok(body) => route(app, peer, &parts, body, &path).await,
        Err(resp) => *resp,
    };
    let h = resp.headers_mut();
    let mut set = |k: &'static str, v: &'static str| {
        h.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
    };
    set("x-content-type-options", "nosniff");
    set("x-frame-options", "DENY");
    set(
        "content-security-policy",
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; \
         form-action 'self'; frame-ancestors 'none'",
    );
    set("referrer-policy", "no-referrer");
    set("cross-origin-opener-policy", "same-origin");
    set("cross-origin-resource-policy", "same-origin");
    set(
        "cache-control",
        if is_asset { "no-cache" } else { "no-store" },
    );
    resp
}

/// Largest body of a request other than a query.
const SMALL_BODY_BYTES: usize = 64 * 1024;

async fn route(app: &Arc<App>, peer: SocketAddr, req: &Parts, body: Bytes, path: &str) -> Resp {
    let post = req.method == Method::POST;
    if post && !same_origin(header(req, "origin"), header(req, "host")) {
        return text(
            StatusCode::FORBIDDEN,
            "Cross-origin requests are refused.\n",
        );
    }
    if let Some(r) = ajax::route(path, post) {
        return reql(app, peer, req, body, r).await;
    }
    match path {
        "/metrics" => metrics(app, req).await,
        "/ajax/session" => session_info(app, req),
        "/ajax/login" => login(app, req, body).await,
        "/ajax/logout" => logout(app, req),
        _ if path == "/ajax" || path.starts_with("/ajax/") => {
            text(StatusCode::NOT_FOUND, "Not found.\n")
        }
        _ => asset(app, req, path).await,
    }
}

/// A header's value as text, when present and readable.
fn header<'a>(req: &'a Parts, name: &str) -> Option<&'a str> {
    req.headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether a POST may be served: browsers name the page that sends a request in
/// `Origin`, so one from another site (or an opaque `null` origin) is refused before it
/// can open a connection or run a query, even while no login is required. Requests
/// without `Origin` (drivers, scripts) are not browser cross-site requests.
fn same_origin(origin: Option<&str>, host: Option<&str>) -> bool {
    let Some(origin) = origin else {
        return true;
    };
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .map(|rest| rest.trim_end_matches('/'));
    match (authority, host) {
        (Some(a), Some(h)) => !a.is_empty() && a.eq_ignore_ascii_case(h),
        _ => false,
    }
}

/// `/ajax/reql`: RethinkDB's `query_server_t::handle`, in its order of checks.
async fn reql(app: &Arc<App>, peer: SocketAddr, req: &Parts, body: Bytes, r: ajax::Route) -> Resp {
    let user = match app.caller(req) {
        Ok(u) => u,
        Err(resp) => return *resp,
    };
    if r == ajax::Route::Open {
        let mut raw = [0u8; 16];
        OsRandom.fill(&mut raw);
        let id = base64::engine::general_purpose::STANDARD.encode(raw);
        let conn = AjaxConn::open(&app.state, &user, peer.to_string());
        let opened = app
            .conns
            .lock()
            .insert(id.clone(), peer.ip(), conn.clone(), Instant::now());
        return match opened {
            Ok(()) => typed(StatusCode::OK, "text/plain", id),
            Err(e) => {
                conn.end(ajax::TERMINATED);
                let status = match e {
                    conns::OpenError::PerClient(_) => StatusCode::TOO_MANY_REQUESTS,
                    conns::OpenError::Total(_) => StatusCode::SERVICE_UNAVAILABLE,
                };
                text(status, &e.message())
            }
        };
    }
    let Some(id) = ajax::query_param(req.uri.query(), "conn_id") else {
        return app_text(StatusCode::BAD_REQUEST, ajax::CONN_ID_MISSING);
    };
    if r == ajax::Route::Close {
        let removed = {
            let mut conns = app.conns.lock();
            match conns.get(&id, Instant::now()) {
                Some(c) if c.user == user => conns.remove(&id),
                _ => None,
            }
        };
        if let Some(c) = removed {
            c.end(ajax::TERMINATED);
        }
        return Response::new(Full::new(Bytes::new()));
    }
    let Some((token, json)) = ajax::split_request(&body) else {
        return app_text(StatusCode::BAD_REQUEST, ajax::REQUEST_TOO_SMALL);
    };
    let payload = body.slice_ref(json);
    let q = match compile_query(&payload) {
        Ok(q) => q,
        Err(e) => return octets(parse_error_frame(token, &e)),
    };
    let conn = app.conns.lock().get(&id, Instant::now());
    let Some(conn) = conn.filter(|c| c.user == user) else {
        return octets(ajax::client_error(token, ajax::NOT_OPEN));
    };
    if q.noreply {
        return app_text(StatusCode::BAD_REQUEST, ajax::NOREPLY_REFUSED);
    }
    let began = Instant::now();
    let (frame, answered) = conn.run(token, q, payload).await;
    let frame = if answered {
        ajax::add_duration_profile(frame, began.elapsed().as_secs_f64() * 1000.0)
    } else {
        frame
    };
    octets(frame)
}

/// A request's body, within `max` bytes and the time limit.
async fn read_body(app: &App, req: &Parts, body: Incoming, max: usize) -> Result<Bytes, Refusal> {
    let too_large = || {
        Box::new(text(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("Request body too large: at most {max} bytes.\n"),
        ))
    };
    let declared =
        header_str(req, header::CONTENT_LENGTH.as_str()).and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let body = Limited::new(body, max).collect();
    match tokio::time::timeout(app.opts.body_timeout, body).await {
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(Box::new(text(
            StatusCode::BAD_REQUEST,
            "Could not read the request body.\n",
        ))),
        Err(_) => Err(Box::new(text(
            StatusCode::REQUEST_TIMEOUT,
            "The request body did not arrive in time.\n",
        ))),
    }
}

/// `GET /ajax/session`: whether a login is needed, who is logged in and the CSRF
/// token the page must echo in `X-Ponder-Token`.
fn session_info(app: &App, req: &Parts) -> Resp {
    if req.method != Method::GET {
        return method_not_allowed("GET");
    }
    let required = app.login_required();
    let l = app.login_of(req);
    let body = serde_json::json!({
        "login_required": required,
        "user": if required { l.as_ref().map(|l| l.user.clone()) } else { Some(ADMIN.to_string()) },
        "token": l.map(|l| l.csrf),
    });
    json(StatusCode::OK, &body)
}

/// `POST /ajax/login` with `{"user", "password"}` as `application/json` (which a
/// cross-site form cannot send): checks the password against the users' stored
/// credentials and starts a session.
async fn login(app: &Arc<App>, req: &Parts, body: Bytes) -> Resp {
    if req.method != Method::POST {
        return method_not_allowed("POST");
    }
    let is_json = header_str(req, header::CONTENT_TYPE.as_str())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !is_json {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Send the login as JSON (Content-Type: application/json).\n",
        );
    }
    let v: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => return text(StatusCode::BAD_REQUEST, "The login is not valid JSON.\n"),
    };
    let field = |k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    let (Some(user), Some(password)) = (field("user"), field("password")) else {
        return text(
            StatusCode::BAD_REQUEST,
            "The login needs \"user\" and \"password\" strings.\n",
        );
    };
    let users = app.state.cluster.users().clone();
    let u = user.clone();
    // One PBKDF2 derivation: on the evaluation pool, never on an async worker.
    let ok = app
        .state
        .pool
        .run(move || users.check_password(&u, &password))
        .await
        .unwrap_or(false);
    if !ok {
        // Slows down guessing from one socket; the socket cap bounds the rest.
        tokio::time::sleep(Duration::from_millis(300)).await;
        return json(
            StatusCode::UNAUTHORIZED,
            &serde_json::json!({"error": "Wrong user name or password."}),
        );
    }
    let (cookie, l) = app.logins.lock().create(&user, Instant::now());
    let mut resp = json(
        StatusCode::OK,
        &serde_json::json!({"user": l.user, "token": l.csrf}),
    );
    if let Ok(v) = HeaderValue::from_str(&login::set_cookie(&cookie, app.secure)) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// `POST /ajax/logout` (with the session's token): ends the session.
fn logout(app: &App, req: &Parts) -> Resp {
    if req.method != Method::POST {
        return method_not_allowed("POST");
    }
    let cookie = header_str(req, header::COOKIE.as_str())
        .and_then(|h| login::cookie_value(h, login::COOKIE));
    if let (Some(c), Some(l)) = (cookie, app.login_of(req)) {
        if !login::token_matches(&l, header_str(req, login::TOKEN_HEADER)) {
            return text(
                StatusCode::FORBIDDEN,
                "Missing or wrong X-Ponder-Token header.\n",
            );
        }
        app.logins.lock().remove(c);
    }
    let mut resp = json(StatusCode::OK, &serde_json::json!({"logged_out": true}));
    if let Ok(v) = HeaderValue::from_str(&login::clear_cookie(app.secure)) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// `GET /metrics`: open while `admin` has no password, else for `admin` (its session
/// or basic auth, as Prometheus' `basic_auth` sends it).
async fn metrics(app: &Arc<App>, req: &Parts) -> Resp {
    if req.method != Method::GET {
        return method_not_allowed("GET");
    }
    if app.login_required() && app.login_of(req).is_none_or(|l| l.user != ADMIN) {
        let basic = header_str(req, header::AUTHORIZATION.as_str()).and_then(login::basic_auth);
        let ok = match basic {
            Some((u, p)) if u == ADMIN => {
                let users = app.state.cluster.users().clone();
                app.state
                    .pool
                    .run(move || users.check_password(&u, &p))
                    .await
                    .unwrap_or(false)
            }
            _ => false,
        };
        if !ok {
            let mut resp = text(StatusCode::UNAUTHORIZED, "The metrics are for admin.\n");
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"ponder\""),
            );
            return resp;
        }
    }
    let dir = app.data_dir.clone();
    let disk = app
        .state
        .pool
        .run(move || storage::disk_usage(&dir).ok())
        .await
        .flatten();
    let snap = metrics::Snapshot {
        cluster: app.state.cluster.metrics(),
        ajax_connections: app.conns.lock().len(),
        disk,
        version: env!("CARGO_PKG_VERSION"),
    };
    typed(
        StatusCode::OK,
        metrics::CONTENT_TYPE,
        metrics::render(&snap),
    )
}

/// A console file (GET only, as RethinkDB's `file_http_app_t`).
async fn asset(app: &Arc<App>, req: &Parts, path: &str) -> Resp {
    if req.method != Method::GET {
        return method_not_allowed("GET");
    }
    let Some(rel) = assets::sanitize(path) else {
        return text(StatusCode::NOT_FOUND, "Not found.\n");
    };
    let loaded = match &app.assets {
        assets::Assets::Embedded => app.assets.load(&rel),
        assets::Assets::Directory(_) => {
            let a = app.assets.clone();
            let r = rel.clone();
            app.state.pool.run(move || a.load(&r)).await.flatten()
        }
    };
    match loaded {
        Some(bytes) => {
            let body = match bytes {
                std::borrow::Cow::Borrowed(b) => Bytes::from_static(b),
                std::borrow::Cow::Owned(v) => Bytes::from(v),
            };
            typed(StatusCode::OK, assets::content_type(&rel), body)
        }
        None => text(StatusCode::NOT_FOUND, "Not found.\n"),
    }
}

fn header_str<'a>(req: &'a Parts, name: &str) -> Option<&'a str> {
    req.headers.get(name).and_then(|v| v.to_str().ok())
}

fn typed(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn text(status: StatusCode, body: &str) -> Resp {
    typed(status, "text/plain; charset=utf-8", body.to_string())
}

/// RethinkDB's error answers use the content type `application/text`.
fn app_text(status: StatusCode, body: &'static str) -> Resp {
    typed(status, "application/text", body)
}

fn octets(frame: Vec<u8>) -> Resp {
    typed(StatusCode::OK, "application/octet-stream", frame)
}

fn json(status: StatusCode, v: &serde_json::Value) -> Resp {
    typed(status, "application/json", v.to_string())
}

fn method_not_allowed(allow: &'static str) -> Resp {
    let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed.\n");
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

#[cfg(test)]
mod tests {
    use super::same_origin;

    #[test]
    fn cross_site_posts_are_told_apart() {
        assert!(same_origin(None, Some("127.0.0.1:8080")));
        assert!(same_origin(
            Some("http://127.0.0.1:8080"),
            Some("127.0.0.1:8080")
        ));
        assert!(same_origin(
            Some("https://Db.Example:8443/"),
            Some("db.example:8443")
        ));
        assert!(!same_origin(
            Some("http://evil.example"),
            Some("127.0.0.1:8080")
        ));
        assert!(!same_origin(
            Some("http://127.0.0.1:8081"),
            Some("127.0.0.1:8080")
        ));
        assert!(!same_origin(Some("null"), Some("127.0.0.1:8080")));
        assert!(!same_origin(Some("http://127.0.0.1:8080"), None));
        assert!(!same_origin(Some("http://"), Some("")));
    }
}
