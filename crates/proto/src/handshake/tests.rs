//! Handshake state-machine tests: RFC 7677 vector, RethinkDB error texts,
//! truncation, size bounds, legacy handshakes and garbage input.

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::{BufMut, BytesMut};
use proptest::prelude::*;

use super::*;

/// Deterministic randomness: a fixed server nonce and a repeated fill byte.
struct Fixed(&'static str);

impl NonceSource for Fixed {
    fn fill(&mut self, buf: &mut [u8]) {
        buf.fill(0x5a);
    }
    fn server_nonce(&mut self) -> String {
        self.0.to_owned()
    }
}

const CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";

fn rfc_users() -> HashMap<String, ScramCredentials> {
    let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    HashMap::from([(
        "user".to_owned(),
        ScramCredentials::derive("pencil", &salt, 4096),
    )])
}

fn magic(v: Version) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_u32_le(v.as_i64() as u32);
    b
}

fn msg(json: &str) -> Vec<u8> {
    let mut v = json.as_bytes().to_vec();
    v.push(0);
    v
}

fn client_first(user: &str) -> Vec<u8> {
    msg(&format!(
        r#"{{"protocol_version":0,"authentication_method":"SCRAM-SHA-256","authentication":"n,,n={user},r={CLIENT_NONCE}"}}"#
    ))
}

fn client_final(proof: &str) -> Vec<u8> {
    msg(&format!(
        r#"{{"authentication":"c=biws,r={CLIENT_NONCE}{SERVER_NONCE},p={proof}"}}"#
    ))
}

const GREETING: &[u8] =
    b"{\"max_protocol_version\":0,\"min_protocol_version\":0,\"server_version\":\"2.4.4\",\"success\":true}\0";

/// Runs magic + client-first, returning the handshake ready for the final message.
fn after_first(
    users: &HashMap<String, ScramCredentials>,
    user: &str,
) -> (Handshake<Fixed>, BytesMut) {
    let mut hs = Handshake::new(Fixed(SERVER_NONCE));
    let mut buf = magic(Version::V1_0);
    buf.extend_from_slice(&client_first(user));
    assert_eq!(
        hs.feed(&mut buf, users).unwrap(),
        Step::Send(GREETING.to_vec())
    );
    let step = hs.feed(&mut buf, users).unwrap();
    let Step::Send(reply) = step else {
        panic!("expected server-first, got {step:?}")
    };
    assert!(reply.starts_with(b"{\"authentication\":\"r=rOprNGfwEbeRWgbNEkqO"));
    assert_eq!(hs.feed(&mut buf, users).unwrap(), Step::NeedMore);
    (hs, buf)
}

fn reject_json(code: i64, text: &str) -> Vec<u8> {
    msg(&format!(
        r#"{{"error":"{text}","error_code":{code},"success":false}}"#
    ))
}

