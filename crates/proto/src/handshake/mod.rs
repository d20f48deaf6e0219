//! Server side of the RethinkDB connection handshake, as a pure state machine.
//!
//! Mirrors `query_server_t::handle_conn` in RethinkDB 2.4's
//! `src/client_protocol/server.cc`:
//! - the client sends a 4-byte little-endian magic ([`Version`]);
//! - `V1_0`: the server immediately sends
//!   `{"max_protocol_version":0,"min_protocol_version":0,"server_version":"2.4.4","success":true}\0`,
//!   then exchanges NUL-terminated JSON messages carrying SCRAM-SHA-256;
//! - `V0_3`/`V0_4`: `u32` auth-key length, the key (checked as the `admin`
//!   password), a `u32` wire protocol that must be `JSON`, then `SUCCESS\0`;
//! - `V0_1`/`V0_2` and unknown magics are refused.
//!
//! Failures are answered the way RethinkDB does — `{"error":..,"error_code":..,
//! "success":false}\0` on V1_0, `ERROR: <text>\n\0` otherwise — after which
//! the connection must be closed. JSON replies have their keys sorted, since
//! RethinkDB serializes them from datum objects (sorted maps).
//!
//! Invariants: [`Handshake::feed`] consumes only the bytes of complete
//! messages and leaves anything after the final message in the buffer (for
//! the frame decoder); it never buffers more than [`MAX_MESSAGE_LEN`] bytes of
//! a NUL-terminated message or 2048 bytes of an auth key before rejecting.

mod scram;

use bytes::{Buf, BytesMut};
use serde_json::Value;

pub use scram::{
    NonceSource, OsRandom, ScramCredentials, UserLookup, DEFAULT_ITERATIONS, DEFAULT_SALT_LEN,
    SERVER_NONCE_LEN,
};

use crate::ql2::{Protocol, Version};
use scram::ScramServer;

/// The `server_version` reported in the V1_0 greeting.
pub const SERVER_VERSION: &str = "2.4.4";

/// Longest NUL-terminated handshake message, NUL included (RethinkDB's
/// `read_datum` reads into a 2048-byte buffer and fails when it fills up).
pub const MAX_MESSAGE_LEN: usize = 2047;

/// Longest legacy (V0_3/V0_4) auth key accepted.
pub const MAX_AUTH_KEY_LEN: usize = 2048;

/// User name legacy (V0_3/V0_4) clients authenticate as.
pub const LEGACY_USER: &str = "admin";

/// Why a handshake was refused. `Display` is RethinkDB's exact text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeFailure {
    /// Unknown magic number.
    #[error("Received an unsupported protocol version. This port is for RethinkDB queries. Does your client driver version not match the server?")]
    UnsupportedVersion,
    /// V0_1/V0_2 magic, or a V0_3/V0_4 client asking for PROTOBUF.
    #[error("The PROTOBUF client protocol is no longer supported")]
    ProtobufUnsupported,
    /// Legacy auth key longer than [`MAX_AUTH_KEY_LEN`].
    #[error("Client provided an authorization key that is too long.")]
    AuthKeyTooLong,
    /// Legacy auth key does not match the admin password.
    #[error("Incorrect authorization key.")]
    IncorrectAuthKey,
    /// Legacy wire protocol number neither JSON nor PROTOBUF.
    #[error("Unrecognized protocol specified: '{0}'")]
    UnrecognizedProtocol(i32),
    /// No NUL within [`MAX_MESSAGE_LEN`] bytes.
    #[error("Limited read buffer size.")]
    MessageTooLong,
    /// A handshake message is not valid JSON.
    #[error("Invalid JSON object.")]
    InvalidJson,
    /// `protocol_version` missing or not a number.
    #[error("Expected a number for `protocol_version`.")]
    ProtocolVersionNotNumber,
    /// `protocol_version` is not 0.
    #[error("Unsupported `protocol_version`.")]
    UnsupportedProtocolVersion,
    /// `authentication_method` missing or not a string.
    #[error("Expected a string for `authentication_method`.")]
    AuthMethodNotString,
    /// `authentication_method` is not `SCRAM-SHA-256`.
    #[error("Unsupported `authentication_method`.")]
    UnsupportedAuthMethod,
    /// `authentication` missing or not a string.
    #[error("Expected a string for `authentication`.")]
    AuthenticationNotString,
    /// Malformed SCRAM message.
    #[error("Invalid encoding")]
    InvalidEncoding,
    /// SCRAM `m=` extension present.
    #[error("Extensions not supported")]
    ExtensionsNotSupported,
    /// The client proof is wrong.
    #[error("Wrong password")]
    WrongPassword,
    /// The GS2 header asks for channel binding.
    #[error("Channel binding is not supported")]
    ChannelBindingNotSupported,
    /// No such user.
    #[error("Unknown user")]
    UnknownUser,
    /// Bad `=2C`/`=3D` escapes in the user name.
    #[error("Invalid username encoding")]
    InvalidUsernameEncoding,
    /// The final nonce does not match.
    #[error("Other error")]
    OtherError,
}

