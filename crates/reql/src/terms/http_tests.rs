//! `r.http` against a tiny HTTP/1.1 server on 127.0.0.1 (a `TcpListener` thread that
//! answers each request by a route function): never the internet.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use datum::Datum;

use crate::ctx::QueryCtx;
use crate::eval::to_datum;
use crate::value::{Env, Val};

/// One parsed request.
struct Req {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Req {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A response: status, extra header lines, body.
type Resp = (u16, Vec<String>, Vec<u8>);

/// Serves `route` on a fresh port; returns `http://127.0.0.1:port` and the hit counter.
fn serve(route: fn(&Req, usize) -> Resp) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap_or("").to_string();
            let path = parts.next().unwrap_or("").to_string();
            let mut headers = Vec::new();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    headers.push((k.trim().to_string(), v.trim().to_string()));
                }
            }
            let len = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.parse::<usize>().ok())
                .unwrap_or(0);
            let mut body = vec![0; len];
            let _ = reader.read_exact(&mut body);
            let req = Req {
                method,
                path,
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            };
            let (status, extra, body) = route(&req, n);
            let mut out = format!("HTTP/1.1 {status} X\r\nConnection: close\r\n");
            for h in extra {
                out.push_str(&h);
                out.push_str("\r\n");
            }
            out.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
            let _ = stream.write_all(out.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    (format!("http://127.0.0.1:{}", addr.port()), hits)
}

fn run(json: &str, connect: bool) -> std::result::Result<String, String> {
    let j: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let term = crate::term::compile_term(&j).map_err(|e| e.message)?;
    let ctx = Arc::new(QueryCtx::new(
        Arc::new(crate::access::NoTables {
            message: "no tables",
            connect,
        }),
        "test".into(),
        0.0,
    ));
    let v = crate::eval::eval(&ctx, &Env::default(), &term).map_err(|e| e.message)?;
    let v = match v {
        Val::Seq(s) => Val::Datum(Datum::array(s.collect(1000).map_err(|e| e.message)?)),
        v => v,
    };
    to_datum(&ctx, v)
        .map(|d| d.to_json_string())
        .map_err(|e| e.message)
}

