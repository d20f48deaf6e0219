//! Target `query`: query parsing (`proto::query::parse_query`) and term compilation
//! (`reql::compile_term`) of arbitrary payloads.
//!
//! Checked: neither panics; a parse error's `CLIENT_ERROR` response is valid JSON; a
//! compile error is a typed `ReqlError` whose message is not empty; and
//! `reql::compile_query`, which compiles most `START` payloads straight from the bytes,
//! answers exactly as parsing and then compiling does. Compilation recurses
//! over the term tree, so a payload nested deeper than a few levels is compiled on a
//! thread with the stack of a tokio worker (2 MiB), where the server compiles it: a
//! payload the parser lets through must not overflow that stack.

use proto::frame::parse_query;

/// The stack of the server's runtime threads (tokio's default).
const SERVER_STACK: usize = 2 << 20;

/// Runs one input.
pub fn check(data: &[u8]) {
    if nesting(data) <= 32 {
        body(data);
        return;
    }
    let joined = std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(SERVER_STACK)
            .spawn_scoped(s, || body(data))
            .map(|h| h.join())
    });
    match joined {
        Ok(Ok(())) => {}
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(e) => panic!("cannot start a thread: {e}"),
    }
}

fn body(data: &[u8]) {
    let compiled = reql::compile_query(data);
    let q = match parse_query(data) {
        Ok(q) => q,
        Err(e) => {
            let r = serde_json::from_slice::<serde_json::Value>(&e.response_json());
            assert!(r.is_ok(), "error response is not JSON: {e:?}");
            assert_eq!(compiled.err(), Some(e), "compile_query's parse error");
            return;
        }
    };
    let Ok(compiled) = compiled else {
        panic!("compile_query failed where parse_query did not: {compiled:?}");
    };
    assert_eq!(compiled.kind, q.kind);
    assert_eq!(
        (compiled.noreply, compiled.profile),
        (q.noreply(), q.profile())
    );
    let terms = q.term.iter().chain(q.optargs.values());
    let mut results = Vec::new();
    for t in terms {
        let r = reql::compile_term(t);
        if let Err(e) = &r {
            assert!(!e.message.is_empty(), "compile error without a message");
        }
        results.push(format!("{r:?}"));
    }
    if q.kind == proto::ql2::QueryType::START {
        let fast = compiled
            .term
            .iter()
            .chain(compiled.optargs.iter().map(|(_, r)| r))
            .map(|r| format!("{r:?}"));
        assert!(fast.eq(results), "compile_query's terms differ");
    }
}

/// The deepest bracket nesting of JSON text (brackets in strings ignored).
pub(crate) fn nesting(bytes: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}
