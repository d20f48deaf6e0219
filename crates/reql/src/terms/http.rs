//! `r.http(url, {...})`: reads the options with RethinkDB's checks and error texts
//! (`rdb_protocol/terms/http.cc`), then performs the request (`terms::http_client`).
//!
//! Without `page` the result is the converted body. With `page` (a function, or the
//! shortcut `'link-next'`) and `page_limit`, the result is a lazy stream of every page's
//! items, fetched one page per batch: the page function receives
//! `{params, header, body}` of the last request and returns the next URL, an object
//! with `url` and/or `params`, or null to stop.
//!
//! The user needs the `connect` permission. `r.http` is never deterministic
//! (`write::is_deterministic` and the index function checks list it).

use std::collections::VecDeque;
use std::sync::Arc;

use datum::{Datum, Object};

use super::http_client::{self as client, Auth, Format, Method, Opts, Outcome};
use crate::ctx::QueryCtx;
use crate::error::{logic, ReqlError, Result, WithFrame};
use crate::eval::{expect_int, expect_num, expect_str, Ev};
use crate::value::{Sequence, Val};

/// The longest timeout RethinkDB accepts (30 days), in milliseconds.
const MAX_TIMEOUT_MS: f64 = 2_592_000_000.0;

/// HTTP: one request, or a depaginated stream.
pub fn http(ev: &Ev) -> Result<Val> {
    let network = ev.ctx.access.network()?;
    let url = ev.string(0)?;
    let mut opts = Opts::new(url);
    opts.public_only = network == crate::access::NetworkPolicy::PublicOnly;
    read_optargs(ev, &mut opts)?;
    let (page, limit) = page_and_limit(ev)?;
    match page {
        None => {
            let res = client::perform(&opts);
            let body = check(&res, &opts)?;
            Ok(Val::Datum(body))
        }
        Some(page) => Ok(Val::Seq(Sequence::stream(Box::new(Pages {
            ctx: ev.ctx.clone(),
            opts,
            page,
            limit,
            more: limit != 0,
            buf: VecDeque::new(),
        })))),
    }
}

/// The body of a successful outcome, or RethinkDB's non-existence error (so that
/// `default` can catch failures of the remote side).
fn check(res: &Outcome, opts: &Opts) -> Result<Datum> {
    if res.error.is_empty() {
        return Ok(res.body.clone().unwrap_or(Datum::Null));
    }
    let mut msg = format!(
        "Error in HTTP {} of `{}`: {}.",
        opts.method.as_str(),
        opts.url,
        res.error
    );
    if let Some(h) = &res.header {
        msg.push_str("\nheader:\n");
        msg.push_str(&h.to_pretty_string());
    }
    if let Some(b) = &res.body {
        msg.push_str("\nbody:\n");
        msg.push_str(&b.to_pretty_string());
    }
    Err(crate::error::nonexist(msg))
}

/// The optargs in RethinkDB's order (`data` before `header`, which may override the
/// Content-Type that `data` sets).
fn read_optargs(ev: &Ev, opts: &mut Opts) -> Result<()> {
    opts.auth = auth(ev)?;
    if let Some(d) = ev.opt_datum("method")? {
        let m = expect_str(&d).at_opt("method")?;
        opts.method = match m {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "PATCH" => Method::Patch,
            "DELETE" => Method::Delete,
            other => {
                return Err(logic(format!(
                    "`method` ({other}) is not recognized (GET, HEAD, POST, PUT, PATCH and DELETE are allowed)."
                )))
                .at_opt("method")
            }
        };
    }
    data(ev, opts)?;
    if let Some(d) = ev.opt_datum("result_format")? {
        let f = expect_str(&d).at_opt("result_format")?;
        opts.format = match f {
            "auto" => Format::Auto,
            "json" => Format::Json,
            "jsonp" => Format::Jsonp,
            "text" => Format::Text,
            "binary" => Format::Binary,
            other => {
                return Err(logic(format!(
                    "`result_format` ({other}) is not recognized, ('auto', 'json', 'jsonp', 'text', and 'binary' are allowed)."
                )))
                .at_opt("result_format")
            }
        };
    }
    if let Some(d) = ev.opt_datum("params")? {
        check_params(&d).at_opt("params")?;
        opts.params = d;
    }
    header(ev, opts)?;
    if let Some(d) = ev.opt_datum("timeout")? {
        let ms = expect_num(&d).at_opt("timeout")? * 1000.0;
        if ms < 0.0 {
            return Err(logic("`timeout` may not be negative.")).at_opt("timeout");
        }
        opts.timeout_ms = ms.min(MAX_TIMEOUT_MS) as u64;
    }
    if let Some(d) = ev.opt_datum("attempts")? {
        opts.attempts = unsigned(&d, u64::MAX).at_opt("attempts")?;
    }
    if let Some(d) = ev.opt_datum("redirects")? {
        let n = unsigned(&d, u64::from(u32::MAX)).at_opt("redirects")?;
        opts.redirects = u32::try_from(n).unwrap_or(u32::MAX);
    }
    opts.verify = ev.opt_bool("verify", true)?;
    Ok(())
}

