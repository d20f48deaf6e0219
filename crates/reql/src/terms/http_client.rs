//! The blocking HTTP exchange behind `r.http` (RethinkDB's `http_job.cc`, which uses
//! libcurl): URL parameters, form data, headers, basic and digest authentication,
//! retries, redirects, the overall timeout, cookies carried between pages, and the
//! conversion of the response (`result_format`) with RethinkDB's error texts.
//!
//! It runs on the evaluation pool's thread (never on an async worker), on `ureq` with
//! rustls, as a `reql::blocking` wait. Everything here is plain data in, `Outcome` out; `terms::http` turns an
//! error into the ReQL error.

use std::time::{Duration, Instant};

use datum::{Datum, Object};

/// The HTTP method (RethinkDB allows these six).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// GET (the default).
    Get,
    /// HEAD: success gives `null`.
    Head,
    /// POST: string data as is, object data form-encoded.
    Post,
    /// PUT: string data as is, other data as JSON.
    Put,
    /// PATCH, like PUT.
    Patch,
    /// DELETE, like PUT.
    Delete,
}

impl Method {
    /// The method's name as RethinkDB prints it in errors.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }
}

/// How the response body becomes a datum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// By the response's Content-Type.
    Auto,
    /// A string.
    Text,
    /// Parsed JSON.
    Json,
    /// Padded JSON (`fn(...)`).
    Jsonp,
    /// A BINARY pseudo-type.
    Binary,
}

/// The authentication scheme.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Basic` sent with the request.
    Basic(String, String),
    /// RFC 2617 digest, answered after the server's 401 challenge.
    Digest(String, String),
}

/// Everything one request needs (RethinkDB's `http_opts_t`).
#[derive(Clone, Debug)]
pub struct Opts {
    /// The URL as given (a scheme is added when missing, as curl does).
    pub url: String,
    /// The method.
    pub method: Method,
    /// URL parameters: an object of numbers, strings and nulls.
    pub params: Datum,
    /// Header lines `name: value`; a `None` value removes a default header.
    pub header: Vec<(String, Option<String>)>,
    /// The request body, if any.
    pub data: Option<Vec<u8>>,
    /// Form fields of a POST, url-encoded into the body.
    pub form: Vec<(String, String)>,
    /// Authentication.
    pub auth: Option<Auth>,
    /// The timeout of the whole exchange (all attempts), in milliseconds.
    pub timeout_ms: u64,
    /// How many times to try on errors that may be temporary.
    pub attempts: u64,
    /// The most redirects to follow.
    pub redirects: u32,
    /// Whether to verify TLS certificates.
    pub verify: bool,
    /// Refuse addresses that are not public (`http_addr`).
    pub public_only: bool,
    /// How to convert the body.
    pub format: Format,
    /// Cookies carried over from the previous page.
    pub cookies: Vec<(String, String)>,
}

impl Opts {
    /// RethinkDB's defaults: GET, 30 s, 5 attempts, 1 redirect, verify.
    pub fn new(url: String) -> Opts {
        Opts {
            url,
            method: Method::Get,
            params: Datum::object(Object::new()),
            header: Vec::new(),
            data: None,
            form: Vec::new(),
            auth: None,
            timeout_ms: 30_000,
            attempts: 5,
            redirects: 1,
            verify: true,
            public_only: false,
            format: Format::Auto,
            cookies: Vec::new(),
        }
    }
}

/// The result of one exchange (RethinkDB's `http_result_t`).
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The response headers (lower-cased names; `link` parsed), when a response came.
    pub header: Option<Datum>,
    /// The converted body, or the raw body with an error.
    pub body: Option<Datum>,
    /// Cookies the server set.
    pub cookies: Vec<(String, String)>,
    /// The failure, empty on success.
    pub error: String,
}

/// The largest response body read (RethinkDB has no limit but memory).
const MAX_BODY: u64 = 256 * 1024 * 1024;

/// The User-Agent sent by default.
fn user_agent() -> String {
    format!("RethinkDB/2.4.4 (Ponder {})", env!("CARGO_PKG_VERSION"))
}

