//! How deeply arrays and objects nest, measured without recursion.
//!
//! Ponder bounds nesting at [`MAX_NESTING`] levels wherever a value can grow deeper
//! than the query that built it: a document being stored, and the accumulator of a
//! loop (`fold`, `reduce`). Everything that recurses over a datum (printing, comparing,
//! key encoding, dropping, decoding stored text) therefore sees at most that depth
//! plus what one query's terms add, which fits the threads' stacks. Without the bound,
//! `r.range(100000).fold([], (acc, x) => [acc])` built a value whose drop overflowed
//! the stack and aborted the server. RethinkDB has no such limit (it grows its
//! coroutine stacks instead); the limit is Ponder's, equal to the deepest payload a
//! query may send, so any value a client can write literally can be stored.

use std::collections::HashMap;
use std::sync::Arc;

use crate::value::Datum;

/// The deepest nesting of arrays and objects a stored document or a loop's
/// accumulator may have (a scalar has depth 0, `[1]` depth 1).
pub const MAX_NESTING: usize = 1024;

impl Datum {
    /// Whether arrays and objects nest more than `limit` levels deep. Iterative, so it is
    /// safe for any depth; an object still held as stored text is measured on its text
    /// (without decoding it, and only when it is long enough to be too deep). Visits at
    /// most the nodes within `limit + 1` levels; a part shared by several parents (an
    /// `Arc` held more than once) is explored again only when met deeper than before,
    /// so values that share their halves cost their size, not their printed size.
    pub fn nesting_exceeds(&self, limit: usize) -> bool {
        let mut stack: Vec<(&Datum, usize)> = vec![(self, 0)];
        let mut shared: HashMap<usize, usize> = HashMap::new();
        while let Some((d, depth)) = stack.pop() {
            crate::work::tick();
            let inner = depth + 1;
            if let Some(p) = shared_ptr(d) {
                match shared.get(&p) {
                    Some(&seen) if seen >= depth => continue,
                    _ => {
                        shared.insert(p, depth);
                    }
                }
            }
            match d {
                Datum::Array(a) => {
                    if inner > limit {
                        return true;
                    }
                    stack.extend(a.iter().filter(|x| is_container(x)).map(|x| (x, inner)));
                }
                Datum::Object(o) => {
                    if inner > limit {
                        return true;
                    }
                    match o.unbuilt_text() {
                        // Text of n bytes nests at most n / 2 levels: most stored
                        // documents are too short to need the scan.
                        Some(text) => {
                            if depth + text.len() / 2 > limit
                                && text_nesting_exceeds(text, limit - depth)
                            {
                                return true;
                            }
                        }
                        None => stack
                            .extend((o.values()).filter(|x| is_container(x)).map(|x| (x, inner))),
                    }
                }
                _ => {}
            }
        }
        false
    }
}

/// The address of a container held by more than one parent.
fn shared_ptr(d: &Datum) -> Option<usize> {
    match d {
        Datum::Array(a) if Arc::strong_count(a) > 1 => Some(Arc::as_ptr(a) as usize),
        Datum::Object(o) if Arc::strong_count(o) > 1 => Some(Arc::as_ptr(o) as usize),
        _ => None,
    }
}

fn is_container(d: &Datum) -> bool {
    matches!(d, Datum::Array(_) | Datum::Object(_))
}

/// Whether JSON text nests arrays and objects more than `limit` levels deep: brackets
/// are counted outside strings, without parsing (so a parser given text that passed
/// cannot recurse deeper). Text that is not JSON gives some answer, never a panic.
pub fn text_nesting_exceeds(text: &[u8], limit: usize) -> bool {
    // Going deeper than `limit` takes more than `limit` opening brackets.
    if text.len() <= limit {
        return false;
    }
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&c) = text.get(i) {
        i += 1;
        match c {
            // A string: jump from quote or backslash to the next (memchr scans the
            // bytes in between many at a time; documents are mostly strings).
            b'"' => loop {
                let Some(j) = text
                    .get(i..)
                    .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
                else {
                    // Unterminated: nothing after it nests.
                    return false;
                };
                i += j + 1;
                if text[i - 1] == b'"' {
                    break;
                }
                // A backslash escapes the byte after it.
                i += 1;
            },
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, one byte at a time (what the scan must agree with).
    fn reference(text: &[u8], limit: usize) -> bool {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        for &c in text {
            if in_string {
                if escaped {
                    escaped = false;
                } else if c == b'\\' {
                    escaped = true;
                } else if c == b'"' {
                    in_string = false;
                }
                continue;
            }
            match c {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > limit {
                        return true;
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        false
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn the_scan_agrees_with_the_definition(
            text in proptest::collection::vec(
                prop_oneof![
                    Just(b'['), Just(b'{'), Just(b']'), Just(b'}'), Just(b'"'),
                    Just(b'\\'), Just(b'a'), Just(b','), Just(b':'),
                ],
                0..64,
            ),
            limit in 0usize..8,
        ) {
            prop_assert_eq!(text_nesting_exceeds(&text, limit), reference(&text, limit));
        }
    }

    #[test]
    fn escapes_and_quotes_at_the_end_do_not_panic() {
        let cases: [&[u8]; 5] = [b"\\", b"\"\\", b"[\"\\\"", b"[[\"", b"\"\\\"[[[[[[[[[[[["];
        for text in cases {
            assert_eq!(
                text_nesting_exceeds(text, 1),
                reference(text, 1),
                "{text:?}"
            );
        }
    }
    use crate::{from_json_slice, from_stored};

    fn nested_array(n: usize) -> Datum {
        let mut d = Datum::Number(1.0);
        for _ in 0..n {
            d = Datum::array(vec![Datum::Null, d]);
        }
        d
    }

    #[test]
    fn depth_is_counted_in_values_and_in_stored_text() {
        assert!(!Datum::Number(1.0).nesting_exceeds(0));
        assert!(Datum::array(vec![]).nesting_exceeds(0));
        assert!(!Datum::array(vec![]).nesting_exceeds(1));
        let d = nested_array(50);
        assert!(!d.nesting_exceeds(50));
        assert!(d.nesting_exceeds(49));
        let text = br#"{"a":[{"b":"[[[[\"{{"}],"c":{}}"#;
        let stored = from_stored(bytes::Bytes::from_static(text)).unwrap();
        assert!(stored.as_object().unwrap().unbuilt_text().is_some());
        let built = from_json_slice(text).unwrap();
        for d in [&stored, &built] {
            assert!(!d.nesting_exceeds(3), "{d:?}");
            assert!(d.nesting_exceeds(2), "{d:?}");
            // Inside an array, the stored object's depth adds to its position.
            let outer = Datum::array(vec![d.clone()]);
            assert!(!outer.nesting_exceeds(4));
            assert!(outer.nesting_exceeds(3));
        }
    }

    #[test]
    fn shared_parts_are_measured_once() {
        let mut d = Datum::Number(1.0);
        for _ in 0..60 {
            d = Datum::array(vec![d.clone(), d]);
        }
        // 2^60 paths, 61 arrays: answered at once.
        assert!(!d.nesting_exceeds(60));
        assert!(d.nesting_exceeds(59));
    }

    #[test]
    fn very_deep_values_are_measured_and_dropped_without_recursion() {
        let d = nested_array(200_000);
        assert!(d.nesting_exceeds(MAX_NESTING));
        assert!(!d.nesting_exceeds(200_000));
        // Dropped on a small stack: the drop must not recurse either.
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || drop(d))
            .unwrap()
            .join()
            .unwrap();
    }
}