/// A non-negative integer no larger than `max`.
fn unsigned(d: &Datum, max: u64) -> Result<u64> {
    let n = expect_int(d)?;
    if n < 0 {
        return Err(logic(format!("Integer too small: {n}")));
    }
    let n = n.unsigned_abs();
    if n > max {
        return Err(logic(format!("Integer too large: {n}")));
    }
    Ok(n)
}

/// `auth`: `{type: 'basic'|'digest', user, pass}` (type defaults to basic).
fn auth(ev: &Ev) -> Result<Option<Auth>> {
    let Some(d) = ev.opt_datum("auth")? else {
        return Ok(None);
    };
    fn fail<T>(m: String) -> Result<T> {
        Err(logic(m)).at_opt("auth")
    }
    if d.as_object().is_none() || d.is_ptype() {
        return fail(format!(
            "Expected `auth` to be an OBJECT, but found {}.",
            d.type_name()
        ));
    }
    let kind = match d.get("type") {
        None => "basic".to_string(),
        Some(Datum::String(s)) => s.to_string(),
        // RethinkDB names the type of the whole auth object here.
        Some(_) => {
            return fail(format!(
                "Expected `auth.type` to be a STRING, but found {}.",
                d.type_name()
            ))
        }
    };
    let item = |name: &str| -> Result<String> {
        match d.get(name) {
            None => fail(format!("`auth.{name}` not found in the auth object.")),
            Some(Datum::String(s)) => Ok(s.to_string()),
            Some(other) => fail(format!(
                "Expected `auth.{name}` to be a STRING, but found {}.",
                other.type_name()
            )),
        }
    };
    let user = item("user")?;
    let pass = item("pass")?;
    match kind.as_str() {
        "basic" => Ok(Some(Auth::Basic(user, pass))),
        "digest" => Ok(Some(Auth::Digest(user, pass))),
        _ => fail("`auth.type` is not recognized ('basic', and 'digest' are allowed).".into()),
    }
}

/// `data`: JSON (or a raw string) for PUT/PATCH/DELETE, a string or form fields for
/// POST, refused for GET and HEAD.
fn data(ev: &Ev, opts: &mut Opts) -> Result<()> {
    let Some(d) = ev.opt_datum("data")? else {
        return Ok(());
    };
    match opts.method {
        Method::Put | Method::Patch | Method::Delete => match &d {
            Datum::String(s) => opts.data = Some(s.as_bytes().to_vec()),
            _ => {
                opts.header
                    .push(("Content-Type".into(), Some("application/json".into())));
                opts.data = Some(d.to_json_string().into_bytes());
            }
        },
        Method::Post => match &d {
            Datum::String(s) => opts.data = Some(s.as_bytes().to_vec()),
            Datum::Object(o) if !d.is_ptype() => {
                for (k, v) in o.iter() {
                    let text = client::param_text(v).ok_or_else(|| {
                        logic(format!(
                            "Expected `data.{k}` to be a NUMBER, STRING or NULL, but found {}.",
                            v.type_name()
                        ))
                        .with_frame(crate::error::Frame::Opt("data".into()))
                    })?;
                    opts.form.push((k.to_string(), text));
                }
            }
            other => {
                return Err(logic(format!(
                    "Expected `data` to be a STRING or OBJECT, but found {}.",
                    other.type_name()
                )))
                .at_opt("data")
            }
        },
        Method::Get | Method::Head => {
            return Err(logic(
                "`data` should only be specified on a PUT, POST, PATCH, or DELETE request.  If you want URL parameters, use `params` instead.",
            ))
        }
    }
    Ok(())
}

