//! `compile_query` against the reference path: the fast path either gives up or gives
//! exactly the reference path's answer (terms, paths, literals, flags), and it does
//! not give up on the queries it exists for.

use proptest::prelude::*;

use super::*;
use datum::Datum;

use crate::error::Frame;

/// Both paths' answers, printed (`Debug` shows every term, path and literal; the
/// reference path's parse error as `Err`).
fn both(payload: &[u8]) -> (Option<String>, String) {
    let fast = direct_query(payload).map(|q| format!("{q:?}"));
    let slow = match reference(payload) {
        Ok(q) => format!("{q:?}"),
        Err(e) => format!("Err({e:?})"),
    };
    (fast, slow)
}

/// Whether a printed reference answer is a success: parsed, and every term compiled.
fn succeeded(slow: &str) -> bool {
    !slow.starts_with("Err(") && !slow.contains("Err(ReqlError")
}

/// The fast path answers, and as the reference path does.
fn fast_agrees(payload: &str) {
    let (fast, slow) = both(payload.as_bytes());
    let fast = fast.unwrap_or_else(|| panic!("fast path gave up on {payload}"));
    assert_eq!(fast, slow, "{payload}");
    assert!(succeeded(&slow), "{payload}");
}

/// The fast path gives up (the answer is the reference path's, an error somewhere).
fn gives_up(payload: &[u8]) {
    let (fast, _) = both(payload);
    assert_eq!(fast, None, "{}", String::from_utf8_lossy(payload));
}

const INSERT: &str = r#"[1,[56,[[15,[[14,["test"]],"t"]],[2,[{"id":1,"name":"a\u00e9\ud83d\ude00","n":-0.0,"big":12345678901234567890,"e":1.5E+3,"nested":{"x":[2,[1,[1,[2,3]],{"y":null}]],"z":true}},{"id":2,"t":{"$reql_type$":"TIME","epoch_time":1.2345678,"timezone":"+00:00"}}]]],{"conflict":"replace","return_changes":[1,false]}],{"durability":"soft","noreply":[1,true],"db":[14,["x"]]}]"#;

#[test]
fn bulk_insert_takes_the_fast_path() {
    fast_agrees(INSERT);
    let q = compile_query(INSERT.as_bytes()).unwrap();
    assert!(q.noreply && !q.profile);
    let term = q.term.unwrap().unwrap();
    assert_eq!(term.tt, proto::ql2::TermType::INSERT);
    // The documents are one literal, charged to the insert's second argument.
    let docs = &term.args[1];
    assert_eq!(docs.tt, proto::ql2::TermType::DATUM);
    assert_eq!(docs.path.frames(), vec![Frame::Pos(1)]);
    let first = docs.datum.as_array().unwrap()[0].clone();
    assert_eq!(
        first.get("big").and_then(|d| d.as_f64()),
        Some(1.2345678901234567e19)
    );
    assert!(first
        .get("n")
        .and_then(|d| d.as_f64())
        .unwrap()
        .is_sign_negative());
    // TIME literals are rounded to milliseconds, as the reference path does.
    let t = docs.datum.as_array().unwrap()[1].get("t").unwrap();
    assert_eq!(t.get("epoch_time").and_then(|d| d.as_f64()), Some(1.235));
}