/// `curl_easy_escape`: percent-encodes everything but ALPHA, DIGIT and `-._~`.
pub fn escape(s: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(s, SET).to_string()
}

/// A parameter value as RethinkDB prints it (`%.20g` for numbers, empty for null).
pub fn param_text(d: &Datum) -> Option<String> {
    match d {
        Datum::Number(n) => Some(format_g20(*n)),
        Datum::String(s) => Some(s.to_string()),
        Datum::Null => Some(String::new()),
        _ => None,
    }
}

/// C's `%.20g` (zero printed as `0` whatever its sign).
fn format_g20(n: f64) -> String {
    datum::keys::fmt_g20(if n == 0.0 { 0.0 } else { n })
}

/// `key=value&...` of url-encoded pairs.
fn encode_pairs<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    pairs
        .map(|(k, v)| format!("{}={}", escape(k), escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The URL with the parameters appended, as RethinkDB's `transfer_url_opt` does it.
pub fn full_url(url: &str, params: &Datum) -> String {
    let mut full = if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    };
    let pairs: Vec<(String, String)> = params
        .as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| param_text(v).map(|t| (k.to_string(), t)))
                .collect()
        })
        .unwrap_or_default();
    let encoded = encode_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if encoded.is_empty() {
        return full;
    }
    let params_pos = url.rfind('?');
    let slash_pos = url.rfind('/');
    if slash_pos.is_none() && params_pos.is_none() {
        full.push('/');
    }
    match (params_pos, slash_pos) {
        (None, _) => full.push('?'),
        (Some(p), Some(s)) if s > p => full.push('?'),
        (Some(p), Some(s)) if s < p => full.push('&'),
        _ => {}
    }
    full.push_str(&encoded);
    full
}

/// Why one attempt failed (curl's codes that RethinkDB tells apart).
enum Failure {
    /// Could not connect: retried.
    Connect,
    /// Failed while sending: retried.
    Send,
    /// Failed while receiving: retried.
    Recv,
    /// The overall timeout passed.
    Timeout,
    /// Anything else: reported at once with this text.
    Other(String),
}

/// A response as read off the wire.
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Performs the exchange: attempts, retries and the conversion of the body.
pub fn perform(opts: &Opts) -> Outcome {
    // Network time, not CPU: the evaluation pool may run another query meanwhile.
    let _waiting = crate::blocking::Waiting::begin();
    let mut out = Outcome::default();
    let deadline = Instant::now() + Duration::from_millis(opts.timeout_ms);
    let url = full_url(&opts.url, &opts.params);
    let mut last: Option<Result<Raw, Failure>> = None;
    for _ in 0..opts.attempts {
        let res = attempt(opts, &url, deadline);
        let retry = match &res {
            Err(Failure::Connect | Failure::Send | Failure::Recv) => true,
            Err(_) => false,
            Ok(raw) => matches!(raw.status, 408 | 500 | 502 | 503 | 504),
        };
        last = Some(res);
        if !retry || Instant::now() >= deadline {
            break;
        }
    }
    let raw = match last {
        None => {
            out.error = "could not perform, no attempts allowed".into();
            return out;
        }
        Some(Err(f)) => {
            out.error = match f {
                Failure::Connect => "could not connect to server".into(),
                Failure::Send => "error when sending data".into(),
                Failure::Recv => "error when receiving data".into(),
                Failure::Timeout => format!(
                    "timed out after {}.{:03} seconds",
                    opts.timeout_ms / 1000,
                    opts.timeout_ms % 1000
                ),
                Failure::Other(m) => m,
            };
            return out;
        }
        Some(Ok(raw)) => raw,
    };
    let header = match parse_header(&raw.headers) {
        Ok(h) => h,
        Err(e) => {
            out.error = e;
            return out;
        }
    };
    out.header = Some(header);
    if !(200..300).contains(&raw.status) {
        if !raw.body.is_empty() {
            out.body = Some(Datum::from(String::from_utf8_lossy(&raw.body).into_owned()));
        }
        out.error = format!("status code {}", raw.status);
        return out;
    }
    out.cookies = merge_cookies(&opts.cookies, &raw.headers);
    if opts.method == Method::Head {
        out.body = Some(Datum::Null);
        return out;
    }
    convert_body(opts.format, &raw, &mut out);
    out
}

