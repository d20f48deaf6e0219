//! `r.format(template, params)` (term FORMAT = 197, from RethinkDB after 2.4.x):
//! replaces each `{name}` in the template with `params[name]`.
//!
//! Strings are inserted as they are; other values as their JSON text (as `r.http`'s URL
//! parameters print them: `1`, `true`, `[1,2]`). `{{` and `}}` stand for literal braces.
//! A name missing from the parameters, or an unclosed `{`, is an error. RethinkDB's
//! source for this later term was not available to compare the error texts with; the
//! wording is recorded as a possible difference in `docs/compatibility.md`.

use datum::Datum;

use crate::error::{logic, nonexist, Result, WithFrame};
use crate::eval::{expect_object, Ev};
use crate::value::Val;

/// FORMAT.
pub fn format(ev: &Ev) -> Result<Val> {
    let template = ev.string(0)?;
    let params = ev.datum(1)?;
    let obj = expect_object(&params).at(1)?;
    if params.is_ptype() {
        return Err(crate::eval::type_error("OBJECT", &params)).at(1);
    }
    let lookup = |name: &str| obj.get(name).cloned();
    render(&template, lookup).map(|s| Val::Datum(Datum::from(s)))
}

/// The template with every `{name}` replaced by `lookup(name)`.
pub fn render(template: &str, lookup: impl Fn(&str) -> Option<Datum>) -> Result<String> {
    let mut out = String::with_capacity(template.len());
    let mut chars = template.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' if chars.peek().is_some_and(|(_, n)| *n == '{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek().is_some_and(|(_, n)| *n == '}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let rest = template.get(i + 1..).unwrap_or("");
                let Some(end) = rest.find('}') else {
                    return Err(logic(format!(
                        "Unterminated `{{` in format string `{template}`."
                    )));
                };
                let name = rest.get(..end).unwrap_or("");
                let value = lookup(name)
                    .ok_or_else(|| nonexist(format!("Format parameter `{name}` not found.")))?;
                match &value {
                    Datum::String(s) => out.push_str(s),
                    other => out.push_str(&other.to_json_string()),
                }
                // Skip the name and the closing brace.
                for _ in 0..=name.chars().count() {
                    chars.next();
                }
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(t: &str) -> std::result::Result<String, String> {
        render(t, |k| match k {
            "a" => Some(Datum::from(1.0)),
            "b" => Some(Datum::from("two")),
            "c" => Some(Datum::array(vec![Datum::from(true)])),
            "ü" => Some(Datum::Null),
            _ => None,
        })
        .map_err(|e| e.message)
    }

    #[test]
    fn substitutes_and_escapes() {
        assert_eq!(fmt("{a} and {b}"), Ok("1 and two".into()));
        assert_eq!(fmt("{c}/{ü}!"), Ok("[true]/null!".into()));
        assert_eq!(fmt("{{a}} }}"), Ok("{a} }".into()));
        assert_eq!(fmt("plain"), Ok("plain".into()));
        assert_eq!(fmt(""), Ok("".into()));
        assert!(fmt("{zz}").is_err_and(|m| m.contains("`zz`")));
        assert!(fmt("x {a").is_err());
    }
}
