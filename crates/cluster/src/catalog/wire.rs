//! A replicated catalog's log entries and replies (`super::machine`): serde JSON, like
//! the catalog's records, each in an envelope carrying [`WIRE_VERSION`], since entries
//! live in the Raft log across upgrades.
//!
//! * A command: `{"v":1,"command":<CatalogCommand>}`.
//! * A reply: `{"v":1,"applied":<what changed>}` or `{"v":1,"refused":{"kind",
//!   "message"}}`. What changed is the command's `Outcome`, with each table entry in
//!   its record form (`table_record`, read back with `parse_table`, as a restart reads
//!   it), so the proposer acts on it as a single server acts on `Catalog::apply`'s.
//!
//! Invariant: decoding never panics; a command that does not decode (bad JSON, unknown
//! version or operation) is answered with a refusal reply by the machine, and a reply
//! that does not decode is an internal error for the proposer.

use reql::error::{internal, op_failed};
use reql::{ErrorKind, ReqlError};
use serde::{Deserialize, Serialize};

use super::apply::{parse_table, table_record, DbChange, Outcome, TableEntry};
use super::command::CatalogCommand;
use crate::auth::Perms;

/// The version of the envelope and of what it carries.
pub const WIRE_VERSION: u32 = 1;

#[derive(Serialize)]
struct CommandOut<'a> {
    v: u32,
    command: &'a CatalogCommand,
}

#[derive(Deserialize)]
struct CommandIn {
    v: u32,
    command: serde_json::Value,
}

/// `command` as a log entry's bytes.
pub fn encode_command(command: &CatalogCommand) -> Vec<u8> {
    let out = CommandOut {
        v: WIRE_VERSION,
        command,
    };
    // Every field is a string, number, bool or JSON value: serialising cannot fail.
    serde_json::to_vec(&out).unwrap_or_default()
}

/// Reads a log entry's command; the error is RethinkDB's for the proposer.
pub(crate) fn decode_command(bytes: &[u8]) -> Result<CatalogCommand, ReqlError> {
    let malformed = |e: serde_json::Error| op_failed(format!("Malformed catalog command: {e}"));
    let env: CommandIn = serde_json::from_slice(bytes).map_err(malformed)?;
    if env.v != WIRE_VERSION {
        return Err(op_failed(format!(
            "Catalog command of version {} (this server reads version {WIRE_VERSION}).",
            env.v
        )));
    }
    serde_json::from_value(env.command).map_err(malformed)
}

/// The error classes a refusal carries.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Kind {
    OpFailed,
    Internal,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Refusal {
    kind: Kind,
    message: String,
}

type WireTable = Option<serde_json::Value>;

#[derive(Serialize, Deserialize, Debug, Default, PartialEq)]
struct Changed {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    db: Option<DbChange>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tables: Vec<(WireTable, WireTable)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    perms: Option<(Perms, Perms)>,
}

#[derive(Serialize, Deserialize, Debug)]
struct ReplyEnvelope {
    v: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    applied: Option<Changed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refused: Option<Refusal>,
}

fn encode(env: &ReplyEnvelope) -> Vec<u8> {
    // Strings, numbers, booleans and JSON values only: serialising cannot fail.
    serde_json::to_vec(env).unwrap_or_default()
}

/// The reply to an applied command.
pub(crate) fn encode_applied(out: &Outcome) -> Vec<u8> {
    let table = |e: &Option<TableEntry>| e.as_ref().map(|e| datum::to_json_value(&table_record(e)));
    let changed = Changed {
        db: out.db.clone(),
        tables: out
            .tables
            .iter()
            .map(|(o, n)| (table(o), table(n)))
            .collect(),
        user: out.user.clone(),
        perms: out.perms,
    };
    encode(&ReplyEnvelope {
        v: WIRE_VERSION,
        applied: Some(changed),
        refused: None,
    })
}

/// The reply to a refused command.
pub(crate) fn encode_refusal(e: &ReqlError) -> Vec<u8> {
    let kind = match e.kind {
        ErrorKind::OpFailed => Kind::OpFailed,
        _ => Kind::Internal,
    };
    encode(&ReplyEnvelope {
        v: WIRE_VERSION,
        applied: None,
        refused: Some(Refusal {
            kind,
            message: e.message.clone(),
        }),
    })
}

/// Reads the reply of a proposed command: what it changed, or the error a single
/// server gives for it (`Catalog::apply`).
pub fn decode_reply(bytes: &[u8]) -> Result<Outcome, ReqlError> {
    let env: ReplyEnvelope = serde_json::from_slice(bytes)
        .map_err(|e| internal(format!("Malformed catalog reply: {e}")))?;
    if env.v != WIRE_VERSION {
        return Err(internal(format!(
            "Catalog reply of version {} (this server reads version {WIRE_VERSION}).",
            env.v
        )));
    }
    match (env.applied, env.refused) {
        (Some(c), None) => {
            let table = |t: Option<serde_json::Value>| -> Result<Option<TableEntry>, ReqlError> {
                t.map(|v| {
                    datum::from_json_value(&v)
                        .map(|d| parse_table(&d))
                        .map_err(|e| internal(format!("Malformed catalog reply: {}", e.0)))
                })
                .transpose()
            };
            let mut tables = Vec::with_capacity(c.tables.len());
            for (o, n) in c.tables {
                tables.push((table(o)?, table(n)?));
            }
            Ok(Outcome {
                db: c.db,
                tables,
                user: c.user,
                perms: c.perms,
            })
        }
        (None, Some(r)) => Err(match r.kind {
            Kind::OpFailed => op_failed(r.message),
            Kind::Internal => internal(r.message),
        }),
        _ => Err(internal(
            "Malformed catalog reply: neither applied nor refused.",
        )),
    }
}