impl HandshakeFailure {
    /// RethinkDB's `error_code`: 1–9 for handshake framing errors, 10–20 for
    /// authentication errors (drivers raise `ReqlAuthError` for these), and
    /// -1 for the pre-V1_0 errors (which are sent as text, without a code).
    pub fn code(&self) -> i64 {
        match self {
            Self::UnsupportedVersion
            | Self::ProtobufUnsupported
            | Self::AuthKeyTooLong
            | Self::IncorrectAuthKey
            | Self::UnrecognizedProtocol(_) => -1,
            Self::ProtocolVersionNotNumber => 1,
            Self::UnsupportedProtocolVersion => 2,
            Self::AuthMethodNotString => 3,
            Self::UnsupportedAuthMethod => 4,
            Self::AuthenticationNotString => 5,
            Self::MessageTooLong => 7,
            Self::InvalidJson => 8,
            Self::InvalidEncoding => 10,
            Self::ExtensionsNotSupported => 11,
            Self::WrongPassword => 12,
            Self::ChannelBindingNotSupported => 15,
            Self::UnknownUser => 17,
            Self::InvalidUsernameEncoding => 18,
            Self::OtherError => 20,
        }
    }
}

/// Misuse of the state machine (never caused by client bytes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// `feed` was called after `Done` or `Reject` was returned.
    #[error("handshake already finished")]
    Finished,
}

/// What the caller must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Read more bytes into the buffer, then call `feed` again.
    NeedMore,
    /// Write these bytes, then call `feed` again (the buffer may already
    /// hold the client's next message).
    Send(Vec<u8>),
    /// Write `reply`; the connection is authenticated as `user`. Bytes left
    /// in the buffer belong to the query stream.
    Done {
        /// Authenticated user name.
        user: String,
        /// Final bytes to send to the client.
        reply: Vec<u8>,
        /// The protocol version the client spoke (`V0_4` and older get one
        /// query at a time and, before `V0_4`, empty normal batches).
        version: Version,
    },
    /// Write `reply`, shut down writing and close the connection.
    Reject {
        /// Error bytes to send.
        reply: Vec<u8>,
        /// Why (for logging).
        failure: HandshakeFailure,
    },
}

/// Internal position in the handshake.
#[derive(Debug)]
enum State {
    Magic,
    ClientFirst,
    ClientFinal(Box<ScramServer>),
    LegacyKeyLen(Version),
    LegacyKey(Version, usize),
    LegacyProtocol(Version),
    Finished,
}

/// The server side of one connection's handshake.
pub struct Handshake<N: NonceSource = OsRandom> {
    state: State,
    nonces: N,
    server_version: String,
}