/// `r.http(url, opts)` as a JSON term.
fn http(url: &str, opts: &str) -> std::result::Result<String, String> {
    run(&format!(r#"[153, ["{url}"], {opts}]"#), true)
}

fn echo(req: &Req, _: usize) -> Resp {
    let body = serde_json::json!({
        "method": req.method,
        "path": req.path,
        "body": req.body,
        "ctype": req.header("content-type"),
        "x": req.header("x-test"),
        "auth": req.header("authorization"),
    });
    (
        200,
        vec!["Content-Type: application/json".into()],
        body.to_string().into_bytes(),
    )
}

#[test]
fn get_json_text_binary() {
    let (base, _) = serve(echo);
    let got = http(&format!("{base}/a"), "{}").expect("get");
    assert!(
        got.contains(r#""method":"GET""#) && got.contains(r#""path":"/a""#),
        "{got}"
    );
    let text = http(&format!("{base}/a"), r#"{"result_format": "text"}"#).expect("text");
    assert!(text.starts_with('"'), "{text}");
    let bin = http(&format!("{base}/a"), r#"{"result_format": "binary"}"#).expect("binary");
    assert!(bin.contains(r#""$reql_type$":"BINARY""#), "{bin}");
    let head = http(&format!("{base}/a"), r#"{"method": "HEAD"}"#).expect("head");
    assert_eq!(head, "null");
}

#[test]
fn params_headers_data_auth() {
    let (base, _) = serve(echo);
    let got = http(
        &format!("{base}/p"),
        r#"{"params": {"a": 1, "b": "x y"}, "header": {"X-Test": "yes"}}"#,
    )
    .expect("params");
    assert!(got.contains(r#""path":"/p?a=1&b=x%20y""#), "{got}");
    assert!(got.contains(r#""x":"yes""#), "{got}");
    let post = http(
        &format!("{base}/f"),
        r#"{"method": "POST", "data": {"k": "v", "n": 2}}"#,
    )
    .expect("post");
    assert!(post.contains(r#""body":"k=v&n=2""#), "{post}");
    assert!(post.contains("application/x-www-form-urlencoded"), "{post}");
    let put = http(
        &format!("{base}/j"),
        r#"{"method": "PUT", "data": {"a": [1]}}"#,
    )
    .expect("put");
    assert!(put.contains(r#""ctype":"application/json""#), "{put}");
    assert!(put.contains(r#"\"a\""#), "{put}");
    let auth = http(
        &format!("{base}/s"),
        r#"{"auth": {"user": "u", "pass": "p"}}"#,
    )
    .expect("auth");
    assert!(auth.contains("Basic dTpw"), "{auth}");
}

#[test]
fn option_errors() {
    let url = "http://127.0.0.1:9/";
    assert_eq!(
        http(url, r#"{"method": "GET", "data": "x"}"#),
        Err("`data` should only be specified on a PUT, POST, PATCH, or DELETE request.  If you want URL parameters, use `params` instead.".into())
    );
    assert_eq!(
        http(url, r#"{"method": "FOO"}"#),
        Err("`method` (FOO) is not recognized (GET, HEAD, POST, PUT, PATCH and DELETE are allowed).".into())
    );
    assert_eq!(
        http(url, r#"{"timeout": -1}"#),
        Err("`timeout` may not be negative.".into())
    );
    assert_eq!(
        http(url, r#"{"page": "link-next"}"#),
        Err("Cannot use `page` without specifying `page_limit` (a positive number performs that many requests, -1 is unlimited).".into())
    );
    assert_eq!(
        http(url, r#"{"page": "foo", "page_limit": 1}"#),
        Err("`page` method 'foo' not recognized, only 'link-next' is available.".into())
    );
    assert_eq!(
        http(url, r#"{"auth": {"type": "x", "user": "u", "pass": "p"}}"#),
        Err("`auth.type` is not recognized ('basic', and 'digest' are allowed).".into())
    );
    assert_eq!(
        http(url, r#"{"header": {"a": "b\nc"}}"#),
        Err("A `header` item contains newline characters.".into())
    );
    assert!(http(url, r#"{"params": {"a": {"b": 1}}}"#)
        .is_err_and(|m| m
            .starts_with("Expected `params.a` to be a NUMBER, STRING or NULL, but found OBJECT:")));
    assert_eq!(
        http(url, r#"{"attempts": 0}"#),
        Err(
            "Error in HTTP GET of `http://127.0.0.1:9/`: could not perform, no attempts allowed."
                .into()
        )
    );
}

#[test]
fn needs_connect_permission() {
    let r = run(r#"[153, ["http://127.0.0.1:9/"]]"#, false);
    assert!(r.is_err_and(|m| m.contains("connect")));
}

fn flaky(_: &Req, n: usize) -> Resp {
    if n < 2 {
        (503, vec![], b"busy".to_vec())
    } else {
        (200, vec!["Content-Type: text/plain".into()], b"ok".to_vec())
    }
}

#[test]
fn attempts_retry_temporary_errors() {
    let (base, hits) = serve(flaky);
    assert_eq!(http(&base, r#"{"attempts": 3}"#), Ok("\"ok\"".into()));
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    let (base, _) = serve(flaky);
    let err = http(&base, r#"{"attempts": 1}"#).expect_err("503");
    assert!(err.contains(": status code 503."), "{err}");
    assert!(err.contains("\nbody:\n\"busy\""), "{err}");
}

fn redirecting(req: &Req, _: usize) -> Resp {
    match req.path.as_str() {
        "/r2" => (302, vec!["Location: /r1".into()], vec![]),
        "/r1" => (302, vec!["Location: /end".into()], vec![]),
        _ => (
            200,
            vec!["Content-Type: text/plain".into()],
            b"end".to_vec(),
        ),
    }
}

#[test]
fn redirects() {
    let (base, _) = serve(redirecting);
    assert_eq!(http(&format!("{base}/r1"), "{}"), Ok("\"end\"".into()));
    assert_eq!(
        http(&format!("{base}/r2"), r#"{"redirects": 2}"#),
        Ok("\"end\"".into())
    );
    let err = http(&format!("{base}/r2"), "{}").expect_err("too many");
    assert!(
        err.contains("Number of redirects hit maximum amount"),
        "{err}"
    );
    let err = http(&format!("{base}/r1"), r#"{"redirects": 0}"#).expect_err("3xx");
    assert!(err.contains("status code 302"), "{err}");
}

fn slow(_: &Req, _: usize) -> Resp {
    std::thread::sleep(std::time::Duration::from_millis(1500));
    (200, vec![], b"late".to_vec())
}

#[test]
fn timeout() {
    let (base, _) = serve(slow);
    let err = http(&base, r#"{"timeout": 0.2}"#).expect_err("timeout");
    assert!(err.ends_with(": timed out after 0.200 seconds."), "{err}");
}

fn paged(req: &Req, _: usize) -> Resp {
    let page: u32 = req
        .path
        .split("page=")
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(1);
    let mut headers = vec!["Content-Type: application/json".to_string()];
    if page < 3 {
        let host = req.header("host").unwrap_or("");
        headers.push(format!(
            "Link: <http://{host}/list?page={}>; rel=\"next\", <http://{host}/list?page=3>; rel=\"last\"",
            page + 1
        ));
    }
    let body = format!("[{}, {}]", page * 10, page * 10 + 1);
    (200, headers, body.into_bytes())
}

#[test]
fn pagination() {
    let (base, _) = serve(paged);
    let all = http(
        &format!("{base}/list"),
        r#"{"page": "link-next", "page_limit": -1}"#,
    );
    assert_eq!(all, Ok("[10,11,20,21,30,31]".into()));
    // With a page function that builds absolute URLs from params.
    let f = r#"[69, [[2, [1]], [3, [], {"params": [3, [], {"page": [24, [[31, [[31, [[10, [1]], "params"]], "page"]], 1]]}]}]]]"#;
    let got = http(
        &format!("{base}/list"),
        &format!(r#"{{"params": {{"page": 1}}, "page": {f}, "page_limit": 3}}"#),
    );
    assert_eq!(got, Ok("[10,11,20,21,30,31]".into()));
    let got = http(
        &format!("{base}/list"),
        &format!(r#"{{"params": {{"page": 1}}, "page": {f}, "page_limit": 0}}"#),
    );
    assert_eq!(got, Ok("[]".into()));
    let got = http(
        &format!("{base}/list"),
        r#"{"page": "link-next", "page_limit": 1}"#,
    );
    assert_eq!(got, Ok("[10,11]".into()));
}