#[test]
fn canonical_documents_keep_their_text() {
    let docs = [
        (r#"{"a":1,"b":"x\n\u0001"}"#, true),
        (r#"{"a":{"b":1},"c":[2,[]]}"#, false),
        (r#"{"a":{"b":1},"c":null}"#, true),
        (r#"{"b":1,"a":2}"#, false),
        (r#"{"a":1.0}"#, false),
        (r#"{"a": 1}"#, false),
        (
            r#"{"a":{"$reql_type$":"TIME","epoch_time":1.2345,"timezone":"Z"}}"#,
            false,
        ),
        (r#"{"a":[2,[1]]}"#, false),
        (r#"{"a":[1,"x"]}"#, false),
        (r#"{}"#, true),
        (r#"{"a":{"index":null,"a":null}}"#, false),
        (r#"{"a":{"b":1,"c":{"y":1,"x":2}}}"#, false),
        (r#"{"a":{"b":1,"c":{"x":1,"y":"\/"}}}"#, false),
        (r#"{"a":{"b":1,"c":{"x":1,"y":2}}}"#, true),
    ];
    let list: Vec<&str> = docs.iter().map(|(d, _)| *d).collect();
    let q = format!(r#"[1,[56,[[15,["t"]],[2,[{}]]]]]"#, list.join(","));
    fast_agrees(&q);
    let term = compile_query(q.as_bytes()).unwrap().term.unwrap().unwrap();
    let stored = term.args[1].datum.as_array().unwrap().to_vec();
    for ((text, kept), d) in docs.iter().zip(&stored) {
        let o = d.as_object().unwrap();
        assert_eq!(o.raw_json().is_some(), *kept, "{text}");
        if let Some(raw) = o.raw_json() {
            assert_eq!(raw, text.as_bytes());
        }
        // A member object's text is its parent's: not kept twice.
        if let Some(inner) = d.get("a").and_then(Datum::as_object) {
            assert!(inner.raw_json().is_none(), "{text}");
        }
    }
    // An inserted document on its own keeps its text too.
    let q = r#"[1,[56,[[15,["t"]],{"id":"k","v":"x"}]]]"#;
    fast_agrees(q);
    let term = compile_query(q.as_bytes()).unwrap().term.unwrap().unwrap();
    assert_eq!(
        term.args[1]
            .datum
            .as_object()
            .and_then(datum::Object::raw_json),
        Some(&br#"{"id":"k","v":"x"}"#[..])
    );
}

#[test]
fn queries_the_fast_path_answers() {
    for q in [
        r#"[1,[15,[[14,["test"]],"t"]]]"#,
        " \n[ 1 , [ 15 , [ [ 14 , [ \"test\" ] ] , \"t\" ] ] , { } ] \t",
        r#"[1,{}]"#,
        r#"[1,"s"]"#,
        r#"[1,[1]]"#,
        r#"[1,[1,{"a":[1,2]},{"ignored":[99999]}]]"#,
        r#"[1,[2,[1,[1,2]],{"a":[15,["t"]]}]]"#,
        r#"[1,[2,[]]]"#,
        r#"[1,[2,null,null]]"#,
        r#"[1,[15,["t"],null]]"#,
        r#"[1,{"b":[15,["t"]],"a":1,"c":{"d":[10,[1]]}}]"#,
        r#"[1,[69,[[2,[1]],[67,[[13,[]],[10,[1]]]]]]]"#,
        r#"[1,[41,[[15,["t"]],[73,["a"]]],{"index":[74,["b"]]}]]"#,
        r#"[1,[1,{"$reql_type$":"BINARY","data":"AAEC"}]]"#,
        r#"[1,{"$reql_type$":"BINARY","data":"AAEC"}]"#,
        r#"[1,{"$reql_type$":"TIME","epoch_time":1,"timezone":"Z"}]"#,
        r#"[1,{"$reql_type$":"LITERAL","value":1}]"#,
        r#"[1,1,{"profile":true,"noreply":[1,true,null]}]"#,
        r#"[1,1,{"noreply":[2,[true]],"profile":[1,true]}]"#,
        r#"[1,1,{"b":1,"a":[2,[1]],"c":{"x":[15,["t"]]}}]"#,
        r#"[1,"\u0000\"\\\/\b\f\n\r\t"]"#,
    ] {
        fast_agrees(q);
    }
}

#[test]
fn errors_are_the_reference_paths() {
    for q in [
        // Malformed JSON, anywhere.
        r#"[1,[15,["t"]]"#,
        r#"[1,[15,["t"]]] x"#,
        r#"[1,[15,["t",]]]"#,
        r#"[1,{"a":1,}]"#,
        r#"[1,{"a" 1}]"#,
        r#"[1,[2,[1,2,3]],{"a":nul}]"#,
        r#"[1,"\x"]"#,
        "[1,\"\x01\"]",
        r#"[1,01]"#,
        r#"[1,1e400]"#,
        r#"[1,-1e400]"#,
        r#"[1,NaN]"#,
        r#"[1,Infinity]"#,
        // Structure.
        r#"{}"#,
        r#"[]"#,
        r#"[1]"#,
        r#"[1,1,{},4]"#,
        r#"[1,1,[]]"#,
        r#"[1,1,null]"#,
        r#"["1",1]"#,
        r#"[1.0,1]"#,
        r#"[9,1]"#,
        r#"[2]"#,
        r#"[3]"#,
        r#"[4]"#,
        r#"[5]"#,
        r#"[2,1,{"noreply":true}]"#,
        // Compile errors, with their backtraces.
        r#"[1,[15.0,["t"]]]"#,
        r#"[1,[-15,["t"]]]"#,
        r#"[1,[99999,[]]]"#,
        r#"[1,["15",[]]]"#,
        r#"[1,[]]"#,
        r#"[1,[1,1,2,3]]"#,
        r#"[1,[15,"t"]]"#,
        r#"[1,[15,["t"],[]]]"#,
        r#"[1,[16,[1,2,3]]]"#,
        r#"[1,[16,[1,2],{"bogus":1}]]"#,
        r#"[1,[56,[[15,["t"]],[2,[{"a":{"b":[2,[{"c":{"$reql_type$":"FOO"}}]]}}]]]]]"#,
        r#"[1,[56,[[15,["t"]],[2,[{"a":{"b":{"$reql_type$":"TIME","epoch_time":1}}}]]]]]"#,
        r#"[1,[56,[[15,["t"]],{"a":{"$reql_type$":"BINARY","data":"!!"}}]]]"#,
        r#"[1,[56,[[15,["t"]],{"a":{"$reql_type$":"GEOMETRY","type":"Point"}}]]]"#,
        r#"[1,[56,[[15,["t"]],[2,[{"a":[73,["x"]]}]]]]]"#,
        r#"[1,{"a":[73,["x"]]}]"#,
        r#"[1,[39,[[15,["t"]],[69,[[2,[1]],[56,[[15,["t"]],{}]]]]]]]"#,
        r#"[1,1,{"db":[15,[1,2,3]]}]"#,
        // Duplicate keys: the last one wins in the reference path.
        r#"[1,{"a":1,"a":2}]"#,
        r#"[1,{"a":[15,["t"]],"a":2}]"#,
        r#"[1,[16,[1,2],{"x":1,"x":2}]]"#,
        r#"[1,1,{"noreply":true,"noreply":false}]"#,
        r#"[1,[56,[[15,["t"]],{"a":{"b":1,"b":{"$reql_type$":"FOO"}}}]]]"#,
        // Lone surrogates.
        r#"[1,"\ud800"]"#,
        r#"[1,"\udc00"]"#,
        r#"[1,{"\ud83d":1}]"#,
        r#"[1,"\ud83d\u0041"]"#,
    ] {
        gives_up(q.as_bytes());
    }
    gives_up(b"[1,\"\x7f\xff\"]");
    gives_up(b"[1,{\"\xc3\":1}]");
}

#[test]
fn a_deep_error_in_a_document_has_its_backtrace() {
    let q = br#"[1,[56,[[15,["t"]],[2,[{"x":1},{"a":{"b":{"$reql_type$":"FOO"}}}]]]]]"#;
    gives_up(q);
    let e = match compile_query(q).unwrap().term {
        Some(Err(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(e.message, "Unknown $reql_type$ `FOO`.");
    assert_eq!(
        e.backtrace(),
        vec![
            Frame::Pos(1),
            Frame::Pos(1),
            Frame::Opt("a".into()),
            Frame::Opt("b".into())
        ]
    );
}

#[test]
fn nesting_is_bounded_as_the_reference_path_bounds_it() {
    let max = proto::query::MAX_QUERY_DEPTH;
    // `[START, {"a": ... 1 ...}]`: the outer array is one level.
    let objects = |n: usize| format!("[1,{}1{}]", r#"{"a":"#.repeat(n), "}".repeat(n));
    let arrays = |n: usize| format!("[1,[1,{}1{}]]", "[".repeat(n), "]".repeat(n));
    let within = [objects(max - 1), arrays(max - 2)];
    let beyond = [objects(max), objects(max + 50), arrays(max - 1)];
    let on_stack = |stack: usize, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .stack_size(stack)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    };
    // The fast path alone on the stack of a tokio worker, where the server compiles.
    let (w, b) = (within.clone(), beyond.clone());
    on_stack(
        2 << 20,
        Box::new(move || {
            for q in &w {
                assert!(direct_query(q.as_bytes()).is_some());
            }
            for q in &b {
                gives_up(q.as_bytes());
            }
        }),
    );
    // Against the reference path (whose unoptimised frames need more stack).
    on_stack(
        16 << 20,
        Box::new(move || {
            for q in &within {
                fast_agrees(q);
            }
            for q in &beyond {
                assert!(matches!(
                    compile_query(q.as_bytes()),
                    Err(QueryParseError::TooDeep(_))
                ));
            }
        }),
    );
}

/// Term-shaped JSON text: term arrays of known and unknown types, objects, literals of
/// every kind, with spacing, duplicate keys and awkward numbers and strings.
fn term_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        prop_oneof![
            Just("-0"),
            Just("-0.0"),
            Just("1e2"),
            Just("1.5"),
            Just("9007199254740993"),
            Just("123456789012345678901"),
            Just("1e400"),
            Just("0.1e-400")
        ]
        .prop_map(str::to_string),
        (0i64..200).prop_map(|n| n.to_string()),
        "\"([a-c$]|\\\\u00e9|\\\\ud83d\\\\ude00|\\\\ud800|\\\\n|é)*\"",
        Just(r#""$reql_type$""#.to_string()),
    ];
    leaf.prop_recursive(5, 40, 4, |inner| {
        let key = prop_oneof![
            Just("a"),
            Just("b"),
            Just("$reql_type$"),
            Just("index"),
            Just("data")
        ];
        let code = prop_oneof![
            Just(1),
            Just(2),
            Just(10),
            Just(13),
            Just(14),
            Just(15),
            Just(17),
            Just(24),
            Just(56),
            Just(69),
            Just(73),
            Just(74),
            Just(99999)
        ];
        let sp = prop_oneof![4 => Just(""), 1 => Just(" ")];
        prop_oneof![
            (
                code,
                prop::option::of(prop::collection::vec(inner.clone(), 0..4)),
                prop::option::of(prop::collection::vec((key.clone(), inner.clone()), 0..3)),
                sp.clone()
            )
                .prop_map(|(c, args, opts, sp)| {
                    let mut s = format!("[{sp}{c}");
                    if let Some(a) = args {
                        s += &format!(",{sp}[{}]", a.join(","));
                        if let Some(o) = opts {
                            let kv: Vec<String> =
                                o.iter().map(|(k, v)| format!("\"{k}\":{sp}{v}")).collect();
                            s += &format!(",{{{}}}", kv.join(","));
                        }
                    }
                    s + "]"
                }),
            (prop::collection::vec((key, inner), 0..4), sp).prop_map(|(kv, sp)| {
                let kv: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\"{sp}:{v}")).collect();
                format!("{{{}}}", kv.join(","))
            }),
        ]
    })
}

/// A query around a term, perhaps with global optargs, perhaps with one byte changed.
fn query_text() -> impl Strategy<Value = Vec<u8>> {
    (
        term_text(),
        prop::option::of(prop::collection::vec(
            (
                prop_oneof![Just("noreply"), Just("profile"), Just("db")],
                term_text(),
            ),
            0..3,
        )),
        any::<prop::sample::Index>(),
        prop::sample::select(b" []{}\",:\\0-1eu".as_slice()),
        0..4u8,
    )
        .prop_map(|(t, opts, at, c, edit)| {
            let mut s = format!("[1,{t}");
            if let Some(o) = opts {
                let kv: Vec<String> = o.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                s += &format!(",{{{}}}", kv.join(","));
            }
            s.push(']');
            let mut b = s.into_bytes();
            let i = at.index(b.len() + 1);
            match edit {
                0 if i < b.len() => b[i] = c,
                1 => b.insert(i, c),
                2 if i < b.len() => {
                    b.remove(i);
                }
                _ => {}
            }
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Whenever the fast path answers, the reference path answers the same, a success.
    #[test]
    fn fast_path_agrees_with_the_reference(b in query_text()) {
        let (fast, slow) = both(&b);
        if let Some(fast) = fast {
            prop_assert_eq!(&fast, &slow, "{}", String::from_utf8_lossy(&b));
            prop_assert!(succeeded(&slow), "{}", String::from_utf8_lossy(&b));
        }
    }
}