impl<N: NonceSource> std::fmt::Debug for Handshake<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handshake")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// Serializes `s` as a JSON string literal.
fn json_str(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// `{"authentication":<s>,"success":true}\0`.
fn success_reply(authentication: &str) -> Vec<u8> {
    format!(
        "{{\"authentication\":{},\"success\":true}}\0",
        json_str(authentication)
    )
    .into_bytes()
}

impl<N: NonceSource> Handshake<N> {
    /// A handshake awaiting the client's magic number.
    pub fn new(nonces: N) -> Self {
        Self {
            state: State::Magic,
            nonces,
            server_version: SERVER_VERSION.to_owned(),
        }
    }

    /// Overrides the `server_version` sent in the V1_0 greeting.
    pub fn with_server_version(mut self, version: &str) -> Self {
        self.server_version = version.to_owned();
        self
    }

    /// Whether `Done` or `Reject` has been returned.
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Finished)
    }

    /// Advances the handshake with the bytes buffered in `input`, consuming
    /// those it uses. Call repeatedly: after `NeedMore` read more bytes first;
    /// after `Send` call again straight away.
    pub fn feed(
        &mut self,
        input: &mut BytesMut,
        users: &dyn UserLookup,
    ) -> Result<Step, HandshakeError> {
        let legacy = !matches!(self.state, State::ClientFirst | State::ClientFinal(_));
        match self.step(input, users) {
            Ok(Some(step)) => Ok(step),
            Ok(None) => Ok(Step::NeedMore),
            Err(Fail::Misuse(e)) => Err(e),
            Err(Fail::Client(failure)) => {
                self.state = State::Finished;
                let reply = if legacy {
                    format!("ERROR: {failure}\n\0").into_bytes()
                } else {
                    format!(
                        "{{\"error\":{},\"error_code\":{},\"success\":false}}\0",
                        json_str(&failure.to_string()),
                        failure.code()
                    )
                    .into_bytes()
                };
                Ok(Step::Reject { reply, failure })
            }
        }
    }

    /// Runs transitions until one yields output or more input is needed.
    fn step(&mut self, input: &mut BytesMut, users: &dyn UserLookup) -> Result<Option<Step>, Fail> {
        loop {
            match std::mem::replace(&mut self.state, State::Finished) {
                State::Finished => return Err(Fail::Misuse(HandshakeError::Finished)),
                State::Magic => {
                    let Some(magic) = take_u32(input) else {
                        self.state = State::Magic;
                        return Ok(None);
                    };
                    match Version::from_i64(i64::from(magic)) {
                        Some(Version::V1_0) => {
                            self.state = State::ClientFirst;
                            return Ok(Some(Step::Send(self.greeting())));
                        }
                        Some(v @ (Version::V0_3 | Version::V0_4)) => {
                            self.state = State::LegacyKeyLen(v);
                        }
                        Some(Version::V0_1 | Version::V0_2) => {
                            return Err(HandshakeFailure::ProtobufUnsupported.into())
                        }
                        None => return Err(HandshakeFailure::UnsupportedVersion.into()),
                    }
                }
                State::ClientFirst => {
                    let Some(msg) = take_message(input)? else {
                        self.state = State::ClientFirst;
                        return Ok(None);
                    };
                    let authentication = check_client_first(&msg)?;
                    let (server, server_first) =
                        ScramServer::start(&authentication, users, &mut self.nonces)?;
                    self.state = State::ClientFinal(Box::new(server));
                    return Ok(Some(Step::Send(success_reply(&server_first))));
                }
                State::ClientFinal(server) => {
                    let Some(msg) = take_message(input)? else {
                        self.state = State::ClientFinal(server);
                        return Ok(None);
                    };
                    let authentication = authentication_field(&msg)?;
                    let (user, server_final) = server.finish(&authentication)?;
                    return Ok(Some(Step::Done {
                        user,
                        reply: success_reply(&server_final),
                        version: Version::V1_0,
                    }));
                }
                State::LegacyKeyLen(v) => {
                    let Some(len) = take_u32(input) else {
                        self.state = State::LegacyKeyLen(v);
                        return Ok(None);
                    };
                    let len = usize::try_from(len).unwrap_or(usize::MAX);
                    if len > MAX_AUTH_KEY_LEN {
                        return Err(HandshakeFailure::AuthKeyTooLong.into());
                    }
                    self.state = State::LegacyKey(v, len);
                }
                State::LegacyKey(v, len) => {
                    if input.len() < len {
                        self.state = State::LegacyKey(v, len);
                        return Ok(None);
                    }
                    let key = input.split_to(len);
                    let ok = users
                        .credentials(LEGACY_USER)
                        .is_some_and(|c| c.verify_password(&String::from_utf8_lossy(&key)));
                    if !ok {
                        return Err(HandshakeFailure::IncorrectAuthKey.into());
                    }
                    self.state = State::LegacyProtocol(v);
                }
                State::LegacyProtocol(v) => {
                    let Some(proto) = take_u32(input) else {
                        self.state = State::LegacyProtocol(v);
                        return Ok(None);
                    };
                    return match Protocol::from_i64(i64::from(proto)) {
                        Some(Protocol::JSON) => Ok(Some(Step::Done {
                            user: LEGACY_USER.to_owned(),
                            reply: b"SUCCESS\0".to_vec(),
                            version: v,
                        })),
                        Some(Protocol::PROTOBUF) => {
                            Err(HandshakeFailure::ProtobufUnsupported.into())
                        }
                        // RethinkDB prints the number as a signed int32 (`%d`).
                        None => Err(HandshakeFailure::UnrecognizedProtocol(proto as i32).into()),
                    };
                }
            }
        }
    }

    /// The V1_0 greeting, keys sorted as RethinkDB's datum serializer emits.
    fn greeting(&self) -> Vec<u8> {
        format!(
            "{{\"max_protocol_version\":0,\"min_protocol_version\":0,\"server_version\":{},\"success\":true}}\0",
            json_str(&self.server_version)
        )
        .into_bytes()
    }
}

