//! Target `query`: query parsing (`proto::query::parse_query`) and term compilation
//! (`reql::compile_term`) of arbitrary payloads.
//!
//! Checked: neither panics; a parse error's `CLIENT_ERROR` response is valid JSON; a
//! compile error is a typed `ReqlError` whose message is not empty. Compilation recurses
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
    let q = match parse_query(data) {
        Ok(q) => q,
        Err(e) => {
            let r = serde_json::from_slice::<serde_json::Value>(&e.response_json());
            assert!(r.is_ok(), "error response is not JSON: {e:?}");
            return;
        }
    };
    let _ = (q.noreply(), q.profile());
    let terms = q.term.iter().chain(q.optargs.values());
    for t in terms {
        if let Err(e) = reql::compile_term(t) {
            assert!(!e.message.is_empty(), "compile error without a message");
        }
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