/// RethinkDB's `check_url_params`: an object of numbers, strings and nulls.
pub fn check_params(d: &Datum) -> Result<()> {
    match d {
        Datum::Object(o) if !d.is_ptype() => {
            for (k, v) in o.iter() {
                if client::param_text(v).is_none() {
                    return Err(logic(format!(
                        "Expected `params.{k}` to be a NUMBER, STRING or NULL, but found {}:\n{}",
                        v.type_name(),
                        v.to_pretty_string()
                    )));
                }
            }
            Ok(())
        }
        other => Err(logic(format!(
            "Expected `params` to be an OBJECT, but found {}:\n{}",
            other.type_name(),
            other.to_pretty_string()
        ))),
    }
}

/// `header`: an object of strings (or null, which drops a default header) or an array
/// of `Name: value` lines; no line may contain a newline.
fn header(ev: &Ev, opts: &mut Opts) -> Result<()> {
    let Some(d) = ev.opt_datum("header")? else {
        return Ok(());
    };
    let fail = |m: String| Err(logic(m)).at_opt("header");
    let newline = |s: &str| s.contains(['\r', '\n']);
    match &d {
        Datum::Object(o) if !d.is_ptype() => {
            for (k, v) in o.iter() {
                match v {
                    Datum::String(s) => {
                        if newline(k) || newline(s) {
                            return fail("A `header` item contains newline characters.".into());
                        }
                        opts.header.push((k.to_string(), Some(s.to_string())));
                    }
                    Datum::Null => opts.header.push((k.to_string(), None)),
                    other => {
                        return fail(format!(
                            "Expected `header.{k}` to be a STRING or NULL, but found {}.",
                            other.type_name()
                        ))
                    }
                }
            }
        }
        Datum::Array(items) => {
            for (i, line) in items.iter().enumerate() {
                let Datum::String(s) = line else {
                    return fail(format!(
                        "Expected `header[{i}]` to be a STRING, but found {}.",
                        line.type_name()
                    ));
                };
                if newline(s) {
                    return fail("A `header` item contains newline characters.".into());
                }
                let (name, value) = s.split_once(':').unwrap_or((s, ""));
                opts.header
                    .push((name.trim().to_string(), Some(value.trim().to_string())));
            }
        }
        other => {
            return fail(format!(
                "Expected `header` to be an ARRAY or OBJECT, but found {}.",
                other.type_name()
            ))
        }
    }
    Ok(())
}

/// How the next page is found.
enum Page {
    /// A ReQL function of `{params, header, body}`.
    Func(Val),
    /// `'link-next'`: the `rel="next"` entry of the Link header.
    LinkNext,
}

/// `page` and `page_limit` (RethinkDB's `get_page_and_limit`).
fn page_and_limit(ev: &Ev) -> Result<(Option<Page>, i64)> {
    let page = ev.opt("page")?;
    let limit = ev.opt_datum("page_limit")?;
    let Some(page) = page else {
        return Ok((None, 0));
    };
    let Some(limit) = limit else {
        return Err(logic(
            "Cannot use `page` without specifying `page_limit` (a positive number performs that many requests, -1 is unlimited).",
        ))
        .at_opt("page");
    };
    let page = match page {
        Val::Func(f) => Page::Func(Val::Func(f)),
        other => match ev.to_datum(other).at_opt("page")? {
            Datum::Null => return Ok((None, 0)),
            Datum::String(s) if &*s == "link-next" => Page::LinkNext,
            Datum::String(s) => {
                return Err(logic(format!(
                    "`page` method '{s}' not recognized, only 'link-next' is available."
                )))
                .at_opt("page")
            }
            other => {
                return Err(crate::eval::type_error("STRING", &other)).at_opt("page");
            }
        },
    };
    let n = expect_int(&limit).at_opt("page_limit")?;
    if n < -1 {
        return Err(logic("`page_limit` should be greater than or equal to -1."))
            .at_opt("page_limit");
    }
    Ok((Some(page), n))
}