#[test]
fn rfc7677_vector_through_state_machine() {
    let users = rfc_users();
    let mut hs = Handshake::new(Fixed(SERVER_NONCE));
    let mut buf = magic(Version::V1_0);
    buf.extend_from_slice(&client_first("user"));
    assert_eq!(
        hs.feed(&mut buf, &users).unwrap(),
        Step::Send(GREETING.to_vec())
    );
    assert_eq!(
        hs.feed(&mut buf, &users).unwrap(),
        Step::Send(msg(
            r#"{"authentication":"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096","success":true}"#
        ))
    );
    assert_eq!(hs.feed(&mut buf, &users).unwrap(), Step::NeedMore);
    buf.extend_from_slice(&client_final(
        "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    ));
    buf.extend_from_slice(b"rest"); // pipelined query bytes stay in the buffer
    assert_eq!(
        hs.feed(&mut buf, &users).unwrap(),
        Step::Done {
            user: "user".to_owned(),
            reply: msg(
                r#"{"authentication":"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=","success":true}"#
            ),
            version: Version::V1_0,
        }
    );
    assert_eq!(&buf[..], b"rest");
    assert!(hs.is_finished());
    assert_eq!(hs.feed(&mut buf, &users), Err(HandshakeError::Finished));
}

#[test]
fn wrong_proof_is_rejected() {
    let users = rfc_users();
    let (mut hs, mut buf) = after_first(&users, "user");
    buf.extend_from_slice(&client_final(
        "AHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    ));
    let step = hs.feed(&mut buf, &users).unwrap();
    assert_eq!(
        step,
        Step::Reject {
            reply: reject_json(12, "Wrong password"),
            failure: HandshakeFailure::WrongPassword
        }
    );
    // Not base64 / wrong length: also a wrong password.
    for proof in ["!!!", "AAAA"] {
        let (mut hs, mut buf) = after_first(&users, "user");
        buf.extend_from_slice(&client_final(proof));
        assert!(matches!(
            hs.feed(&mut buf, &users).unwrap(),
            Step::Reject {
                failure: HandshakeFailure::WrongPassword,
                ..
            }
        ));
    }
}

#[test]
fn unknown_user_rejected_at_final_message() {
    let users = rfc_users();
    let (mut hs, mut buf) = after_first(&users, "nobody");
    buf.extend_from_slice(&client_final(
        "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    ));
    assert_eq!(
        hs.feed(&mut buf, &users).unwrap(),
        Step::Reject {
            reply: reject_json(17, "Unknown user"),
            failure: HandshakeFailure::UnknownUser
        }
    );
}

#[test]
fn wrong_nonce_and_bad_encoding() {
    let users = rfc_users();
    let cases = [
        (
            r#"{"authentication":"c=biws,r=xyz,p=AAAA"}"#,
            HandshakeFailure::WrongPassword,
        ),
        (
            r#"{"authentication":"c=eSws,r=x,p=A"}"#,
            HandshakeFailure::InvalidEncoding,
        ),
        (
            r#"{"authentication":"c=biws,r=x"}"#,
            HandshakeFailure::OtherError,
        ),
        (
            r#"{"authentication":"c=biws"}"#,
            HandshakeFailure::InvalidEncoding,
        ),
        (
            r#"{"authentication":"c=biws,m=x"}"#,
            HandshakeFailure::ExtensionsNotSupported,
        ),
        (
            r#"{"authentication":5}"#,
            HandshakeFailure::AuthenticationNotString,
        ),
        (r#"{"authentication":"#, HandshakeFailure::InvalidJson),
    ];
    for (json, want) in cases {
        let (mut hs, mut buf) = after_first(&users, "user");
        buf.extend_from_slice(&msg(json));
        match hs.feed(&mut buf, &users).unwrap() {
            Step::Reject { failure, .. } => assert_eq!(failure, want, "{json}"),
            other => panic!("{json}: {other:?}"),
        }
    }
}

#[test]
fn client_first_validation() {
    let users = rfc_users();
    let cases = [
        (
            r#"{"protocol_version":"0"}"#,
            1,
            "Expected a number for `protocol_version`.",
        ),
        (
            r#"{"protocol_version":1}"#,
            2,
            "Unsupported `protocol_version`.",
        ),
        (
            r#"{"protocol_version":0}"#,
            3,
            "Expected a string for `authentication_method`.",
        ),
        (
            r#"{"protocol_version":0,"authentication_method":"MD5"}"#,
            4,
            "Unsupported `authentication_method`.",
        ),
        (
            r#"{"protocol_version":0,"authentication_method":"SCRAM-SHA-256"}"#,
            5,
            "Expected a string for `authentication`.",
        ),
        (
            r#"{"protocol_version":0,"authentication_method":"SCRAM-SHA-256","authentication":"y,,n=a,r=b"}"#,
            15,
            "Channel binding is not supported",
        ),
        (
            r#"{"protocol_version":0,"authentication_method":"SCRAM-SHA-256","authentication":"n,,n=a"}"#,
            10,
            "Invalid encoding",
        ),
        (
            r#"{"protocol_version":0,"authentication_method":"SCRAM-SHA-256","authentication":"n,,m=x,n=a,r=b"}"#,
            11,
            "Extensions not supported",
        ),
        (
            r#"{"protocol_version":0,"authentication_method":"SCRAM-SHA-256","authentication":"n,,n=a=zz,r=b"}"#,
            18,
            "Invalid username encoding",
        ),
        ("[1,2", 8, "Invalid JSON object."),
    ];
    for (json, code, text) in cases {
        let mut hs = Handshake::new(Fixed(SERVER_NONCE));
        let mut buf = magic(Version::V1_0);
        buf.extend_from_slice(&msg(json));
        assert_eq!(
            hs.feed(&mut buf, &users).unwrap(),
            Step::Send(GREETING.to_vec())
        );
        match hs.feed(&mut buf, &users).unwrap() {
            Step::Reject { reply, failure } => {
                assert_eq!(failure.code(), code, "{json}");
                assert_eq!(reply, reject_json(code, text), "{json}");
            }
            other => panic!("{json}: {other:?}"),
        }
    }
}

#[test]
fn bad_magic_and_old_versions() {
    let users = rfc_users();
    let mut hs = Handshake::new(Fixed(SERVER_NONCE));
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
    assert_eq!(
        hs.feed(&mut buf, &users).unwrap(),
        Step::Reject {
            reply: b"ERROR: Received an unsupported protocol version. This port is for RethinkDB queries. Does your client driver version not match the server?\n\0".to_vec(),
            failure: HandshakeFailure::UnsupportedVersion,
        }
    );
    for v in [Version::V0_1, Version::V0_2] {
        let mut hs = Handshake::new(Fixed(SERVER_NONCE));
        let mut buf = magic(v);
        assert_eq!(
            hs.feed(&mut buf, &users).unwrap(),
            Step::Reject {
                reply: b"ERROR: The PROTOBUF client protocol is no longer supported\n\0".to_vec(),
                failure: HandshakeFailure::ProtobufUnsupported,
            }
        );
    }
}

#[test]
fn truncated_input_needs_more() {
    let users = rfc_users();
    let mut hs = Handshake::new(Fixed(SERVER_NONCE));
    let whole = [magic(Version::V1_0).to_vec(), client_first("user")].concat();
    let mut buf = BytesMut::new();
    let mut sent = Vec::new();
    for &b in &whole {
        buf.put_u8(b);
        loop {
            match hs.feed(&mut buf, &users).unwrap() {
                Step::NeedMore => break,
                Step::Send(bytes) => sent.push(bytes),
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0], GREETING);
    assert!(buf.is_empty());
}

#[test]
fn oversized_message_rejected() {
    let users = rfc_users();
    let mut hs = Handshake::new(Fixed(SERVER_NONCE));
    let mut buf = magic(Version::V1_0);
    assert!(matches!(hs.feed(&mut buf, &users).unwrap(), Step::Send(_)));
    buf.extend_from_slice(&vec![b' '; MAX_MESSAGE_LEN - 1]);
    assert_eq!(hs.feed(&mut buf, &users).unwrap(), Step::NeedMore);
    buf.extend_from_slice(&vec![b' '; 4 * 1024 * 1024]);
    assert_eq!(
        hs.feed(&mut buf, &users).unwrap(),
        Step::Reject {
            reply: reject_json(7, "Limited read buffer size."),
            failure: HandshakeFailure::MessageTooLong
        }
    );
}

fn legacy(v: Version, key: &[u8], proto: u32) -> BytesMut {
    let mut buf = magic(v);
    buf.put_u32_le(key.len() as u32);
    buf.put_slice(key);
    buf.put_u32_le(proto);
    buf
}

#[test]
fn legacy_handshakes() {
    let users = HashMap::from([(
        "admin".to_owned(),
        ScramCredentials::derive("", b"0123456789abcdef", 64),
    )]);
    let json = Protocol::JSON.as_i64() as u32;
    for v in [Version::V0_3, Version::V0_4] {
        let mut hs = Handshake::new(Fixed(SERVER_NONCE));
        let mut buf = legacy(v, b"", json);
        assert_eq!(
            hs.feed(&mut buf, &users).unwrap(),
            Step::Done {
                user: "admin".to_owned(),
                reply: b"SUCCESS\0".to_vec(),
                version: v
            }
        );
    }
    let text = |s: &str| format!("ERROR: {s}\n\0").into_bytes();
    let cases = [
        (
            legacy(Version::V0_4, b"secret", json),
            text("Incorrect authorization key."),
        ),
        (
            legacy(Version::V0_4, &[b'k'; 2049], json),
            text("Client provided an authorization key that is too long."),
        ),
        (
            legacy(Version::V0_4, b"", Protocol::PROTOBUF.as_i64() as u32),
            text("The PROTOBUF client protocol is no longer supported"),
        ),
        (
            legacy(Version::V0_3, b"", 0xffff_ffff),
            text("Unrecognized protocol specified: '-1'"),
        ),
    ];
    for (mut buf, want) in cases {
        let mut hs = Handshake::new(Fixed(SERVER_NONCE));
        match hs.feed(&mut buf, &users).unwrap() {
            Step::Reject { reply, .. } => assert_eq!(reply, want),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn generated_credentials_use_rethinkdb_defaults() {
    let c = ScramCredentials::generate("pw", &mut Fixed(""));
    assert_eq!(c.salt.len(), DEFAULT_SALT_LEN);
    assert_eq!(c.iterations, DEFAULT_ITERATIONS);
    assert!(c.verify_password("pw"));
    assert_eq!(OsRandom.server_nonce().len(), 24);
}

proptest! {
    #[test]
    fn garbage_never_panics(magic_ok: bool, chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8)) {
        let users = HashMap::from([("user".to_owned(), ScramCredentials::derive("p", b"salt", 2))]);
        let mut hs = Handshake::new(Fixed(SERVER_NONCE));
        let mut buf = if magic_ok { magic(Version::V1_0) } else { BytesMut::new() };
        for chunk in chunks {
            buf.extend_from_slice(&chunk);
            loop {
                match hs.feed(&mut buf, &users) {
                    Ok(Step::Send(_)) => continue,
                    Ok(Step::NeedMore) => break,
                    Ok(Step::Done { .. }) | Ok(Step::Reject { .. }) | Err(_) => break,
                }
            }
        }
    }
}