/// Converts a successful response's body by `format`.
fn convert_body(format: Format, raw: &Raw, out: &mut Outcome) {
    let text = || Datum::from(String::from_utf8_lossy(&raw.body).into_owned());
    match format {
        Format::Text => out.body = Some(text()),
        Format::Binary => out.body = Some(datum::ptype::make_binary(&raw.body)),
        Format::Json => json_body(&raw.body, true, out),
        Format::Jsonp => jsonp_body(&raw.body, true, out),
        Format::Auto => {
            let ct = raw
                .headers
                .iter()
                .rev()
                .find(|(k, _)| k == "content-type")
                .map(|(_, v)| v.to_ascii_lowercase())
                .unwrap_or_default();
            if ct.starts_with("application/json") {
                json_body(&raw.body, true, out);
            } else if ct.starts_with("text/javascript")
                || ct.starts_with("application/json-p")
                || ct.starts_with("text/json-p")
            {
                json_body(&raw.body, false, out);
                if !out.error.is_empty() {
                    out.error.clear();
                    jsonp_body(&raw.body, false, out);
                    if !out.error.is_empty() {
                        out.error.clear();
                        out.body = Some(text());
                    }
                }
            } else if ct.starts_with("audio/")
                || ct.starts_with("image/")
                || ct.starts_with("video/")
                || ct.starts_with("application/octet-stream")
            {
                out.body = Some(datum::ptype::make_binary(&raw.body));
            } else {
                out.body = Some(text());
            }
        }
    }
}

fn json_body(body: &[u8], attach: bool, out: &mut Outcome) {
    match datum::from_json_slice(body) {
        Ok(d) => out.body = Some(d),
        Err(e) => {
            let empty = body.iter().all(u8::is_ascii_whitespace);
            out.error = format!(
                "failed to parse JSON response: {}",
                super::control::rapidjson_message(&e.0, empty)
            );
            if attach {
                out.body = Some(Datum::from(String::from_utf8_lossy(body).into_owned()));
            }
        }
    }
}

fn jsonp_body(body: &[u8], attach: bool, out: &mut Outcome) {
    let text = String::from_utf8_lossy(body);
    match jsonp_inner(&text) {
        Some(json) => json_body(json.as_bytes(), attach, out),
        None => {
            out.error = "failed to parse JSONP response".into();
            if attach {
                out.body = Some(Datum::from(text.into_owned()));
            }
        }
    }
}