/// The depaginated stream: one request per page, fetched when the buffer runs dry.
struct Pages {
    ctx: Arc<QueryCtx>,
    opts: Opts,
    page: Page,
    /// Requests left (-1: unlimited).
    limit: i64,
    more: bool,
    buf: VecDeque<Datum>,
}

impl Iterator for Pages {
    type Item = Result<Datum>;

    fn next(&mut self) -> Option<Result<Datum>> {
        loop {
            if let Some(d) = self.buf.pop_front() {
                return Some(Ok(d));
            }
            if !self.more {
                return None;
            }
            if self.ctx.cancel.load(std::sync::atomic::Ordering::Relaxed) {
                self.more = false;
                return Some(Err(crate::error::op_failed(
                    "Query interrupted: the client disconnected.",
                )));
            }
            match self.next_page() {
                Ok(items) => self.buf.extend(items),
                Err(e) => {
                    self.more = false;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl Pages {
    /// Fetches one page and works out the next request.
    fn next_page(&mut self) -> Result<Vec<Datum>> {
        let res = client::perform(&self.opts);
        let body = check(&res, &self.opts)?;
        self.more = self.depaginate(&res, &body)?;
        Ok(match body {
            Datum::Array(items) => items.iter().cloned().collect(),
            other => vec![other],
        })
    }

    /// True when another request should be made.
    fn depaginate(&mut self, res: &Outcome, body: &Datum) -> Result<bool> {
        if self.limit > 0 {
            self.limit -= 1;
        }
        if self.limit == 0 {
            return Ok(false);
        }
        self.opts.cookies = res.cookies.clone();
        let header = res
            .header
            .clone()
            .unwrap_or_else(|| Datum::object(Object::new()));
        let arg = Datum::from_pairs([
            ("params", self.opts.params.clone()),
            ("header", header),
            ("body", body.clone()),
        ]);
        self.apply_page(&arg).map_err(|e| {
            ReqlError::new(
                e.kind,
                format!(
                    "Error in HTTP {} of `{}`: {}.\nError occurred during `page` called with:\n{}\n",
                    self.opts.method.as_str(),
                    self.opts.url,
                    e.message,
                    arg.to_pretty_string()
                ),
            )
        })
    }

    fn apply_page(&mut self, arg: &Datum) -> Result<bool> {
        let next = match &self.page {
            Page::LinkNext => arg
                .get("header")
                .and_then(|h| h.get("link"))
                .and_then(|l| l.get("rel=\"next\""))
                .cloned()
                .unwrap_or(Datum::Null),
            Page::Func(f) => {
                let v = crate::eval::call(&self.ctx, f, vec![arg.clone()])?;
                crate::eval::to_datum(&self.ctx, v)?
            }
        };
        match &next {
            Datum::Null | Datum::String(_) => self.apply_url(&next),
            Datum::Object(_) if !next.is_ptype() => {
                let url = next.get("url");
                let params = next.get("params");
                if url.is_none() && params.is_none() {
                    return Err(logic(
                        "OBJECT returned by `page` must contain `url` and/or `params` fields.",
                    ));
                }
                if let Some(p) = params {
                    check_params(p)?;
                    let mut merged = self.opts.params.as_object().cloned().unwrap_or_default();
                    if let Some(o) = p.as_object() {
                        for (k, v) in o.iter() {
                            merged.insert(k.clone(), v.clone());
                        }
                    }
                    self.opts.params = Datum::object(merged);
                }
                match url {
                    Some(u) => self.apply_url(u),
                    None => Ok(true),
                }
            }
            other => Err(logic(format!(
                "Expected `page` to return an OBJECT, but found {}.",
                other.type_name()
            ))),
        }
    }

    fn apply_url(&mut self, url: &Datum) -> Result<bool> {
        match url {
            Datum::Null => Ok(false),
            Datum::String(s) => {
                self.opts.url = s.to_string();
                Ok(true)
            }
            other => Err(logic(format!(
                "Expected `url` in OBJECT returned by `page` to be a STRING or NULL, but found {}.",
                other.type_name()
            ))),
        }
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