/// Internal failure: the client's fault, or API misuse.
enum Fail {
    Client(HandshakeFailure),
    Misuse(HandshakeError),
}

impl From<HandshakeFailure> for Fail {
    fn from(f: HandshakeFailure) -> Self {
        Fail::Client(f)
    }
}

/// Takes a little-endian `u32` if four bytes are buffered.
fn take_u32(input: &mut BytesMut) -> Option<u32> {
    if input.len() < 4 {
        return None;
    }
    Some(input.get_u32_le())
}

/// Takes one NUL-terminated message and parses it as a JSON value.
fn take_message(input: &mut BytesMut) -> Result<Option<Value>, HandshakeFailure> {
    let window = input
        .get(..input.len().min(MAX_MESSAGE_LEN))
        .unwrap_or_default();
    let Some(nul) = window.iter().position(|&b| b == 0) else {
        if input.len() >= MAX_MESSAGE_LEN {
            return Err(HandshakeFailure::MessageTooLong);
        }
        return Ok(None);
    };
    let msg = input.split_to(nul + 1);
    let body = msg.get(..nul).unwrap_or_default();
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|_| HandshakeFailure::InvalidJson)
}

/// Reads the string field `authentication` of a handshake message.
fn authentication_field(msg: &Value) -> Result<String, HandshakeFailure> {
    match msg.get("authentication") {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(HandshakeFailure::AuthenticationNotString),
    }
}

/// Validates the client's first message, returning its `authentication`.
fn check_client_first(msg: &Value) -> Result<String, HandshakeFailure> {
    match msg.get("protocol_version") {
        Some(Value::Number(n)) => {
            if n.as_f64() != Some(0.0) {
                return Err(HandshakeFailure::UnsupportedProtocolVersion);
            }
        }
        _ => return Err(HandshakeFailure::ProtocolVersionNotNumber),
    }
    match msg.get("authentication_method") {
        Some(Value::String(m)) if m == "SCRAM-SHA-256" => {}
        Some(Value::String(_)) => return Err(HandshakeFailure::UnsupportedAuthMethod),
        _ => return Err(HandshakeFailure::AuthMethodNotString),
    }
    authentication_field(msg)
}

#[cfg(test)]
mod tests;