/// The JSON inside `fn(...)`, `obj.fn(...)` or `obj["fn"](...)` (json-p.org's forms).
pub fn jsonp_inner(text: &str) -> Option<String> {
    const IDENT: &str = r"\s*[$_\p{Ll}\p{Lt}\p{Lu}\p{Lm}\p{Lo}\p{Nl}][$_\p{Ll}\p{Lt}\p{Lu}\p{Lm}\p{Lo}\p{Nl}\p{Mn}\p{Mc}\p{Nd}\p{Pc}]*\s*";
    const CALL: &str = r"\(((?s).*)\)";
    const END: &str = r"\s*;?\s*";
    let forms = [
        format!("^{IDENT}{CALL}{END}$"),
        format!(r"^{IDENT}\.{IDENT}{CALL}{END}$"),
        format!(r#"^{IDENT}\[\s*['"].*['"]\s*\]\s*{CALL}{END}$"#),
    ];
    forms.iter().find_map(|f| {
        regex::Regex::new(f)
            .ok()?
            .captures(text)?
            .get(1)
            .map(|m| m.as_str().to_string())
    })
}

/// The header object: lower-cased names, the last value of a repeated name, and `link`
/// parsed into `{param: url}` (RFC 5988).
fn parse_header(headers: &[(String, String)]) -> Result<Datum, String> {
    let mut fields = Object::new();
    let mut links = Object::new();
    for (k, v) in headers {
        if k == "link" {
            add_links(v, &mut links)?;
        } else {
            fields.insert(k.as_str().into(), Datum::from(v.as_str()));
        }
    }
    if !links.is_empty() {
        fields.insert("link".into(), Datum::object(links));
    }
    Ok(Datum::object(fields))
}

fn add_links(line: &str, links: &mut Object) -> Result<(), String> {
    let re = regex::Regex::new(r"^\s*<([^>]*)>\s*(?:;\s*([^,]+)\s*(?:,|$))")
        .map_err(|e| e.to_string())?;
    let mut rest = line;
    while let Some(c) = re.captures(rest) {
        let url = c.get(1).map_or("", |m| m.as_str());
        let param = c.get(2).map_or("", |m| m.as_str());
        links.insert(param.into(), Datum::from(url));
        let end = c.get(0).map_or(0, |m| m.end());
        if end == 0 {
            break;
        }
        rest = rest.get(end..).unwrap_or("");
    }
    if !rest.is_empty() {
        return Err(format!("failed to parse link header line: '{line}'"));
    }
    Ok(())
}

/// The cookies to send next: the old ones updated by this response's `Set-Cookie`s.
fn merge_cookies(old: &[(String, String)], headers: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = old.to_vec();
    for (k, v) in headers {
        if k != "set-cookie" {
            continue;
        }
        let pair = v.split(';').next().unwrap_or("");
        if let Some((name, value)) = pair.split_once('=') {
            let name = name.trim().to_string();
            out.retain(|(n, _)| *n != name);
            out.push((name, value.trim().to_string()));
        }
    }
    out
}

/// One try: the request, a digest challenge answered if needed, and the body read.
fn attempt(opts: &Opts, url: &str, deadline: Instant) -> Result<Raw, Failure> {
    let first = send(opts, url, deadline, None)?;
    if let (401, Some(Auth::Digest(user, pass))) = (first.status, &opts.auth) {
        let challenge = first
            .headers
            .iter()
            .find(|(k, v)| k == "www-authenticate" && v.trim_start().starts_with("Digest"))
            .map(|(_, v)| v.clone());
        if let Some(ch) = challenge {
            let answer = digest_answer(&ch, user, pass, opts.method.as_str(), url);
            return send(opts, url, deadline, Some(answer));
        }
    }
    Ok(first)
}

fn send(opts: &Opts, url: &str, deadline: Instant, authz: Option<String>) -> Result<Raw, Failure> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Failure::Timeout);
    }
    let tls = ureq::tls::TlsConfig::builder()
        .disable_verification(!opts.verify)
        .build();
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(left))
        .max_redirects(opts.redirects)
        .max_redirects_will_error(true)
        .tls_config(tls)
        .user_agent(user_agent())
        .build();
    let agent = if opts.public_only {
        ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::new(),
            super::http_addr::PublicOnly(Default::default()),
        )
    } else {
        ureq::Agent::new_with_config(config)
    };
    let method = match opts.method {
        Method::Get => ureq::http::Method::GET,
        Method::Head => ureq::http::Method::HEAD,
        Method::Post => ureq::http::Method::POST,
        Method::Put => ureq::http::Method::PUT,
        Method::Patch => ureq::http::Method::PATCH,
        Method::Delete => ureq::http::Method::DELETE,
    };
    let mut b = ureq::http::Request::builder().method(method).uri(url);
    let mut body = opts.data.clone();
    let mut headers: Vec<(String, Option<String>)> = Vec::new();
    if opts.method == Method::Post {
        if !opts.form.is_empty() {
            body = Some(
                encode_pairs(opts.form.iter().map(|(k, v)| (k.as_str(), v.as_str()))).into_bytes(),
            );
        }
        headers.push((
            "Content-Type".into(),
            Some("application/x-www-form-urlencoded".into()),
        ));
        body.get_or_insert_with(Vec::new);
    }
    if let Some(Auth::Basic(user, pass)) = &opts.auth {
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        headers.push(("Authorization".into(), Some(format!("Basic {token}"))));
    }
    if let Some(a) = authz {
        headers.push(("Authorization".into(), Some(a)));
    }
    if !opts.cookies.is_empty() {
        let c = opts
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        headers.push(("Cookie".into(), Some(c)));
    }
    for (k, v) in &opts.header {
        headers.retain(|(n, _)| !n.eq_ignore_ascii_case(k));
        headers.push((k.clone(), v.clone()));
    }
    for (k, v) in &headers {
        match v {
            Some(v) => b = b.header(k.as_str(), v.as_str()),
            None if k.eq_ignore_ascii_case("user-agent") => b = b.header(k.as_str(), ""),
            None => {}
        }
    }
    let result = match body {
        Some(bytes) => b
            .body(bytes)
            .map_err(|e| Failure::Other(bad_url(&e.to_string())))
            .and_then(|req| agent.run(req).map_err(failure)),
        None => b
            .body(())
            .map_err(|e| Failure::Other(bad_url(&e.to_string())))
            .and_then(|req| agent.run(req).map_err(failure)),
    };
    let mut resp = result?;
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let buf = resp
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_vec()
        .map_err(failure)?;
    Ok(Raw {
        status,
        headers,
        body: buf,
    })
}

fn bad_url(_detail: &str) -> String {
    "URL using bad/illegal format or missing URL".into()
}

/// Maps ureq's error onto curl's classes (and its texts, which RethinkDB reports).
fn failure(e: ureq::Error) -> Failure {
    use std::io::ErrorKind as K;
    match e {
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::ConnectionFailed => Failure::Connect,
        ureq::Error::Io(io) if io.kind() == K::PermissionDenied => {
            Failure::Other(super::http_addr::REFUSED.into())
        }
        ureq::Error::Io(io) => match io.kind() {
            K::ConnectionRefused | K::AddrNotAvailable | K::NotConnected => Failure::Connect,
            K::TimedOut => Failure::Timeout,
            K::BrokenPipe | K::WriteZero => Failure::Send,
            _ => Failure::Recv,
        },
        ureq::Error::HostNotFound => Failure::Other("Couldn't resolve host name".into()),
        ureq::Error::TooManyRedirects => {
            Failure::Other("Number of redirects hit maximum amount".into())
        }
        ureq::Error::BadUri(_) | ureq::Error::Http(_) => {
            Failure::Other("URL using bad/illegal format or missing URL".into())
        }
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => {
            Failure::Other("SSL peer certificate or SSH remote key was not OK".into())
        }
        ureq::Error::BodyExceedsLimit(_) => Failure::Other("response body too large".into()),
        ureq::Error::Protocol(p) => Failure::Other(format!("protocol error: {p}")),
        other => Failure::Other(other.to_string()),
    }
}

/// The `Authorization: Digest` answer to a challenge (RFC 2617, MD5, qop `auth`).
pub fn digest_answer(challenge: &str, user: &str, pass: &str, method: &str, url: &str) -> String {
    let fields = digest_fields(challenge.trim_start().trim_start_matches("Digest"));
    let get = |k: &str| {
        fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    };
    let realm = get("realm");
    let nonce = get("nonce");
    let opaque = get("opaque");
    let qop = get("qop");
    let uri = uri_path(url);
    let ha1 = md5_hex(&format!("{user}:{realm}:{pass}"));
    let ha2 = md5_hex(&format!("{method}:{uri}"));
    let cnonce = format!("{:016x}", rand::random::<u64>());
    let nc = "00000001";
    let use_qop = qop.split(',').any(|q| q.trim() == "auth");
    let response = if use_qop {
        md5_hex(&format!("{ha1}:{nonce}:{nc}:{cnonce}:auth:{ha2}"))
    } else {
        md5_hex(&format!("{ha1}:{nonce}:{ha2}"))
    };
    let mut out = format!(
        "Digest username=\"{user}\", realm=\"{realm}\", nonce=\"{nonce}\", uri=\"{uri}\", response=\"{response}\""
    );
    if use_qop {
        out.push_str(&format!(", qop=auth, nc={nc}, cnonce=\"{cnonce}\""));
    }
    if !opaque.is_empty() {
        out.push_str(&format!(", opaque=\"{opaque}\""));
    }
    out.push_str(", algorithm=MD5");
    out
}

/// `k=v, k="v"` pairs of a challenge.
fn digest_fields(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let Some((k, after)) = rest.split_once('=') else {
            break;
        };
        let key = k.trim().trim_start_matches(',').trim().to_string();
        let after = after.trim_start();
        let (val, next) = if let Some(q) = after.strip_prefix('"') {
            match q.find('"') {
                Some(end) => (q.get(..end).unwrap_or(""), q.get(end + 1..).unwrap_or("")),
                None => (q, ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (
                    after.get(..end).unwrap_or(""),
                    after.get(end..).unwrap_or(""),
                ),
                None => (after, ""),
            }
        };
        out.push((key, val.trim().to_string()));
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

/// The path and query of a URL (the `uri` of a digest answer).
fn uri_path(url: &str) -> String {
    let after_scheme = url.split_once("://").map_or(url, |(_, r)| r);
    match after_scheme.find('/') {
        Some(i) => after_scheme.get(i..).unwrap_or("/").to_string(),
        None => "/".into(),
    }
}

fn md5_hex(s: &str) -> String {
    use md5::Digest as _;
    let d = md5::Md5::digest(s.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_get_parameters_like_rethinkdb() {
        let p = Datum::object(
            [
                ("a".into(), Datum::from(1.0)),
                ("b c".into(), Datum::from("x&y")),
            ]
            .into_iter()
            .collect(),
        );
        assert_eq!(
            full_url("example.org", &p),
            "http://example.org/?a=1&b%20c=x%26y"
        );
        assert_eq!(full_url("http://h/p", &p), "http://h/p?a=1&b%20c=x%26y");
        assert_eq!(
            full_url("http://h/p?x=0", &p),
            "http://h/p?x=0&a=1&b%20c=x%26y"
        );
        let empty = Datum::object(Object::new());
        assert_eq!(full_url("http://h/p", &empty), "http://h/p");
    }

    #[test]
    fn numbers_print_as_percent_20g() {
        assert_eq!(format_g20(1.0), "1");
        assert_eq!(format_g20(1.5), "1.5");
        assert_eq!(format_g20(0.1), "0.10000000000000000555");
        assert_eq!(format_g20(-3.0), "-3");
        assert_eq!(format_g20(1e25), "1.0000000000000000906e+25");
    }

    #[test]
    fn jsonp_forms() {
        assert_eq!(jsonp_inner("cb({\"a\":1});").as_deref(), Some("{\"a\":1}"));
        assert_eq!(jsonp_inner(" o.cb ( [1] ) ").as_deref(), Some(" [1] "));
        assert_eq!(jsonp_inner("o[\"f-n\"](2)").as_deref(), Some("2"));
        assert_eq!(jsonp_inner("1(2)"), None);
    }

    #[test]
    fn link_headers_parse() {
        let h = vec![(
            "link".to_string(),
            "<http://a/2>; rel=\"next\", <http://a/9>; rel=\"last\"".to_string(),
        )];
        let d = parse_header(&h).unwrap_or(Datum::Null);
        let link = d.get("link").cloned().unwrap_or(Datum::Null);
        assert_eq!(
            link.get("rel=\"next\"").and_then(Datum::as_str),
            Some("http://a/2")
        );
        assert_eq!(
            link.get("rel=\"last\"").and_then(Datum::as_str),
            Some("http://a/9")
        );
        let bad = vec![("link".to_string(), "nonsense".to_string())];
        assert!(parse_header(&bad).is_err());
    }

    #[test]
    fn digest_challenges_parse() {
        let f = digest_fields(r#" realm="r", nonce="abc", qop="auth,auth-int", opaque="o""#);
        assert_eq!(f.len(), 4);
        let a = digest_answer(
            r#"Digest realm="r", nonce="n""#,
            "u",
            "p",
            "GET",
            "http://h/x?y",
        );
        assert!(a.contains("uri=\"/x?y\""));
        assert!(a.contains(&md5_hex(&format!(
            "{}:n:{}",
            md5_hex("u:r:p"),
            md5_hex("GET:/x?y")
        ))));
    }
}
